"""Telegram adapter figures: updates per second through the whole daemon, and the gateway's overhead per update.

    python bench/bench_telegram.py [--chats 50] [--per-chat 10] [--latency-samples 40] [--paced-chats 20]

The real daemon (offline agent, ``[agent] chunk_delay_s = 0.0``: a zero-latency model) polls the in-process fake
Bot API (tests/fakes/telegram, no state file). Overhead = from the fake's timestamp of the inbound message to the
timestamp of the reply's last version (the final edit, or the send if the reply went out whole).

* ingest_per_s: updates stored in the inbox per second (the adapter's intake alone: poll, normalise, commit);
* unloaded: one update at a time, each to a new chat: the pipeline's own latency;
* unpaced: chats x per-chat updates at once, the fake's flood limits and the adapter's budgets lifted, so the
  figure is what the gateway sustains (latency then includes waiting behind the same chat's earlier turns);
* paced: the same with Telegram's limits (fake and adapter at ~1 op/s per chat, 25-30/s per bot): the rate a
  real bot would see; it is bound by the pacing, not by the gateway.
"""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import tables
from bench.benchlib import UNLIMITED_SENDERS
from tests.actor_system import wait_for
from tests.gateway import Gateway
from tests.fakes.telegram import FakeTelegram

CURSOR = "▍"
UNPACED_FAKE = {"per_chat_interval": 0.0, "global_per_second": 1_000_000, "group_per_minute": 1_000_000}
UNPACED_ADAPTER = "bot_ops_per_s = 100000.0\npacing = { per_chat_ops_per_s = 100000.0, per_chat_burst = 1000 }\n"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def start_gateway(workdir: Path, tg: FakeTelegram, chats: int, adapter_extra: str) -> Gateway:
    gw = Gateway(workdir, watchdog_interval=5.0, extra_toml=f"""
[adapters.telegram]
type = "telegram"
access = "open"
token = "{tg.token}"
base_url = "{tg.base_url}"
poll_timeout_s = 1.0
{UNLIMITED_SENDERS}
{adapter_extra}
[agent]
chunk_delay_s = 0.0
[sessions]
max_live = {chats + 20}
""")
    # The test helper's 1.5 s ping deadline is for small test trees; under a burst the adapter's mailbox is long
    # and a restart mid-measure would measure the recovery, not the pipeline.
    gw.config.write_text(gw.config.read_text().replace("ping_deadline_s = 1.5", "ping_deadline_s = 10.0"))
    gw.start()
    gw.wait_ready(timeout=60)
    return gw


def stop(gw: Gateway) -> None:
    gw.cli("stop")
    gw.kill_everything()


def overheads(tg: FakeTelegram, chat_ids: list[int]) -> list[float]:
    """Per inbound message: seconds from its arrival at the fake to the last version of the reply to it."""
    out = []
    for chat_id in chat_ids:
        messages = tg.messages(chat_id, incoming=True)
        arrived = {m["message_id"]: m["sent_at"] for m in messages if not m["outgoing"]}
        for reply in (m for m in messages if m["outgoing"] and not m["deleted"] and m["reply_to"] in arrived):
            out.append(reply["history"][-1]["at"] - arrived[reply["reply_to"]])
    return out


def settled_replies(tg: FakeTelegram, chat_ids: list[int]) -> int:
    return sum(1 for c in chat_ids for m in tg.messages(c) if not m["deleted"] and CURSOR not in m["text"]
               and m["reply_to"] is not None)


def inbox_rows(gw: Gateway) -> int:
    try:
        with sqlite3.connect(gw.state / "gateway.db") as db:
            return db.execute("SELECT count(*) FROM inbox").fetchone()[0]
    except sqlite3.Error:   # busy, or not created yet
        return 0


def inbox_done(gw: Gateway, total: int) -> bool:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        states = [s for (s,) in db.execute("SELECT state FROM inbox")]
    return len(states) == total and all(s == "done" for s in states)


def table_row(label: str, tg: FakeTelegram, chat_ids: list[int], total: int, elapsed: float, ingest) -> dict:
    lat, stats = overheads(tg, chat_ids), tg.stats()
    return {"run": label, "updates": total, "chats": len(chat_ids), "seconds": round(elapsed, 2),
            "updates_per_s": round(total / elapsed, 1), "ingest_per_s": ingest,
            "p50_ms": round(1000 * percentile(lat, 50)), "p99_ms": round(1000 * percentile(lat, 99)),
            "429s": stats["floods_served"], "violations": stats["retry_after_violations"]}


def run_burst(label: str, chats: int, per_chat: int, limits: dict, adapter_extra: str, first_chat: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp, FakeTelegram(**limits) as tg:
        gw = start_gateway(Path(tmp), tg, chats, adapter_extra)
        try:
            chat_ids = [first_chat + c for c in range(chats)]
            started = time.monotonic()
            for n in range(per_chat):
                for chat_id in chat_ids:
                    tg.inject_message(f"question {n}", chat_id=chat_id)
            total = chats * per_chat
            wait_for(lambda: inbox_rows(gw) >= total, 600, 0.02, f"{total} inbox rows")
            ingested = time.monotonic() - started
            # A row is done once its reply is delivered: the database says when, without locking the fake.
            wait_for(lambda: inbox_done(gw, total), 1800, 0.1, f"{total} answers")
            elapsed = time.monotonic() - started
            assert settled_replies(tg, chat_ids) == total, "one settled reply per update"
            return table_row(label, tg, chat_ids, total, elapsed, round(total / ingested))
        finally:
            stop(gw)


def run_unloaded(samples: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp, FakeTelegram(**UNPACED_FAKE) as tg:
        gw = start_gateway(Path(tmp), tg, samples, UNPACED_ADAPTER)
        try:
            chat_ids = [7_000_001 + n for n in range(samples)]
            started = time.monotonic()
            for chat_id in chat_ids:
                tg.inject_message("one question", chat_id=chat_id)
                tg.wait_for(lambda: settled_replies(tg, [chat_id]) == 1, timeout=60, interval=0.005)
            return table_row("unloaded, one at a time", tg, chat_ids, samples, time.monotonic() - started, "-")
        finally:
            stop(gw)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--per-chat", type=int, default=10)
    parser.add_argument("--latency-samples", type=int, default=40)
    parser.add_argument("--paced-chats", type=int, default=20)
    parser.add_argument("--paced-per-chat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [run_unloaded(args.latency_samples),
            run_burst("unpaced burst", args.chats, args.per_chat, UNPACED_FAKE, UNPACED_ADAPTER, 8_000_001),
            run_burst("Telegram pacing", args.paced_chats, args.paced_per_chat, {}, "", 9_000_001)]
    if args.json:
        print(json.dumps({"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, "runs": rows}))
        return 0
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    print(f"machine: {os.cpu_count()} cpus, python {sys.version.split()[0]}; zero-latency offline agent")
    tables.show(columns, [[row[c] for c in columns] for row in rows],
                ["  ".join(str(row[c] if row else c).ljust(widths[c]) for c in columns) for row in [None, *rows]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
