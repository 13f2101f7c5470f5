"""A crash-looping deploy, from the chats' side: many chats streaming, the whole daemon killed with -9 several times
in its first seconds and started again a moment after each kill (G1-G3, G8; docs/design.md §3).

One run (``storm``): ``chats`` chats of the fake platform each send ``per_chat`` messages, all at once (the default
busy mode queues them, so every chat streams turn after turn); ``kills`` kill -9 of the launcher fall at seeded
random moments within ``window_s`` of the first message, each followed by a start ``restart_after_s`` later (a
crash-looping deploy's rhythm, not a wait for anything). Then every message must be answered, and the chats are
judged (``judge``):

* each message has exactly one complete answer (its quote, then the offline agent's last line), unfinished copies
  only above an answer carrying the re-sent marker;
* no answer twice, no "send it again" notice (every cut turn is resumed: [sessions] max_resumes is 3);
* at most one marked answer per kill (a kill cuts at most one send per chat lane in flight, and the ambiguity window
  is the request itself); none at all in Telegram private chats, where the lost copy is found by its id
  (actors/adapters/lost_copies.py).

Used by tests/pipeline/test_kill_storm.py (one seed, in the suite) and bench/kill_storm.py (many seeds, a table).
"""
from __future__ import annotations

import os
import random
import signal
import sqlite3
import time
from dataclasses import dataclass, field

from actors.adapters.pacing import DEFAULT_RESENT_MARKER
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.telegram import FakeTelegram
from tests.pipeline.harness import CURSOR, pipeline_gateway, telegram_gateway

ANSWER_END = "api_key_env"    # in the offline agent's last paragraph: an answer that has it is complete
NOTICES = ("send it again", "Please send it again", "interrupted")


@dataclass
class StormReport:
    seed: int
    messages: int
    kills: list = field(default_factory=list)     # seconds after the first message
    answered_s: float = 0.0
    marked: int = 0
    lost_found: int = 0      # lost sends whose copy was found by its id (Telegram private chats)
    lost_absent: int = 0     # lost sends found never to have landed
    violations: list = field(default_factory=list)


def question(chat: str, n: int, slow_s: float) -> str:
    return f"question {n} of {chat} #slow {slow_s}"


def judge(platform, chats: list, per_chat: int, max_marked: int) -> tuple[int, list[str]]:
    """(marked answers, violations) read from the platform's side."""
    violations, marked = [], 0
    for chat in chats:
        shown = [m for m in platform.messages(chat) if not m.get("deleted")]
        for n in range(per_chat):
            quote = f"question {n} of {chat}"
            mine = [m["text"] for m in shown if quote in m["text"]]
            complete = [t for t in mine if ANSWER_END in t and CURSOR not in t]
            unfinished = [t for t in mine if t not in complete]
            if len(complete) != 1:
                violations.append(f"{chat} q{n}: {len(complete)} complete answers ({len(mine)} messages)")
                continue
            resent = complete[0].startswith(DEFAULT_RESENT_MARKER)
            marked += resent
            if unfinished and not resent:
                violations.append(f"{chat} q{n}: an unfinished copy beside an unmarked answer")
        for m in shown:
            if any(notice in m["text"] for notice in NOTICES):
                violations.append(f"{chat}: a notice instead of an answer: {m['text'][:80]!r}")
    if marked > max_marked:
        violations.append(f"{marked} marked answers, at most {max_marked} allowed")
    return marked, violations


def inbox_done(gw) -> tuple[int, int]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        rows = db.execute("SELECT state FROM inbox").fetchall()
    return sum(1 for (state,) in rows if state == "done"), len(rows)


def storm(tmp_path, seed: int, chats: int = 20, per_chat: int = 5, kills: int = 3, window_s: float = 12.0,
          restart_after_s: tuple = (0.2, 1.5), slow_s: float = 0.15, answer_timeout_s: float = 240.0,
          extra: str = "", platform_kind: str = "fake") -> StormReport:
    """``slow_s`` between the answer's chunks: a turn streams for a few seconds, so most kills cut turns, and two
    kills close together cut the same one twice. ``platform_kind``: "fake" (the generic fake: no way to find a
    lost copy, so at most one marked answer per kill) or "telegram" (private chats of the fake Bot API: every lost
    copy is found, so no marked answer at all)."""
    rng = random.Random(seed)
    telegram = platform_kind == "telegram"
    names = [7_000_000 + 100 * seed + c for c in range(chats)] if telegram else [f"storm{seed}-{c}"
                                                                                  for c in range(chats)]
    report = StormReport(seed, chats * per_chat)
    extra = "[delivery]\nsweep_interval_s = 1.0\n" + extra
    with (FakeTelegram() if telegram else FakePlatform()) as platform:
        gw = telegram_gateway(tmp_path, platform.base_url, extra=extra) if telegram else \
            pipeline_gateway(tmp_path, platform, extra=extra)
        # The watchdog is not under test: a busy actor restarted by its short test deadline is a fault of its own.
        gw.config.write_text(gw.config.read_text().replace("ping_deadline_s = 1.5", "ping_deadline_s = 30.0"))
        try:
            gw.start()
            gw.wait_ready()
            for n in range(per_chat):
                for chat in names:
                    if telegram:
                        platform.inject_message(question(chat, n, slow_s), chat_id=chat)
                    else:
                        platform.inject(chat, question(chat, n, slow_s))
            started = time.monotonic()
            moments = sorted(rng.uniform(0.5, window_s) for _ in range(kills))
            for moment in moments:
                if (wait := moment - (time.monotonic() - started)) > 0:
                    time.sleep(wait)      # the storm's schedule: kills land when they land, ready or not
                os.kill(gw.launcher_pid, signal.SIGKILL)
                report.kills.append(round(time.monotonic() - started, 2))
                gw.assert_no_process_left(timeout=30)
                time.sleep(rng.uniform(*restart_after_s))   # the deploy's restart delay
                gw.start()
                gw._tree_or_none()    # learn the new processes' pids, for the next kill's check
            gw.wait_ready(timeout=60)
            try:
                wait_for(lambda: inbox_done(gw) == (report.messages, report.messages), answer_timeout_s, 0.2,
                         "every message answered")
            except AssertionError as exc:
                report.violations.append(f"{exc}: inbox {inbox_done(gw)}")
            report.answered_s = round(time.monotonic() - started, 1)

            def settled():
                return all(CURSOR not in m["text"] for chat in names for m in platform.messages(chat)
                           if not m.get("deleted"))
            try:
                wait_for(settled, 60, 0.2, "every answer settled (no streaming cursor left)")
            except AssertionError as exc:
                report.violations.append(str(exc))
            report.marked, found = judge(platform, names, per_chat, 0 if telegram else kills)
            report.violations.extend(found)
            log = gw.log()
            report.lost_found, report.lost_absent = log.count("edited into place"), log.count("never landed")
            if report.violations:
                tail = [line for line in gw.log().splitlines() if " INFO root" not in line][-30:]
                report.violations.append("log tail:\n" + "\n".join(tail))
        finally:
            gw.cli("stop")
            gw.kill_everything()
    return report
