"""The Telegram adapter in the real daemon against the fake Bot API: every update answered exactly once across a
kill -9 of the whole daemon, within the platform's pacing; webhook mode; formatting; the token kept out of sight.

The acceptance run (``test_every_update_is_answered_once_across_a_daemon_kill``) is small by default;
GATEWAY_TEST_SCALE=full runs the acceptance size (1,000 updates over 100 chats).
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from actors.adapters.registry import pacing_for
from actors.adapters.pacing import DEFAULT_RESENT_MARKER as RESENT_MARKER
from storage import Store
from tests.actor_system import free_port, wait_for
from tests.gateway import ROOT, Gateway
from tests.fakes.harness import ControlClient, StandaloneFake
from tests.fakes.telegram import DEFAULT_TOKEN, FakeTelegram
from tests.fakes.telegram.botapi import ApiError
from tests.pipeline.harness import CURSOR
from tests.pipeline.harness import telegram_gateway as harness_telegram_gateway

FULL = os.environ.get("GATEWAY_TEST_SCALE") == "full"
CHATS, PER_CHAT = (100, 10) if FULL else (12, 5)
pytestmark = pytest.mark.timeout(1800 if FULL else 240)
WEBHOOK_SECRET = "hook-secret_0123456789"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def telegram_gateway(tmp_path: Path, base_url: str, adapter: str = "", **kwargs) -> Gateway:
    return harness_telegram_gateway(tmp_path, base_url, adapter, f"[sessions]\nmax_live = {CHATS + 10}\n", **kwargs)


def stop(gw: Gateway) -> None:
    gw.cli("stop")
    gw.kill_everything()


def inbox(gw: Gateway) -> list[tuple]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return db.execute("SELECT platform_message_id, state, received_at FROM inbox ORDER BY seq").fetchall()


def fake_chats(control: ControlClient, chat_ids: list) -> dict:
    """The standalone fake's chats (``timeline``: chat, messages, ops), through its control API."""
    return {str(chat_id): control.get(f"/_control/chats/{chat_id}") for chat_id in chat_ids}


def bot_messages(chat: dict) -> list[dict]:
    return [m for m in chat["messages"] if m["outgoing"] and not m["deleted"]]


def settled_in(tg: FakeTelegram, chat_id: int) -> list[str]:
    """The in-process fake's settled bot messages in a chat (None while there are none, for wait_for)."""
    texts = [m["text"] for m in tg.messages(chat_id) if not m["deleted"]]
    return texts if texts and not any(CURSOR in t for t in texts) else None


def pacing_excess(ops: list[dict], rate: float, burst: int, slack_s: float = 0.05) -> list[tuple]:
    """Pairs of attempts (first, last) with more operations between them, inclusive, than a token bucket of
    ``rate``/s and ``burst`` allows: what the adapter's per-chat budget promises, whatever the platform answered.
    ``slack_s`` covers the distance between the adapter's clock reading and the fake's."""
    times = sorted(o["at"] for o in ops if o["method"] in ("sendMessage", "editMessageText", "deleteMessage"))
    return [(i, k) for i in range(len(times)) for k in range(i + 1, len(times))
            if k - i + 1 > burst + rate * (times[k] - times[i] + slack_s)]


# --------------------------------------------------------------------------------------- the acceptance run

KILL_MARGIN_S = 1.0   # an operation in flight at the kill, and the cascade of deaths after the launcher's
RECOVERY_WINDOW_S = 30.0   # a turn answered this long before the kill may not have reached the ledger (loaded box)


async def ledger_and_transcripts(db_path: Path) -> tuple[list, list]:
    async with await Store.open(db_path) as store:
        obligations = await store.ledger.list(limit=100_000)
        events = []
        for info in await store.sessions.list(limit=100_000):
            events += await store.sessions.load(info.session_id)
        return obligations, events


