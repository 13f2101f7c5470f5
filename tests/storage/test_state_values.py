"""The stored states' enums hold exactly the strings the columns allow: a member renamed in the code would leave
every row already on disk unreadable as that state, so the values are the schema's, character for character."""
from __future__ import annotations

import re
import sqlite3

import pytest

from storage.approvals import ApprovalState
from storage.inbox import InboxState
from storage.ledger import ObligationState
from storage.sessions import SessionState

from .helpers import open_store

pytestmark = pytest.mark.timeout(30)


def allowed_states(db_path, table: str) -> set[str]:
    """The values the ``state IN (...)`` CHECK of ``table`` allows, as the database was created."""
    with sqlite3.connect(db_path) as conn:
        [(sql,)] = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    found = re.search(r"CHECK \(state IN \(([^)]*)\)\)", sql)
    assert found, f"no state CHECK in {table}: {sql}"
    return {value.strip().strip("'") for value in found.group(1).split(",")}


async def test_each_state_enum_is_the_vocabulary_its_column_allows(db_path):
    async with open_store(db_path):
        pass
    for table, states in (("inbox", InboxState), ("obligations", ObligationState), ("sessions", SessionState),
                          ("approvals", ApprovalState)):
        assert {s.value for s in states} == allowed_states(db_path, table), table


async def test_a_row_written_with_a_member_reads_back_as_the_plain_string_it_always_was(db_path):
    async with open_store(db_path) as store:
        seq, _ = await store.inbox.put("k", "telegram", "m1", {"text": "hi"})
        await store.inbox.take(seq)
        row = await store.inbox.get(seq)
    assert type(row.state) is str and row.state == InboxState.TAKEN == "taken"
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT state, typeof(state) FROM inbox WHERE seq = ?", (seq,)).fetchone() == \
            ("taken", "text")
