"""The page in Debian's headless Chromium, driven by Playwright, against the real daemon: fixtures and helpers of
the browser tests (test_browser.py, test_browser_ux.py).

Waits are Playwright's ``wait_for_function`` (a poll in the page with WAIT_MS as its deadline); the page's CSP
forbids eval, so every check in the page is a function, never a string expression.
"""
from __future__ import annotations

import os

import pytest

from tests.actor_system import free_port
from tests.webchat.helpers import served_port, webchat_gateway

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 30_000


@pytest.fixture
def browser_context(tmp_path):
    """A fresh browser profile: a new visitor cookie, so a conversation of its own."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"Debian's chromium is not installed at {CHROMIUM} (.ci/run installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context.set_default_timeout(WAIT_MS)
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context):
    return browser_context.pages[0] if browser_context.pages else browser_context.new_page()


def started_gateway(tmp_path):
    gw = webchat_gateway(tmp_path, port=free_port())
    gw.start()
    gw.wait_ready()
    served_port(gw)
    return gw


def stopped(gw) -> None:
    gw.cli("stop")
    gw.kill_everything()


def url_of(gw) -> str:
    return f"http://127.0.0.1:{served_port(gw)}/"


def watch_problems(page) -> list:
    """Script errors and console errors (a CSP violation shows up there), as they happen."""
    problems = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda message: message.type == "error" and problems.append(message.text))
    return problems


def wait_connected(page) -> None:
    page.wait_for_function("() => document.getElementById('status').dataset.connected === 'yes'")


def wait_state(page, state: str, reason: str = "") -> None:
    page.wait_for_function("([state, reason]) => { const s = document.getElementById('status').dataset;"
                           " return s.state === state && (!reason || s.reason === reason); }", arg=[state, reason])


def send(page, text: str) -> None:
    page.fill("#input", text)
    page.press("#input", "Enter")


def wait_answers(page, count: int) -> list[str]:
    """Wait for ``count`` final answers on the page; return the texts of every message, in order."""
    page.wait_for_function("count => document.querySelectorAll('.message.assistant[data-final=\"yes\"]').length"
                           " >= count && !document.querySelector('.message.assistant.streaming')", arg=count)
    return page.eval_on_selector_all("#messages .message .text", "nodes => nodes.map(n => n.textContent)")
