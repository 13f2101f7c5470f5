"""Scale to zero ([gateway] idle_exit_s, daemon/idle_exit.py): the activity clock as a rule, as storage reads it,
the configuration check that refuses platforms which could not wake a stopped gateway, and a real daemon that
stops, exit 0, once idle, while its scheduler ticks with nothing due."""
from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import uuid

import pytest

from actors.adapters.on_demand import check_idle_exit
from actors.sessions.approval_flow import EXPIRY_PLATFORM
from common.config import ConfigError, SCHEMA
from daemon.idle_exit import Activity, IdleClock, check_interval, read_activity
from storage import InboundItem, Store
from storage.cron import CRON_PLATFORM
from tests.actor_system import free_port, wait_for
from tests.gateway import Gateway
from tests.http.fakes import CallbackReceiver, WebhookSender

pytestmark = pytest.mark.timeout(120)
SECRET = "idle-exit-webhook-secret"


# ------------------------------------------------------------------------------------------------ the rule

def test_the_clock_counts_from_the_last_platform_traffic_or_the_start_whichever_is_later():
    clock = IdleClock(idle_exit_s=5.0, started_at=1000.0)
    assert clock.idle_for(Activity(None, False), 1003.0) == 3.0            # nothing ever came: since the start
    assert clock.idle_for(Activity(900.0, False), 1003.0) == 3.0           # traffic of an earlier life: the start
    assert clock.idle_for(Activity(1002.0, False), 1003.0) == 1.0
    assert not clock.due(Activity(1002.0, False), 1006.9)
    assert clock.due(Activity(1002.0, False), 1007.0)


def test_work_in_flight_holds_the_exit_without_moving_the_clock():
    clock = IdleClock(idle_exit_s=5.0, started_at=1000.0)
    assert not clock.due(Activity(1001.0, busy=True), 1100.0)    # a reply still to deliver: not now
    assert clock.due(Activity(1001.0, busy=False), 1006.0)       # done: at once, 5 s after the traffic, not after
    assert clock.idle_for(Activity(1001.0, busy=True), 1100.0) == 99.0


def test_zero_means_never_and_the_check_interval_is_bounded():
    assert not IdleClock(idle_exit_s=0.0, started_at=0.0).due(Activity(None, False), 10 ** 9)
    assert SCHEMA["gateway"]["idle_exit_s"][1] == 0.0, "off by default"
    assert check_interval(5) == 0.5 and check_interval(60) == 6.0 and check_interval(86_400) == 10.0


def test_storage_reads_platform_traffic_past_the_gateways_own_rows_and_sees_work_in_flight(tmp_path):
    async def scenario():
        async with await Store.open(tmp_path / "gateway.db") as store:
            assert await read_activity(tmp_path / "gateway.db", "normal") == Activity(None, False)
            [(seq, _)] = await store.inbox.put_many([InboundItem("web:dm:a", "web", "m1", {"text": "hi"})])
            arrived = (await store.inbox.get(seq)).received_at
            await store.inbox.take(seq)
            await store.inbox.done(seq)
            # what the gateway writes for itself, later: a cron run and an approval deadline
            for platform in (CRON_PLATFORM, EXPIRY_PLATFORM):
                [(own, _)] = await store.inbox.put_many([InboundItem("web:dm:a", platform, f"{platform}-1", {})])
                await store.inbox.take(own)
                await store.inbox.done(own)
            assert await read_activity(tmp_path / "gateway.db", "normal") == Activity(arrived, False)
            [(waiting, _)] = await store.inbox.put_many([InboundItem("web:dm:b", CRON_PLATFORM, "cron-2", {})])
            assert (await read_activity(tmp_path / "gateway.db", "normal")).busy, "a row waiting is work"
            await store.inbox.take(waiting)
            await store.inbox.done(waiting)
            assert not await store.ledger.any_open()
    asyncio.run(scenario())


# ------------------------------------------------------------------------------------ the configuration check

def _config(adapters: dict, **gateway) -> dict:
    return {"_source": "gateway.toml", "gateway": {"idle_exit_s": 30.0, **gateway}, "adapters": adapters}


