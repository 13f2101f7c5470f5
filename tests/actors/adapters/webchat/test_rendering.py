"""What the page is given to show of an answer: markdown rendered and sanitised, previews without the gateway's
cursor and added fences (actors/adapters/webchat/formatting.py)."""
from __future__ import annotations

import re

import pytest

from actors.adapters.webchat import formatting
from actors.adapters.webchat.protocol import conversation, op_frame
from actors.messages import WaitingForModel
from actors.sessions import reply_text
from actors.sessions.reply_text import ReplyText
from actors.sessions.chunking import split_message
from storage import TranscriptEvent

CURSOR_HTML = formatting.CURSOR_HTML


def gateway_preview(answer: str, tool_line: str = "") -> str:
    """A preview exactly as the stream consumer makes it for a platform that edits (one part)."""
    preview = answer + (f"\n\n{tool_line}" if tool_line else "")
    [part] = split_message(preview + reply_text.CURSOR, 1_000_000)
    return part


def test_the_cursor_is_the_stream_consumers():
    assert formatting.CURSOR == reply_text.CURSOR


def test_markdown_renders_bold_inline_code_lists_and_code_blocks():
    shown = formatting.render("Some **bold**, `code` and _em_.\n\n- one\n- two\n\n```python\nprint('hi')\n```")
    assert "<strong>bold</strong>" in shown and "<code>code</code>" in shown and "<em>em</em>" in shown
    assert "<ul>\n<li>one</li>" in shown
    assert '<pre><code class="language-python">print(\'hi\')\n</code></pre>' in shown
    assert "**" not in shown and "`" not in shown


@pytest.mark.parametrize("hostile", [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    '<a href="javascript:alert(1)">x</a>',
    "<iframe src=//evil.example></iframe>",
    '<div onclick="alert(1)">x</div>',
])
def test_html_from_the_model_is_text_never_markup(hostile):
    shown = formatting.render(f"before {hostile} after")
    assert re.fullmatch(r"<p>[^<>]*</p>\n", shown), shown    # one paragraph of escaped text: no element at all
    assert "&lt;" in shown


@pytest.mark.parametrize("link, href", [
    ("[x](javascript:alert(1))", None), ("[x](data:text/html,hi)", None), ("[x](/ws)", None),
    ("[x](https://example.org/a)", "https://example.org/a"), ("<https://example.org>", "https://example.org")])
def test_links_keep_only_web_and_mail_addresses_and_open_apart(link, href):
    shown = formatting.render(link)
    found = re.findall(r'href="([^"]*)"', shown)
    assert found == ([href] if href else []), shown
    if href:
        assert 'rel="noopener noreferrer"' in shown and 'target="_blank"' in shown


def test_the_sanitiser_strips_what_the_parser_never_emits():
    """The second layer on its own: markup as if the parser had let it through."""
    cleaned = formatting.sanitise('<p onclick="x()">a<img src=x onerror=alert(1)><script>alert(2)</script>'
                                 '<a href="javascript:alert(3)">b</a><span class="evil cursor">c</span>'
                                 '<code class="language-py" style="color:red">d</code></p>')
    assert cleaned == '<p>a<a target="_blank" rel="noopener noreferrer">b</a><span>c</span>' \
                      '<code class="language-py">d</code></p>'


def test_a_preview_ending_inside_a_code_block_is_an_open_block_with_one_cursor():
    text = gateway_preview("Here:\n\n```toml\n[agent]\nkind = \"openai\"")
    assert text.endswith("▍\n```"), "the gateway closes the fence after its cursor, for other platforms"
    shown = formatting.view(text, final=False)["html"]
    assert shown == ('<p>Here:</p>\n<pre><code class="language-toml">[agent]\nkind = "openai"'
                     f'{CURSOR_HTML}</code></pre>\n')
    assert "▍" not in shown and "`" not in shown


