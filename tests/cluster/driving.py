"""What the cluster tests share: the web chat visitors run in the leader's namespace, the checks of their answers,
the counts of a host's database, the tree's shards."""
from __future__ import annotations

import asyncio
import json
import subprocess
import threading

from storage import Store
from tests.gateway import PYTHON, ROOT

WEB_PORT = 18080   # the web chat's port inside the leader's namespace (its own loopback)


def web_leader_toml(chunk_delay_s: float, port: int = WEB_PORT, web_extra: str = "") -> str:
    """A leader with one shard, one per worker that joins, and a web chat on its own loopback; the offline agent
    streams a turn in ~27 chunks ``chunk_delay_s`` apart."""
    return f"""shards_per_worker = 1
[sessions]
shards = 1
[adapters.web]
type = "webchat"
host = "127.0.0.1"   # inside the leader's namespace: its own loopback
port = {port}
# every visitor of the drivers comes from one address
new_visitors_per_hour = 0
messages_per_minute_per_address = 0
uploads_per_hour_per_address = 0
{web_extra}[agent]
chunk_delay_s = {chunk_delay_s}
"""


def shards_running(leader, kind: str = "SessionShard") -> dict:
    tree = json.loads(leader.cli("tree", "--json", timeout=30).stdout or "{}")
    found = {}

    def walk(node):
        if node.get("kind") == kind:
            found[node.get("name")] = node.get("state")
        for child in node.get("children", ()):
            walk(child)
    walk(tree.get("tree", tree))
    return found


class Driver:
    """tests/cluster/webchat_driver.py in the leader's namespace, read as it prints; ``rounds`` > 1: each round
    after the first goes at ``next_round()``."""

    def __init__(self, leader, prefix: str, count: int, timeout: float, rounds: int = 1, port: int = WEB_PORT,
                 history: bool = False):
        self.proc = subprocess.Popen([*leader.lab.exec_prefix("leader"), PYTHON, "-m", "tests.cluster.webchat_driver",
                                      f"http://127.0.0.1:{port}", prefix, str(count), str(timeout), str(rounds),
                                      *(["history"] if history else [])],
                                     cwd=ROOT, env=leader.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.answers: list[dict] = []
        self.summaries: dict[int, dict] = {}    # round -> its finals
        self.histories: dict[str, dict] = {}    # visitor -> its reloaded page's history frame (history=True)
        self.round_done = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @property
    def summary(self) -> dict | None:
        return self.summaries.get(max(self.summaries)) if self.summaries else None

    def _read(self) -> None:
        for line in self.proc.stdout:
            item = json.loads(line)
            if "histories" in item:
                self.histories = item["histories"]
            elif "finals" in item:
                with self.round_done:
                    self.summaries[item.get("round", 1)] = item["finals"]
                    self.round_done.notify_all()
            else:
                self.answers.append(item)

    def wait_round(self, number: int, timeout: float) -> dict:
        with self.round_done:
            if not self.round_done.wait_for(lambda: number in self.summaries or self.proc.poll() is not None,
                                            timeout):
                raise AssertionError(f"round {number} of the visitors did not end within {timeout}s "
                                     f"({len(self.answers)} answers so far)")
        assert number in self.summaries, f"the driver ended before round {number}: {self.proc.stderr.read()[-3000:]}"
        return self.summaries[number]

    def next_round(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float) -> dict:
        self.proc.wait(timeout)
        self.reader.join(10)
        assert self.proc.returncode == 0 and self.summary is not None, self.proc.stderr.read()[-3000:]
        return self.summary


def check_each_answered_once(finals: dict, worker) -> None:
    unanswered = [name for name, shown in finals.items() if not shown]
    assert not unanswered, f"no answer for {unanswered}; the worker's log ends:\n{worker.log()[-3000:]}"
    doubled = {name: shown for name, shown in finals.items() if len(shown) > 1}
    assert not doubled, f"answered in more than one message: {doubled}"


def counts(path) -> tuple[dict, dict]:
    async def read():
        async with await Store.open(path) as store:
            return await store.inbox.counts(), await store.ledger.counts()
    return asyncio.run(read())


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0
