"""kill -9 at random points of a turn, many times: after recovery every reply must be in the chat exactly once.

    python bench/chaos_turns.py [--trials 200] [--seed 1]

Each trial sends one message into a fresh chat (a slow, streamed answer), kills one victim at a random moment
(a Session, a StreamConsumer, the adapter, or the whole daemon, which is then started again), and checks from the
platform's side: one visible message whose final text is the whole answer, no second message, and the inbox row
done. Prints a table of trials and violations per victim; exits non-zero on any violation.

A kill between the platform creating a message and the gateway recording its id (the ambiguous send) leaves a copy
nobody can edit; recovery then sends the answer again with the re-sent marker line. That outcome (one complete
answer, marked, plus at most one unaddressable copy) is counted as "marked", not as a violation; the same copy next
to an unmarked answer is one.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.adapters.pacing import DEFAULT_RESENT_MARKER
from bench import tables
from bench.benchlib import UNLIMITED_SENDERS
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, actor_pid, pipeline_gateway, visible

VICTIMS = ("Session", "StreamConsumer", "FakePlatformAdapter", "daemon")


def trial(gw, platform, rng, n: int, victims: tuple) -> tuple[str, str | None, bool]:
    victim = rng.choice(victims)
    chat = f"chaos{n}"
    text = f"trial {n} #slow 0.05"
    platform.inject(chat, text)
    time.sleep(rng.uniform(0.0, 0.6))           # a random point: before, during or after the stream
    if victim == "daemon":
        os.kill(gw.launcher_pid, signal.SIGKILL)
        gw.assert_no_process_left(20)
        gw.start()
    else:
        try:
            os.kill(actor_pid(gw, victim, timeout=2), signal.SIGKILL)
        except (AssertionError, ProcessLookupError):
            pass                                 # it had already finished: a kill after the fact
    try:
        wait_for(lambda: inbox_done(gw) and any(final_answer(m, n) for m in visible(platform, chat)), 90, 0.05,
                 "answered")
    except AssertionError:
        return victim, f"no complete answer: {[m['text'][-40:] for m in platform.messages(chat)]}", False
    return (victim, *classify(platform.messages(chat), n))


def classify(messages: list[dict], n: int) -> tuple[str | None, bool]:
    """(violation or None, marked): what the chat shows once the answer is complete."""
    answers = [m for m in messages if final_answer(m, n)]
    marked = [m for m in answers if m["text"].startswith(DEFAULT_RESENT_MARKER)]
    if len(marked) == 1 and len(messages) <= 2:
        return None, True          # the other message, if any, is the copy the gateway could not address
    if not marked and len(answers) == 1 and len(messages) == 1:
        return None, False
    if not marked and len(answers) == 1 and len(messages) == 2:
        # The kill fell between the platform creating a message and the gateway recording its id, and the answer
        # does not tell the reader that the other message is a stale copy.
        return "ambiguous send: a stale copy next to an unmarked answer", False
    return f"{len(answers)} complete answers ({len(marked)} marked) in {len(messages)} messages", bool(marked)


def final_answer(message: dict, n: int) -> bool:
    return f"trial {n}" in message["text"] and "api_key_env" in message["text"] and CURSOR not in message["text"]


def inbox_done(gw) -> bool:
    """Trials run one after another: every inbound message so far is done."""
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return db.execute("SELECT count(*) FROM inbox WHERE state != 'done'").fetchone()[0] == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--victims", default=",".join(VICTIMS), help=f"comma-separated, from {', '.join(VICTIMS)}")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    runs, bad, marked, marked_alone = Counter(), Counter(), Counter(), Counter()
    violations = []
    with tempfile.TemporaryDirectory() as tmp, FakePlatform() as platform:
        gw = pipeline_gateway(Path(tmp), platform, max_restarts=100_000, ping_deadline=10.0,
                              adapter_extra=UNLIMITED_SENDERS)
        gw.start()
        try:
            for n in range(args.trials):
                victim, problem, was_marked = trial(gw, platform, rng, n, tuple(args.victims.split(",")))
                runs[victim] += 1
                if was_marked:
                    marked[victim] += 1
                    alone = len(platform.messages(f"chaos{n}")) == 1
                    marked_alone[victim] += alone
                    print(f"trial {n} ({victim}): marked as re-sent"
                          + (" (no copy reached the chat)" if alone else " next to an unfinished copy"),
                          file=sys.stderr, flush=True)
                if problem:
                    bad[victim] += 1
                    violations.append(f"trial {n} ({victim}): {problem}")
                    print(violations[-1], file=sys.stderr, flush=True)
        finally:
            gw.cli("stop")
            gw.kill_everything()
    counted = [[victim, runs[victim], marked[victim], marked_alone[victim], bad[victim]] for victim in VICTIMS]
    counted.append(["total", sum(runs.values()), sum(marked.values()), sum(marked_alone.values()),
                    sum(bad.values())])
    columns = ["victim", "trials", "marked", "of which alone", "violations"]
    tables.show(columns, counted, [f"{v:<22}{t:>8}{m:>8}{a:>16}{b:>12}" for v, t, m, a, b in [columns, *counted]],
                right=tuple(columns[1:]))
    print("marked: the answer carries the re-sent marker (a send's outcome was unknown after the kill); alone: no "
          "unfinished copy reached the chat, the mark was a precaution")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
