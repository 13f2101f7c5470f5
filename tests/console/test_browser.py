"""The console in Debian's headless Chromium, driven by Playwright, against the real daemon: every page loads with
no console error, light and dark, at 390 px without sideways scrolling; the tree page shows an adapter's restart
within 2 s of a kill -9 of its process.

With CONSOLE_SCREENSHOTS=1 the page test also writes docs/console/PAGE-{desktop,phone}-{light,dark}.png (the
reusable way to refresh the screenshots: ``CONSOLE_SCREENSHOTS=1 python -m pytest tests/console/test_browser.py -k
every_page -n 0``)."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from storage import TASK_PLATFORM, InboundItem, Store
from storage.ledger import Target
from tests.console.helpers import console_gateway, console_port, running
from tests.webchat.browser import WAIT_MS, watch_problems

pytestmark = pytest.mark.timeout(240)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"
SCREENSHOTS = os.environ.get("CONSOLE_SCREENSHOTS") == "1"
PAGES = ("overview", "tree", "adapters", "chats", "deliveries", "pairing", "cron", "logs")
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
RESTART_SHOWN_WITHIN_S = 2.0


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = console_gateway(tmp_path_factory.mktemp("console-browser"), allow_actions=True,
                         extra='[adapters.web]\ntype = "webchat"\nport = 0\n\n[agent]\nchunk_delay_s = 0.0\n\n'
                               '[cron.morning]\nschedule = "0 9 * * 1-5"\ntimezone = "Europe/Berlin"\n'
                               'prompt = "Summarise my calendar"\nadapter = "cli"\nchat = "operator"\n')
    with running(gw):
        # Something on every page: two turns (one failed), a pairing code, a failed delivery.
        gw.cli("chat", "--message", "What is the capital of France?", timeout=90, check=True)
        gw.cli("chat", "--message", "#fail this one", timeout=90)
        seed_store(gw)
        gw.cli("cron", "run", "morning", check=True)
        yield gw, f"http://127.0.0.1:{console_port(gw)}"


def seed_store(gw) -> None:
    async def seed(store):
        await store.access.request_code("web", "4711", "4711", "Ada Lovelace", ttl_s=3600, max_codes=5, lockout_s=60)
        ob = await store.ledger.record_obligation("ghost.chat-1", "in-1", Target("ghost", "chat-1"),
                                                  "The capital of France is Paris.", claim=True)
        await store.ledger.mark_failed(ob.obligation_id, ob.fence, "403 Forbidden: the bot was removed from the chat")
        # A background task of every chat whose result was kept (the chat was reset while it ran): its prompt's
        # inbox row dropped, so the running gateway never runs it.
        for key in {s.session_key for s in await store.sessions.list(limit=20)}:
            started = await store.tasks.start(key, "an-earlier-conversation", "default", "Count the moons", 5,
                                              lambda n, key=key: InboundItem(f"{key}.task-{n}", TASK_PLATFORM,
                                                                             f"{key}.task-{n}", {"text": "moons"}),
                                              f"seed:{key}")
            await store.inbox.drop(started.task.inbox_seq, "seeded for the console's pages")
            await store.tasks.finish(started.task.task_key, "kept", KEPT_RESULT, "An earlier task #1 finished")

    async def go():
        store = await Store.open(gw.state / "gateway.db", "normal")
        try:
            await seed(store)
        finally:
            await store.close()
    asyncio.run(asyncio.wait_for(go(), 30))


def node_of(page, name: str) -> dict:
    return page.evaluate("name => { const n = document.querySelector(`.node[data-name='${name}']`);"
                         " return n ? {...n.dataset} : null; }", name)


def test_the_tree_page_shows_an_adapters_restart_within_2_s_of_a_kill_9(gateway, page):
    gw, base = gateway
    problems = watch_problems(page)
    page.goto(base + "/tree")
    page.wait_for_function("() => document.querySelector(\".node[data-name='web'][data-state='running']\")")
    before = gw.node("web")
    shown = node_of(page, "web")
    assert int(shown["pid"]) == before["pid"] and int(shown["restarts"]) == before["restarts"]
    assert shown["flashed"] == "0"

    os.kill(before["pid"], signal.SIGKILL)
    killed_at = time.monotonic()
    try:
        page.wait_for_function(
            "old => { const n = document.querySelector(\".node[data-name='web']\");"
            " return n && Number(n.dataset.restarts) > old && n.dataset.flashed !== '0'; }",
            arg=before["restarts"], timeout=WAIT_MS)
    except Exception as exc:   # say what the page showed instead
        raise AssertionError(f"no restart shown: the page shows {node_of(page, 'web')}") from exc
    shown_after = time.monotonic() - killed_at
    after = node_of(page, "web")
    assert shown_after < RESTART_SHOWN_WITHIN_S, f"the restart showed {shown_after:.2f}s after the kill: {after}"
    assert "flash" in page.get_attribute(".node[data-name='web']", "class")

    page.click(".node[data-name='web']")   # its facts
    page.wait_for_selector("#facts:not([hidden])")
    facts = page.inner_text("#facts")
    assert "Restarts" in facts and "Last crash" in facts and after["pid"] in facts
    assert problems == []


KEPT_RESULT = "Jupiter has 95 known moons. " * 12
READY = "() => document.getElementById('page').dataset.ready === 'yes'"


def first_session_link(page, base: str) -> str:
    page.goto(base + "/chats")
    page.wait_for_selector("#sessions a")
    return page.get_attribute("#sessions a", "href")


def test_chats_search_reads_the_transcript_and_exports_it(gateway, page):
    _gw, base = gateway
    problems = watch_problems(page)
    page.goto(base + "/chats")
    page.wait_for_function(READY)
    page.fill("#q", "capital")
    page.click("form.search button[type=submit]")
    page.wait_for_selector("#sessions h2:has-text('Found: 2')")   # the question and its echo
    assert "capital" in page.inner_text("#sessions").lower()
    page.click("#sessions a")
    page.wait_for_selector("#transcript .event.assistant")
    events = page.eval_on_selector_all("#transcript .event", "nodes => nodes.map(n => n.textContent)")
    assert any("What is the capital of France?" in e for e in events), events
    with page.expect_download() as download:
        page.click("#export")
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["session"]["session_key"] and len(exported["events"]) == len(events)
    # The chat's background tasks, a kept result readable on a click; and every chat's kept results on /chats.
    page.wait_for_selector("#tasks .task.kept")
    assert page.is_hidden("#tasks .task.kept pre.result")
    page.click("#tasks .task.kept summary")
    assert page.inner_text("#tasks .task.kept pre.result").startswith("Jupiter has 95 known moons.")
    assert "Count the moons" in page.inner_text("#tasks")
    page.goto(base + "/chats")
    page.wait_for_function(READY)
    assert "Kept task results" in page.inner_text("#kept-tasks") and page.is_visible("#kept-tasks .task.kept")
    assert problems == []


OVERFLOW = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
BACKGROUND = "() => getComputedStyle(document.body).backgroundColor"


def test_every_page_loads_without_an_error_light_and_dark_desktop_and_phone(gateway, page):
    _gw, base = gateway
    problems = watch_problems(page)
    if SCREENSHOTS:
        DOCS.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size_name, size in (("desktop", DESKTOP), ("phone", PHONE)):
            page.set_viewport_size(size)
            for name in [*PAGES, "transcript"]:
                page.goto(f"{base}/{name}" if name != "transcript" else base + first_session_link(page, base))
                page.wait_for_function(READY)
                page.wait_for_function("() => document.getElementById('live').dataset.connected === 'yes'")
                if name == "tree":
                    page.wait_for_selector(".node[data-name='root']")
                if name == "overview":
                    page.wait_for_selector("#health [data-health]")
                if name == "transcript":
                    page.wait_for_selector("#transcript .event.assistant")
                assert page.get_attribute("#page", "data-page") == ("chats" if name == "transcript" else name)
                assert page.is_hidden("#problem"), f"{name}: {page.inner_text('#problem')}"
                assert page.evaluate(OVERFLOW) <= 0, f"{name} scrolls sideways at {size['width']} px"
                red, green, blue = [int(c) for c in page.evaluate(BACKGROUND)[4:-1].split(",")[:3]]
                assert (red + green + blue > 600) == (scheme == "light"), f"{name} in {scheme}: {red, green, blue}"
                if SCREENSHOTS:
                    page.screenshot(path=str(DOCS / f"{name}-{size_name}-{scheme}.png"))
    assert problems == []