@pytest.mark.parametrize("answer, expected", [
    ("Look:\n\n```py", f'<p>Look:</p>\n<pre><code class="language-py">{CURSOR_HTML}</code></pre>\n'),
    ("```py\nx = 1\n```", f'<pre><code class="language-py">x = 1\n</code></pre>\n<p>{CURSOR_HTML}</p>\n'),
    ("Title\n---", f"<h2>Title</h2>\n<p>{CURSOR_HTML}</p>\n"),
    ("- one\n- tw", f"<ul>\n<li>one</li>\n<li>tw{CURSOR_HTML}</li>\n</ul>\n"),
    ("half **bold", f"<p>half **bold{CURSOR_HTML}</p>\n"),
])
def test_the_cursor_never_changes_what_the_text_received_means(answer, expected):
    assert formatting.view(gateway_preview(answer), final=False)["html"] == expected


def test_the_tool_line_of_a_preview_is_apart_even_inside_an_open_code_block():
    text = gateway_preview("```py\nx = 6*7", "⚙ calculator…")
    assert formatting.view(text, final=False) == {
        "html": f'<pre><code class="language-py">x = 6*7{CURSOR_HTML}</code></pre>\n', "tool": "⚙ calculator…"}


def test_the_waiting_for_the_model_line_of_a_preview_is_apart_too():
    text = ReplyText()
    text.apply(WaitingForModel(6.0))
    view = formatting.view(text.preview([]), final=False)
    assert view == {"html": f"<p>{CURSOR_HTML}</p>\n", "tool": "⏳ still waiting for the model… (6s)"}, view


def test_a_final_text_is_rendered_whole_without_a_cursor():
    text = "Done.\n\n⚙ not a tool line in a final text ▍"
    view = formatting.view(text, final=True)
    assert view["tool"] == "" and "cursor" not in view["html"] and "⚙ not a tool line" in view["html"]


def test_a_preview_part_before_the_last_is_shown_whole_without_a_cursor():
    first = split_message("```py\n" + "x = 1\n" * 30 + reply_text.CURSOR, 100)[0]
    assert first.endswith("x = 1\n```"), "the chunker closed the block this part cuts"
    shown = formatting.view(first, final=False)["html"]
    assert shown.startswith('<pre><code class="language-py">x = 1\n') and shown.endswith("</code></pre>\n")
    assert "cursor" not in shown


def test_a_text_too_long_to_render_is_escaped_plain_text():
    text = "<b>x</b> **y**\n" * (formatting.MAX_RENDERED_CHARS // 10)
    shown = formatting.render(text)
    assert shown.startswith('<p class="plain">&lt;b&gt;x&lt;/b&gt; **y**\n') and "<strong>" not in shown


def test_a_history_renders_its_newest_answers_within_the_budget():
    def event(seq, text):
        return TranscriptEvent("assistant", "message", {"text": text}, f"t{seq}", 1000.0 + seq, seq)
    long = "**a**" + "x" * 30_000     # under MAX_RENDERED_CHARS each; six of them fill the budget
    shown = conversation([event(n, long) for n in range(8)])
    assert ["<strong>" in m["html"] for m in shown] == [False] * 2 + [True] * 6
    assert shown[0]["html"].startswith('<p class="plain">**a**')


def test_operations_carry_what_the_page_shows():
    frame = op_frame("send", "w1", "**hi** ▍", final=False, reply_to="m1")
    assert frame == {"type": "op", "action": "send", "message_id": "w1", "text": "**hi** ▍", "final": False,
                     "reply_to": "m1", "html": f"<p><strong>hi</strong>{CURSOR_HTML}</p>\n", "tool": ""}
    assert "html" not in op_frame("typing", None) and "html" not in op_frame("delete", "w1")


def test_a_failed_turns_text_is_marked_an_error_in_operations_and_in_the_history():
    frame = op_frame("edit", "w1", "The model service took too long to answer.", final=True, kind="error")
    assert frame["kind"] == "error"
    assert "kind" not in op_frame("edit", "w1", "An answer.", final=True), "an answer carries no kind"
    failed = TranscriptEvent("assistant", "message", {"text": "Half.\n\nNo model.", "reason": "error",
                                                      "error": "No model."}, "t1", 1000.0, 1)
    answered = TranscriptEvent("assistant", "message", {"text": "Fine.", "reason": "complete"}, "t2", 1001.0, 2)
    assert [m.get("kind") for m in conversation([failed, answered])] == ["error", None]
