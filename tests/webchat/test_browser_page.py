"""The page's own parts, in headless Chromium against the real daemon: a message over the text limit is kept and
said so (never cut by the composer), the colour scheme and its toggle, highlighted code, the welcome line, the
icons, and earlier conversations listed and reopened.

One daemon for the module; each test is a fresh browser profile, so a visitor and a conversation of its own.
"""
from __future__ import annotations

import pytest

from tests.webchat.browser import (send, started_gateway, stopped, url_of, wait_answers, wait_connected,
                                   watch_problems)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = started_gateway(tmp_path_factory.mktemp("webchat-page"))
    try:
        yield gw
    finally:
        stopped(gw)


def test_a_message_over_the_text_limit_is_neither_cut_nor_sent_and_the_visitor_is_told_and_keeps_it(page, gateway):
    """The composer once had maxlength=16000: a longer paste was cut there without a word and the rest sent as a
    turn. Now the whole text stays in the composer, the page says its length and the limit, and nothing is sent."""
    problems = watch_problems(page)
    page.goto(url_of(gateway))
    wait_connected(page)
    text = "word " * 3_400 + "the end"           # 17,007 characters, past the default 16,000
    page.focus("#input")
    page.keyboard.insert_text(text)                # as a paste arrives
    assert page.input_value("#input") == text, "the composer keeps every character typed or pasted"
    assert page.get_attribute("#input", "aria-invalid") == "true"
    assert "17,007 characters: over the limit of 16,000" in page.text_content("#hint")
    page.press("#input", "Enter")
    page.wait_for_function("() => !document.getElementById('problem').hidden")
    said = page.text_content("#problem")
    assert "Your message is 17,007 characters long" in said and "at most 16,000 characters" in said, said
    assert page.input_value("#input") == text, "not sent, so not taken out of the composer"
    assert page.eval_on_selector_all("#messages .message", "nodes => nodes.length") == 0, "nothing was sent"

    page.fill("#input", "")
    send(page, "a short one")
    texts = wait_answers(page, 1)
    assert texts[0] == "a short one" and len(texts) == 2, texts
    page.reload()
    texts = wait_answers(page, 1)
    assert texts[0] == "a short one" and len(texts) == 2, f"the long message never became a turn: {texts}"
    assert problems == []
