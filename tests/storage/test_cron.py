"""Scheduled runs in storage (storage/cron.py): a time is claimed once, with its inbox row and its job's cursor in
the same transaction; pauses are kept; a conversation's backlog of runs is bounded."""
from __future__ import annotations

from storage import CRON_PLATFORM, InboundItem, RunClaim, Store


def claim(run_id: str, at: float, key: str = "default.fake.dm.chat-1", origin: str = "schedule", **kw) -> RunClaim:
    item = InboundItem(key, CRON_PLATFORM, run_id, {"text": "hello", "internal": True})
    return RunClaim(run_id, "job", origin, at, item, **kw)


async def test_a_time_is_claimed_once_with_its_inbox_row_and_the_cursor(db_path):
    async with await Store.open(db_path) as store:
        await store.cron.ensure_jobs(["job"], now=100.0)
        [first] = await store.cron.claim([claim("job:schedule:160", 160.0)], {"job": 161.0}, now=161.0)
        assert first.inserted and first.outcome == "injected" and first.inbox_seq is not None
        row = await store.inbox.get(first.inbox_seq)
        assert (row.platform, row.platform_message_id, row.state) == (CRON_PLATFORM, "job:schedule:160", "received")
        [again] = await store.cron.claim([claim("job:schedule:160", 160.0)], {"job": 150.0}, now=170.0)
        assert not again.inserted and again.inbox_seq == first.inbox_seq, "the second claim changes nothing"
        assert (await store.inbox.counts())["received"] == 1
        assert (await store.cron.states())["job"].checked_until == 161.0, "a cursor never moves back"
        [run] = await store.cron.runs("job")
        assert (run.run_id, run.outcome, run.inbox_state) == ("job:schedule:160", "injected", "received")


async def test_a_new_job_starts_from_when_it_was_first_seen(db_path):
    async with await Store.open(db_path) as store:
        await store.cron.ensure_jobs(["job"], now=100.0)
        await store.cron.ensure_jobs(["job", "other"], now=500.0)
        states = await store.cron.states()
        assert states["job"].checked_until == 100.0 and states["other"].checked_until == 500.0


async def test_a_job_a_reload_added_or_changed_starts_from_the_reload_and_its_cursor_never_moves_back(db_path):
    async with await Store.open(db_path) as store:
        await store.cron.ensure_jobs(["job"], now=100.0)
        await store.cron.start_from(["job", "new"], now=500.0)
        states = await store.cron.states()
        assert states["job"].checked_until == 500.0 and states["new"].checked_until == 500.0
        await store.cron.start_from(["job"], now=400.0)   # a clock stepped back: the cursor stays
        assert (await store.cron.states())["job"].checked_until == 500.0


async def test_a_skipped_time_is_recorded_without_an_inbox_row(db_path):
    async with await Store.open(db_path) as store:
        [result] = await store.cron.claim([RunClaim("job:schedule:60", "job", "schedule", 60.0, None, caught_up=True,
                                                    missed=4, reason="missed")], {"job": 70.0}, now=70.0)
        assert result.outcome == "skipped" and result.inbox_seq is None
        assert (await store.inbox.counts())["received"] == 0
        [run] = await store.cron.runs()
        assert (run.outcome, run.missed, run.caught_up, run.reason) == ("skipped", 4, True, "missed")


async def test_pause_is_kept_and_resume_does_not_catch_up_the_pause(db_path):
    async with await Store.open(db_path) as store:
        await store.cron.ensure_jobs(["job"], now=100.0)
        paused = await store.cron.set_paused("job", True, now=200.0)
        assert paused.paused and paused.paused_at == 200.0
    async with await Store.open(db_path) as store:   # another process, or the next start
        assert (await store.cron.states())["job"].paused
        resumed = await store.cron.set_paused("job", False, now=900.0)
        assert not resumed.paused and resumed.checked_until == 900.0
        assert (await store.cron.set_paused("never-seen", True, now=5.0)).paused, "a job not yet seen can be paused"


async def test_a_conversations_backlog_of_runs_is_bounded(db_path):
    async with await Store.open(db_path) as store:
        claims = [claim(f"job:schedule:{t}", float(t)) for t in range(1, 5)]
        results = await store.cron.claim(claims, {"job": 5.0}, max_waiting=2, now=5.0)
        assert [r.outcome for r in results] == ["injected", "injected", "skipped", "skipped"]
        assert "2 scheduled runs of this conversation still unanswered" in results[2].reason
        other = await store.cron.claim([claim("job:schedule:9", 9.0, key="default.fake.dm.chat-2")], max_waiting=2)
        assert other[0].outcome == "injected", "the bound is per conversation"
        for r in results[:2]:
            await store.inbox.take(r.inbox_seq)
            await store.inbox.done(r.inbox_seq)
        [later] = await store.cron.claim([claim("job:schedule:6", 6.0)], max_waiting=2)
        assert later.outcome == "injected", "answered runs no longer count"


async def test_a_manual_run_does_not_take_a_scheduled_time(db_path):
    async with await Store.open(db_path) as store:
        [scheduled] = await store.cron.claim([claim("job:schedule:60", 60.0)])
        [manual] = await store.cron.claim([claim("job:manual:abc", 60.0, origin="manual")])
        assert scheduled.inserted and manual.inserted and manual.inbox_seq != scheduled.inbox_seq


async def test_old_runs_are_pruned(db_path):
    async with await Store.open(db_path) as store:
        await store.cron.claim([claim("job:schedule:1", 1.0)], now=10.0)
        await store.cron.claim([claim("job:schedule:2", 2.0)], now=1000.0)
        assert await store.cron.purge(500.0, now=1100.0) == 1
        assert [r.run_id for r in await store.cron.runs()] == ["job:schedule:2"]


async def test_a_run_for_a_suspended_conversation_is_skipped_not_stored(db_path):
    """The operator suspended the chat's conversation: a run would only fetch the suspension notice, each time."""
    key = "default.fake.dm.chat-1"
    async with await Store.open(db_path) as store:
        info = await store.sessions.get_or_create(key, {})
        await store.sessions.suspend(info.session_id)
        [result] = await store.cron.claim([claim("job:schedule:60", 60.0, key=key)])
        assert result.outcome == "skipped" and "suspended" in result.reason and result.inbox_seq is None
        await store.sessions.resume(info.session_id)
        [later] = await store.cron.claim([claim("job:schedule:62", 62.0, key=key)])
        assert later.outcome == "injected"
