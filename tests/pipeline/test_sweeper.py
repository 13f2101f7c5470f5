"""The delivery sweeper finishes replies whose owner died, also after it was itself restarted: a new sweeper
learns from the adapters that their platforms are reachable (it sweeps only those)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.actor_system import wait_for
from tests.gateway import ROOT
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import actor_pid, pipeline_gateway, settled_answers

pytestmark = pytest.mark.timeout(120)

# Claims a reply in a process of its own, which then exits: the obligation is left attempting, its owner dead.
ORPHAN = """
import asyncio, sys
from storage import Store, Target
async def main(path, chat, text):
    store = await Store.open(path)
    await store.ledger.record_obligation(f"default.fake.dm.{chat}", f"in-{chat}", Target("fake", chat), text,
                                         claim=True)
    await store.close()
asyncio.run(main(*sys.argv[1:]))
"""


# Like ORPHAN, but the reply is cut in parts and its owner died with the first part's send in flight (its intent
# committed, no id back): a copy nobody can address may be in the chat.
ORPHAN_IN_FLIGHT = """
import asyncio, sys
from storage import Store, Target
async def main(path, chat, *parts):
    store = await Store.open(path)
    await store.ledger.record_obligation(f"default.fake.dm.{chat}", f"in-{chat}", Target("fake", chat),
                                         "\\n".join(parts), chunks=parts, claim=True, send_intent=0)
    await store.close()