def test_a_platform_the_gateway_polls_or_connects_to_is_refused_naming_it_and_its_webhook_mode():
    with pytest.raises(ConfigError) as refused:
        check_idle_exit(_config({"tg": {"type": "telegram", "token": "1:x"},
                                 "web": {"type": "webchat"}}))
    text = str(refused.value)
    assert "[gateway] idle_exit_s" in text and "tg (telegram: polls the platform)" in text and "webhook mode" in text
    assert "web (" not in text, text
    with pytest.raises(ConfigError, match="ob \\(onebot"):   # a reverse WebSocket would wake it over and over
        check_idle_exit(_config({"ob": {"type": "onebot", "mode": "reverse", "access_token": "t"}}))
    # Feishu's long connection is one the gateway opens, though the platform's default intake is a server
    with pytest.raises(ConfigError, match="lark \\(feishu: keeps a connection to the platform\\)"):
        check_idle_exit(_config({"lark": {"type": "feishu", "app_id": "cli_x", "app_secret": "s",
                                          "inbound": "long_connection"}}))


def test_webhook_modes_the_web_chat_and_a_zero_bound_pass():
    check_idle_exit(_config({"tg": {"type": "telegram", "token": "1:x", "mode": "webhook",
                                    "webhook_secret": "s3cret", "webhook_url": "https://bot.example/tg"},
                             "web": {"type": "webchat"},
                             "api": {"type": "http", "hmac_secret": "k"}}))
    check_idle_exit({"_source": "gateway.toml", "gateway": {"idle_exit_s": 0.0},
                     "adapters": {"tg": {"type": "telegram", "token": "1:x"}}})


def test_a_leader_of_worker_hosts_is_refused():
    with pytest.raises(ConfigError, match="worker hosts"):
        check_idle_exit({**_config({"web": {"type": "webchat"}}), "cluster": {"enabled": True}})


def test_the_start_refuses_it_with_exit_78_before_anything_runs(tmp_path):
    gateway = Gateway(tmp_path, gateway_toml="idle_exit_s = 30", extra_toml="""
[adapters.tg]
type = "telegram"
token = "123:abc"
""")
    result = gateway.cli("start")
    assert result.returncode == 78, (result.returncode, result.stdout, result.stderr)
    assert "idle_exit_s" in result.stderr and "tg (telegram: polls the platform)" in result.stderr, result.stderr
    assert not (gateway.state / "run" / "runtime.json").exists()


# --------------------------------------------------------------------------------------------- the daemon

def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_an_idle_gateway_answers_then_stops_with_exit_0_while_its_scheduler_ticks_with_nothing_due(tmp_path):
    receiver = CallbackReceiver(SECRET).start()
    port = free_port()
    gateway = Gateway(tmp_path, watchdog_interval=0.5, gateway_toml="idle_exit_s = 5", extra_toml=f"""
[adapters.api]
type = "http"
port = {port}
hmac_secret = "{SECRET}"
callback_url = "{receiver.url}"
[agent]
chunk_delay_s = 0.0
[cron.yearly]
schedule = "0 0 1 1 *"
prompt = "happy new year"
adapter = "api"
chat = "nobody"
""")
    proc = gateway.run_foreground()
    try:
        wait_for(lambda: _listening(port), 60, 0.05, "the webhook server")
        chat = f"conv-{uuid.uuid4().hex[:8]}"
        status, _ = WebhookSender(f"http://127.0.0.1:{port}/webhook", SECRET).post(json.dumps(
            {"conversation_id": chat, "user_id": "alice", "message_id": "m1", "text": "hello"}).encode())
        assert status == 202
        wait_for(lambda: any(p["conversation_id"] == chat and p["final"] for p in receiver.received), 60, 0.05,
                 "the answer at the callback")
        try:
            code = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running 90 s after its answer:\n" + gateway.log()[-3000:]) from None
        output = proc.stdout.read()
        assert code == 0, output[-3000:]
        idle = re.search(r"idle for (\d+)s with no work in flight", output)
        assert idle and int(idle.group(1)) >= 5, output[-3000:]
        assert re.search(r"gateway stopped \(exit 0\)", output), output[-2000:]
        gateway.assert_no_process_left()
    finally:
        if proc.poll() is None:
            proc.kill()
        gateway.kill_everything()
        receiver.stop()
