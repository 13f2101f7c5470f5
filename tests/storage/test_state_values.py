"""The stored states' enums hold exactly the strings the columns allow: a member renamed in the code would leave
every row already on disk unreadable as that state, so the values are the schema's, character for character."""
from __future__ import annotations

import re

import pytest

from storage.approvals import ApprovalState
from storage.inbox import InboxState
from storage.ledger import ObligationState
from storage.sessions import SessionState

from .helpers import execute, open_store

pytestmark = pytest.mark.timeout(30)


def allowed_states(db_path, table: str) -> set[str]:
    """The values the ``state IN (...)`` CHECK of ``table`` allows, as the database was created."""
    if str(db_path).startswith("postgresql://"):   # PostgreSQL keeps the CHECK as state = ANY (ARRAY['a'::text, ...])
        checks = [sql for (sql,) in execute(db_path, "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE "
                                                     "conrelid = ?::regclass AND contype = 'c'", (table,))]
        found = [sql for sql in checks if "(state =" in sql]
        assert len(found) == 1, f"no single state CHECK in {table}: {checks}"
        return set(re.findall(r"'(\w+)'::text", found[0]))
    [(sql,)] = execute(db_path, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
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
    type_of = "pg_typeof(state)::text" if str(db_path).startswith("postgresql://") else "typeof(state)"
    assert tuple(execute(db_path, f"SELECT state, {type_of} FROM inbox WHERE seq = ?", (seq,))[0]) == ("taken", "text")
