"""TelegramAPI: error classification, token hygiene, and the pure text helpers (checked against the fake's
parsers, which are as strict as Telegram's)."""
from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from hypothesis import given, settings, strategies as st

from actors.adapters.errors import (ConflictError, FloodError, FormattingError, MessageNotFoundError,
                                    PermanentError, RetryableError, TooLongError)
from actors.adapters.pacing import utf16_len
from actors.adapters.telegram.client import TelegramAPI, classify_error
from actors.adapters.telegram.formatting import escape_html, escape_markdown_v2, markdown_to_telegram_html
from tests.fakes.telegram import FakeTelegram, parse_html, parse_markdown_v2

pytestmark = pytest.mark.timeout(30)
TOKEN = "987654321:AAH-secret_token_value_0123456789abcd"


def error_body(code, description, **parameters):
    body = {"ok": False, "error_code": code, "description": description}
    return dict(body, parameters=parameters) if parameters else body


@pytest.mark.parametrize("status, description, expected", [
    (429, "Too Many Requests: retry after 7", FloodError),
    (500, "Internal Server Error", RetryableError),
    (502, "Bad Gateway", RetryableError),
    (409, "Conflict: terminated by other getUpdates request", ConflictError),
    (400, "Bad Request: can't parse entities: Character '.' is reserved", FormattingError),
    (400, "Bad Request: can't find end of the entity starting at byte offset 3", FormattingError),
    (400, "Bad Request: message is too long", TooLongError),
    (400, "Bad Request: MESSAGE_TOO_LONG", TooLongError),
    (400, "Bad Request: message to edit not found", MessageNotFoundError),
    (400, "Bad Request: message to delete not found", MessageNotFoundError),
    (400, "Bad Request: chat not found", PermanentError),
    (403, "Forbidden: bot was blocked by the user", PermanentError),
    (401, "Unauthorized", PermanentError),
    (404, "Not Found", PermanentError),
])
def test_errors_are_classified_by_what_the_caller_must_do(status, description, expected):
    error = classify_error("sendMessage", status, error_body(status, description, retry_after=7))
    assert type(error) is expected and error.status == status and error.description == description


def test_flood_error_carries_retry_after_and_is_retryable():
    error = classify_error("sendMessage", 429, error_body(429, "Too Many Requests: retry after 7", retry_after=7))
    assert isinstance(error, RetryableError) and error.retry_after == 7.0
    assert isinstance(classify_error("x", 400, error_body(400, "Bad Request: message is too long")), PermanentError)


def test_garbled_answers_are_retryable():
    assert type(classify_error("getMe", 200, None)) is RetryableError
    assert type(classify_error("getMe", 502, "<html>bad gateway</html>")) is RetryableError


def test_utf16_len_counts_astral_characters_twice():
    assert [utf16_len(s) for s in ("", "abc", "é", "😀", "a😀b", "👩‍💻")] == [0, 3, 1, 2, 4, 5]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_escaped_markdown_v2_shows_exactly_the_original_text(text):
    assert parse_markdown_v2(escape_markdown_v2(text)) == (text, [])


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_escaped_html_shows_exactly_the_original_text(text):
    assert parse_html(escape_html(text)) == (text, [])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab *`\n<>&_.!#") + ["**", "```", "```py\n"])).map("".join))
def test_markdown_to_html_always_yields_html_telegram_accepts(text):
    parse_html(markdown_to_telegram_html(text))  # raises EntityParseError if not


@pytest.mark.parametrize("markdown, html", [
    ("**bold** and `x<y` & more", "<b>bold</b> and <code>x&lt;y</code> &amp; more"),
    ("```python\nprint(1 < 2)\n```\nafter", '<pre><code class="language-python">print(1 &lt; 2)</code></pre>\nafter'),
    ("```\nplain\n```", "<pre>plain</pre>"),
    ("```print(1)```", "<pre>print(1)</pre>"),
    ("streaming ```js\nlet a = 1", 'streaming <pre><code class="language-js">let a = 1</code></pre>'),
    ("unmatched ** stays, as does a lone ` tick", "unmatched ** stays, as does a lone ` tick"),
    ("<b>not markup</b>", "&lt;b&gt;not markup&lt;/b&gt;"),
])
def test_markdown_to_html_examples(markdown, html):
    assert markdown_to_telegram_html(markdown) == html


