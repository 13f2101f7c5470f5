"""Tool calls waiting for approval, in storage (storage/approvals.py): asked once per call, the first answer wins
(also between two connections racing), nothing answers past the deadline, a tool starts once, and every state is
still there when the file is opened again (a restart)."""
from __future__ import annotations

import asyncio

import pytest

from storage import ApprovalRequest, InboundItem, Store
from storage.approvals import CODE_LENGTH, MAX_ARGUMENTS_BYTES, MAX_PENDING_PER_SESSION, MAX_STEP_BYTES
from storage.inline import run_inline

from .helpers import execute, open_store

pytestmark = pytest.mark.timeout(60)

KEY = "ops.telegram.dm.chat-1"


STEP = '{"role": "assistant", "content": null, "tool_calls": []}'


def request(call_id: str = "call_1", turn_id: str = "t1", arguments: str = '{"path": "/tmp/a"}',
            key: str = KEY, timeout_s: float = 600.0, step: str = STEP) -> ApprovalRequest:
    return ApprovalRequest(session_key=key, turn_id=turn_id, call_id=call_id, tool_name="files__delete",
                           arguments=arguments, platform="telegram", chat_id="1001", timeout_s=timeout_s, step=step)


async def test_a_call_is_asked_about_once_and_its_row_holds_what_runs_once_approved(db_path):
    async with open_store(db_path) as store:
        first = await store.approvals.ask(request(), now=100.0)
        again = await store.approvals.ask(request(), now=150.0)        # the same call, asked after a re-run
        assert first.inserted and not again.inserted and again.approval == first.approval
        row = first.approval
        assert (row.state, row.asked_at, row.deadline, row.arguments, row.step) == ("pending", 100.0, 700.0,
                                                                                    '{"path": "/tmp/a"}', STEP)
        assert len(row.code) == CODE_LENGTH and len(row.approval_id) == 16 and len(row.arguments_sha256) == 64
        with pytest.raises(ValueError, match="other arguments"):
            await store.approvals.ask(request(arguments='{"path": "/"}'))
        with pytest.raises(ValueError, match=f"over the {MAX_ARGUMENTS_BYTES}"):
            await store.approvals.ask(request("call_2", arguments="x" * (MAX_ARGUMENTS_BYTES + 1)))
        with pytest.raises(ValueError, match=f"over the {MAX_STEP_BYTES}"):
            await store.approvals.ask(request("call_2", step="x" * (MAX_STEP_BYTES + 1)))
        other_turn = await store.approvals.ask(request(turn_id="t2"), now=100.0)   # a call id names a call per turn
        assert other_turn.inserted and other_turn.approval.approval_id != row.approval_id
        assert other_turn.approval.code != row.code                   # both pending: the codes tell them apart
        assert await store.approvals.get(row.approval_id) == row
        assert await store.approvals.by_code(KEY, row.code.lower()) == row


async def test_a_session_holds_a_bounded_number_of_questions(db_path):
    async with open_store(db_path) as store:
        for n in range(MAX_PENDING_PER_SESSION):
            assert (await store.approvals.ask(request(f"call_{n}"))).inserted
        refused = await store.approvals.ask(request("call_more"))
        assert refused.approval is None and not refused.inserted and "waiting" in refused.refused
        elsewhere = await store.approvals.ask(request("call_more", key="ops.telegram.dm.chat-2"))
        assert elsewhere.inserted                                       # another session: its own bound


async def test_two_answers_racing_from_two_connections_make_one_winner(db_path):
    async with open_store(db_path) as setup:
        asked = (await setup.approvals.ask(request(), now=100.0)).approval
    async with open_store(db_path) as one, open_store(db_path) as two:
        answers = await asyncio.gather(one.approvals.answer(asked.approval_id, "approve", "telegram:9", now=110.0),
                                       two.approvals.answer(asked.approval_id, "deny", "telegram:8", now=110.0))
    assert [a.won for a in answers].count(True) == 1, answers
    winner = next(a for a in answers if a.won)
    loser = next(a for a in answers if not a.won)
    assert loser.approval == winner.approval                            # the loser is told what won
    expected = {"approve": ("approved", "telegram:9"), "deny": ("denied", "telegram:8")}[winner.approval.answer]
    assert (winner.approval.state, winner.approval.answered_by, winner.approval.answered_at) == (*expected, 110.0)


