"""Liveness under bursts: every acknowledged message is answered within the bound ([sessions] answer_bound_s,
60 s, plus the agent's own time, which is ~0 here), burst after burst (docs/design.md §3; issue: 20 bursts of 500).

    python bench/burst_liveness.py [--bursts 20] [--messages 500] [--chats 250]

One daemon, the generic fake platform with its pacing lifted and the zero-latency offline agent. Each burst injects
``messages`` messages spread over ``chats`` fresh chats at once (so each chat queues several turns), and waits
until every reply is final. Prints one line per burst (answered, p50 / p99 / max seconds from the injection to the
reply's final text) and exits non-zero if any reply took longer than the bound or never came.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchlib import BENCH_FAKE_ADAPTER, percentile
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, pipeline_gateway

BOUND_S = 60.0


def seconds(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def answered_at(platform, chats: list[str], texts: dict) -> dict:
    """text -> when its reply showed its final text, for the replies that have; one read of each chat."""
    done = {}
    for chat in chats:
        for message in platform.messages(chat):
            if CURSOR in message["text"] or message.get("deleted"):
                continue
            for text in texts[chat]:
                if f'"{text}"' in message["text"] and text not in done:
                    done[text] = message["history"][-1]["at"]
    return done


def burst(platform, n: int, messages: int, chats: int, timeout: float) -> dict:
    names = [f"b{n}-{c}" for c in range(chats)]
    texts = {chat: [] for chat in names}
    sent = {}
    for i in range(messages):
        chat = names[i % chats]
        text = f"burst {n} message {i}"
        texts[chat].append(text)
        sent[text] = time.time()
        platform.inject(chat, text)
    done = {}
    try:
        wait_for(lambda: len(done.update(answered_at(platform, names, texts)) or done) == messages, timeout, 0.5,
                 f"every reply of burst {n}")
    except AssertionError:
        pass
    waits = [done[t] - sent[t] for t in done]
    return {"answered": len(done), "p50": percentile(waits, 50) if waits else None,
            "p99": percentile(waits, 99) if waits else None, "max": max(waits) if waits else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bursts", type=int, default=20, help="bursts, one after the other (20)")
    parser.add_argument("--messages", type=int, default=500, help="messages per burst (500)")
    parser.add_argument("--chats", type=int, default=250, help="fresh chats per burst (250)")
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp, FakePlatform() as platform:
        gw = pipeline_gateway(Path(tmp), platform, watchdog_interval=10.0, ping_deadline=10.0, max_restarts=1000,
                              adapter_extra=BENCH_FAKE_ADAPTER)
        try:
            gw.start()
            gw.wait_ready()
            print(f"| burst | answered of {args.messages} | p50 s | p99 s | max s | within {BOUND_S:g} s |\n"
                  "|---:|---:|---:|---:|---:|---|", flush=True)
            for n in range(args.bursts):
                r = burst(platform, n, args.messages, args.chats, timeout=BOUND_S * 3)
                ok = r["answered"] == args.messages and r["max"] is not None and r["max"] <= BOUND_S
                failed += not ok
                print(f"| {n} | {r['answered']} | {seconds(r['p50'])} | {seconds(r['p99'])} | {seconds(r['max'])} | "
                      f"{'yes' if ok else 'NO'} |", flush=True)
        finally:
            gw.cli("stop")
            gw.kill_everything()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
