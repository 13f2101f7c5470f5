"""A leader gateway and its worker hosts, each in its own network namespace (netns.py), driven through the real CLI."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.cluster.netns import Lab
from tests.gateway import PYTHON, ROOT, Gateway

CHECK_S, MISSES = 2, 3     # failure detection the tests run with: a member lost within ~(MISSES + 1) * CHECK_S
CLUSTER_TOML = f"[cluster]\nmember_check_s = {CHECK_S}\nmember_misses = {MISSES}\n"
LEADER_PORT = 17811        # inside the leader's own namespace: no other process can hold it
CLUSTER_SECRET = "lab-convention-secret-0123456789"   # [cluster] secret_env's default variable, on every host


class NamespacedGateway(Gateway):
    """The gateway daemon in one of the lab's namespaces (its own addresses), driven through the real CLI there."""

    def __init__(self, tmp_path: Path, lab: Lab, host: str, **gateway_kwargs):
        self.lab, self.host = lab, host
        tmp_path.mkdir(parents=True, exist_ok=True)
        super().__init__(tmp_path, **gateway_kwargs)

    def cli(self, *args, timeout: float = 60, check: bool = False) -> subprocess.CompletedProcess:
        result = subprocess.run([*self.lab.exec_prefix(self.host), PYTHON, str(ROOT / "run_gateway.py"),
                                 "--config", str(self.config), *args],
                                env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"{args} exited {result.returncode}: {result.stdout}\n{result.stderr}")
        return result

    def status(self) -> dict:
        result = self.cli("status", "--json", timeout=30)
        try:
            return json.loads(result.stdout)
        except ValueError:
            return {"error": result.stdout + result.stderr}


class LeaderGateway(NamespacedGateway):
    """The gateway daemon, run inside the lab's leader namespace on its private address."""

    def __init__(self, tmp_path: Path, lab: Lab, host: str = "leader", extra_toml: str = "", ping_deadline: float = 1.5):
        address = lab.hosts[host]
        super().__init__(tmp_path, lab, host, admin_port=LEADER_PORT, ping_deadline=ping_deadline,
                         gateway_toml=f'bind_host = "{address}"\nallow_non_loopback = true\n',
                         extra_toml=CLUSTER_TOML.replace("[cluster]\n", f'[cluster]\nenabled = true\nhost_name = '
                                                         f'"{host}"\n') + extra_toml)
        self.address = address
        self.env["GATEWAY_CLUSTER_SECRET"] = CLUSTER_SECRET      # workers' env is made from this one

    def metrics(self) -> str:
        """/metrics, fetched from inside the leader's namespace (it listens on the leader's private address)."""
        url = self.status()["metrics_url"]
        result = subprocess.run([*self.lab.exec_prefix(self.host), PYTHON, "-c",
                                 "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=20)"
                                 ".read().decode())", url], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    def hosts(self) -> dict[str, str]:
        return {h["name"]: h["state"] for h in self.status().get("hosts", [])}

    def wait_hosts(self, wanted: dict[str, str], timeout: float = 45.0) -> float:
        """Seconds until `status` shows every host of ``wanted`` in its state; says what it last saw otherwise."""
        started, seen = time.monotonic(), {}
        while time.monotonic() - started < timeout:
            seen = self.hosts()
            if all(seen.get(name) == state for name, state in wanted.items()):
                return time.monotonic() - started
            time.sleep(0.1)
        raise AssertionError(f"after {timeout}s `status` shows hosts {seen}, waiting for {wanted}")


class WorkerHost:
    """``run_gateway.py join`` in the lab's namespace for ``host``, in the foreground as a service manager runs it."""

    def __init__(self, tmp_path: Path, lab: Lab, host: str, leader: LeaderGateway):
        self.lab, self.host, self.leader = lab, host, leader
        self.dir = tmp_path / host
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "worker.toml"
        self.config.write_text(CLUSTER_TOML)
        self.proc: subprocess.Popen | None = None
        self.log_path = self.dir / "worker.log"

    def join(self, *extra: str) -> subprocess.Popen:
        env = dict(self.leader.env, GATEWAY_STATE_DIR=str(self.dir / "state"), THESPLOG_THRESHOLD="INFO")
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen([*self.lab.exec_prefix(self.host), PYTHON, str(ROOT / "run_gateway.py"),
                                          "--config", str(self.config), "join", f"{self.leader.address}:{LEADER_PORT}",
                                          "--bind", self.lab.hosts[self.host], "--name", self.host, *extra],
                                         env=env, stdout=log, stderr=subprocess.STDOUT)
        return self.proc

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.terminate()
        return self.proc.wait(timeout)
