"""Tool approvals answered with the web chat's buttons, in headless Chromium against the real daemon and the fake
model (docs/approvals.md): the question shows Approve and Deny; a click answers it once, the buttons go and the
question says who answered, in the page and in the history a reload shows; a press of another visitor's question
(its data sent by a second visitor) is refused and changes nothing.

One daemon and one fake model for the module; each test is a fresh browser profile (a visitor of its own)."""
from __future__ import annotations

import sqlite3

import pytest

from tests.actor_system import free_port
from tests.fakes.openai_server import FakeOpenAIServer, agent_toml, text_reply, tool_call_reply
from tests.pipeline.approval_helpers import CALL, GUARDED_PROFILES, PRESSABLE, tool_results
from tests.webchat.browser import send, stopped, url_of, wait_answers, wait_connected, watch_problems
from tests.webchat.client import WebChatClient
from tests.webchat.helpers import served_port, webchat_gateway

pytestmark = pytest.mark.timeout(180)



@pytest.fixture(scope="module")
def model():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, model):
    gw = webchat_gateway(tmp_path_factory.mktemp("webchat-approvals"), port=free_port(),
                         extra=agent_toml(model) + GUARDED_PROFILES)
    gw.start()
    try:
        gw.wait_ready()
        served_port(gw)
        yield gw
    finally:
        stopped(gw)


def asked(page, gateway, model, then: str) -> tuple[list, int]:
    """The page open, the question asked and shown with its buttons: the page's problems and the model's
    requests before it."""
    problems = watch_problems(page)
    page.goto(url_of(gateway))
    wait_connected(page)
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."), text_reply(then))
    send(page, "what is 2+3*4?")
    page.wait_for_function("() => document.querySelectorAll('.message.assistant button.choice').length === 2")
    texts = [t.strip() for t in wait_answers(page, 1)]
    assert PRESSABLE in texts[-1], texts
    assert page.eval_on_selector_all(".message.assistant button.choice", "bs => bs.map(b => b.textContent)") == [
        "Approve", "Deny"]
    assert len(model.requests) == before + 1, "the model is not asked again before the answer"
    return problems, before


def settled_line(page) -> str:
    page.wait_for_function("() => document.querySelector('.message.assistant .settled') !== null")
    return page.eval_on_selector(".message.assistant .settled", "n => n.textContent")


def approval_rows(gateway) -> list[tuple]:
    with sqlite3.connect(gateway.state / "gateway.db") as db:
        return db.execute("SELECT approval_id, chat_id, state, answer, outcome FROM approvals").fetchall()


def test_a_click_on_approve_runs_the_tool_once_and_the_question_says_so_also_after_a_reload(page, gateway, model):
    problems, before = asked(page, gateway, model, "It is 14.")
    page.click("button.choice.approve")
    texts = [t.strip() for t in wait_answers(page, 2)]
    assert texts[-1] == "It is 14.", texts
    assert settled_line(page) == "Approved by you."
    assert page.query_selector_all("button.choice") == [], "the buttons are gone: no second press"
    assert tool_results(model, before) == ["14"] and len(model.requests) == before + 2
    page.reload()
    wait_connected(page)
    texts = [t.strip() for t in wait_answers(page, 2)]
    question = [t for t in texts if "The assistant wants to run calculator" in t]
    assert len(question) == 1 and question[0].endswith("Approved by you.") and PRESSABLE not in question[0], texts
    assert page.query_selector_all("button.choice") == []
    assert problems == []


def test_a_click_on_deny_refuses_the_call_and_a_press_of_another_visitor_changes_nothing(page, gateway, model):
    problems, before = asked(page, gateway, model, "Fine, not computed.")
    deny = page.eval_on_selector("button.choice.deny", "b => b.dataset.data")
    approve = page.eval_on_selector("button.choice.approve", "b => b.dataset.data")
    client = WebChatClient(url_of(gateway).rstrip("/"))
    try:   # another visitor sends this question's data: refused, and the question still waits
        answer = client.request("stranger", {"type": "press", "id": "forged-1", "data": approve})
        assert answer == {"type": "press", "id": "forged-1", "kept": False,
                          "notice": "This question is not yours to answer."}, answer
    finally:
        client.close()
    assert [r[2] for r in approval_rows(gateway) if deny.startswith(f"ap:{r[0]}:")] == ["pending"]
    assert page.query_selector_all("button.choice:disabled") == []
    page.click("button.choice.deny")
    texts = [t.strip() for t in wait_answers(page, 2)]
    assert texts[-1] == "Fine, not computed.", texts
    assert settled_line(page) == "Denied by you."
    assert tool_results(model, before) == ["Approval was denied for this call of calculator; it was not run."]
    assert problems == []


def test_model_is_answered_with_a_button_per_model_and_a_click_switches(page, gateway, model):
    problems = watch_problems(page)
    page.goto(url_of(gateway))
    wait_connected(page)
    send(page, "/model")
    page.wait_for_function("() => document.querySelectorAll('.message.assistant button.choice').length === 1")
    assert page.eval_on_selector("button.choice", "b => b.textContent") == "large-model"
    page.click("button.choice")
    texts = [t.strip() for t in wait_answers(page, 2)]
    assert texts[-1] == "Switched to large-model: the next answer uses it.", texts
    before = len(model.requests)
    model.script(text_reply("Answered by the large model."))
    send(page, "hello")
    texts = [t.strip() for t in wait_answers(page, 3)]
    assert texts[-1] == "Answered by the large model." and model.requests[before].body["model"] == "large-model"
    assert problems == []
