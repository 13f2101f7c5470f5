"""Pausing, resuming and reconnecting an adapter from the console's adapters page has the effect of the CLI's
`adapters pause|resume|reconnect NAME` (one AdapterCommand, two faces), against the real daemon and the fake Bot API:
a paused adapter asks the platform for nothing (the update sent meanwhile stays unconfirmed there), and resumed,
from the other face, it takes that update: nothing is lost. `status --json` counts each adapter's messages in/out.

The absence of polling while paused is watched over ABSENCE_S, longer than three long-poll rounds of the adapter
(poll_timeout_s = 1): a paused intake that still polled would be seen within it."""
from __future__ import annotations

import json
import sqlite3
import time

import pytest

from tests.actor_system import wait_for
from tests.console.helpers import console_gateway, console_port, running
from tests.fakes.telegram import DEFAULT_TOKEN, FakeTelegram

pytestmark = pytest.mark.timeout(240)
ABSENCE_S = 3.5


def telegram_row(gw) -> dict:
    rows = json.loads(gw.cli("status", "--json").stdout).get("adapters") or []
    return next((r for r in rows if r["name"] == "telegram"), {})


def stored(gw, text: str) -> bool:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return any(text in str(payload) for (payload,) in db.execute("SELECT payload FROM inbox"))


def polls(tg) -> int:
    return tg.stats()["requests"].get("getUpdates", 0)


def paused_takes_nothing(gw, tg, text: str, chat_id: int) -> None:
    """While paused: the adapter does not poll, and an update sent meanwhile stays with the platform."""
    before = polls(tg)
    tg.inject_message(text, chat_id=chat_id)
    deadline = time.monotonic() + ABSENCE_S
    while time.monotonic() < deadline:
        assert polls(tg) == before, f"a paused adapter polled the platform ({polls(tg) - before} getUpdates)"
        assert not stored(gw, text), "a paused adapter stored a new message"
        time.sleep(0.1)
    assert any(text in json.dumps(u) for u in tg.pending_updates()), "the update should wait at the platform"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with FakeTelegram() as tg:
        gw = console_gateway(tmp_path_factory.mktemp("console-adapters"), allow_actions=True, extra=f"""
[adapters.telegram]
type = "telegram"
access = "open"
token = "{DEFAULT_TOKEN}"
base_url = "{tg.base_url}"
poll_timeout_s = 1.0

[agent]
chunk_delay_s = 0.0
""")
        with running(gw):
            wait_for(lambda: telegram_row(gw).get("state") == "connected", 60, 0.2, "telegram connected")
            yield gw, tg, f"http://127.0.0.1:{console_port(gw)}"


def click_action(page, action: str) -> None:
    """Click the telegram row's button for ``action`` and wait for the gateway's answer to it (200, else its text)."""
    with page.expect_response(lambda r: f"/api/actions/{action}" in r.url, timeout=60_000) as answer:
        page.click(f"tr[data-adapter='telegram'] button[data-action='{action}']")
    assert answer.value.status == 200, (action, answer.value.status, answer.value.text())


def test_paused_with_the_cli_resumed_from_the_page_and_back_loses_nothing(gateway, page):
    gw, tg, base = gateway
    tg.inject_message("echo before any pause", chat_id=51)
    wait_for(lambda: stored(gw, "before any pause"), 60, 0.1, "the first message stored")
    wait_for(lambda: telegram_row(gw).get("messages_out", 0) >= 1, 60, 0.2, "the answer counted as a message out")
    assert telegram_row(gw)["messages_in"] == 1

    done = json.loads(gw.cli("adapters", "pause", "telegram", "--json", check=True).stdout)
    assert done == {"ok": True, "adapter": "telegram", "action": "pause", "detail": done["detail"]}
    row = telegram_row(gw)
    assert row["state"] == "paused" and row["paused_by"].startswith("cli"), row
    assert "intake pause by cli" in gw.log()
    paused_takes_nothing(gw, tg, "sent while paused by the cli", 52)

    page.goto(base + "/adapters")
    click_action(page, "adapters.resume")
    wait_for(lambda: stored(gw, "sent while paused by the cli"), 60, 0.1, "the held update taken after the resume")
    page.wait_for_selector("tr[data-adapter='telegram'] button[data-action='adapters.pause']")
    assert "intake resume by 127.0.0.1" in gw.log() or "intake resume by " in gw.log()

    # As an operator would: once the page shows the resumed adapter connected again (the resume restarts its
    # intake; a click meanwhile finds no running adapter to send it to, and says so).
    wait_for(lambda: telegram_row(gw).get("state") == "connected", 60, 0.2, "telegram connected after the resume")
    click_action(page, "adapters.pause")
    wait_for(lambda: telegram_row(gw).get("state") == "paused", 30, 0.2, "paused from the page")
    assert not telegram_row(gw)["paused_by"].startswith("cli")
    paused_takes_nothing(gw, tg, "sent while paused by the page", 53)
    gw.cli("adapters", "resume", "telegram", check=True)
    wait_for(lambda: stored(gw, "sent while paused by the page"), 60, 0.1, "the held update taken after the resume")
    assert telegram_row(gw)["messages_in"] == 3
    assert gw.cli("adapters", "resume", "telegram").returncode == 1   # not paused: refused, said why


def test_reconnect_from_both_faces_opens_a_new_connection_and_keeps_taking_messages(gateway, page):
    gw, tg, base = gateway
    gw.cli("adapters", "reconnect", "telegram", check=True)
    # The page is used as an operator would: once the adapter shows connected again after the CLI's reconnect (a
    # click meanwhile finds no running adapter to send it to, and says so).
    wait_for(lambda: telegram_row(gw).get("state") == "connected", 60, 0.2,
             "telegram connected again after the CLI's reconnect")
    page.goto(base + "/adapters")

    def clicked():
        """The console's answer to a click; None (click again) while its own walk of the tree finds the adapter
        without an address yet (a loaded machine's supervisor answering the walk late), as an operator would."""
        with page.expect_response(lambda r: "/api/actions/adapters.reconnect" in r.url, timeout=30_000) as answer:
            page.click("tr[data-adapter='telegram'] button[data-action='adapters.reconnect']")
        running = not (answer.value.status == 404 and "is running" in answer.value.text())
        return answer.value if running else None
    answer = wait_for(clicked, 60, 0.5, "the console to find the running telegram adapter")
    assert answer.status == 200, answer.text()
    assert gw.log().count("intake reconnect by") == 2
    tg.inject_message("echo after reconnecting", chat_id=54)
    wait_for(lambda: stored(gw, "after reconnecting"), 60, 0.1, "a message taken after the reconnects")
    assert gw.cli("adapters", "pause", "nosuch").returncode == 1
