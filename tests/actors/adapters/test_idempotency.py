"""The rule of op ids and platform keys (actors/adapters/idempotency.py): an id or key names one operation with one
content across every life of the daemon; a genuine retry keeps it. And the kit's check of it in the adapter."""
from __future__ import annotations

import dataclasses

import pytest

from actors.adapters import registry  # noqa: F401 - the registry first: it imports every adapter, base included
from actors.adapters.idempotency import KeyBook, life_token, op_id, platform_key
from actors.adapters.matrix import formatting as matrix
from actors.messages import OutgoingFile, PlatformOp

pytestmark = pytest.mark.timeout(30)
TURN = "708398b918634ab4"   # a turn keeps its id across restarts: every life that resumes it edits the same reply


def edit(number: int, fence, text: str, message_id: str = "$reply") -> PlatformOp:
    return PlatformOp(op_id(TURN, fence, number), "edit", "!room", text, message_id=message_id, final=True)


def test_two_different_edits_of_one_reply_in_two_lives_get_two_keys():
    # Life 1 claimed the reply under fence 3 and showed a preview as its second operation; the daemon was killed;
    # life 2 claimed it under fence 4 and its second operation is the final edit of the same message.
    preview, final = edit(2, 3, "The answer so▍"), edit(2, 4, "The answer so far, complete.")
    assert preview.op_id != final.op_id
    assert platform_key(preview) != platform_key(final)
    assert matrix.txn_id(None, platform_key(preview), "edit") != matrix.txn_id(None, platform_key(final), "edit")


def test_an_op_id_reused_by_another_life_still_gives_another_key_for_other_content():
    """The old numbering (``<turn>:<n>`` from 1 in every life) made these two the same txnId: Synapse answered the
    final edit with the preview's event and changed nothing. The key carries the content, so it cannot."""
    preview = PlatformOp(f"{TURN}:2", "edit", "!room", "The answer so▍", message_id="$reply")
    final = dataclasses.replace(preview, text="The answer so far, complete.")
    assert platform_key(preview) != platform_key(final)
    assert platform_key(dataclasses.replace(final, message_id="$other")) != platform_key(final)
    assert platform_key(dataclasses.replace(final, action="delete")) != platform_key(final)


def test_a_retry_of_one_edit_in_one_life_gets_the_same_key_and_is_admitted():
    first = edit(5, 7, "final text")
    retry = dataclasses.replace(first)   # what the adapter repeats after a dropped connection: the same op
    assert platform_key(retry) == platform_key(first)
    book = KeyBook()
    assert book.admit(first) is None and book.admit(retry) is None


def test_operations_are_numbered_under_the_claim_or_a_token_of_this_life():
    assert op_id(TURN, 3, 1) != op_id(TURN, 4, 1) != op_id(TURN, 3, 2)
    assert op_id("sweep:0123456789abcdef", 5, 1) != op_id("sweep:0123456789abcdef", 6, 1)
    tokens = {life_token() for _ in range(1000)}
    assert len(tokens) == 1000 and all(op_id(TURN, t, 1).startswith(TURN) for t in tokens)


def test_the_book_refuses_an_op_id_handed_again_for_another_operation():
    book = KeyBook()
    assert book.admit(edit(1, 1, "preview")) is None
    refused = book.admit(edit(1, 1, "another text"))
    assert refused and "one operation with one content" in refused
    assert book.admit(edit(1, 1, "preview", message_id="$other"))
    file = OutgoingFile("a" * 64, "image/png", "photo")
    assert book.admit(PlatformOp("f1", "send", "!room", file=file)) is None
    assert book.admit(PlatformOp("f1", "send", "!room", file=dataclasses.replace(file, cache_key="b" * 64)))
    typing = PlatformOp(f"{TURN}:typing", "typing", "!room")
    assert book.admit(typing) is None and book.admit(dataclasses.replace(typing, chat_id="!other")) is None


def test_a_keyed_send_names_its_part_whatever_text_an_attempt_carries_and_nothing_else():
    """Every attempt at part 0 carries the part's key (a send whose answer was lost must not show twice); the text
    differs between attempts and the part is edited to the wanted text after. The key may not name another part."""
    book = KeyBook()
    first = PlatformOp("a:1.1", "send", "!room", "The ans▍", idempotency_key="0123456789abcdef.0")
    again = PlatformOp("a:2.1", "send", "!room", "The answer▍", idempotency_key="0123456789abcdef.0")
    assert platform_key(first) == platform_key(again) == "0123456789abcdef.0"
    assert book.admit(first) is None and book.admit(again) is None
    assert book.admit(dataclasses.replace(again, op_id="a:2.2", chat_id="!elsewhere"))
    assert book.admit(dataclasses.replace(again, text="other")), "its op id is still one operation's"


def test_the_book_is_bounded_and_forgets_the_oldest_first():
    book = KeyBook(limit=100)
    for n in range(1000):
        assert book.admit(edit(n, 1, f"text {n}")) is None
    assert len(book._named) == 100
    assert book.admit(edit(0, 1, "other")) is None, "long forgotten"
    assert book.admit(edit(999, 1, "other")), "still remembered"


def test_the_adapter_refuses_an_op_id_handed_again_for_another_edit_before_it_reaches_the_platform(tmp_path):
    from tests.actors.adapters.test_base import actor_side
    from tests.fakes.fakeplatform import FakePlatform
    with FakePlatform() as fake:
        adapter, stub = actor_side(fake, tmp_path)
        adapter.on_PlatformOp(edit(1, 1, "preview"), "consumer")
        adapter.on_PlatformOp(edit(1, 1, "preview"), "consumer")          # a retry: goes
        adapter.on_PlatformOp(edit(1, 1, "final text"), "consumer")       # a new edit under a used id: refused
        assert len(stub.submitted) == 2
        [(to, refused)] = stub.sent
        assert to == "consumer" and not refused.ok and refused.error_kind == "permanent"
        assert refused.op_id == edit(1, 1, "x").op_id and "one operation with one content" in refused.error
