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


# The page's colours, read in the page: the background, the text and the composer's.
COLOURS = """() => ({
  background: getComputedStyle(document.documentElement).backgroundColor,
  text: getComputedStyle(document.body).color,
  input: getComputedStyle(document.getElementById('input')).backgroundColor,
  toggle: document.getElementById('theme')?.getAttribute('aria-pressed'),
  chosen: document.documentElement.dataset.theme || '',
})"""


def luminance(css_colour: str) -> float:
    """0 (black) to 1 (white), from a computed ``rgb(r, g, b)``."""
    red, green, blue = (int(part) for part in css_colour[css_colour.index("(") + 1:].rstrip(")").split(",")[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def test_the_page_follows_a_dark_system_scheme_and_a_toggle_chooses_light_or_dark_for_every_later_visit(page,
                                                                                                      gateway):
    problems = watch_problems(page)
    page.emulate_media(color_scheme="dark")
    page.goto(url_of(gateway))
    wait_connected(page)
    shown = page.evaluate(COLOURS)
    assert luminance(shown["background"]) < 0.2 and luminance(shown["text"]) > 0.7, f"a dark system: dark {shown}"
    assert luminance(shown["input"]) < 0.2 and shown["toggle"] == "true", shown

    page.click("#theme")
    shown = page.evaluate(COLOURS)
    assert luminance(shown["background"]) > 0.8 and luminance(shown["text"]) < 0.3, f"light on a click: {shown}"
    assert shown["toggle"] == "false" and shown["chosen"] == "light"
    page.reload()
    wait_connected(page)
    assert luminance(page.evaluate(COLOURS)["background"]) > 0.8, "the choice is kept across visits"

    page.emulate_media(color_scheme="light")
    page.click("#theme")
    page.reload()
    wait_connected(page)
    shown = page.evaluate(COLOURS)
    assert luminance(shown["background"]) < 0.2 and shown["chosen"] == "dark", f"dark chosen on a light system: {shown}"
    assert problems == []


# The code block of the newest answer: its text, and the colour of each token kind Pygments marked in it.
CODE_COLOURS = """() => {
  const answers = document.querySelectorAll('#messages .message.assistant');
  const code = answers[answers.length - 1].querySelector('pre > code');
  const colours = {};
  for (const span of code.querySelectorAll('span[class]')) colours[span.className] = getComputedStyle(span).color;
  return {text: code.textContent, plain: getComputedStyle(code).color, colours,
          sheets: Array.from(document.styleSheets, (s) => (s.href || '').split('/').pop())};
}"""


def test_code_blocks_are_highlighted_by_the_gateway_with_the_code_text_unchanged(page, gateway):
    problems = watch_problems(page)
    page.goto(url_of(gateway))
    wait_connected(page)
    send(page, "show me the configuration")
    wait_answers(page, 1)
    shown = page.evaluate(CODE_COLOURS)
    assert shown["text"].startswith('[agent]\nkind = "openai"'), shown["text"]
    assert "highlight.css" in shown["sheets"], shown["sheets"]
    token_colours = set(shown["colours"].values())
    assert len(token_colours) >= 3 and token_colours - {shown["plain"]}, \
        f"table names, keys, strings and comments in colours of their own: {shown['colours']}"
    page.reload()      # the history's rendering too
    wait_answers(page, 1)
    assert page.evaluate(CODE_COLOURS)["colours"] == shown["colours"]
    assert problems == []


def test_the_welcome_line_names_the_agent_and_the_icons_need_no_emoji_font(page, gateway):
    problems = watch_problems(page)
    page.goto(url_of(gateway))
    wait_connected(page)
    page.wait_for_function("() => !document.getElementById('welcome').hidden")
    welcome = page.text_content("#welcome")
    assert welcome.startswith("You are talking to the gateway's agent, offline: no language model is configured"), \
        welcome
    drawn = page.evaluate("""() => Array.from(document.querySelectorAll('#attach-button svg, #theme svg, h1 svg'),
        (svg) => { const box = svg.getBoundingClientRect(); return [box.width, box.height]; })""")
    assert len(drawn) == 3 and all(w >= 12 and h >= 12 for w, h in drawn), f"each icon is drawn: {drawn}"
    # Emoji presentation characters (pictographs, dingbats, arrows with an emoji form): none left as text.
    emoji = page.evaluate(r"""() => Array.from(document.body.innerText.matchAll(/\p{Extended_Pictographic}/gu),
        (m) => m[0])""")
    assert emoji == [], f"text an emoji font would have to draw: {emoji}"
    icon = page.request.get(url_of(gateway) + "static/icon.svg")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert problems == []


def test_earlier_conversations_are_listed_after_new_chat_and_open_to_read(page, gateway):
    problems = watch_problems(page)
    page.goto(url_of(gateway))
    wait_connected(page)
    send(page, "the first conversation")
    wait_answers(page, 1)
    page.click("#new-chat")
    page.wait_for_function("() => document.getElementById('status').dataset.state === 'idle'")
    send(page, "the second conversation")
    page.wait_for_function("() => Array.from(document.querySelectorAll('#messages .message.assistant'))"
                           ".some((m) => m.textContent.includes('1 message from you'))")

    page.click("#earlier-chats")
    page.wait_for_function("() => document.querySelectorAll('#earlier-list li').length > 0")
    listed = page.eval_on_selector_all("#earlier-list .preview", "nodes => nodes.map(n => n.textContent)")
    assert listed == ["the first conversation"], f"the earlier one only, not the current: {listed}"
    assert page.is_hidden("#messages"), "the panel covers the current conversation"
    page.click("#earlier-list button")
    page.wait_for_function("() => !document.getElementById('earlier-log').hidden")
    texts = page.eval_on_selector_all("#earlier-log .message .text", "nodes => nodes.map(n => n.textContent)")
    assert texts[0] == "the first conversation" and 'You said: "the first conversation"' in texts[1], texts
    assert "Read only" in page.text_content("#earlier-note")

    page.click("#earlier-back")
    assert page.is_visible("#messages") and page.is_hidden("#earlier")
    current = page.eval_on_selector_all("#messages .message.user .text", "nodes => nodes.map(n => n.textContent)")
    assert current == ["the second conversation"], current
    assert problems == []
