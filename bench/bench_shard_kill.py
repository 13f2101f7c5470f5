"""A session shard killed with -9, as a chat sees it: the kill, a message into one of its chats at that moment, and
the time until that message's answer is final on the platform. The shard's supervisor restarts it, the new shard
finds the chat's inbox row and starts its session, the turn runs; nothing in between is the benchmark's.

    python bench/bench_shard_kill.py [--kills N]

Run by bench/run_benchmarks.py as its "shard kill" phase; alone it prints the figures as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchlib import BENCH_FAKE_ADAPTER, final_at, measure_latency, ms, percentile
from tests.actor_system import wait_for
from tests.gateway import nodes
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import pipeline_gateway

CHAT = "shard-kill"


def _shard_of_the_chat(gw) -> dict:
    """The shard node whose cells hold the chat's session (the only session of this gateway)."""
    def find():
        tree = gw._tree_or_none() or {}
        for node in nodes(tree):
            if node["kind"] == "SessionShard" and node.get("pid") and \
                    any(child["kind"] == "Session" for child in node.get("children", [])):
                return node
        return None
    return wait_for(find, 30, 0.05, "the shard that hosts the chat's session")


def bench_shard_kills(kills: int) -> dict:
    """``kills`` times: SIGKILL the chat's shard, inject a message into the chat at once, time until its answer is
    final. Also the answer's ordinary latency just before, for comparison."""
    with tempfile.TemporaryDirectory() as tmp, FakePlatform() as platform:
        # period_s 0.5: each kill starts a fresh restart window, so the figure is the restart and not the backoff a
        # shard that keeps dying earns. The watchdog's interval is long so that it is not what notices the kill.
        gw = pipeline_gateway(Path(tmp), platform, watchdog_interval=30.0, max_restarts=10_000, period_s=0.5,
                              adapter_extra=BENCH_FAKE_ADAPTER)
        served, warm = [], []
        try:
            gw.start()
            gw.wait_ready()
            for i in range(kills):
                warm.append(measure_latency(platform, CHAT, f"before kill {i}"))
                shard = _shard_of_the_chat(gw)
                text = f"at kill {i}"
                killed_at = time.time()
                os.kill(shard["pid"], signal.SIGKILL)
                platform.inject(CHAT, text)
                done = wait_for(lambda: final_at(platform, CHAT, text), 60, 0.002, f"the answer to {text!r}")
                served.append(done - killed_at)
                # A new shard, answering: the next round kills that one.
                wait_for(lambda: _shard_of_the_chat(gw)["pid"] != shard["pid"], 30, 0.05, "the new shard")
                time.sleep(0.5)   # let the restart intensity window slide: the figure is latency, not give-up
        finally:
            gw.cli("stop")
            gw.kill_everything()
    return {"shard_kills": kills, "served_again_ms_p50": ms(percentile(served, 50)),
            "served_again_ms_p99": ms(percentile(served, 99)), "served_again_ms_max": ms(max(served)),
            "warm_answer_ms_p50": ms(percentile(warm, 50))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20, help="how many times the shard is killed (20)")
    print(json.dumps(bench_shard_kills(parser.parse_args().kills), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
