"""Acting from the console has the CLI's effect: approving a pairing code and retrying a failed delivery from the
page (Chromium, Playwright) against the real daemon, each beside the same action taken with the CLI; and the
overview counts the gateway's own turns, failures and memory.

The codes and the failed deliveries are written into the gateway's database by the test (the real storage, beside
the running daemon, as the CLI writes it): a stranger's message and a platform that refuses a reply would make
the same rows, more slowly."""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
import urllib.request

import pytest

from storage import Store
from storage.ledger import Target
from tests.actor_system import wait_for
from tests.console.helpers import console_gateway, console_port, running
from tests.webchat.browser import watch_problems

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = console_gateway(tmp_path_factory.mktemp("console-actions"), allow_actions=True,
                         extra='[adapters.web]\ntype = "webchat"\nport = 0\n\n[agent]\nchunk_delay_s = 0.0\n\n'
                               '[cron.yearly]\nschedule = "0 9 1 1 *"\nprompt = "Happy new year"\nadapter = "cli"\n'
                               'chat = "operator"\n')
    with running(gw):
        yield gw, f"http://127.0.0.1:{console_port(gw)}"


def on_store(gw, call):
    async def go():
        store = await Store.open(gw.state / "gateway.db", "normal")
        try:
            return await call(store)
        finally:
            await store.close()
    # In a thread of its own: Playwright's sync API runs an event loop on the test's thread.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, asyncio.wait_for(go(), 30)).result(40)


def cli_json(gw, *args) -> dict:
    return json.loads(gw.cli(*args, "--json", check=True).stdout)


def test_approving_a_pairing_code_in_the_page_is_approving_it_with_the_cli(gateway, page):
    gw, base = gateway

    async def two_codes(store):
        common = {"ttl_s": 3600, "max_codes": 5, "lockout_s": 60}
        return [(await store.access.request_code("web", user, f"chat-{user}", name, **common)).code.code
                for user, name in (("u-page", "Ada"), ("u-cli", "Grace"))]
    page_code, cli_code = on_store(gw, two_codes)
    problems = watch_problems(page)
    page.goto(base + "/pairing")
    page.click(f"tr[data-code='{page_code}'] button[data-action='pairing.approve']")
    page.wait_for_function(f"() => !document.querySelector(\"tr[data-code='{page_code}']\")")
    gw.cli("pair", "approve", cli_code, check=True)

    listed = cli_json(gw, "pair", "list")
    assert listed["pending"] == []
    grants = {g["user_id"]: g for g in listed["grants"]}
    assert set(grants) == {"u-page", "u-cli"}
    assert grants["u-cli"]["granted_by"] == "cli"
    assert grants["u-page"]["granted_by"] == "console (loopback from 127.0.0.1)"
    assert {k: v for k, v in grants["u-page"].items() if k not in ("user_id", "user_name", "granted_by", "granted_at")} \
        == {k: v for k, v in grants["u-cli"].items() if k not in ("user_id", "user_name", "granted_by", "granted_at")}
    gw.wait_log(f"console: pairing.approve '{page_code}' by console (loopback from 127.0.0.1)")
    assert problems == []


def test_retrying_a_failed_delivery_in_the_page_is_retrying_it_with_the_cli(gateway, page):
    gw, base = gateway

    async def two_failed(store):
        ids = []
        for n in (1, 2):   # a platform no adapter serves: the retried reply stays pending, for the test to see
            ob = await store.ledger.record_obligation(f"ghost.chat-{n}", f"in-{n}", Target("ghost", f"chat-{n}"),
                                                      f"reply {n}", claim=True)
            await store.ledger.mark_failed(ob.obligation_id, ob.fence, "the platform refused it")
            ids.append(ob.obligation_id)
        return ids
    page_id, cli_id = on_store(gw, two_failed)
    problems = watch_problems(page)
    page.goto(base + "/deliveries")
    row = f"tr[data-obligation='{page_id}']"
    page.wait_for_selector(f"{row}[data-state='failed']")
    page.click(f"{row} button[data-action='deliveries.retry']")
    page.wait_for_selector(f"{row}[data-state='pending']")
    gw.cli("deliveries", "retry", cli_id, check=True)

    rows = {d["obligation_id"]: d for d in cli_json(gw, "deliveries")["deliveries"]}
    same = ("state", "attempts", "last_error", "platform")
    assert rows[page_id]["state"] == "pending"
    assert {k: rows[page_id].get(k) for k in same} == {k: rows[cli_id].get(k) for k in same}
    gw.wait_log(f"console: deliveries.retry '{page_id}' by console (loopback from 127.0.0.1)")
    assert problems == []


def test_running_a_cron_job_from_the_page_is_cron_run(gateway, page):
    gw, base = gateway
    problems = watch_problems(page)
    page.goto(base + "/cron")
    page.click("tr[data-job='yearly'] button[data-action='cron.run']")
    runs = wait_for(lambda: (job := cli_json(gw, "cron", "list")["jobs"][0])["runs"] and job["runs"], 30, 0.2,
                    "the manual run in `cron list`")
    assert runs[0]["origin"] == "manual" and runs[0]["run_id"].startswith("yearly:manual:")
    page.wait_for_selector("tr[data-job='yearly'] .runs li")   # the page reloads the jobs after the action
    gw.wait_log("console: cron.run 'yearly' by console (loopback from 127.0.0.1)")
    assert problems == []


def test_the_overview_counts_the_gateways_own_turns_failures_and_memory(gateway):
    gw, base = gateway

    def status() -> dict:
        with urllib.request.urlopen(base + "/api/status", timeout=15) as response:
            return json.loads(response.read())
    before = status()["hour"]
    gw.cli("chat", "--message", "hello there", timeout=90, check=True)
    gw.cli("chat", "--message", "#fail please", timeout=90)
    seen = wait_for(lambda: (s := status())["hour"]["turns"] >= before["turns"] + 2 and s, 30, 0.2,
                    "two more turns in the overview's hour")
    assert seen["hour"]["failed"] >= before["failed"] + 1
    assert seen["hour"]["p50"] is not None and seen["hour"]["p99"] >= seen["hour"]["p50"]
    assert sum(p["turns"] for p in seen["recent"]) == seen["hour"]["turns"] and len(seen["recent"]) == 60
    assert seen["recent"][-1]["t"] <= time.time() < seen["recent"][-1]["t"] + 61
    memory = seen["memory"]
    assert memory["processes"] >= 10 and memory["pss_bytes"] > 50 * 1024 * 1024, memory
    assert set(seen["deliveries"]) >= {"pending", "failed", "delivered"}
    cli = seen["platforms"]["cli"]
    assert cli["turns"] >= 2 and cli["rate_limit_waits"] == 0