def audit(chats: dict, chat_ids: list, obligations: list, events: list,
          killed_at: float) -> tuple[list, list, list]:
    """(failures, gaps, marked). Gaps are the ways a kill -9 can still cost a reply or double one that are not in
    the adapter's power; each is recognised by its evidence and named as such in the report, anything else is a
    failure. The acceptance run allows neither. ``marked`` lists the one duplicate the design accepts:

    * ambiguous send: Telegram executed a sendMessage whose answer died with the daemon; the ledger never heard
      of the message, so the reply was sent again (Telegram has no idempotency key, docs/design.md §5). Where
      the copy that was delivered carries the re-sent marker, the reader can tell the two apart (docs/design.md
      §2.6): marked, not a gap;
    * answered but never delivered: the turn's answer was in the transcript before the kill, its obligation was
      not in the ledger (or had no final text), and recovery marked the inbox row done without delivering it;
    * started afresh: a turn cut by the kill ran again under a new turn id instead of being resumed, so its user
      message is twice in the transcript (the chat still gets one reply)."""
    failures, gaps, marked = [], [], []
    delivered = {o.inbound_ref: o for o in obligations if o.state == "delivered"}
    recorded = {(o.target.chat_id, str(m)) for o in delivered.values() for m in o.parts.values()}
    turn_of = {e.payload["platform_message_id"]: e.turn_id for e in events if e.role == "user" and e.kind == "message"}
    answered_at = {e.turn_id: e.created_at for e in events if e.role == "assistant" and e.kind == "message"}
    doubled_turns(events, answered_at, killed_at, failures, gaps)
    for chat_id in chat_ids:
        chat = chats[str(chat_id)]
        mine = bot_messages(chat)
        for m in mine:
            if (str(chat_id), str(m["message_id"])) not in recorded:
                at_the_kill = -KILL_MARGIN_S < m["sent_at"] - killed_at < KILL_MARGIN_S
                first_line = m["text"].removesuffix(CURSOR).split("\n", 1)[0]
                resent = any(r["text"].startswith(RESENT_MARKER) and first_line in r["text"] for r in mine
                             if (str(chat_id), str(r["message_id"])) in recorded)
                (marked if at_the_kill and resent else gaps if at_the_kill else failures).append(
                    f"chat {chat_id}: message {m['message_id']} sent {m['sent_at'] - killed_at:+.2f}s from the kill "
                    f"is in no delivered reply (ambiguous send): {m['text'][:50]!r}")
            elif CURSOR in m["text"]:
                failures.append(f"chat {chat_id}: delivered message {m['message_id']} still streams")
        for question in (m for m in chat["messages"] if not m["outgoing"]):
            ref = f"{chat_id}:{question['message_id']}"
            answers = [m for m in mine if f'"{question["text"]}"' in m["text"] and CURSOR not in m["text"]
                       and (str(chat_id), str(m["message_id"])) in recorded]
            if len(answers) == 1:
                continue
            written = answered_at.get(turn_of.get(ref), float("inf"))
            in_flight = -RECOVERY_WINDOW_S < written - killed_at < KILL_MARGIN_S   # its reply was under way
            if not answers and f"telegram:{ref}" not in delivered and in_flight:
                gaps.append(f"chat {chat_id}: {question['text']!r} answered {written - killed_at:+.2f}s from the "
                            f"kill, never delivered (recovery saw the turn complete, no obligation held its text)")
            else:
                failures.append(f"chat {chat_id}: {question['text']!r} has {len(answers)} delivered answers")
    return failures, gaps, marked


def doubled_turns(events: list, answered_at: dict, killed_at: float, failures: list, gaps: list) -> None:
    """Inbound messages that started more than one turn: a gap if every earlier turn was cut by the kill."""
    turns_of: dict[str, list] = {}
    for e in events:
        if e.role == "user" and e.kind == "message":
            turns_of.setdefault(e.payload["platform_message_id"], []).append(e)
    for ref, started in turns_of.items():
        if len(started) == 1:
            continue
        cut = [e for e in started[:-1] if e.turn_id not in answered_at and e.created_at < killed_at + KILL_MARGIN_S]
        (gaps if len(cut) == len(started) - 1 else failures).append(
            f"{ref} became {len(started)} turns {[e.turn_id for e in started]}"
            + (" (the one cut by the kill was started afresh, not resumed)" if cut else ""))


