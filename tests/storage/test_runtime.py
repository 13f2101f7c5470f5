import pytest

from storage import NotFound, session_key

from .helpers import Src, open_store

KEY = session_key(Src())


async def test_turn_bookkeeping(db_path):
    async with open_store(db_path) as store:
        sid = (await store.sessions.get_or_create(KEY)).session_id
        blank = await store.sessions.runtime(sid)
        assert blank.turn_token is None and not blank.resume_pending and blank.compression_cursor == 0
        await store.sessions.begin_turn(sid, "turn-a", inbox_seq=7, started_at=100.0)
        state = await store.sessions.runtime(sid)
        assert (state.turn_token, state.resume_pending, state.resume_inbox_seq, state.resume_started_at) == (
            "turn-a", True, 7, 100.0)
        assert not await store.sessions.end_turn(sid, "stale-turn")  # a stale turn cannot clear a newer one
        assert (await store.sessions.runtime(sid)).resume_pending
        assert await store.sessions.end_turn(sid, "turn-a")
        assert not (await store.sessions.runtime(sid)).resume_pending
        await store.sessions.set_compression_cursor(sid, 42)
        assert (await store.sessions.runtime(sid)).compression_cursor == 42
        with pytest.raises(NotFound):
            await store.sessions.begin_turn("missing", "t", 1)
        with pytest.raises(TypeError):
            await store.sessions.begin_turn(sid, "t", None)


async def test_an_interrupted_turn_is_resumed_up_to_max_resumes_times_across_restarts(db_path):
    async with open_store(db_path) as store:
        sid = (await store.sessions.get_or_create(KEY)).session_id
        await store.sessions.begin_turn(sid, "turn-a", inbox_seq=3)
    # "kill -9": the process is gone without end_turn; a new process opens the store, three times in a row
    for attempt in (1, 2):
        async with open_store(db_path) as store:
            assert [r.session_id for r in await store.sessions.pending_resumes()] == [sid]
            claimed = await store.sessions.claim_resume(sid, max_resumes=2)
            assert claimed is not None and claimed.resume_inbox_seq == 3 and claimed.resume_attempts == attempt
    async with open_store(db_path) as store:
        state = await store.sessions.runtime(sid)
        assert state.resume_pending and state.resume_already_attempted and state.resume_attempts == 2
        assert [r.session_id for r in await store.sessions.pending_resumes()] == [sid], "listed: for its notice"
        assert await store.sessions.claim_resume(sid, max_resumes=2) is None  # never a loop
        assert await store.sessions.claim_resume(sid) is None  # max_resumes 1: long spent
        again = await store.sessions.claim_resume(sid, max_resumes=2, again=True)  # a full disk stopped the last
        assert again is not None and again.resume_inbox_seq == 3 and again.resume_attempts == 2   # not counted
        await store.sessions.begin_turn(sid, "turn-b", inbox_seq=4)  # a new input is resumable again
        assert (await store.sessions.claim_resume(sid)).resume_inbox_seq == 4
        assert await store.sessions.claim_resume("no-such-session") is None
