"""What the bench scripts share: percentiles, reading replies off the fake platform, the gateway's process memory,
runtime measures (start-to-ready, restart after SIGKILL) and a description of the machine.

Every figure is taken against the real daemon (tests/gateway.py) and the generic fake platform
(tests/fakes/fakeplatform.py) on 127.0.0.1; the scripts put the repository root on sys.path before importing this.
"""
from __future__ import annotations

import datetime
import os
import platform as python_platform
import random
import signal
import statistics
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import psutil

from common import config as config_mod
from supervision import tree as tree_mod
from daemon.admin import AdminClient
from tests.actor_system import wait_for
from tests.gateway import Gateway, nodes
from tests.pipeline.harness import CURSOR

# Benchmarks drive one chat far faster than a person types: the per-sender limit (30 a minute by default,
# actors/adapters/sender_limits.py) would measure the limit, not the pipeline, so they turn it off.
UNLIMITED_SENDERS = "limits = { per_minute = 0 }"
# The fake platform's per-chat pacing (50 operations a second, burst 50) holds sequential turns in one chat to one
# per 20 ms once the burst is spent: a deliberate wait the baseline relay does not make. The pipeline benchmarks
# lift it too, so that "overhead per turn" is the gateway's work, not its pacing.
BENCH_FAKE_ADAPTER = UNLIMITED_SENDERS + "\npacing = { per_chat_ops_per_s = 100000.0, per_chat_burst = 1000 }"
KILLABLE = ("watchdog", "sweeper", "ticker", "shard:0")


