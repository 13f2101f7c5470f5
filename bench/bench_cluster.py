"""Answers/s and reply latency with 0, 1, 2 or more worker hosts, each host in its own network namespace (as root).

    python bench/bench_cluster.py [--visitors 100] [--workers 0 1 2] [--out DIR]

Per run: a leader with one session shard and ``[cluster] shards_per_worker = 1``, N workers joined, and VISITORS
web chat visitors (tests/cluster/webchat_driver.py, inside the leader's namespace) who connect, then each send one
message at once. Reported: answers/s (visitors / time to the last answer), reply latency p50/p99, and the CPU
seconds each host's processes spent over the burst, the driver's own excluded. On one 2-core box every host shares
the same two cores, so the absolute rate cannot grow with hosts; the leader's CPU per answer says where one
leader's ceiling is (it runs every adapter and forwards every worker's rows), and the workers' CPU per answer what
each added host takes off it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil

from bench.benchlib import machine, percentile
from tests.actor_system import wait_for
from tests.cluster import netns
from tests.cluster.hosts import LeaderGateway, WorkerHost
from tests.gateway import PYTHON

WEB_PORT = 18090


def cpu_s(pids) -> float:
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def shards_running(leader) -> set:
    tree = json.loads(leader.cli("tree", "--json", timeout=60).stdout or "{}")
    found = set()

    def walk(node):
        if node.get("kind") == "SessionShard" and node.get("state") == "running":
            found.add(node.get("name"))
        for child in node.get("children", ()):
            walk(child)
    walk(tree.get("tree", tree))
    return found


def run(workers: int, visitors: int, tmp: Path, args_timeout: float = 60.0) -> dict:
    names = [f"w{i + 1}" for i in range(workers)]
    lab = netns.Lab.of_hosts(f"b{workers}", "leader", *names)
    leader = LeaderGateway(tmp / "leader", lab, extra_toml=f"""shards_per_worker = 1
[sessions]
shards = 1
[adapters.web]
type = "webchat"
host = "127.0.0.1"
port = {WEB_PORT}
limits = {{ per_minute = 0 }}
max_tabs_per_client = 0   # every visitor of the bench comes from one address
new_visitors_per_hour = 0
messages_per_minute_per_address = 0
uploads_per_hour_per_address = 0
max_tabs = {visitors + 8}
[agent]
chunk_delay_s = 0.0
""")
    # Every visitor of the bench connects from one address: no per-client bound on HTTP connections either.
    text = leader.config.read_text()
    leader.config.write_text(text.replace("allow_non_loopback = true\n",
                                          "allow_non_loopback = true\nhttp_connections_per_client = 0\n", 1))
    hosts = {}
    try:
        leader.start()
        hosts = {name: WorkerHost(tmp, lab, name, leader) for name in names}
        for host in hosts.values():
            host.join()
        leader.wait_hosts({"leader": "running", **{n: "running" for n in names}}, timeout=90)
        wanted = {"shard:0", *(f"shard:{n}/0" for n in names)}
        wait_for(lambda: wanted <= shards_running(leader), 90, 0.5, f"shards {sorted(wanted)} running")
        driver = subprocess.Popen([*lab.exec_prefix("leader"), PYTHON, "-m", "tests.cluster.webchat_driver",
                                   f"http://127.0.0.1:{WEB_PORT}", "bench", str(visitors), str(args_timeout)],
                                  cwd=ROOT, env=leader.env, stdout=subprocess.PIPE, text=True)
        before = {h: cpu_s(p for p in lab.pids(h) if p != driver.pid) for h in ("leader", *names)}
        answers = []
        for line in driver.stdout:
            item = json.loads(line)
            if "finals" in item:
                doubled = sum(1 for shown in item["finals"].values() if len(shown) > 1)
                unanswered = sum(1 for shown in item["finals"].values() if not shown)
                break
            answers.append(item)
        after = {h: cpu_s(p for p in lab.pids(h) if p != driver.pid) for h in ("leader", *names)}
        driver.wait(60)
        if not answers:
            tail = "\n".join(leader.log().splitlines()[-20:])
            raise SystemExit(f"bench_cluster: no visitor was answered with {workers} worker(s); the leader's log "
                             f"ends:\n{tail}")
        span = max(a["at_s"] for a in answers)
        latencies = [a["after_s"] for a in answers]
        cpu = {h: round(after[h] - before[h], 2) for h in after}
        return {"workers": workers, "visitors": visitors, "answered": len(answers), "unanswered": unanswered,
                "doubled": doubled, "answers_per_s": round(len(answers) / span, 1),
                "reply_p50_ms": round(percentile(latencies, 50) * 1000), "reply_p99_ms":
                round(percentile(latencies, 99) * 1000), "cpu_s": cpu,
                "leader_cpu_ms_per_answer": round(cpu["leader"] * 1000 / max(1, len(answers)), 2)}
    finally:
        for host in hosts.values():
            host.stop()
        leader.cli("stop", timeout=60)
        leader.kill_everything()
        lab.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visitors", type=int, default=100, help="web chat visitors, each sending one message")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=None, help="a directory for results.json")
    args = parser.parse_args()
    if (why := netns.skip_reason()) is not None:
        sys.exit(f"bench_cluster: {why}")
    load = list(psutil.getloadavg())
    results = []
    for workers in args.workers:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.monotonic()
            results.append(run(workers, args.visitors, Path(tmp)))
            print(f"[{time.strftime('%H:%M:%S')}] {workers} worker(s) ({time.monotonic() - started:.0f}s): "
                  f"{json.dumps(results[-1])}", flush=True)
    print(f"\nCommand: `python bench/bench_cluster.py --visitors {args.visitors} --workers "
          f"{' '.join(map(str, args.workers))}`; load average at start {load}; {machine()}\n")
    print("| workers | answered | answers/s | reply p50 / p99 | CPU s: leader / each worker | leader CPU per answer |")
    print("|---|---|---|---|---|---|")
    for r in results:
        workers_cpu = " / ".join(str(v) for h, v in r["cpu_s"].items() if h != "leader") or "-"
        print(f"| {r['workers']} | {r['answered']}/{r['visitors']} ({r['doubled']} twice) | {r['answers_per_s']} | "
              f"{r['reply_p50_ms']} / {r['reply_p99_ms']} ms | {r['cpu_s']['leader']} / {workers_cpu} | "
              f"{r['leader_cpu_ms_per_answer']} ms |")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cluster.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