async def test_a_double_click_is_one_answer(db_path):
    async with open_store(db_path) as store:
        asked = (await store.approvals.ask(request(), now=100.0)).approval
        first = await store.approvals.answer(asked.approval_id, "approve", "telegram:9", now=110.0)
        second = await store.approvals.answer(asked.approval_id, "approve", "telegram:9", now=111.0)
        late_deny = await store.approvals.answer(asked.approval_id, "deny", "operator", now=112.0)
        assert first.won and not second.won and not late_deny.won
        assert (late_deny.approval.state, late_deny.approval.answered_at) == ("approved", 110.0)
        assert (await store.approvals.answer("no-such-id", "approve", "telegram:9")).approval is None
        with pytest.raises(ValueError, match="approve or deny"):
            await store.approvals.answer(asked.approval_id, "yes", "telegram:9")


async def test_an_answer_past_the_deadline_is_refused_and_expires_the_question(db_path):
    async with open_store(db_path) as store:
        asked = (await store.approvals.ask(request(timeout_s=60.0), now=100.0)).approval
        late = await store.approvals.answer(asked.approval_id, "approve", "telegram:9", now=160.0)   # at the deadline
        assert not late.won and late.approval.state == "expired" and late.approval.answer is None
        assert await store.approvals.start_execution(asked.approval_id) is False
        assert await store.approvals.expire_due(now=200.0) == []        # expired once, by the answer
        assert await store.approvals.finish(asked.approval_id, "expired", now=201.0)
        assert not await store.approvals.finish(asked.approval_id, "expired", now=202.0)


async def test_expiry_takes_only_due_questions_each_once(db_path):
    async with open_store(db_path) as store:
        due = (await store.approvals.ask(request("a", timeout_s=10.0), now=100.0)).approval
        later = (await store.approvals.ask(request("b", timeout_s=100.0), now=100.0)).approval
        other = (await store.approvals.ask(request("c", key="ops.telegram.dm.chat-2", timeout_s=10.0),
                                           now=100.0)).approval
        assert [a.approval_id for a in await store.approvals.pending_for(KEY)] == [due.approval_id,
                                                                                    later.approval_id]
        assert await store.approvals.sessions_due(now=109.0) == []
        assert sorted(await store.approvals.sessions_due(now=110.0)) == sorted([KEY, "ops.telegram.dm.chat-2"])
        expired = await store.approvals.expire_due(now=110.0, session_key=KEY)
        assert [(a.approval_id, a.state) for a in expired] == [(due.approval_id, "expired")]
        assert await store.approvals.expire_due(now=110.0, session_key=KEY) == []
        assert [a.approval_id for a in await store.approvals.expire_due(now=110.0)] == [other.approval_id]
        assert [a.approval_id for a in await store.approvals.pending_for(KEY)] == [later.approval_id]
        assert [a.approval_id for a in await store.approvals.unsettled_for(KEY)] == [due.approval_id]
        assert await store.approvals.sessions_due(now=110.0) == []