def percentile(values, p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


# ------------------------------------------------------------------------------------------ replies on the fake
def final_at(platform, chat, inbound_text):
    """Time the reply quoting ``inbound_text`` reached its final text, or None while it is still streaming."""
    for m in platform.messages(chat):
        if inbound_text in m["text"] and CURSOR not in m["text"]:
            return m["history"][-1]["at"]
    return None


def measure_latency(platform, chat: str, text: str, timeout: float = 30) -> float:
    """Inject one message and return seconds until the reply to it shows its final text on the platform."""
    sent = time.time()
    platform.inject(chat, text)
    done = wait_for(lambda: final_at(platform, chat, text), timeout, 0.002, "reply")
    return done - sent


def final_times(platform, chats) -> dict:
    """chat -> when its first bot message showed its final text (no cursor), for the chats that have one. One read
    of the fake's state for all chats: polling a thousand chats one by one would load the machine being measured."""
    wanted = {str(c) for c in chats}

    def select(state):
        out = {}
        for chat in wanted:
            for m in state["chats"].get(chat, {}).get("messages", {}).values():
                if not m["deleted"] and CURSOR not in m["text"]:
                    out[chat] = m["history"][-1]["at"]
                    break
        return out
    return platform.read(select)


def streaming_chats(platform, chats) -> int:
    """How many of ``chats`` show a bot message (streaming or final)."""
    wanted = {str(c) for c in chats}
    return platform.read(lambda s: sum(1 for c in wanted if s["chats"].get(c, {}).get("messages")))


def per_second(times: list[float], start: float) -> list[int]:
    """Counts of ``times`` in each whole second after ``start`` (index 0: the first second)."""
    if not times:
        return []
    bins = [0] * (int(max(times) - start) + 1)
    for t in times:
        bins[max(0, int(t - start))] += 1
    return bins


# ------------------------------------------------------------------------------------------------- memory
def pss_mib(pid: int) -> float:
    """Proportional set size (private pages plus a share of the pages shared after fork), in MiB."""
    info = psutil.Process(pid).memory_full_info()
    return getattr(info, "pss", info.uss) / 2**20


def process_tree_pss(root_pid: int) -> dict[int, float]:
    """pid -> PSS in MiB of ``root_pid`` and all its descendants: the whole daemon when given the launcher, read
    from the OS, so a slow actor cannot hide part of it (a tree walk can miss an actor that answers late)."""
    try:
        root = psutil.Process(root_pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return {}
    out = {}
    for proc in processes:
        try:
            out[proc.pid] = pss_mib(proc.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def process_tree_cpu_s(root_pid: int) -> float:
    """CPU seconds (user + system) used so far by ``root_pid`` and all its descendants, with their reaped children:
    the whole daemon's CPU when given the launcher."""
    try:
        root = psutil.Process(root_pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for proc in processes:
        try:
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


def session_pss(gw, attempts: int = 5) -> list[float]:
    """PSS of each live Session process, from the actor tree. Under load a describe can miss its deadline and leave
    the sessions out of a walk: walk again, a few times, until some show up."""
    for _ in range(attempts):
        out = []
        for n in nodes(gw.tree()):
            if n["kind"] == "Session" and n.get("pid"):
                try:
                    out.append(pss_mib(n["pid"]))
                except psutil.NoSuchProcess:
                    pass
        if out:
            return out
    return []


def tree_pss(gw) -> float:
    return sum(process_tree_pss(gw.launcher_pid).values())


# ------------------------------------------------------------------------------------------------ runtime
def bench_starts(n: int) -> dict:
    """``run_gateway.py start`` n times on a fresh state dir: the launcher's own start-to-ready and the wall time."""
    launcher, wall = [], []
    for _ in range(n):
        with tempfile.TemporaryDirectory() as tmp:
            gw = Gateway(Path(tmp), watchdog_interval=5.0)
            t = time.monotonic()
            info = gw.start()
            wall.append(time.monotonic() - t)
            launcher.append(info["ready_after_s"])
            gw.cli("stop")
            gw.kill_everything()
    return {"launcher_ready_s_p50": statistics.median(launcher), "start_command_s_p50": statistics.median(wall),
            "start_command_s_max": max(wall), "starts": n}


def bench_kills(n: int) -> dict:
    """SIGKILL of a random leaf child of the root, n times: kill -> replacement answering its supervisor."""
    with tempfile.TemporaryDirectory() as tmp:
        # period_s 0.5: each kill starts a fresh restart window, so the figure is the restart itself and not the
        # exponential backoff a child that keeps dying earns (base 10 ms, cap 200 ms in this configuration).
        gw = Gateway(Path(tmp), watchdog_interval=30.0, max_restarts=10_000, period_s=0.5)
        gw.start()
        os.environ["GATEWAY_STATE_DIR"] = str(gw.state)
        client = AdminClient(config_mod.load(str(gw.config)))
        latencies = []
        try:
            for _ in range(n):
                name = random.choice(KILLABLE)
                old = _node(client, name)
                killed_at = time.time()
                os.kill(old.pid, signal.SIGKILL)
                time.sleep(0.1)  # a walk that starts before the exit is noticed waits out a describe deadline
                while True:
                    node = _node(client, name)
                    if node is not None and node.pid and node.pid != old.pid and node.state == "running":
                        break
                    time.sleep(0.005)
                # started_at is when the supervisor got the new child's ChildReady: killed -> answering.
                latencies.append(node.started_at - killed_at)
                time.sleep(0.5)  # let the restart intensity window slide: we measure latency, not give-up
            memory = _memory(client)
        finally:
            gw.cli("stop")
            gw.kill_everything()
    return {"kills": n, "restart_ms_p50": ms(percentile(latencies, 50)),
            "restart_ms_p99": ms(percentile(latencies, 99)), "restart_ms_max": ms(max(latencies)), **memory}


def _node(client, name):
    for node, _, _ in tree_mod.walk(client.tree()):
        if node.name == name:
            return node
    return None


def _memory(client) -> dict:
    uss, pss = [], []
    for node, _, _ in tree_mod.walk(client.tree()):
        if node.ref is None:
            continue   # a cell: its memory is its shard's
        info = psutil.Process(node.pid).memory_full_info()
        uss.append(info.uss / 2**20)
        pss.append(getattr(info, "pss", info.uss) / 2**20)
    return {"actors": len(pss), "pss_mib_mean": round(statistics.mean(pss), 2),
            "uss_mib_mean": round(statistics.mean(uss), 2)}


# ------------------------------------------------------------------------------------------------ machine
def machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = python_platform.processor()
    try:
        thespian = metadata.version("thespian")
    except metadata.PackageNotFoundError:
        thespian = "?"
    return {"cpus": os.cpu_count(), "cpu_model": model, "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "python": sys.version.split()[0], "thespian": thespian, "os": python_platform.platform(),
            "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


# ----------------------------------------------------------------------------------------------- baseline
class BaselineProcess:
    """bench/baseline_relay.py in its own process (its memory is then its own), polling ``base_url``.

    ``with BaselineProcess(url) as relay:`` returns once the relay's first poll was answered; ``relay.ready_s`` is
    the time from spawn to that moment; leaving the block stops it (SIGTERM, then SIGKILL)."""

    SCRIPT = Path(__file__).resolve().parent / "baseline_relay.py"

    def __init__(self, base_url: str, timeout: float = 20.0, chunk_delay_s: float = 0.0):
        self.base_url, self.timeout, self.chunk_delay_s = base_url, timeout, chunk_delay_s
        self.proc = None
        self.ready_s = None

    def __enter__(self) -> "BaselineProcess":
        import selectors
        import subprocess
        started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, str(self.SCRIPT), "--base-url", self.base_url,
                                      "--chunk-delay", str(self.chunk_delay_s)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(self.timeout):
                self.__exit__()
                raise AssertionError(f"baseline relay not ready within {self.timeout}s")
        line = self.proc.stdout.readline()
        if '"ready": true' not in line:
            self.__exit__()
            raise AssertionError(f"baseline relay did not start: {line!r}")
        self.ready_s = time.monotonic() - started
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def __exit__(self, *exc) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except Exception:  # noqa: BLE001 - it did not stop in time: it must not outlive the bench
            self.proc.kill()
            self.proc.wait(5)
