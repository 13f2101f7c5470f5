"""The web chat's highlighted code (highlight.py through formatting.py), the welcome line's facts (welcome.py) and
the earlier conversations' list items (earlier.py): pure functions."""
from __future__ import annotations

import html
import re

import pytest

from actors.adapters.webchat import earlier, formatting, highlight
from actors.adapters.webchat.welcome import agent_facts
from storage import SessionInfo, TranscriptEvent

pytestmark = pytest.mark.timeout(20)

CODE = 'def greet(name):\n    return f"hello {name}"  # a comment\n'
ANSWER = f"Here:\n\n```python\n{CODE}```\n"


def code_of(rendered: str) -> str:
    """The text a browser shows of the rendered code block (tags dropped, entities decoded)."""
    inner = re.search(r"<code[^>]*>(.*?)</code>", rendered, re.S).group(1)
    return html.unescape(re.sub(r"<[^>]+>", "", inner))


def test_a_final_answers_code_is_highlighted_into_token_spans_and_its_text_is_the_code_exactly():
    shown = formatting.view(ANSWER, final=True)["html"]
    assert '<code class="language-python">' in shown
    classes = set(re.findall(r'<span class="([^"]+)">', shown))
    assert {"k", "nf", "c1"} <= classes and all(highlight.is_token_class(c) for c in classes), classes
    assert code_of(shown) == CODE, "no newline stripped or added: the copy button copies what the model wrote"
    code = "\n\n  x = 1\n\n"
    assert code_of(formatting.view(f"```python\n{code}```", True)["html"]) == code


def test_previews_unknown_languages_and_long_answers_stay_plain():
    assert "<span class=\"k\">" not in formatting.view(ANSWER + formatting.CURSOR, final=False)["html"]
    assert "<span" not in formatting.view("```no-such-language\nx = 1\n```", True)["html"]
    assert "<span" not in formatting.view("```\nx = 1\n```", True)["html"]
    long = ANSWER + "x" * formatting.HIGHLIGHT_MAX_CHARS
    assert '<span class="k">' not in formatting.view(long, True)["html"]
    assert '<span class="k">' not in formatting.view(ANSWER, True, highlight_it=False)["html"]


def test_only_the_highlighters_own_classes_pass_the_sanitiser():
    assert highlight.is_token_class("k") and highlight.is_token_class("s2")
    forged = '<pre><code><span class="k">a</span><span class="evil">b</span><span class="k evil">c</span></code></pre>'
    assert formatting.sanitise(forged) == '<pre><code><span class="k">a</span><span>b</span><span>c</span></code></pre>'
    # A model's own HTML never reaches the sanitiser as tags: the parser escapes it.
    assert "<span" not in formatting.view('<span class="k">x</span>', True)["html"]


def test_the_style_sheet_has_a_light_palette_and_a_dark_one_for_the_system_and_for_the_choice():
    sheet = highlight.style_sheet()
    assert re.search(r"^\.message \.text pre code \.k \{", sheet, re.M)
    system_dark = sheet[sheet.index("@media (prefers-color-scheme: dark) {"):]
    assert ':root:not([data-theme="light"]) .message .text pre code .k {' in system_dark[:system_dark.index("\n}")]
    assert ':root[data-theme="dark"] .message .text pre code .k {' in sheet
    assert "background" not in sheet.split("\n", 2)[1], "the block's background is style.css's"


def test_the_welcome_line_names_the_profile_the_kind_of_agent_and_the_model_never_its_server_or_key():
    openai = {"agent": {"kind": "openai", "base_url": "http://10.0.0.5:8000/v1", "model": "gpt-4o-mini",
                        "api_key": "sk-secret"},
              "profiles": {"support": {"agent": {"model": "support-model"}}}}
    assert agent_facts(openai, "default") == {"profile": "default", "agent": "openai", "model": "gpt-4o-mini"}
    assert agent_facts(openai, "support") == {"profile": "support", "agent": "openai", "model": "support-model"}
    assert agent_facts({}, "default") == {"profile": "default", "agent": "offline", "model": ""}
    assert agent_facts({"agent": {"model": "m", "kind": "offline"}}, "default")["model"] == ""


def _event(seq, role, text):
    return TranscriptEvent(role, "message", {"text": text}, None, 1000.0 + seq, seq)


def test_a_listed_conversation_shows_its_title_or_the_newest_words_of_the_visitor_on_one_line():
    info = SessionInfo("a" * 32, "web:k", "reset", 1.0, 2.0, None, {})
    events = [_event(1, "user", "first question"), _event(2, "assistant", "an answer"),
              _event(3, "user", "  the newest\nquestion  "), _event(4, "user", "/new")]
    assert earlier.list_item(info, events) == {"id": "a" * 32, "current": False, "started": 1.0, "updated": 2.0,
                                               "preview": "the newest question", "messages": 2}
    assert earlier.preview([_event(1, "user", "x" * 500)], None)[0] == "x" * 119 + "…"
    assert earlier.preview(events, "Trip planning")[0] == "Trip planning"
    assert earlier.session_id_of({"id": "a" * 32}) == "a" * 32
    assert [earlier.session_id_of({"id": v}) for v in ("A" * 32, "a" * 31, "../" + "a" * 32, 5, None)] == [None] * 5