async def test_an_approved_tool_starts_once_and_its_outcome_is_given_once(db_path):
    async with open_store(db_path) as store:
        asked = (await store.approvals.ask(request(), now=100.0)).approval
        denied = (await store.approvals.ask(request("call_2"), now=100.0)).approval
        await store.approvals.answer(asked.approval_id, "approve", "telegram:9", now=110.0)
        await store.approvals.answer(denied.approval_id, "deny", "telegram:9", now=110.0)
        assert await store.approvals.start_execution(asked.approval_id) is True
        assert await store.approvals.start_execution(asked.approval_id) is False
        assert await store.approvals.start_execution(denied.approval_id) is False   # a no never runs
        with pytest.raises(ValueError, match="outcome"):
            await store.approvals.finish(asked.approval_id, "maybe")
        assert not await store.approvals.finish(asked.approval_id, "denied")         # not its state's outcome
        assert await store.approvals.finish(asked.approval_id, "ok", now=120.0)
        assert not await store.approvals.finish(asked.approval_id, "cut", now=121.0)
        done = await store.approvals.get(asked.approval_id)
        assert (done.state, done.outcome, done.finished_at) == ("done", "ok", 120.0)
        assert [a.approval_id for a in await store.approvals.unsettled_for(KEY)] == [denied.approval_id]


async def test_every_state_is_there_after_the_file_is_opened_again(db_path):
    async with open_store(db_path) as store:
        waiting = (await store.approvals.ask(request("a"), now=100.0)).approval
        running = (await store.approvals.ask(request("b"), now=100.0)).approval
        await store.approvals.answer(running.approval_id, "approve", "telegram:9", now=110.0)
        assert await store.approvals.start_execution(running.approval_id)
    # the restart: a new Store on the same file, as a restarted shard opens it
    async with open_store(db_path) as store:
        assert await store.approvals.pending_for(KEY) == [waiting]
        [cut] = await store.approvals.unsettled_for(KEY)
        assert (cut.approval_id, cut.state) == (running.approval_id, "executing")
        assert await store.approvals.start_execution(running.approval_id) is False   # never run again
        assert await store.approvals.finish(running.approval_id, "cut", now=200.0)
        answered = await store.approvals.answer(waiting.approval_id, "approve", "operator", now=300.0)
        assert answered.won and answered.approval.deadline == waiting.deadline
    async with open_store(db_path) as store:
        assert (await store.approvals.get(running.approval_id)).outcome == "cut"
        assert (await store.approvals.get(waiting.approval_id)).state == "approved"


async def test_purge_deletes_only_old_done_rows(db_path):
    async with open_store(db_path) as store:
        old = (await store.approvals.ask(request("a", timeout_s=10.0), now=100.0)).approval
        open_question = (await store.approvals.ask(request("b"), now=100.0)).approval
        await store.approvals.expire_due(now=200.0)
        await store.approvals.finish(old.approval_id, "expired", now=200.0)
        assert await store.approvals.purge(older_than_s=50.0, now=300.0) == 1
        assert await store.approvals.get(old.approval_id) is None
        assert await store.approvals.get(open_question.approval_id) is not None


async def test_the_schema_refuses_a_state_the_code_does_not_know(db_path):
    async with open_store(db_path) as store:
        asked = (await store.approvals.ask(request()))
    with pytest.raises(Exception, match="CHECK constraint failed|violates check constraint"):   # SQLite's, PostgreSQL's
        execute(db_path, "UPDATE approvals SET state = 'maybe' WHERE approval_id = ?", (asked.approval.approval_id,))


async def test_the_store_reaches_approvals(db_path):
    async with await Store.open(db_path) as store:
        assert await store.approvals.pending_for(KEY) == []


def test_a_shards_inline_store_runs_every_call_without_a_loop(db_path):
    """A session cell reaches storage through its shard's inline store (storage/inline.py): no call may wait."""
    setup = asyncio.new_event_loop()
    store = setup.run_until_complete(Store.open(db_path, inline=True))
    try:
        asked = run_inline(store.approvals.ask(request(), now=100.0)).approval
        assert run_inline(store.approvals.answer(asked.approval_id, "approve", "telegram:9", now=110.0)).won
        assert run_inline(store.approvals.start_execution(asked.approval_id))
        assert run_inline(store.approvals.finish(asked.approval_id, "ok", now=120.0))
        assert run_inline(store.approvals.expire_due(now=999.0)) == []
        assert run_inline(store.approvals.pending_for(KEY)) == [] == run_inline(store.approvals.unsettled_for(KEY))
        assert run_inline(store.approvals.by_code(KEY, asked.code)).state == "done"
    finally:
        setup.run_until_complete(store.close())
        setup.close()


