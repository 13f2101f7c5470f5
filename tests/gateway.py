"""Drive the real daemon from a test: a private state dir and port, the real CLI, pids checked against the OS."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from tests.actor_system import wait_for

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# The embedded default adapters, but the web chat on a free port: `status` is degraded (exit 1) while the default
# port is taken, as it may be by other gateways on this machine (tests running beside these).
DEFAULT_ADAPTERS_ANY_PORT = '[adapters.web]\ntype = "webchat"\nport = 0\n'


def interruptible() -> None:
    """``preexec_fn`` for a child a test sends Ctrl-C (SIGINT): its default action, whatever the test runner got.
    A shell starts background jobs with SIGINT ignored, that is inherited, and Python then leaves it ignored: the
    child would never see the Ctrl-C the test is about."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def exited(pid: int) -> bool:
    """The process is gone or a zombie: it has run its last instruction and the kernel has closed its sockets (a
    peer sees their end from now on, not a connection that still answers)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class Gateway:
    def __init__(self, tmp_path: Path, extra_toml: str = "", watchdog_interval: float = 0.5, max_restarts: int = 5,
                 period_s: float = 30.0, ping_deadline: float = 1.5, admin_port: int = 0, gateway_toml: str = "",
                 test_hooks: bool = True, watchdog_toml: str = ""):
        """``test_hooks``: [debug] fault_injection on (unless the test's own TOML has a [debug] table), for the
        offline agent's #slow / #long / #fail hooks and Fault messages; False: the defaults, as an operator runs."""
        self.state = tmp_path / "state"
        # 0: the launcher takes a free port as it starts and records it for the CLI. A port chosen here would stay
        # unbound until then, and another process of a busy suite may take it meanwhile.
        self.port = admin_port
        self.config = tmp_path / "gateway.toml"
        self.config.write_text(f"""
[gateway]
admin_port = {self.port}
{gateway_toml}
[watchdog]
interval_s = {watchdog_interval}
ping_deadline_s = {ping_deadline}
{watchdog_toml}
[supervision]
max_restarts = {max_restarts}
period_s = {period_s}
backoff_base_s = 0.01
backoff_max_s = 0.2
{extra_toml}
""" + ("" if "[metrics]" in extra_toml else "[metrics]\nport = 0   # many test daemons at once: each its own port\n")
          + ("" if "[console]" in extra_toml else "[console]\nport = 0\n")
          + ("" if not test_hooks or "[debug]" in extra_toml + gateway_toml else "[debug]\nfault_injection = true\n"))
        self.env = dict(os.environ, GATEWAY_STATE_DIR=str(self.state), PYTHONPATH=str(ROOT))
        self.env.pop("GATEWAY_CONFIG", None)
        self.seen_pids: set[int] = set()
        self.launcher_pid = 0

    # ------------------------------------------------------------------------------------------------ the CLI
    def cli(self, *args, timeout: float = 60, check: bool = False) -> subprocess.CompletedProcess:
        result = subprocess.run([PYTHON, str(ROOT / "run_gateway.py"), "--config", str(self.config), *args],
                                env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"{args} exited {result.returncode}: {result.stdout}\n{result.stderr}")
        return result

    def start(self) -> dict:
        """Start the daemon. Exit 4 is a start too (started, degraded: an adapter or the metrics port could not
        connect or listen on its first attempt): tests of a platform that is down at first start it so."""
        result = self.cli("start", "--json")
        if result.returncode not in (0, 4):
            raise AssertionError(f"start exited {result.returncode}: {result.stdout}\n{result.stderr}")
        out = json.loads(result.stdout)
        self.launcher_pid = out["pid"]
        self.seen_pids.add(self.launcher_pid)
        return out

    def run_foreground(self) -> subprocess.Popen:
        proc = subprocess.Popen([PYTHON, str(ROOT / "run_gateway.py"), "--config", str(self.config), "run"],
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.launcher_pid = proc.pid
        self.seen_pids.add(proc.pid)
        return proc

    def tree(self) -> dict:
        tree = json.loads(self.cli("tree", "--json", check=True).stdout)
        self.seen_pids.update(n["pid"] for n in nodes(tree) if n["pid"])
        return tree

    def node(self, name: str) -> dict:
        return next(n for n in nodes(self.tree()) if n["name"] == name)

    def wait_ready(self, timeout: float = 20) -> dict:
        return wait_for(lambda: (t := self._tree_or_none()) and all(n["state"] in ("running", "busy") for n in nodes(t)) and t,
                        timeout, 0.05, "every actor running")

    def _tree_or_none(self):
        result = self.cli("tree", "--json")
        if result.returncode != 0:
            return None
        tree = json.loads(result.stdout)
        self.seen_pids.update(n["pid"] for n in nodes(tree) if n["pid"])
        return tree

    def log(self) -> str:
        path = self.state / "gateway.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_log(self, fragment: str, timeout: float = 15) -> str:
        """Log lines reach the file through the actor system's logger, a moment after the fact they report (a row
        deleted, a turn resumed): a test that checks the log right after the fact races that hop."""
        wait_for(lambda: fragment in self.log(), timeout, 0.05,
                 f"a log line with {fragment!r} (last lines: {self.log().splitlines()[-5:]})")
        return self.log()

    # ------------------------------------------------------------------------------------------------ cleanup
    def alive_pids(self) -> list[int]:
        return [pid for pid in self.seen_pids if not exited(pid)]

    def assert_no_process_left(self, timeout: float = 10) -> None:
        wait_for(lambda: not self.alive_pids(), timeout, 0.05, f"gateway processes to exit: {self.alive_pids()}")

    def kill_everything(self) -> None:
        for pid in self.alive_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def nodes(tree: dict) -> list[dict]:
    out = [tree]
    for child in tree.get("children", []):
        out.extend(nodes(child))
    return out
