"""The real daemon on PostgreSQL ([storage] backend = "postgresql", its password from the environment), against a real
server (tests/servers/postgresql.py) and the fake platform: a message gets its answer, and a kill -9 of the whole
daemon while an answer streams ends, after a restart, with that answer in the chat once, edited into place.

One server and one daemon for the module (the kill test restarts the daemon it killed)."""
from __future__ import annotations

import os
import signal

import psycopg
import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, pipeline_gateway, settled_answers, visible
from tests.servers.postgresql import PASSWORD_ENV, PostgreSQL

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def server():
    started = PostgreSQL().start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def platform():
    with FakePlatform() as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, server, platform):
    dsn = server.dsn(server.create_database())
    gw = pipeline_gateway(tmp_path_factory.mktemp("pg-daemon"), platform,
                          extra=f'[storage]\nbackend = "postgresql"\ndsn = "{dsn}"\npassword_env = "{PASSWORD_ENV}"\n')
    gw.env[PASSWORD_ENV] = server.password
    gw.dsn = dsn
    gw.start()
    gw.wait_ready(timeout=60)
    yield gw
    gw.cli("stop")
    gw.kill_everything()


def rows(gw, server, statement: str) -> list:
    with psycopg.connect(gw.dsn, password=server.password, connect_timeout=10) as conn:
        return conn.execute(statement).fetchall()


def test_a_message_gets_its_answer_with_the_state_in_postgresql(gateway, server, platform):
    platform.inject("pg-1", "hello from postgres")
    [answer] = settled_answers(platform, "pg-1", timeout=60, gw=gateway)
    assert "hello from postgres" in answer and "api_key_env" in answer
    assert not (gateway.state / "gateway.db").exists(), "no SQLite file beside the PostgreSQL state"
    wait_for(lambda: rows(gateway, server, "SELECT state FROM inbox") == [("done",)], 60, 0.1,
             "the message done in PostgreSQL's inbox")
    assert rows(gateway, server, "SELECT count(*) FROM transcript")[0][0] >= 2


def test_kill_9_of_the_daemon_mid_answer_ends_with_the_answer_once(gateway, server, platform):
    platform.inject("pg-kill", "survive a crash on postgres #slow 0.15")
    wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, "pg-kill")), 60, 0.01,
             "the answer to start streaming")
    wait_for(lambda: rows(gateway, server, "SELECT count(*) FROM obligation_parts")[0][0], 60, 0.01,
             "the first part's id in the ledger")
    os.kill(gateway.launcher_pid, signal.SIGKILL)
    gateway.assert_no_process_left()
    gateway.start()
    [answer] = settled_answers(platform, "pg-kill", timeout=90, gw=gateway)
    assert "survive a crash on postgres" in answer and "api_key_env" in answer, answer
    assert len(platform.messages("pg-kill")) == 1, "edited into place: no second message"
    gateway.wait_log("resuming the turn interrupted by a restart", timeout=60)
    wait_for(lambda: {s for (s,) in rows(gateway, server, "SELECT state FROM inbox")} == {"done"}, 60, 0.1,
             "every message done in PostgreSQL's inbox")
