"""The generic fake platform, driven through its own client (actors.adapters.fake.client)."""
from __future__ import annotations

import asyncio
import time
import urllib.error

import pytest

from actors.adapters.errors import FloodError, MessageNotFoundError, RetryableError, TooLongError
from actors.adapters.fake.client import FakePlatformAPI
from tests.fakes.fakeplatform import ControlClient, FakePlatform, StandaloneFake

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def platform():
    with FakePlatform() as fake:
        yield fake


def run_with_client(fake: FakePlatform, scenario):
    """Run ``scenario(api)`` on a fresh event loop with a client bound to the fake."""
    async def main():
        async with FakePlatformAPI(fake.base_url) as api:
            return await scenario(api)
    return asyncio.run(main())


def test_poll_returns_updates_from_offset_and_reports_the_acknowledged_offset(platform):
    first = platform.inject("c1", "one", user="u1")
    second = platform.inject("c2", "two", chat_type="group", thread="t9", date=1_700_000_000.5)

    async def scenario(api):
        return await api.poll_updates(0), await api.poll_updates(second)

    everything, from_second = run_with_client(platform, scenario)
    assert [u["id"] for u in everything] == [first, second] and first < second
    assert everything[1] == {"id": second, "chat": "c2", "user": "user", "text": "two", "chat_type": "group",
                             "thread": "t9", "message_id": everything[1]["message_id"], "date": 1_700_000_000.5}
    assert [u["text"] for u in from_second] == ["two"]
    assert platform.stats()["acked_offset"] == second


def test_long_poll_wakes_when_a_message_is_injected_from_another_thread(platform):
    async def scenario(api):
        poll = asyncio.create_task(api.poll_updates(0, timeout=10))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, platform.wait_for, lambda: platform.stats()["requests"].get("poll"))
        started = time.monotonic()
        platform.inject("c1", "late")
        updates = await poll
        return updates, time.monotonic() - started

    updates, waited = run_with_client(platform, scenario)
    assert [u["text"] for u in updates] == ["late"] and waited < 2


def test_empty_long_poll_ends_at_its_timeout(platform):
    async def scenario(api):
        started = time.monotonic()
        return await api.poll_updates(0, timeout=0.2), time.monotonic() - started

    updates, waited = run_with_client(platform, scenario)
    assert updates == [] and 0.15 < waited < 2


def test_timeline_keeps_every_edit_and_the_deletion(platform):
    async def scenario(api):
        kept = await api.send("c1", "draft", reply_to="7", thread="t1")
        assert await api.edit("c1", kept, "draft, longer") is True
        assert await api.edit("c1", kept, "final") is True
        assert await api.edit("c1", kept, "final") is False  # not_modified is not an error
        gone = await api.send("c1", "temporary")
        await api.delete("c1", gone)
        await api.typing("c1")
        with pytest.raises(MessageNotFoundError):
            await api.edit("c1", gone, "too late")
        return kept

    kept = run_with_client(platform, scenario)
    first, second = platform.messages("c1")
    assert first["message_id"] == kept and [h["text"] for h in first["history"]] == ["draft", "draft, longer", "final"]
    assert first["reply_to"] == "7" and first["thread"] == "t1"
    assert second["deleted"] and second["deleted_at"] >= second["sent_at"]
    assert platform.final_texts("c1") == ["final"]
    assert [o["op"] for o in platform.ops("c1")] == ["send", "edit", "edit", "edit", "send", "delete", "typing", "edit"]
    assert platform.stats()["errors"] == {"not_modified": 1, "not_found": 1}


def test_text_over_the_limit_is_refused():
    with FakePlatform(text_limit=10) as fake:
        async def scenario(api):
            await api.send("c1", "x" * 10)
            with pytest.raises(TooLongError):
                await api.send("c1", "x" * 11)
        run_with_client(fake, scenario)
        assert fake.final_texts("c1") == ["x" * 10]


def test_per_chat_budget_answers_429_and_counts_clients_that_come_back_early():
    with FakePlatform(op_interval=0.3, op_burst=2) as fake:
        async def scenario(api):
            await api.send("c1", "a")
            await api.send("c1", "b")
            with pytest.raises(FloodError) as flood:
                await api.send("c1", "c")
            with pytest.raises(FloodError):
                await api.send("c1", "c")  # ignoring retry_after is refused again
            await api.send("other", "independent budget")
            await asyncio.sleep(flood.value.retry_after)  # honouring retry_after, as a client must
            await api.send("c1", "c")
            return flood.value.retry_after

        retry_after = run_with_client(fake, scenario)
        assert 0 < retry_after <= 0.3
        stats = fake.stats()
        assert stats["floods_served"] == 2 and stats["retry_after_violations"] == 1
        sent = [o["at"] for o in fake.ops("c1", "send") if o["status"] == 200]
        assert sent[2] - sent[1] >= retry_after - 0.06


