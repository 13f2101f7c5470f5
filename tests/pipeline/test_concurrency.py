"""Many sessions, many messages, sent at once with /stop and interrupts mixed in (G2, G4).

Every session's transcript must be a serial history: the events of one turn are contiguous, every tool call is
followed by its result, and every inbound message is processed exactly once. The default size keeps the suite
fast; GATEWAY_TEST_SCALE=full runs the acceptance size (50 sessions x 20 messages).
"""
from __future__ import annotations

import asyncio
import os
import random
import sqlite3

import pytest

from storage import Store
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import pipeline_gateway

FULL = os.environ.get("GATEWAY_TEST_SCALE") == "full"
SESSIONS, MESSAGES = (50, 20) if FULL else (8, 6)
pytestmark = pytest.mark.timeout(1800 if FULL else 240)


def inbox_rows(gw) -> list[tuple]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return db.execute("SELECT session_key, platform_message_id, state FROM inbox").fetchall()


async def transcripts(path) -> dict:
    store = await Store.open(path)
    try:
        out = {}
        for info in await store.sessions.list(limit=10_000):
            out[info.session_id] = await store.sessions.load(info.session_id)
        return out
    finally:
        await store.close()


def check_serial(events) -> None:
    seen_turns, current = set(), None
    open_calls = {}
    for e in events:
        if e.turn_id is None:
            continue
        if e.turn_id != current:
            assert e.turn_id not in seen_turns, f"turn {e.turn_id} interleaved with another"
            assert not open_calls, f"tool call without result: {open_calls}"
            seen_turns.add(e.turn_id)
            current = e.turn_id
        if e.kind == "tool_call":
            open_calls[e.payload["call_id"]] = e
        elif e.kind == "tool_result":
            assert open_calls.pop(e.payload["call_id"], None) is not None, "tool result without its call"
    assert not open_calls


@pytest.mark.parametrize("busy_mode", ["queue", "interrupt"])
def test_concurrent_sessions_keep_serial_histories_and_answer_each_message_once(tmp_path, busy_mode):
    rng = random.Random(busy_mode)
    with FakePlatform() as platform:
        # Each chat sends its messages at once on purpose: no sender limit here (tests/security covers it).
        gw = pipeline_gateway(tmp_path, platform, extra=f"[sessions]\nbusy_mode = \"{busy_mode}\"\n"
                                                         f"max_live = {SESSIONS + 5}\n",
                              adapter_extra="limits = { per_minute = 0 }")
        try:
            gw.start()
            gw.wait_ready()
            plan = [(f"chat{s}", m) for s in range(SESSIONS) for m in range(MESSAGES)]
            rng.shuffle(plan)
            sent = 0
            for chat, m in plan:
                kind = rng.random()
                text = ("/stop" if kind < 0.08 else f"what is {m}*7 please ({chat} #{m})" if kind < 0.3
                        else f"hello from {chat} #{m} #slow 0.01")
                platform.inject(chat, text)
                sent += 1
            wait_for(lambda: len(inbox_rows(gw)) == sent, 60, 0.2, "every message in the inbox")
            wait_for(lambda: all(state == "done" for _, _, state in inbox_rows(gw)), 600 if FULL else 180, 0.5,
                     "every message processed")
            rows = inbox_rows(gw)
            assert len({(k, mid) for k, mid, _ in rows}) == sent, "each inbound message is one inbox row"
            histories = asyncio.run(transcripts(gw.state / "gateway.db"))
            user_messages = []
            for events in histories.values():
                check_serial(events)
                user_messages += [e.payload["platform_message_id"] for e in events
                                  if e.role == "user" and e.kind == "message"]
            assert len(user_messages) == len(set(user_messages)), "no inbound message became two turns"
            assert gw.cli("status").returncode == 0
        finally:
            gw.cli("stop")
            gw.kill_everything()