async def test_an_answer_from_outside_the_chat_puts_its_inbox_row_in_with_it_or_not_at_all(db_path):
    async with open_store(db_path) as store:
        asked = (await store.approvals.ask(request(), now=100.0)).approval
        later = (await store.approvals.ask(request("call_2"), now=101.0)).approval
        assert [a.approval_id for a in await store.approvals.listing()] == [asked.approval_id, later.approval_id]
        row = InboundItem(KEY, "approval", f"approval:{asked.approval_id}:answered", {"text": ""})
        won = await store.approvals.answer(asked.approval_id, "approve", "operator", now=110.0, enqueue=row)
        assert won.won and won.inbox_seq is not None
        assert (await store.inbox.get(won.inbox_seq)).platform_message_id == row.platform_message_id
        lost = await store.approvals.answer(asked.approval_id, "deny", "operator", now=111.0,
                                            enqueue=InboundItem(KEY, "approval", "another", {"text": ""}))
        assert not lost.won and lost.inbox_seq is None
        assert [r.platform_message_id for r in await store.inbox.rows_in_state(KEY, ("received",))] == [
            row.platform_message_id]                  # the losing answer put nothing in
        assert [a.approval_id for a in await store.approvals.listing()] == [later.approval_id]
        assert [a.approval_id for a in await store.approvals.listing(("approved",))] == [asked.approval_id]


async def test_a_reset_withdraws_the_questions_waiting_and_no_answer_counts_after(db_path):
    async with open_store(db_path) as store:
        await store.sessions.get_or_create(KEY)
        waiting = (await store.approvals.ask(request("a", timeout_s=10.0), now=100.0)).approval
        answered = (await store.approvals.ask(request("b"), now=100.0)).approval
        other = (await store.approvals.ask(request("c", key="ops.telegram.dm.chat-2"), now=100.0)).approval
        await store.approvals.answer(answered.approval_id, "approve", "telegram:9", now=105.0)
        await store.sessions.reset(KEY)
        gone = await store.approvals.get(waiting.approval_id)
        assert (gone.state, gone.outcome, gone.answer) == ("done", "withdrawn", None)
        assert (await store.approvals.get(answered.approval_id)).state == "approved"   # answered before: kept
        assert (await store.approvals.get(other.approval_id)).state == "pending"       # another conversation
        late = await store.approvals.answer(waiting.approval_id, "approve", "telegram:9", now=106.0)
        assert not late.won and late.approval.outcome == "withdrawn"
        assert await store.approvals.sessions_due(now=1e12) == ["ops.telegram.dm.chat-2"]


async def test_a_question_sent_to_a_chat_finds_its_approval_by_chat_and_code(db_path):
    async with open_store(db_path) as store:
        row = (await store.approvals.ask(request(), now=100.0)).approval
        assert await store.approvals.for_question("telegram", "1001", row.code.lower()) == row
        assert await store.approvals.for_question("telegram", "1002", row.code) is None      # another chat's
        assert await store.approvals.for_question("discord", "1001", row.code) is None       # another platform's
        await store.approvals.answer(row.approval_id, "approve", "telegram:9", now=110.0)
        answered = await store.approvals.for_question("telegram", "1001", row.code)          # answered: still it
        assert (answered.approval_id, answered.state) == (row.approval_id, "approved")


def test_an_approval_id_never_begins_with_a_dash_which_the_cli_would_read_as_an_option():
    # token_urlsafe begins with "-" once in 64 draws: in 2,000 the chance of never seeing one is about 1e-14.
    from storage.approvals import new_approval_id
    ids = [new_approval_id() for _ in range(2000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 16 for i in ids) and len(set(ids)) == len(ids)
