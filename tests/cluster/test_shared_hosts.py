"""Hosts sharing one PostgreSQL ([cluster] shared, docs/distribution.md), on this machine: two real daemons, each
with its own state dir, the same configuration but the host name, one Telegram bot on the fake Bot API in its own
process. One host at a time polls (the intake's lease), the sessions are split between the hosts by partition
leases, and a kill -9 of the polling host moves the polling to the other within the lease time, with every message
answered once and no two polls overlapping (the fake answers an overlapped poll 409 and counts it).

The network-namespace runs (a host's network cut, three hosts) are in test_shared_failover.py."""
from __future__ import annotations

import json
import os
import signal
import time

import psycopg
import pytest

from tests.actor_system import wait_for
from tests.fakes.harness import ControlClient, StandaloneFake
from tests.pipeline.harness import CURSOR, telegram_gateway
from tests.servers.postgresql import PASSWORD_ENV, PostgreSQL

pytestmark = pytest.mark.timeout(300)
LEASE_S = 4.0
CHATS = 10


@pytest.fixture(scope="module")
def server():
    started = PostgreSQL().start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def fake():
    standalone = StandaloneFake("tests.fakes.telegram", "").start()
    yield standalone
    standalone.stop()


def shared_host(tmp_path, fake, server, dsn: str, name: str):
    (tmp_path / name).mkdir()
    gw = telegram_gateway(tmp_path / name, fake.base_url, extra=f"""
[storage]
backend = "postgresql"
dsn = "{dsn}"
password_env = "{PASSWORD_ENV}"
[cluster]
shared = true
host_name = "{name}"
lease_s = {LEASE_S}
partitions = 8
""")
    gw.env[PASSWORD_ENV] = server.password
    return gw


def leases(dsn: str, server) -> dict[str, tuple]:
    with psycopg.connect(dsn, password=server.password, connect_timeout=10) as conn:
        return {name: (holder, token) for name, holder, token in conn.execute(
            "SELECT name, holder, token FROM leases WHERE holder <> '' AND expires_at > "
            "extract(epoch from clock_timestamp())")}


def conflicts(control: ControlClient) -> int:
    return sum(n for text, n in control.get("/_control/stats")["errors"].items() if "Conflict" in text)


def answered(control: ControlClient, chat_id: int) -> list[str]:
    chat = control.get(f"/_control/chats/{chat_id}")
    return [m["text"] for m in chat["messages"] if m["outgoing"] and not m["deleted"]]


def settled(control: ControlClient, chat_ids: list[int], each: int) -> dict:
    """Every chat's bot messages once each chat has ``each`` settled answers (None until then, for wait_for)."""
    shown = {c: answered(control, c) for c in chat_ids}
    done = all(len(t) >= each and not any(CURSOR in x for x in t) for t in shown.values())
    return shown if done else None


def test_one_host_polls_the_sessions_are_split_and_a_killed_poller_is_replaced_within_the_lease_time(
        tmp_path, fake, server):
    dsn = server.dsn(server.create_database())
    control = ControlClient(fake.base_url, timeout=30)
    hosts = {name: shared_host(tmp_path, fake, server, dsn, name) for name in ("a", "b")}
    try:
        for gw in hosts.values():
            gw.start()
        for gw in hosts.values():
            gw.wait_ready(timeout=90)
        wait_for(lambda: "intake:telegram" in leases(dsn, server), 60, 0.2, "a host holding the Telegram intake")
        chat_ids = [7_100_001 + c for c in range(CHATS)]
        control.post("/_control/inject", [{"text": f"first question from {c}", "chat_id": c} for c in chat_ids])
        first = wait_for(lambda: settled(control, chat_ids, 1), 120, 0.2, "every chat's first answer")
        assert all(len(texts) == 1 for texts in first.values()), f"one answer per message: {first}"
        held = leases(dsn, server)
        partition_holders = {holder for name, (holder, _t) in held.items() if name.startswith("partition:")}
        assert partition_holders == {"a", "b"}, f"the sessions' partitions are split between the hosts: {held}"
        poller, token = held["intake:telegram"]
        other = "b" if poller == "a" else "a"
        assert conflicts(control) == 0, "no two polls overlapped"
        # Any host shows every host and every lease: the non-polling one is asked.
        shown = json.loads(hosts[other].cli("status", "--json").stdout)["shared"]
        assert {h["name"]: h["intakes"] for h in shown["hosts"]} == {poller: ["telegram"], other: []}, shown
        assert {h["name"] for h in shown["hosts"] if h["partitions"] and h["shards"] == 2} == {"a", "b"}, shown
        assert shown["partitions_unheld"] == 0, shown
        tree = hosts[other].cli("tree").stdout
        assert f"intake:telegram        held by {poller} (token {token}" in tree, tree

        os.kill(hosts[poller].launcher_pid, signal.SIGKILL)
        hosts[poller].assert_no_process_left()
        killed = time.monotonic()
        control.post("/_control/inject", [{"text": f"second question from {c}", "chat_id": c} for c in chat_ids])
        wait_for(lambda: leases(dsn, server).get("intake:telegram", ("",))[0] == other, 60, 0.1,
                 f"host {other} to take the Telegram intake")
        taken_after = time.monotonic() - killed
        second = wait_for(lambda: settled(control, chat_ids, 2), 120, 0.2, "every chat's second answer")
        assert all(len(texts) == 2 for texts in second.values()), f"each message answered once: {second}"
        after = leases(dsn, server)
        assert after["intake:telegram"][1] == token + 1, f"the take-over moved the fencing token: {after}"
        assert {h for n, (h, _t) in after.items() if n.startswith("partition:")} == {other}, (
            f"the killed host's partitions went to {other}: {after}")
        assert conflicts(control) == 0, "no two polls overlapped across the take-over"
        assert taken_after <= LEASE_S + 8, f"taken over {taken_after:.1f}s after the kill (lease {LEASE_S}s)"
        print(f"\nthe Telegram intake moved {taken_after:.1f}s after the kill (lease_s = {LEASE_S})")
    finally:
        for gw in hosts.values():
            gw.cli("stop")
            gw.kill_everything()
