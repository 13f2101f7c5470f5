"""The page in a real browser: Debian's headless Chromium driven by Playwright, against the real daemon.

Type, send, watch the answer stream in, reload: the history is there; errors are shown; the gateway is stopped and
started again under an open page, which reconnects and carries on with the same conversation. The send-to-first-
painted-token time is measured in the page (see RECORDER) and printed.
"""
from __future__ import annotations

import json

import pytest

from actors.agents.offline import FAKE_SECRET
from tests.actors.media.fixtures import png
from tests.webchat.browser import (send, started_gateway, stopped, url_of, wait_answers, wait_connected, wait_state,
                                   watch_problems)

pytestmark = pytest.mark.timeout(180)

# Installed in the page before one send: every distinct text of the answer to it, with the time it changed, and the
# time of the first animation frame after its first non-empty text (the first painted token). The submit listener
# is on the document, capturing, so it runs before the page's own handler.
RECORDER = """() => {
  const rec = window.__rec = {sentAt: null, firstPaint: null, texts: [], toolSeen: false, answersBefore: 0};
  const log = document.getElementById("messages");
  document.addEventListener("submit", () => {
    rec.sentAt = performance.now();
    rec.answersBefore = log.querySelectorAll(".message.assistant").length;
  }, true);
  new MutationObserver(() => {
    const answer = log.querySelectorAll(".message.assistant")[rec.answersBefore];
    if (!answer || rec.sentAt === null) return;
    if (answer.querySelector(".tool")) rec.toolSeen = true;
    const text = answer.querySelector(".text").textContent;
    const last = rec.texts[rec.texts.length - 1];
    if (text && (!last || last.text !== text || last.final !== answer.dataset.final)) {
      rec.texts.push({text, final: answer.dataset.final, at: performance.now()});
    }
    if (text && rec.firstPaint === null) {
      rec.firstPaint = -1;
      requestAnimationFrame(() => { rec.firstPaint = performance.now(); });
    }
  }).observe(log, {childList: true, subtree: true, characterData: true, attributes: true});
}"""


@pytest.fixture
def gateway(tmp_path):
    gw = started_gateway(tmp_path)
    try:
        yield gw
    finally:
        stopped(gw)


def test_type_send_watch_it_stream_reload_and_the_history_is_there(page, gateway, tmp_path):
    problems = watch_problems(page)
    page.goto(url_of(gateway))
    wait_connected(page)
    assert page.evaluate("document.activeElement.id") == "input", "the message box has the focus"
    assert page.get_attribute("#input", "aria-describedby") == "hint" and page.is_visible("label[for=input]")
    page.evaluate(RECORDER)

    send(page, "hello browser, what is 6*7? #slow 0.05")
    texts = wait_answers(page, 1)
    assert texts[0] == "hello browser, what is 6*7? #slow 0.05"
    assert texts[1].startswith('You said: "hello browser, what is 6*7? #slow 0.05"') and "6*7 = 42" in texts[1]
    rec = page.evaluate("window.__rec")
    previews = [t for t in rec["texts"] if t["final"] == "no"]
    assert len(previews) >= 3, f"the answer was painted only {len(previews)} time(s) before the end"
    assert all(len(a["text"]) <= len(b["text"]) for a, b in zip(previews, previews[1:])), "it grew as it streamed"
    assert rec["texts"][-1]["final"] == "yes" and rec["texts"][-1]["text"] == texts[1]
    assert rec["toolSeen"], "the calculator's progress line was shown while it ran"
    first_token_ms = rec["firstPaint"] - rec["sentAt"]
    assert 0 < first_token_ms < 10_000
    print(f"\nweb chat: send -> first painted token {first_token_ms:.0f} ms; "
          f"{len(previews)} streaming paints over {previews[-1]['at'] - previews[0]['at']:.0f} ms")

    page.reload()
    wait_connected(page)
    assert wait_answers(page, 1) == texts, "the history came back from the session"
    assert json.loads(page.evaluate("localStorage.getItem('agent-gateway.unacked')")) == []

    # An image the agent returns is shown inline (fetched from the gateway, decoded by the browser), reload too.
    send(page, "draw a card saying see you tomorrow")
    loaded = "() => { const i = document.querySelector('img.file'); return i && i.complete && i.naturalWidth > 0 }"
    page.wait_for_function(loaded, timeout=60_000)
    assert page.get_attribute("img.file", "alt") == "card.png"
    page.reload()
    wait_connected(page)
    page.wait_for_function(loaded, timeout=60_000)

    # A photo picked in the page is uploaded, sent with the message, and the agent answers about it.
    photo = tmp_path / "holiday.png"
    photo.write_bytes(png(96, 64))
    page.set_input_files("#attach", str(photo))
    page.wait_for_selector("#attached li:has-text('holiday.png')", timeout=30_000)
    send(page, "what is in this picture?")
    page.wait_for_function("() => Array.from(document.querySelectorAll('.message.assistant .text'))"
                           ".some((n) => n.textContent.includes('You sent a photo (PNG, 96×64'))", timeout=60_000)
    assert page.locator(".message.user img.file").count() == 1 and page.locator("#attached li").count() == 0

    send(page, "now fail please #fail")
    shown = wait_answers(page, 5)
    assert "The agent failed" in shown[-1] and FAKE_SECRET not in page.content()
    assert problems == []


def test_the_page_reconnects_after_a_gateway_restart_and_the_conversation_continues(page, gateway):
    page.goto(url_of(gateway))
    wait_connected(page)
    send(page, "before the restart")
    before = wait_answers(page, 1)
    assert "This conversation has 1 message from you" in before[1]

    gateway.cli("stop", check=True)
    wait_state(page, "interrupted", "lost")
    assert page.is_visible("#status") and "Connection lost, reconnecting" in page.text_content("#status")
    send(page, "sent while the gateway was down")   # kept in localStorage, sent once the gateway is back
    assert "will be sent when the connection is back" in page.text_content("#messages")

    gateway.start()
    wait_connected(page)
    after = wait_answers(page, 2)
    assert after[:2] == before, "the earlier exchange is still on the page"
    assert after[2] == "sent while the gateway was down"
    assert "This conversation has 2 messages from you" in after[3], "the same session carried on"
    page.reload()
    wait_connected(page)
    assert wait_answers(page, 2) == after