def test_every_update_is_answered_once_across_a_daemon_kill(tmp_path):
    # Its own process, so it outlives the daemon's kill. No state file: the fake would rewrite all of it on every
    # change, which at this size makes the fake, not the gateway, the bottleneck.
    fake = StandaloneFake("tests.fakes.telegram", "").start()
    control = ControlClient(fake.base_url, timeout=60)
    gw = telegram_gateway(tmp_path, fake.base_url)
    # The watchdog is not under test: its short test deadline would restart a busy actor mid-burst, and an
    # operation in hand at that moment may be sent twice (its consumer retries it).
    gw.config.write_text(gw.config.read_text().replace("ping_deadline_s = 1.5", "ping_deadline_s = 60.0"))
    total = CHATS * PER_CHAT
    chat_ids = [5_000_001 + c for c in range(CHATS)]
    try:
        # Random 429s on both write methods; each one binds like a real one (the chat is banned for retry_after).
        control.post("/_control/faults", {"p_flood": 0.05, "seed": 7, "flood_retry_after": 1,
                                          "methods": ["sendMessage", "editMessageText"]})
        gw.start()
        gw.wait_ready()
        started = time.monotonic()
        plan = [(chat, n) for chat in chat_ids for n in range(PER_CHAT)]
        random.Random(3).shuffle(plan)
        plan.sort(key=lambda item: item[1])   # shuffled across chats, in order within each chat
        # Updates keep arriving while the daemon is killed and restarted.
        injector = threading.Thread(target=lambda: [
            control.post("/_control/inject", [{"text": f"question {n} from {chat}", "chat_id": chat}
                                              for chat, n in plan[first:first + 50]])
            for first in range(0, total, 50)], daemon=True)
        injector.start()

        def answered() -> int:
            return sum(1 for _, state, _ in inbox(gw) if state == "done")
        # Mid-run: some answered, most not, many turns streaming and updates still unconfirmed.
        wait_for(lambda: answered() >= total // 3, 600, 0.2, "a third of the answers")
        killed_at = time.time()
        os.kill(gw.launcher_pid, signal.SIGKILL)
        gw.assert_no_process_left()
        answered_at_kill = answered()
        start_after_kill(gw)
        injector.join(600)
        # Quiet: every row done (a row is done once its reply is delivered, or by recovery) and no reply in hand.
        wait_for(lambda: len(rows := inbox(gw)) == total and all(s == "done" for _, s, _ in rows)
                 and not ledger_busy(gw), 1200 if FULL else 180, 0.5, "every update processed")
        elapsed = time.monotonic() - started
        chats, stats = fake_chats(control, chat_ids), control.get("/_control/stats")
        assert len({mid for mid, _, _ in inbox(gw)}) == total, "each update is one inbox row"
        failures, gaps, marked = audit(chats, chat_ids,
                                       *asyncio.run(ledger_and_transcripts(gw.state / "gateway.db")), killed_at)
        # Strict across the restart too: 429 bans are persisted and every budget starts spent (adapters/budgets.py).
        pacing = pacing_for("telegram")
        over_budget = 0
        for chat_id in chat_ids:
            excess = pacing_excess(chats[str(chat_id)]["ops"], pacing.per_chat_ops_per_s, pacing.per_chat_burst)
            if excess:
                over_budget += 1
                failures.append(f"chat {chat_id} exceeded its budget between attempts {excess[:3]}")
        if stats["retry_after_violations"]:
            failures.append(f"{stats['retry_after_violations']} operations sent while a 429 held")
        assert stats["floods_served"] > 0, "the run was meant to meet 429s"
        print(f"\n{total} updates over {CHATS} chats in {elapsed:.1f}s; {answered_at_kill} answered at the kill; "
              f"{stats['floods_served']} 429s served; pacing: {over_budget} chat(s) over budget, "
              f"{stats['retry_after_violations']} op(s) sent under a 429; {len(marked)} ambiguous send(s) "
              f"re-sent with the marker; {len(gaps)} gap(s), {len(failures)} failure(s)")
        assert not failures and not gaps, "\n".join(failures + gaps)
    finally:
        stop(gw)
        fake.stop()


def start_after_kill(gw: Gateway) -> None:
    """The launcher's death takes its tree down in a cascade; the last actor process, which still shares the run
    lock, may outlive assert_no_process_left (it only knows the pids the tree showed) by a moment."""
    def attempt():
        try:
            return gw.start()
        except AssertionError as exc:
            if "already running" in str(exc):
                return None
            raise
    wait_for(attempt, 60, 0.2, "the killed daemon's last process to be gone")


def ledger_busy(gw: Gateway) -> int:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return db.execute("SELECT count(*) FROM obligations WHERE state IN ('pending', 'attempting')").fetchone()[0]


# ------------------------------------------------------------------------------------------------- webhooks

def post_update(url: str, update: dict, secret: str | None) -> int:
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers[SECRET_HEADER] = secret
    request = urllib.request.Request(url, data=json.dumps(update).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_webhook_refuses_a_wrong_secret_and_acknowledges_only_durable_updates(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/tg/hook"
    with FakeTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url, adapter=f"""mode = "webhook"
webhook_port = {port}
webhook_path = "/tg/hook"
webhook_secret = "{WEBHOOK_SECRET}"
""")
        try:
            gw.start()
            gw.wait_ready()
            wait_for(lambda: (tg.read(lambda s: s["webhook"]) or {}).get("url") == url, 20, 0.05,
                     "the adapter to set its webhook")
            forged = {"update_id": 1, "message": {"message_id": 1, "date": 0, "text": "let me in",
                                                  "chat": {"id": 666, "type": "private"}}}
            assert post_update(url, forged, "wrong-secret") == 401
            assert post_update(url, forged, None) == 401
            update = tg.inject_message("pushed to the hook", chat_id=77)
            [delivery] = wait_for(lambda: [d for d in tg.webhook_log() if d["error"] is None], 20, 0.05,
                                  "the update to be acknowledged")
            assert delivery["update_id"] == update["update_id"]
            [(message_id, _state, received_at)] = inbox(gw)
            assert message_id == "77:1"
            # The row was committed before the 2xx left: its timestamp precedes the fake's record of the answer.
            assert received_at <= delivery["at"]
            [answer] = wait_for(lambda: settled_in(tg, 77), 60, 0.1, "the answer")
            assert "pushed to the hook" in answer
            assert [mid for mid, _, _ in inbox(gw)] == ["77:1"], "the forged updates never reached the inbox"
        finally:
            stop(gw)


# ------------------------------------------------------------------------------- formatting, token hygiene

class RefusingTelegram(FakeTelegram):
    """Refuses the entities of the next ``refusals`` formatted texts, as Telegram does with markup it cannot parse,
    and answers the next ``unauthorized`` requests 401, as for a revoked token."""
    refusals = 0
    unauthorized = 0

    def _parse_text(self, params: dict, too_long: str):
        if params.get("parse_mode") and self.refusals > 0:
            self.refusals -= 1
            raise ApiError(400, "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0")
        return super()._parse_text(params, too_long)

    async def _dispatch(self, request):
        if self.unauthorized > 0:
            self.unauthorized -= 1
            return self._answer(ApiError(401, "Unauthorized"))
        return await super()._dispatch(request)


def test_a_send_whose_answer_was_lost_is_found_in_a_private_chat_and_marked_in_a_group(tmp_path):
    """The Bot API has no idempotency key: a send that took effect but lost its answer (a connection cut mid-call)
    must not be repeated as if it had failed. In a private chat the copy is found by its id (the chat numbers its
    messages in sequence: actors/adapters/lost_copies.py) and edited into the answer: one message, unmarked. In a
    group the next copy carries the re-sent mark: never two unmarked answers."""
    with FakeTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url, adapter="")
        try:
            gw.start()
            gw.wait_ready()

            def shown(chat):
                return [m["text"] for m in tg.messages(chat) if not m["deleted"]]

            def sends(chat):
                return [op for op in tg.timeline(chat)["ops"] if op["method"] == "sendMessage"]
            tg.set_faults(next=["drop_after"], methods=["sendMessage"])
            tg.inject_message("echo answer me once", chat_id=41)
            wait_for(lambda: shown(41) and all(CURSOR not in t for t in shown(41)) and "api_key_env" in shown(41)[0],
                     60, 0.1, f"the private chat's answer, final (shown: {shown(41)})")
            assert len(shown(41)) == 1 and RESENT_MARKER not in shown(41)[0], shown(41)
            assert len(sends(41)) == 1, "the copy was found, not sent again"
            gw.wait_log("is message")

            tg.set_faults(next=["drop_after"], methods=["sendMessage"])
            tg.inject_message("echo answer the group once @fake_gateway_bot", chat_type="supergroup", chat_id=-1002)
            wait_for(lambda: any(RESENT_MARKER in t and CURSOR not in t for t in shown(-1002)), 60, 0.1,
                     f"the group's marked copy, final (shown: {shown(-1002)})")
            # The lost send's copy stays as it was sent (a preview, maybe with its cursor): the mark says so.
            unmarked = [t for t in shown(-1002) if RESENT_MARKER not in t]
            assert len(shown(-1002)) == 2 and len(unmarked) == 1, shown(-1002)
            assert len(sends(-1002)) == 2

            def metrics():
                url = json.loads((gw.state / "run" / "runtime.json").read_text())["metrics"]["url"]
                return urllib.request.urlopen(url, timeout=10).read().decode()
            wait_for(lambda: 'gateway_lost_sends_total{outcome="found",platform="telegram"} 1' in metrics()
                     and 'gateway_lost_sends_total{outcome="marked",platform="telegram"} 1' in metrics(), 20, 0.2,
                     "the two lost sends counted in /metrics: one found, one marked")
        finally:
            stop(gw)


def test_a_search_for_a_lost_copy_cut_by_dropped_connections_is_repeated_not_marked(tmp_path):
    """The search is edits, safe to repeat: connections dropped through all of the adapter's own retries make the
    consumer look again a moment later, not mark the reply as re-sent."""
    with FakeTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url, adapter="")
        try:
            gw.start()
            gw.wait_ready()
            tg.set_faults(next=["drop_after"] + ["drop"] * 5, methods=["sendMessage", "editMessageText"])
            tg.inject_message("echo find me through the drops", chat_id=45)

            def shown():
                return [m["text"] for m in tg.messages(45) if not m["deleted"]]
            wait_for(lambda: shown() and CURSOR not in shown()[-1] and "api_key_env" in shown()[-1], 60, 0.1,
                     f"the final answer (shown: {shown()})")
            assert len(shown()) == 1 and RESENT_MARKER not in shown()[0], shown()
            gw.wait_log("edited into place")
        finally:
            stop(gw)


