"""`start` says at once what does not work: it waits (bounded) for each adapter's first attempt and the metrics
server's, and reports "started, degraded: ..." with the cause and exit 4, instead of "gateway started" and 0."""
from __future__ import annotations

import json
import os
import re
import socket
import threading

import pytest

from tests.actor_system import free_port, wait_for
from tests.gateway import DEFAULT_ADAPTERS_ANY_PORT, Gateway

pytestmark = pytest.mark.timeout(120)


def _held_port() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_start_names_the_ports_it_cannot_listen_on_and_who_holds_them(tmp_path):
    web, metrics = _held_port(), _held_port()
    web_port, metrics_port = web.getsockname()[1], metrics.getsockname()[1]
    gw = Gateway(tmp_path, extra_toml=f'[adapters.web]\ntype = "webchat"\nport = {web_port}\n'
                                      f'[metrics]\nport = {metrics_port}\n')
    try:
        result = gw.cli("start", timeout=90)
        said = result.stdout + result.stderr
        first = said.splitlines()[0]
        gw.seen_pids.add(int(re.search(r"\(pid (\d+)\)", first).group(1)))
        assert result.returncode == 4, said
        assert first.startswith("gateway started (pid ") and ", degraded: " in first, said
        me = f"in use by pid {os.getpid()}"
        assert f"web cannot listen on 127.0.0.1:{web_port} ({me}" in first, said
        assert f"metrics cannot listen on 127.0.0.1:{metrics_port} ({me}" in first, said
        status = gw.cli("status", "--json")
        problems = json.loads(status.stdout)["problems"]
        assert status.returncode == 1 and any(p.startswith("metrics cannot listen") for p in problems), problems
    finally:
        gw.cli("stop", timeout=60)
        gw.kill_everything()
        web.close()
        metrics.close()


def test_start_names_an_adapter_that_cannot_reach_its_platform(tmp_path):
    closed = _held_port()
    port = closed.getsockname()[1]
    closed.close()   # nothing listens there now: every connection is refused
    gw = Gateway(tmp_path, extra_toml='[adapters.web]\ntype = "webchat"\nport = 0\n'
                                      '[adapters.tg]\ntype = "telegram"\n'
                                      'token = "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghi"\n'
                                      f'base_url = "http://127.0.0.1:{port}"\n')
    try:
        result = gw.cli("start", "--json", timeout=90)
        out = json.loads(result.stdout)
        gw.seen_pids.add(out["pid"])
        assert result.returncode == 4 and out["ok"] and out["degraded"], out
        assert len(out["problems"]) == 1 and out["problems"][0].startswith("tg retrying: "), out
        assert f"127.0.0.1:{port}" in out["problems"][0], out
    finally:
        gw.cli("stop", timeout=60)
        gw.kill_everything()


def test_an_admin_port_taken_by_another_gateway_names_it_in_one_line(tmp_path):
    port = free_port()
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = Gateway(tmp_path / "first", admin_port=port, extra_toml=DEFAULT_ADAPTERS_ANY_PORT)
    second = Gateway(tmp_path / "second", admin_port=port, extra_toml=DEFAULT_ADAPTERS_ANY_PORT)
    try:
        first.start()
        result = second.cli("start", timeout=90)
        said = (result.stdout + result.stderr).strip().splitlines()
        assert result.returncode == 1, said
        assert said[0] == (f"the gateway failed to start (exit 1): admin port 127.0.0.1:{port} is in use by another "
                           f"gateway, pid {first.launcher_pid}, state dir {first.state}; set [gateway] admin_port "
                           "to another port (0: any free one)"), said
        assert said[1:] == [f"  log: {second.state / 'gateway.log'}"], said
        # The first one keeps the port to itself: every admin connection still reaches it.
        for _ in range(5):
            assert json.loads(first.cli("status", "--json").stdout)["pid"] == first.launcher_pid
    finally:
        for gw in (first, second):
            gw.cli("stop", timeout=60)
            gw.kill_everything()


def test_an_admin_port_taken_by_a_program_says_only_this_start_s_cause(tmp_path):
    port = free_port()
    gw = Gateway(tmp_path, admin_port=port, extra_toml=DEFAULT_ADAPTERS_ANY_PORT)
    try:
        gw.start()                   # an earlier run: its lines are in the log, and are not this start's story
        gw.cli("stop", timeout=60, check=True)
        with socket.socket() as squatter:
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.bind(("127.0.0.1", port))
            squatter.listen()
            result = gw.cli("start", timeout=90)
        said = (result.stdout + result.stderr).strip().splitlines()
        assert result.returncode == 1 and len(said) == 2, said
        assert said[0].startswith(f"the gateway failed to start (exit 1): admin port 127.0.0.1:{port} is in use by "
                                  f"pid {os.getpid()}, python"), said
    finally:
        gw.kill_everything()


def test_a_foreground_run_says_once_where_it_serves_and_what_does_not_work(tmp_path):
    """`run` (what a service manager runs) has no `start` to report: once the adapters have had their first attempt
    its log says, in one line, where the web chat serves and which adapter is down and why."""
    held = _held_port()
    held_port = held.getsockname()[1]
    gw = Gateway(tmp_path, extra_toml='[adapters.web]\ntype = "webchat"\nport = 0\n'
                                      f'[adapters.busy]\ntype = "webchat"\nport = {held_port}\n')
    proc = gw.run_foreground()
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in proc.stdout), daemon=True)
    reader.start()
    try:
        try:
            [said] = wait_for(lambda: [line for line in lines if "gateway.launcher: serving" in line], 60, 0.05,
                              "the launcher's serving line")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the log so far: {lines[-15:]}") from None
        assert " WARNING " in said, said
        assert re.search(r"serving, web chat http://127\.0\.0\.1:\d+/; degraded: busy cannot listen on "
                         rf"127\.0\.0\.1:{held_port} \(in use by pid {os.getpid()}, python", said), said
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
        gw.kill_everything()
        held.close()
