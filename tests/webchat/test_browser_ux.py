"""What a person sees in the page, in headless Chromium against the real daemon: answers rendered as markdown (bold,
inline code, code blocks in a monospace font with a copy button), a model's HTML shown as text and never run,
streaming previews with one cursor and no fence the answer did not hold, Stop and New chat, the state line.

One daemon for the module; each test is a fresh browser profile, so a visitor and a conversation of its own. The
screenshots in docs/ come from tests/webchat/screenshots.py.
"""
from __future__ import annotations

import pytest

from tests.webchat.browser import (send, started_gateway, stopped, url_of, wait_answers, wait_connected, wait_state,
                                   watch_problems)

pytestmark = pytest.mark.timeout(180)

# What the newest answer shows, read in the page.
LAST_ANSWER = """() => {
  const answers = document.querySelectorAll("#messages .message.assistant");
  const answer = answers[answers.length - 1];
  const code = answer.querySelector("pre > code");
  const prose = answer.querySelector("p");
  // Monospace means every glyph is as wide as every other in the font the block is drawn with.
  const widths = (node) => {
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = getComputedStyle(node).font;
    return [ctx.measureText("iiiiiiiiii").width, ctx.measureText("MMMMMMMMMM").width];
  };
  return {
    text: answer.querySelector(".text").textContent,
    strong: Array.from(answer.querySelectorAll("strong"), (n) => n.textContent),
    inlineCode: Array.from(answer.querySelectorAll("p code"), (n) => n.textContent),
    codeBlock: code ? code.textContent : null,
    codeLanguage: code ? code.className : null,
    codeWidths: code ? widths(code) : null,
    proseWidths: widths(prose),
    copyButtons: answer.querySelectorAll(".code-block button.copy").length,
    foreignElements: document.querySelectorAll("#messages img, #messages script, #messages iframe").length,
    handlers: Array.from(document.querySelectorAll("#messages *")).flatMap(
      (n) => Array.from(n.attributes).filter((a) => a.name.startsWith("on")).map((a) => a.name)),
  };
}"""