class HoldingTelegram(FakeTelegram):
    """The fake Bot API, except that the first sendMessage creates its message and then holds the HTTP answer until
    ``released``: the message exists and the gateway cannot learn its id (the window a kill -9 must hit)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.holding, self.released = threading.Event(), threading.Event()

    async def _dispatch(self, request):
        answer = await super()._dispatch(request)
        if request.match_info.get("method", "").lower() == "sendmessage" and not self.holding.is_set():
            self.holding.set()
            while not self.released.is_set():
                await asyncio.sleep(0.02)
        return answer


def test_kill_9_between_a_send_and_its_id_in_a_private_chat_edits_the_copy_into_the_answer(tmp_path):
    """The daemon dies while Telegram holds the answer to the first send: that message exists and its id is nowhere
    in the gateway. In a private chat the resumed turn finds it by its id and goes on editing it: one message,
    unmarked, and the ledger does not call the delivery ambiguous."""
    with HoldingTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url)
        try:
            gw.start()
            gw.wait_ready()
            tg.inject_message("a send nobody hears back about #slow 0.1", chat_id=43)
            wait_for(tg.holding.is_set, 30, 0.01, "the first send created and its answer held")
            os.kill(gw.launcher_pid, signal.SIGKILL)
            gw.assert_no_process_left()
            tg.released.set()
            gw.start()

            def shown():
                return [m["text"] for m in tg.messages(43) if not m["deleted"]]
            wait_for(lambda: shown() and CURSOR not in shown()[-1] and "api_key_env" in shown()[-1], 60, 0.1,
                     f"the final answer (shown: {shown()})")
            assert len(shown()) == 1 and RESENT_MARKER not in shown()[0], shown()
            assert len([op for op in tg.timeline(43)["ops"] if op["method"] == "sendMessage"]) == 1
            gw.wait_log("edited into place")
            [delivery] = json.loads(gw.cli("deliveries", "--json", check=True).stdout)["deliveries"]
            assert delivery["state"] == "delivered" and not delivery["ambiguous"], delivery
        finally:
            tg.released.set()
            stop(gw)


# A reply whose owner died right after its send left: the obligation has its final text and the send's intent, and
# the process that made them is gone (it exits), so the sweeper finishes it.
LOST_SEND = """
import asyncio, sys
from storage import Store, Target
async def main(path, chat, reply_to, text):
    store = await Store.open(path)
    ob = await store.ledger.record_obligation(f"default.telegram.dm.{chat}", "m-lost", Target("telegram", chat,
                                              reply_to=reply_to), text, chunks=[text], claim=True)
    await store.ledger.record_send_intent(ob.obligation_id, ob.fence, 0)
    await store.close()