asyncio.run(main(*sys.argv[1:]))
"""


def orphan_reply(gw, chat: str, text: str, *more_parts: str) -> None:
    script = ORPHAN_IN_FLIGHT if more_parts else ORPHAN
    subprocess.run([sys.executable, "-c", script, str(gw.state / "gateway.db"), chat, text, *more_parts],
                   check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)


def test_a_restarted_sweeper_still_finishes_orphaned_replies(tmp_path):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, extra="[delivery]\nsweep_interval_s = 1.0\n")
        try:
            gw.start()
            gw.wait_ready()
            orphan_reply(gw, "o1", "finished by the first sweeper")
            assert settled_answers(platform, "o1", gw=gw) == ["finished by the first sweeper"]
            old = actor_pid(gw, "DeliverySweeper")
            os.kill(old, signal.SIGKILL)
            wait_for(lambda: actor_pid(gw, "DeliverySweeper") != old, 20, 0.05, "a new sweeper")
            orphan_reply(gw, "o2", "finished by the restarted one")
            assert settled_answers(platform, "o2", timeout=30, gw=gw) == ["finished by the restarted one"]
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_a_reply_whose_send_failed_is_tried_again_while_its_owner_lives(tmp_path):
    """A failed attempt gives the reply up: the sweep tries it again at its next pass, though the process that
    failed it (here the sweeper itself) still runs."""
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, extra="[delivery]\nsweep_interval_s = 1.0\n")
        try:
            gw.start()
            gw.wait_ready()
            # 1 + the adapter's 4 retries: the sweeper's first attempt fails for good, the next one goes through.
            platform.set_faults(next=["error"] * 5, methods=["send"])
            orphan_reply(gw, "f1", "delivered on the second attempt")
            gw.wait_log("send failed")
            assert settled_answers(platform, "f1", timeout=30, gw=gw) == ["delivered on the second attempt"]
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_a_resent_reply_keeps_its_one_mark_when_a_later_part_fails_and_the_next_sweep_finishes_it(tmp_path):
    """A reply whose first part's send was lost with its owner goes again marked as re-sent; on a platform without
    edits the mark is on that part. Its second part fails this attempt (1 + the adapter's 4 retries); the next sweep
    sends only that part, unmarked: the mark stays where it went (recorded with the reply's parts), one per reply."""
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, extra="[delivery]\nsweep_interval_s = 1.0\n",
                              adapter_extra="pacing = { supports_edit = false }")
        try:
            gw.start()
            gw.wait_ready()
            platform.set_faults(next=["none"] + ["error"] * 5, methods=["send"])
            orphan_reply(gw, "m1", "the first part", "the second part")
            gw.wait_log("send failed")
            texts = settled_answers(platform, "m1", count=2, timeout=30, gw=gw)
            marker = "↻ re-sent after a restart"
            assert [t.startswith(marker) for t in texts] == [True, False], texts
            assert [t.split("\n")[-1] for t in texts] == ["the first part", "the second part"], texts
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_answered_inbox_rows_and_expired_pending_receipts_are_pruned(tmp_path):
    import sqlite3

    with FakePlatform() as platform:
        # 0.00002 days = 1.7 s, and housekeeping every second (after the first, 5 s after the sweeper starts): a
        # loaded machine may answer only after that first one, so a later one must find the row old enough.
        gw = pipeline_gateway(tmp_path, platform, extra="[storage]\ninbox_retention_days = 0.00002\n"
                                                        "[delivery]\nhousekeeping_interval_s = 1.0\n")
        try:
            gw.start()
            gw.wait_ready()
            with sqlite3.connect(gw.state / "gateway.db", timeout=30) as db:   # a status report kept, long expired
                db.execute("INSERT INTO pending_receipts (platform, platform_message_id, receipt, expires_at) "
                           "VALUES ('whatsapp', 'wamid.NEVER', 'read', 1.0)")
            platform.inject("c1", "hello")
            settled_answers(platform, "c1", gw=gw)

            def rows():
                with sqlite3.connect(gw.state / "gateway.db") as db:
                    return db.execute("SELECT state FROM inbox").fetchall()
            # The answer is on the platform a moment before its session marks the row done (its delivery's
            # result comes back to the shard first); a done row may be pruned as soon as it is old enough.
            wait_for(lambda: rows() in ([("done",)], []), 30, 0.02, f"the answered row done (rows: {rows()})")
            wait_for(lambda: rows() == [], 30, 0.2, f"the answered row pruned (rows: {rows()})")
            gw.wait_log("retention removed 1 answered inbox row(s)")
            gw.wait_log("dropped 1 status report(s) kept for sends never recorded", timeout=60)
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_media_files_nothing_references_are_swept_and_referenced_ones_kept(tmp_path):
    import asyncio
    import os
    import time

    from storage import MediaCache, Store

    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform)
        cache = MediaCache(gw.state / "media")
        orphan, kept = cache.put(b"a file no message names"), cache.put(b"a file an inbox row names")
        old = time.time() - 7200
        for key in (orphan, kept):
            os.utime(cache.path(key), (old, old))


        async def name_the_kept_file():   # before the start: the sweeper's first housekeeping must see the row
            async with await Store.open(gw.state / "gateway.db") as store:
                seq, _ = await store.inbox.put("k", "x", "1", {"text": "", "attachments": [{"cache_key": kept}]})
                await store.inbox.take(seq)
                await store.inbox.done(seq)
        asyncio.run(name_the_kept_file())
        try:
            gw.start()
            gw.wait_ready()
            wait_for(lambda: not cache.has(orphan), 30, 0.2, "the unreferenced file swept")
            gw.wait_log("retention removed 1 unreferenced media file(s)")
            assert cache.has(kept)
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_a_stored_message_whose_doorbell_was_lost_is_answered_within_the_bound(tmp_path):
    """The liveness bound: a row stored with no doorbell (a kill between the commit and the ring, a doorbell lost
    on its way) is found by the sweeper once it is [sessions] answer_bound_s old, logged, counted, and its session
    rung again."""
    import asyncio
    import dataclasses
    import json
    import time

    from actors.messages import MessageEvent, Source
    from storage import Store, session_key

    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform,
                              extra="[sessions]\nanswer_bound_s = 1.0\n[delivery]\nsweep_interval_s = 0.5\n")
        try:
            gw.start()
            gw.wait_ready()
            platform.inject("warm", "hello")
            settled_answers(platform, "warm", gw=gw)
            source = Source(platform="fake", chat_id="lost", user_id="user", user_name="user")
            event = MessageEvent(source, "is anyone there?", "lost-1", time.time())

            async def put_without_a_doorbell():
                async with await Store.open(gw.state / "gateway.db") as store:
                    await store.inbox.put(session_key(source), "fake", "lost-1", dataclasses.asdict(event))
            asyncio.run(put_without_a_doorbell())
            [answer] = settled_answers(platform, "lost", timeout=30, gw=gw)
            assert 'You said: "is anyone there?"' in answer
            gw.wait_log("is not taken")
            status = json.loads(gw.cli("status", "--json", check=True).stdout)
            assert status["recovery"]["late"] in (0, 1), status   # counted while it waited; 0 once answered
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_a_reply_whose_adapter_the_directory_never_names_is_reported_stalled_and_asks_again(tmp_path):
    """A stored message for an adapter the configuration no longer has (or whose address never reached the shard):
    its reply cannot leave. Past the liveness bound that is logged with the reply's state, counted in /metrics, and
    the directory is asked for again through the tree; the other chats go on."""
    import asyncio
    import dataclasses
    import time
    import urllib.request

    from actors.messages import MessageEvent, Source
    from storage import Store, session_key
    from tests.integration.test_metrics import endpoint

    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, extra="[sessions]\nanswer_bound_s = 1.0\n")
        source = Source(platform="gone", chat_id="c1", user_id="user", user_name="user")
        event = MessageEvent(source, "hello?", "gone-1", time.time())

        async def a_row_for_an_adapter_not_configured():
            gw.state.mkdir(parents=True, exist_ok=True)
            async with await Store.open(gw.state / "gateway.db") as store:
                await store.inbox.put(session_key(source), "gone", "gone-1", dataclasses.asdict(event))
        asyncio.run(a_row_for_an_adapter_not_configured())
        try:
            gw.start()
            gw.wait_ready()
            gw.wait_log("for adapter 'gone', which the directory does not name")
            gw.wait_log("root: the directory was asked for again")
            info = endpoint(gw)

            def stalled_counted():
                with urllib.request.urlopen(f"http://{info['host']}:{info['port']}/metrics", timeout=10) as response:
                    body = response.read().decode()
                return 'gateway_stalled_replies_total{platform="gone",reason="no_adapter"} 1' in body or None
            wait_for(stalled_counted, 20, 0.2, "the stalled reply in /metrics")
            platform.inject("alive", "still there?")
            [answer] = settled_answers(platform, "alive", gw=gw)
            assert 'You said: "still there?"' in answer
        finally:
            gw.cli("stop")
            gw.kill_everything()