@pytest.mark.parametrize("markup, text, entities", [
    ("*b* _i_ __u__ ~s~ ||sp||", "b i u s sp", ["bold", "italic", "underline", "strikethrough", "spoiler"]),
    ("[link](http://x.y/a\\)b)", "link", ["text_link"]),
    ("`a*b` ```py\nx_y\n```", "a*b x_y\n", ["code", "pre"]),
    (">quoted\nplain", "quoted\nplain", ["blockquote"]),
    ("😀*b*", "😀b", ["bold"]),
])
def test_fake_markdown_v2_parser_accepts_valid_markup(markup, text, entities):
    parsed_text, parsed_entities = parse_markdown_v2(markup)
    assert parsed_text == text and [e["type"] for e in parsed_entities] == entities
    if markup.startswith("😀"):
        assert parsed_entities[0]["offset"] == 2  # UTF-16 offsets


@pytest.mark.parametrize("markup", ["1.5", "a-b", "(x)", "*unclosed", "a | b", "`code", "x > y", "[a](b"])
def test_fake_markdown_v2_parser_rejects_what_telegram_rejects(markup):
    with pytest.raises(ValueError):
        parse_markdown_v2(markup)


@pytest.mark.parametrize("markup", ["<b>x", "<b>x</i>", "</b>", "<div>x</div>", "a < b", "<span>x</span>",
                                    "<b x"])
def test_fake_html_parser_rejects_unknown_and_unbalanced_tags(markup):
    with pytest.raises(ValueError):
        parse_html(markup)


def test_fake_html_parser_accepts_telegram_tags():
    text, entities = parse_html('<b>1</b><a href="http://x?a=1&amp;b=2">2</a><tg-spoiler>3</tg-spoiler>'
                                '<pre><code class="language-go">4</code></pre>&lt;&#33;&quot;')
    assert text == '1234<!"'
    assert [(e["type"], e.get("url"), e.get("language")) for e in entities] == [
        ("bold", None, None), ("text_link", "http://x?a=1&b=2", None), ("spoiler", None, None),
        ("pre", None, "go")]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_token_never_appears_in_errors_logs_or_repr(caplog):
    caplog.set_level(logging.DEBUG)

    async def scenario():
        async with TelegramAPI(TOKEN, base_url=f"http://127.0.0.1:{closed_port()}") as down:
            with pytest.raises(RetryableError) as network:
                await down.get_me()
        async with TelegramAPI(TOKEN, base_url="http://[bad url") as malformed:
            with pytest.raises(RetryableError) as bad_url:
                await malformed.get_me()
        with FakeTelegram() as fake:  # a token the fake does not know: 401
            async with TelegramAPI(TOKEN, base_url=fake.base_url) as wrong:
                with pytest.raises(PermanentError) as unauthorized:
                    await wrong.get_me()
        return [network.value, bad_url.value, unauthorized.value], repr(down)

    errors, representation = asyncio.run(scenario())
    for error in errors:
        assert TOKEN not in str(error) and TOKEN not in repr(error) and error.__cause__ is None
        assert error.__suppress_context__ or error.__context__ is None
    assert TOKEN not in representation and "987654321" in representation
    assert TOKEN not in caplog.text


def test_client_against_the_fake_timeouts_floods_and_not_modified():
    with FakeTelegram(time_scale=0.05, per_chat_burst=1) as fake:
        fake.inject_message("hi", chat_id=7)

        async def scenario():
            async with TelegramAPI(fake.token, base_url=fake.base_url, request_timeout=5) as api:
                assert (await api.get_me())["username"] == "fake_gateway_bot"
                with pytest.raises(RetryableError, match="TimeoutError"):
                    await api.call("getUpdates", {"offset": 10**9, "timeout": 5}, timeout=0.2)
                message_id = await api.send_message(7, "hello")
                with pytest.raises(FloodError) as flood:
                    await api.edit_message_text(7, message_id, "hello again")
                assert flood.value.retry_after == 1.0
                await asyncio.sleep(flood.value.retry_after)  # honouring the platform's instruction
                assert await api.edit_message_text(7, message_id, "hello again") is True
                assert await api.edit_message_text(7, message_id, "hello again") is False
                await api.send_chat_action(7)
                await api.delete_message(7, message_id)

        asyncio.run(scenario())
        assert fake.stats()["retry_after_violations"] == 0