asyncio.run(main(*sys.argv[1:]))
"""


def test_the_sweeper_finds_the_copy_of_a_lost_send_in_a_private_chat(tmp_path):
    with FakeTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url, adapter="[delivery]\nsweep_interval_s = 1.0\n")
        try:
            gw.start()
            gw.wait_ready()
            update = tg.inject_message("echo hello first", chat_id=44)
            wait_for(lambda: tg.final_texts(44) and CURSOR not in tg.final_texts(44)[-1], 60, 0.1, "the first answer")
            # The lost send: it reached Telegram (the bot's message exists), its id never reached the ledger.
            request = urllib.request.Request(f"{tg.base_url}/bot{DEFAULT_TOKEN}/sendMessage", method="POST",
                                             data=json.dumps({"chat_id": 44, "text": "an unfinished ▍"}).encode(),
                                             headers={"Content-Type": "application/json"})
            lost_id = json.loads(urllib.request.urlopen(request, timeout=10).read())["result"]["message_id"]
            subprocess.run([sys.executable, "-c", LOST_SEND, str(gw.state / "gateway.db"), "44",
                            f"44:{update['message']['message_id']}", "the whole answer, found"], check=True,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
            wait_for(lambda: "the whole answer, found" in tg.final_texts(44), 60, 0.1,
                     f"the copy edited into the answer (shown: {tg.final_texts(44)})")
            assert len(tg.final_texts(44)) == 2 and not any(RESENT_MARKER in t for t in tg.final_texts(44))
            copy = next(m for m in tg.messages(44) if m["message_id"] == lost_id)
            assert copy["text"] == "the whole answer, found", "the lost copy itself became the answer"
            sends = [op for op in tg.timeline(44)["ops"] if op["method"] == "sendMessage"]
            assert len(sends) == 2, "the first answer and the lost send (the test's own call): nothing sent again"
        finally:
            stop(gw)


SPECIAL = r'<b>tag</b> & &amp; 1.5! _under_ [link](x) #hash +plus -minus =eq |pipe| {brace} ~tilde~ >quote \back'


@pytest.mark.parametrize("parse_mode", ["HTML", "MarkdownV2"])
def test_special_characters_arrive_intact_and_refused_markup_falls_back_to_plain_text(tmp_path, parse_mode):
    with RefusingTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url, adapter=f'parse_mode = "{parse_mode}"')
        # Debug logging everywhere, and an adapter refused for a revoked token (its error in the log, the tree and
        # status): the most text there is that could leak the token.
        gw.config.write_text(gw.config.read_text().replace("[gateway]\n", '[gateway]\nlog_level = "debug"\n', 1))
        try:
            gw.start()
            gw.wait_ready()
            tg.inject_message(f"echo {SPECIAL}", chat_id=31)
            [answer] = wait_for(lambda: settled_in(tg, 31), 60, 0.1, "the first answer")
            assert SPECIAL in answer, "every reserved character shows literally"
            assert "[agent]" in answer and "```" not in answer, "the fence became a code block"
            [message] = [m for m in tg.messages(31) if m["outgoing"]]
            assert {h["parse_mode"] for h in message["history"]} == {parse_mode}
            tg.refusals = 100   # every formatted text from now on is refused
            tg.inject_message("plain please", chat_id=32)
            [plain] = wait_for(lambda: settled_in(tg, 32), 60, 0.1, "the second answer")
            assert "plain please" in plain and "```toml" in plain, "sent as the raw text"
            [message] = [m for m in tg.messages(32) if m["outgoing"]]
            assert message["history"][-1]["parse_mode"] is None
            # The log reaches its file through Thespian's logger process, a moment after the chat shows the text.
            wait_for(lambda: "sent as plain text" in gw.log(), 10, 0.05, "the fallback in the log")
            tg.refusals = 0
            check_token_hidden(gw, tg)
        finally:
            stop(gw)


def check_token_hidden(gw: Gateway, tg: RefusingTelegram) -> None:
    def refusal():   # the adapter's row in status once the platform refused it
        result = gw.cli("status", "--json")
        rows = json.loads(result.stdout).get("adapters", []) if result.stdout.strip() else []
        return next((r for r in rows if r["name"] == "telegram" and "refused" in r.get("error", "")), None)
    tg.unauthorized = 1   # the next request meets a revoked token: the adapter is down, with the refusal shown
    wait_for(refusal, 30, 0.1, "the adapter shown refused by the revoked token")
    tree = gw.cli("tree", "--json", check=True).stdout
    gw.wait_log("Unauthorized")
    secret_part = DEFAULT_TOKEN.split(":", 1)[1]
    for where, text in (("gateway.log", gw.log()), ("tree --json", tree), ("status", gw.cli("status").stdout)):
        assert secret_part not in text, f"the token appears in {where}"


def test_a_reply_slow_to_start_shows_typing_and_a_quick_one_costs_no_typing_call(tmp_path):
    """The typing indicator covers a model slow to give its first word: shown after a second of nothing to show,
    never for a reply that is already streaming by then (it would cost a Bot API call for nothing)."""
    with FakeTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url)
        try:
            gw.start()
            gw.wait_ready()
            tg.inject_message("quick one", chat_id=41)
            wait_for(lambda: settled_in(tg, 41), 60, 0.1, "the quick answer")
            tg.inject_message("slow to start #think 2.5", chat_id=42)
            wait_for(lambda: settled_in(tg, 42), 60, 0.1, "the slow answer")
            typing = tg.ops(42, "sendChatAction")
            first_text = min(o["at"] for o in tg.ops(42) if o["method"] == "sendMessage")
            assert typing and typing[0]["at"] < first_text, tg.ops(42)
            assert tg.ops(41, "sendChatAction") == [], "a reply streaming within a second shows no typing"
        finally:
            gw.cli("stop")
            gw.kill_everything()
