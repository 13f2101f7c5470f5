"""What a person sees in the page when the model misbehaves, in headless Chromium against the real daemon and a fake
OpenAI-compatible model (tests/fakes/openai_server.py): an answer stopped inside a code block ends with the block
closed and "(stopped)" as prose after it; a model slow to start shows "still waiting for the model…" after a few
seconds, then its answer; a hung model is given up on after first_token_timeout_s and the failure is shown as an
error, with a Retry button that answers the last message again in its place. And what voice replies look like: a
recording picked in the page is answered with the text, then the spoken answer in an audio player that plays what
the gateway serves.

One daemon and one fake model for the module; each test is a fresh browser profile (a visitor of its own) and
scripts the model's next replies. With WEBCHAT_SCREENSHOTS=1 the tests also write their pictures into docs/.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.actor_system import free_port
from tests.fakes.openai_server import OGG_OPUS, FakeOpenAIServer, Reply, agent_toml, text_chunks, text_reply
from tests.webchat.browser import send, stopped, url_of, wait_answers, wait_connected, watch_problems
from tests.webchat.helpers import served_port, webchat_gateway

pytestmark = pytest.mark.timeout(180)

DOCS = Path(__file__).resolve().parents[2] / "docs"
SCREENSHOTS = os.environ.get("WEBCHAT_SCREENSHOTS") == "1"
FIRST_TOKEN_TIMEOUT_S = 12   # a hung model is given up on after this (the sign comes after 5 s)
CODE_LINES = "".join(f"print({n})\n" for n in range(60))


@pytest.fixture(scope="module")
def model():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, model):
    gw = webchat_gateway(tmp_path_factory.mktemp("webchat-model"), port=free_port(),
                         extra=agent_toml(model, f"first_token_timeout_s = {FIRST_TOKEN_TIMEOUT_S}") + f"""
[media]
transcription_url = "{model.base_url}"
speech_url = "{model.base_url}"