# Installed before one send: a snapshot of the answer to it at every change of the DOM.
PREVIEW_RECORDER = """() => {
  const log = document.getElementById("messages");
  const rec = window.__previews = [];
  const before = log.querySelectorAll(".message.assistant").length;
  new MutationObserver(() => {
    const answer = log.querySelectorAll(".message.assistant")[before];
    if (!answer) return;
    const text = answer.querySelector(".text").textContent;
    rec.push({final: answer.dataset.final, text, cursors: answer.querySelectorAll(".cursor").length,
              cursorInCode: answer.querySelector("pre code .cursor") !== null,
              codeBlocks: answer.querySelectorAll("pre code").length});
  }).observe(log, {childList: true, subtree: true, characterData: true, attributes: true});
}"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = started_gateway(tmp_path_factory.mktemp("webchat-ux"))
    try:
        yield gw
    finally:
        stopped(gw)


def status_of(page) -> dict:
    return page.evaluate("() => ({...document.getElementById('status').dataset,"
                         " text: document.getElementById('status').textContent,"
                         " stop: document.getElementById('stop').disabled,"
                         " newChat: document.getElementById('new-chat').disabled})")


def user_texts(page) -> list[str]:
    return page.eval_on_selector_all("#messages .message.user .text", "nodes => nodes.map(n => n.textContent)")


def wait_streaming(page) -> None:
    """An answer is on the page and still being written."""
    page.wait_for_function("() => { const a = document.querySelector('.message.assistant.streaming .text');"
                           " return a !== null && a.textContent.length > 0; }")


def test_answers_are_markdown_with_monospace_code_a_copy_button_and_model_html_is_only_text(browser_context, page,
                                                                                            gateway):
    problems, dialogs = watch_problems(page), []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(url_of(gateway))
    browser_context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url_of(gateway).rstrip("/"))
    wait_connected(page)
    assert status_of(page)["state"] == "idle" and status_of(page)["text"] == "Ready"

    send(page, "Can you show me **bold**, `inline code` and a code block?")
    wait_answers(page, 1)
    shown = page.evaluate(LAST_ANSWER)
    assert shown["strong"] == ["bold"] and shown["inlineCode"] == ["inline code"], shown
    assert "**" not in shown["text"] and "`" not in shown["text"], "no markdown syntax is left as text"
    assert shown["codeLanguage"] == "language-toml" and shown["codeBlock"].startswith("[agent]\nkind = ")
    narrow, wide = shown["codeWidths"]
    assert narrow == wide, f"the code block's font is not monospace: {shown['codeWidths']}"
    assert shown["proseWidths"][0] < shown["proseWidths"][1], "the prose is in a proportional font"
    assert shown["copyButtons"] == 1
    assert user_texts(page) == ["Can you show me **bold**, `inline code` and a code block?"], "own text as typed"

    page.click(".message.assistant .code-block button.copy")
    page.wait_for_function("() => document.querySelector('.code-block button.copy').dataset.copied === 'yes'")
    assert page.evaluate("() => navigator.clipboard.readText()") == shown["codeBlock"]


    hostile = 'look: <img src=x onerror=alert(1)> and <script>alert(2)</script> <a href="javascript:alert(3)">x</a>'
    send(page, hostile)
    wait_answers(page, 2)
    shown = page.evaluate(LAST_ANSWER)
    assert shown["foreignElements"] == 0 and shown["handlers"] == [], shown
    assert "<img src=x onerror=alert(1)>" in shown["text"] and "<script>alert(2)</script>" in shown["text"], \
        "the model's HTML is shown as the text it is"
    assert page.eval_on_selector_all("#messages a", "links => links.map(a => a.href)") == []
    page.reload()   # the history's rendering too
    wait_answers(page, 2)
    assert page.evaluate(LAST_ANSWER)["foreignElements"] == 0
    assert dialogs == [] and problems == []


def test_a_streaming_preview_shows_one_cursor_and_no_fence_it_did_not_receive(page, gateway):
    problems = watch_problems(page)
    page.goto(url_of(gateway))
    wait_connected(page)
    page.evaluate(PREVIEW_RECORDER)
    send(page, "stream a code block to me #slow 0.1")
    wait_answers(page, 1)
    snapshots = page.evaluate("window.__previews")
    previews = [s for s in snapshots if s["final"] == "no" and s["text"]]
    assert len(previews) >= 5, f"only {len(previews)} preview(s) seen"
    assert [s for s in previews if s["cursors"] != 1] == [], "exactly one cursor while the answer streams"
    assert [s["text"] for s in previews if "▍" in s["text"] or "`" in s["text"]] == [], \
        "neither the gateway's cursor glyph nor a fence line is ever shown as text"
    inside = [s for s in previews if s["cursorInCode"]]
    assert inside, "mid-block previews show an open code block with the cursor in it"
    assert all(s["codeBlocks"] == 1 for s in inside)
    final = snapshots[-1]
    assert final["final"] == "yes" and final["cursors"] == 0 and "`" not in final["text"]
    assert problems == []


def test_stop_ends_the_answer_in_progress_and_the_page_says_it_was_stopped(page, gateway):
    page.goto(url_of(gateway))
    wait_connected(page)
    assert status_of(page)["stop"] is True, "nothing to stop yet"
    send(page, "a slow answer please #slow 0.4")   # ~25 pieces: about ten seconds to the end
    wait_streaming(page)
    status = status_of(page)
    assert status["state"] == "answering" and status["text"] == "Answering…" and status["stop"] is False
    page.click("#stop")
    texts = wait_answers(page, 1)
    assert texts[1].rstrip().endswith("(stopped)") and "api_key_env" not in texts[1], texts[1]
    wait_state(page, "interrupted", "stopped")
    status = status_of(page)
    assert status["text"] == "Stopped" and status["stop"] is True
    assert user_texts(page) == ["a slow answer please #slow 0.4"], "the /stop is the button's, not a message"

    page.reload()
    wait_connected(page)
    assert wait_answers(page, 1) == texts, "the stopped answer is in the history, the /stop is not"
    send(page, "and now a whole one")
    after = wait_answers(page, 2)
    assert "api_key_env" in after[3]
    wait_state(page, "idle")


def test_new_chat_leaves_the_conversation_and_its_answer_in_progress_behind(page, gateway):
    page.goto(url_of(gateway))
    wait_connected(page)
    send(page, "the old conversation")
    wait_answers(page, 1)
    send(page, "still the old one #slow 0.4")
    wait_streaming(page)
    page.click("#new-chat")
    # At once: nothing of the old conversation is left (the answer to /new may be there already).
    left = page.eval_on_selector_all("#messages .message .text", "nodes => nodes.map(n => n.textContent)")
    assert [t for t in left if not t.startswith("Started a new conversation.")] == [], left
    page.wait_for_function("() => document.querySelectorAll('.message.assistant[data-final=\"yes\"]').length")
    texts = wait_answers(page, 1)
    assert len(texts) == 1 and texts[0].startswith("Started a new conversation."), \
        f"only the answer to /new; the interrupted answer of the old conversation is not shown: {texts}"
    wait_state(page, "idle")
    assert status_of(page)["newChat"] is False

    send(page, "hello again")
    texts = wait_answers(page, 2)
    assert "This conversation has 1 message from you" in texts[-1], "a new session: one message so far"
    page.reload()
    wait_connected(page)
    texts = wait_answers(page, 1)
    assert texts[0] == "hello again" and "This conversation has 1 message from you" in texts[1] and len(texts) == 2