def test_scripted_faults_in_order_including_a_send_that_took_effect_but_lost_its_answer(platform):
    platform.set_faults(next=["error", "drop", "drop_after", "flood"], flood_retry_after=0.01)

    async def scenario(api):
        for _ in range(3):
            with pytest.raises(RetryableError):
                await api.send("c1", "hello")
        with pytest.raises(FloodError):
            await api.send("c1", "hello")

    run_with_client(platform, scenario)
    assert platform.final_texts("c1") == ["hello"]  # only the drop_after one reached the chat
    assert [o["status"] for o in platform.ops("c1")] == [500, 599, 200, 429]


def test_seeded_429_storm_is_reproducible_and_every_nth_is_exact():
    def storm(**faults):
        with FakePlatform() as fake:
            fake.set_faults(**faults)

            async def scenario(api):
                outcomes = []
                for i in range(12):
                    try:
                        await api.typing(f"chat{i}")
                        outcomes.append("ok")
                    except FloodError:
                        outcomes.append("429")
                return outcomes
            return run_with_client(fake, scenario)

    assert storm(p_flood=0.5, seed=7) == storm(p_flood=0.5, seed=7)
    assert "429" in storm(p_flood=0.5, seed=7) and "ok" in storm(p_flood=0.5, seed=7)
    assert [i for i, o in enumerate(storm(flood_every=3)) if o == "429"] == [2, 5, 8, 11]


def test_control_api_over_http(platform):
    control = ControlClient(platform.base_url)
    ids = control.post("/_control/inject", [{"chat": "c1", "text": "a"}, {"chat": "c1", "text": "b"}])["ids"]
    ids += control.post("/_control/inject", {"chat": "c2", "text": "c", "chat_type": "group"})["ids"]
    assert ids == sorted(ids) and len(ids) == 3
    control.post("/_control/config", {"text_limit": 3})
    control.post("/_control/faults", {"next": ["error"]})

    async def scenario(api):
        with pytest.raises(RetryableError):
            await api.send("c1", "abc")
        await api.send("c1", "abc")
        with pytest.raises(TooLongError):
            await api.send("c1", "abcd")

    run_with_client(platform, scenario)
    chat = control.get("/_control/chats/c1")
    assert [m["text"] for m in chat["messages"]] == ["abc"]
    assert [u["text"] for u in chat["inbound"]] == ["a", "b"]
    assert [o["status"] for o in chat["ops"]] == [500, 200, 400]
    assert sorted(control.get("/_control/chats")["chats"]) == ["c1", "c2"]
    assert control.get("/_control/stats")["requests"]["send"] == 3
    control.post("/_control/reset")
    assert control.get("/_control/chats")["chats"] == [] and platform.messages("c1") == []


def test_bad_control_arguments_are_a_400_not_a_crash(platform):
    with pytest.raises(urllib.error.HTTPError) as error:
        ControlClient(platform.base_url).post("/_control/faults", {"next": ["bogus"]})
    assert error.value.code == 400


def test_wait_for_gives_up_at_its_deadline(platform):
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        platform.wait_for(lambda: platform.final_texts("c1"), timeout=0.2)
    assert time.monotonic() - started < 1


def test_standalone_process_keeps_its_history_across_kill_and_restart(tmp_path):
    state = tmp_path / "platform.json"
    with StandaloneFake("tests.fakes.fakeplatform", state) as fake:
        fake.control.post("/_control/inject", {"chat": "c1", "text": "before the crash"})

        async def send(text):
            async with FakePlatformAPI(fake.base_url) as api:
                return await api.send("c1", text), await api.poll_updates(0)

        first_id, updates = asyncio.run(send("reply one"))
        assert [u["text"] for u in updates] == ["before the crash"]
        port = fake.port
        fake.kill()
        fake.start()
        assert fake.port == port
        timeline = fake.control.get("/_control/chats/c1")
        assert [m["text"] for m in timeline["messages"]] == ["reply one"]
        assert [u["text"] for u in timeline["inbound"]] == ["before the crash"]
        second_id, _ = asyncio.run(send("reply two"))
        assert int(second_id) > int(first_id)  # counters survived too: no id is reused