[profiles.default]
voice_replies = true
""")
    gw.start()
    try:
        gw.wait_ready()
        served_port(gw)
        yield gw
    finally:
        stopped(gw)


def opened(page, gateway) -> list:
    """The page open and connected; the script and console errors it meets from now on."""
    problems = watch_problems(page)
    page.goto(url_of(gateway))
    wait_connected(page)
    return problems


def last_answer(page) -> dict:
    return page.evaluate("""() => {
      const answers = document.querySelectorAll("#messages .message.assistant");
      const answer = answers[answers.length - 1];
      return {final: answer.dataset.final, text: answer.querySelector(".text").textContent,
              code: Array.from(answer.querySelectorAll("pre code"), (n) => n.textContent),
              prose: Array.from(answer.querySelectorAll(".text > p"), (n) => n.textContent)};
    }""")


def test_a_stop_inside_a_code_block_closes_the_block_and_says_stopped_after_it(page, gateway, model):
    # About fifteen seconds of code, streamed a line at a time: the stop lands inside the block.
    model.script(text_reply("Here you are:\n\n```python\n" + CODE_LINES + "```\n", pieces=62, delay_between_s=0.25))
    problems = opened(page, gateway)
    send(page, "print the numbers in python")
    page.wait_for_function("() => { const c = document.querySelector('.message.assistant.streaming pre code');"
                           " return c !== null && c.textContent.includes('print(3)'); }")
    page.click("#stop")
    wait_answers(page, 1)
    shown = last_answer(page)
    assert shown["final"] == "yes"
    assert len(shown["code"]) == 1 and "(stopped)" not in shown["code"][0], shown
    assert shown["code"][0].startswith("print(0)\n"), shown
    assert shown["prose"][-1] == "(stopped)", f"the note is prose after the block: {shown}"
    if SCREENSHOTS:
        page.set_viewport_size({"width": 1280, "height": 800})
        page.screenshot(path=str(DOCS / "webchat-stopped-code.png"))

    page.reload()   # the history shows it the same
    wait_connected(page)
    wait_answers(page, 1)
    again = last_answer(page)
    assert again["code"] == shown["code"] and again["prose"][-1] == "(stopped)", again
    assert problems == []


def test_a_model_slow_to_start_shows_that_the_answer_is_still_coming(page, gateway, model):
    model.script(Reply(chunks=text_chunks("Here at last."), delay_before_s=8))
    problems = opened(page, gateway)
    send(page, "are you there?")
    page.wait_for_function("() => { const t = document.querySelector('.message.assistant.streaming .tool');"
                           " return t !== null && t.textContent.trim().startsWith('still waiting for the model…'); }")
    # The page's own hourglass, not the gateway's emoji (drawn as an empty box where no emoji font is installed).
    mark = page.evaluate("() => { const t = document.querySelector('.message.assistant.streaming .tool');"
                         " const use = t.querySelector('svg.icon use'); const box = t.querySelector('svg').getBoundingClientRect();"
                         " return [use.getAttribute('href'), t.textContent.includes('\u23f3'), box.width > 0]; }")
    assert mark == ["#icon-hourglass", False, True], mark
    waiting = page.evaluate("""() => ({typing: !document.getElementById('typing').hidden,
                                       status: document.getElementById('status').dataset.state,
                                       text: document.querySelector('.message.assistant .text').textContent.trim()})""")
    assert waiting == {"typing": False, "status": "answering", "text": ""}, waiting
    texts = wait_answers(page, 1)
    assert texts[-1].strip() == "Here at last."
    assert page.query_selector(".message.assistant .tool") is None, "the sign is gone with the answer"
    assert problems == []


FAILURE = """() => Array.from(document.querySelectorAll("#messages .message"), (m) => ({
  role: m.classList.contains("user") ? "user" : "assistant", error: m.classList.contains("error"),
  retry: m.querySelectorAll("button.retry").length, text: m.querySelector(".text").textContent.trim(),
  label: m.classList.contains("error") ? getComputedStyle(m, "::before").content : "",
  colour: getComputedStyle(m.querySelector(".text")).color}))"""


def test_a_failed_turn_is_an_error_with_a_retry_that_answers_the_message_again(page, gateway, model):
    model.script(Reply(chunks=text_chunks("too late"), delay_before_s=60))   # hung: no first token
    problems = opened(page, gateway)
    send(page, "hello, model?")
    page.wait_for_function("() => document.querySelector('.message.assistant.error') !== null",
                           timeout=(FIRST_TOKEN_TIMEOUT_S + 40) * 1000)
    shown = page.evaluate(FAILURE)
    assert [(m["role"], m["error"], m["retry"]) for m in shown] == [("user", False, 0), ("assistant", True, 1)], shown
    assert shown[1]["text"].startswith("The model service took too long to answer."), shown
    assert shown[1]["label"] == '"⚠ Error"' and shown[1]["colour"] != shown[0]["colour"], shown
    if SCREENSHOTS:
        page.set_viewport_size({"width": 1280, "height": 800})
        page.screenshot(path=str(DOCS / "webchat-error-retry.png"))

    page.reload()   # the history says it too
    wait_connected(page)
    page.wait_for_function("() => document.querySelector('.message.assistant.error button.retry') !== null")

    page.click("button.retry")   # nothing scripted now: the fake model answers (an echo of the message)
    page.wait_for_function("() => { const a = document.querySelectorAll('.message.assistant[data-final=\"yes\"]');"
                           " return a.length === 1 && !a[0].classList.contains('error'); }")
    shown = page.evaluate(FAILURE)
    assert [(m["role"], m["error"], m["retry"]) for m in shown] == [("user", False, 0), ("assistant", False, 0)], \
        shown
    assert shown[1]["text"] == "echo: hello, model?", "the last message answered again, in the failed one's place"
    assert model.requests[-1].body["messages"][-1] == {"role": "user", "content": "hello, model?"}

    page.reload()
    wait_connected(page)
    wait_answers(page, 1)
    assert [(m["role"], m["text"], m["error"]) for m in page.evaluate(FAILURE)] == [
        ("user", "hello, model?", False), ("assistant", "echo: hello, model?", False)], "the history agrees"
    assert problems == []


# The voice notes of the page: each player's source fetched as the page would play it.
PLAYERS = """async () => Promise.all(Array.from(document.querySelectorAll('#messages .message audio.file'),
                                            async (a) => {
  const answer = await fetch(a.src);
  const body = await answer.arrayBuffer();
  return {role: a.closest('.message').classList.contains('assistant') ? 'assistant' : 'user', controls: a.controls,
          status: answer.status, type: answer.headers.get('Content-Type'), size: body.byteLength};
}))"""


def test_a_recording_picked_in_the_page_is_answered_with_the_text_and_a_player_of_the_spoken_answer(
        page, gateway, model, tmp_path):
    problems = opened(page, gateway)
    model.script(text_reply("The museum opens at ten."))
    recording = tmp_path / "question.ogg"
    recording.write_bytes(OGG_OPUS + b"\x00" * 64)
    page.set_input_files("#attach", str(recording))
    page.wait_for_selector("#attached li:has-text('question.ogg')", timeout=30_000)
    send(page, "listen")
    page.wait_for_selector("#messages .message.assistant audio.file", timeout=60_000)
    assert any("The museum opens at ten." in text for text in wait_answers(page, 1))
    players = page.evaluate(PLAYERS)
    spoken = {"role": "assistant", "controls": True, "status": 200, "type": "audio/ogg", "size": len(OGG_OPUS)}
    assert spoken in players and [p["role"] for p in players] == ["user", "assistant"], players
    page.reload()
    wait_connected(page)
    page.wait_for_selector("#messages .message.assistant audio.file", timeout=60_000)
    assert spoken in page.evaluate(PLAYERS), "the history shows the player too"
    assert problems == []
