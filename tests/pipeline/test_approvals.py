"""Tool approvals through the real daemon (docs/approvals.md): the fake platform's user, the fake OpenAI-compatible
model, a profile that guards the calculator. The model's guarded call ends the turn with the question; a typed
answer starts the turn that goes on: approved, the tool runs once and the model reads its result; denied or
expired, the model reads why it did not run; a second answer is told what came first; a kill -9 of the whole
daemon between the question and the answer loses neither."""
from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import time

import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.openai_server import FakeOpenAIServer, agent_toml, text_reply, tool_call_reply
from tests.pipeline.harness import pipeline_gateway, settled_answers

pytestmark = pytest.mark.timeout(240)

CALL = ("calculator", '{"expression": "2+3*4"}')


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with FakePlatform() as platform, FakeOpenAIServer() as model:
        gw = pipeline_gateway(tmp_path_factory.mktemp("gw"), platform, agent=agent_toml(model) + """
[profiles.default]
approve_tools = ["calculator"]

[profiles.hurried]
approve_tools = ["calculator"]
approval_timeout_s = 10

[profiles.eager]
approve_tools = ["calculator"]
busy_mode = "interrupt"

[[routes]]
chat = "late"
profile = "hurried"

[[routes]]
chat = "eager"
profile = "eager"

[[routes]]
chat = "late-k"
profile = "hurried"

[profiles.ops]
approve_tools = ["calculator"]
approvers = "operator"

[[routes]]
chat = "op"
profile = "ops"
""")
        gw.start()
        gw.wait_ready()
        try:
            yield gw, platform, model
        finally:
            gw.cli("stop")
            gw.kill_everything()


def question_code(text: str) -> str:
    found = re.search(r"\u201capprove ([A-Z0-9]{4})\u201d", text)
    assert found, f"no code in the question: {text!r}"
    return found.group(1)


def tool_messages(model: FakeOpenAIServer, since: int) -> list[dict]:
    return [m for r in model.requests[since:] for m in r.body["messages"] if m.get("role") == "tool"]


def approvals(gw) -> list[tuple]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return db.execute("SELECT tool_name, state, answer, answered_by, outcome FROM approvals "
                          "ORDER BY asked_at").fetchall()


def ask(gw, platform, model, chat: str, then: str) -> tuple[str, int]:
    """The user asks in ``chat``; the model calls the calculator; answers the question's text and code, and how
    many model requests there were before."""
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."), text_reply(then))
    platform.inject(chat, "what is 2+3*4?")
    [question] = settled_answers(platform, chat, count=1, gw=gw)
    assert question.startswith("Let me compute.\n\nThe assistant wants to run calculator with "), question
    assert len(model.requests) == before + 1, "the model is not asked again before the answer"
    return question_code(question), before


def test_an_approved_call_runs_once_and_the_model_reads_its_result(rig):
    gw, platform, model = rig
    code, before = ask(gw, platform, model, "a", "It is 14.")
    platform.inject("a", f"approve {code}")
    answers = settled_answers(platform, "a", count=2, gw=gw)
    assert answers[1] == "It is 14.", answers
    assert [m["content"] for m in tool_messages(model, before)] == ["14"]
    platform.inject("a", f"approve {code}")          # a second answer changes nothing, and says what came first
    assert settled_answers(platform, "a", count=3, gw=gw)[2] == "Already answered: approved by fake:user."
    assert ("calculator", "done", "approve", "fake:user", "ok") in approvals(gw)


def test_a_denied_call_does_not_run_and_the_model_is_told(rig):
    gw, platform, model = rig
    code, before = ask(gw, platform, model, "b", "Fine, I will not compute it.")
    platform.inject("b", "approve")                   # an attempt without a code is told how, and is no turn
    assert "approve CODE" in settled_answers(platform, "b", count=2, gw=gw)[1]
    platform.inject("b", f"DENY {code.lower()}")
    answers = settled_answers(platform, "b", count=3, gw=gw)
    assert answers[2] == "Fine, I will not compute it."
    assert [m["content"] for m in tool_messages(model, before)] == [
        "Approval was denied for this call of calculator; it was not run."]
    assert len(model.requests) == before + 2, "the attempt without a code reached the model"


def test_a_question_past_its_deadline_is_refused_and_the_model_told(rig):
    gw, platform, model = rig
    code, before = ask(gw, platform, model, "late", "Nobody answered, so I did not compute it.")
    answers = settled_answers(platform, "late", count=2, timeout=60, gw=gw)   # the 10 s deadline, then the turn
    assert answers[1] == "Nobody answered, so I did not compute it."
    assert [m["content"] for m in tool_messages(model, before)] == [
        "No one answered the request to run calculator within 10 seconds; it was not run."]
    platform.inject("late", f"approve {code}")
    assert settled_answers(platform, "late", count=3, gw=gw)[2].startswith("This question expired at ")


def test_a_kill_9_between_question_and_answer_loses_neither(rig):
    gw, platform, model = rig
    code, before = ask(gw, platform, model, "k", "It is 14, after the restart.")
    os.kill(gw.launcher_pid, signal.SIGKILL)          # kill -9: the launcher takes its whole tree with it
    gw.assert_no_process_left(timeout=30)
    gw.start()
    gw.wait_ready()
    platform.inject("k", f"approve {code}")
    answers = settled_answers(platform, "k", count=2, timeout=60, gw=gw)
    assert answers[1] == "It is 14, after the restart."
    assert [m["content"] for m in tool_messages(model, before)] == ["14"]
    wait_for(lambda: ("calculator", "done", "approve", "fake:user", "ok") in approvals(gw), 20, 0.05,
             "the approved call done")


def test_a_call_too_large_to_ask_about_is_refused_and_said_so(rig):
    gw, platform, model = rig
    before = len(model.requests)
    huge = '{"expression": "' + "1+" * 9000 + '1"}'
    model.script(tool_call_reply([("calculator", huge)], text="Let me compute."))
    platform.inject("big", "add all the ones")
    [answer] = settled_answers(platform, "big", count=1, gw=gw)
    assert answer.startswith("Let me compute.\n\ncalculator needs approval, but arguments of ") and \
        answer.endswith("; it was not run."), answer
    assert len(model.requests) == before + 1, "neither asked about nor run: the model is not asked again"
    assert not [row for row in approvals(gw) if row[0] == "calculator" and row[1] == "pending"]


def test_an_answer_waits_for_the_turn_running_even_where_messages_interrupt(rig):
    gw, platform, model = rig
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."))
    platform.inject("eager", "what is 2+3*4?")
    code = question_code(settled_answers(platform, "eager", count=1, gw=gw)[0])
    model.script(text_reply("A slow answer about the weather.", pieces=6, delay_between_s=0.4),
                 text_reply("It is 14."))
    platform.inject("eager", "tell me about the weather")
    wait_for(lambda: len(model.requests) == before + 2, 30, 0.05, "the weather turn asking the model")
    platform.inject("eager", f"approve {code}")
    answers = settled_answers(platform, "eager", count=3, timeout=60, gw=gw)
    assert answers[1:] == ["A slow answer about the weather.", "It is 14."], answers


def test_a_deadline_that_passed_while_the_gateway_was_down_expires_after_the_restart(rig):
    gw, platform, model = rig
    _code, before = ask(gw, platform, model, "late-k", "Nobody answered while I was down.")
    with sqlite3.connect(gw.state / "gateway.db") as db:
        [(deadline,)] = db.execute("SELECT deadline FROM approvals WHERE state = 'pending'").fetchall()
    os.kill(gw.launcher_pid, signal.SIGKILL)
    gw.assert_no_process_left(timeout=30)
    wait_for(lambda: time.time() > deadline, 30, 0.1, "the question's deadline to pass while the gateway is down")
    gw.start()                                        # nothing waits in the inbox: the due question wakes its session
    gw.wait_ready()
    answers = settled_answers(platform, "late-k", count=2, timeout=60, gw=gw)
    assert answers[1] == "Nobody answered while I was down."
    assert [m["content"] for m in tool_messages(model, before)] == [
        "No one answered the request to run calculator within 10 seconds; it was not run."]


def test_a_settled_approval_is_pruned_with_the_answered_messages(tmp_path):
    with FakePlatform() as platform, FakeOpenAIServer() as model:
        # 0.00002 days = 1.7 s, and housekeeping every second: a done approval is soon old enough to go.
        gw = pipeline_gateway(tmp_path, platform, agent=agent_toml(model) + """
[profiles.default]
approve_tools = ["calculator"]

[storage]
inbox_retention_days = 0.00002

[delivery]
housekeeping_interval_s = 1.0
""")
        try:
            gw.start()
            gw.wait_ready()
            code, _before = ask(gw, platform, model, "p", "It is 14.")
            def inbox_rows():
                with sqlite3.connect(gw.state / "gateway.db") as db:
                    return db.execute("SELECT COUNT(*) FROM inbox").fetchone()[0]
            # The question's message is answered and pruned; the question itself, waiting, is not.
            wait_for(lambda: inbox_rows() == 0, 30, 0.2, "the asking message pruned")
            assert [row[1] for row in approvals(gw)] == ["pending"]
            platform.inject("p", f"approve {code}")
            settled_answers(platform, "p", count=2, gw=gw)
            wait_for(lambda: approvals(gw) == [], 30, 0.2, f"the settled approval pruned ({approvals(gw)})")
            gw.wait_log("retention removed 1 settled tool approval(s)")
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_the_operator_answers_from_the_cli_and_the_chat_may_not(rig):
    gw, platform, model = rig
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."), text_reply("The operator let me: 14."))
    platform.inject("op", "what is 2+3*4?")
    [question] = settled_answers(platform, "op", count=1, gw=gw)
    assert question.endswith("It waits for the operator's approval (within 10 minutes)."), question
    listed = json.loads(gw.cli("approvals", "list", "--json", check=True).stdout)["approvals"]
    [waiting] = [a for a in listed if a["session_key"].startswith("ops.")]
    assert (waiting["tool"], waiting["arguments"], waiting["approvers"]) == ("calculator", CALL[1], "operator")
    with sqlite3.connect(gw.state / "gateway.db") as db:
        [(code,)] = db.execute("SELECT code FROM approvals WHERE approval_id = ?", (waiting["id"],)).fetchall()
    platform.inject("op", f"approve {code}")          # someone in the chat, under approvers = "operator"
    assert settled_answers(platform, "op", count=2, gw=gw)[1] == "Only the operator can answer this question."

    done = gw.cli("approvals", "approve", waiting["id"], "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["detail"] == "Approved: calculator runs now.", done
    answers = settled_answers(platform, "op", count=3, timeout=60, gw=gw)
    assert answers[2] == "The operator let me: 14."
    assert [m["content"] for m in tool_messages(model, before)] == ["14"]
    again = gw.cli("approvals", "deny", waiting["id"], "--json")
    assert again.returncode == 1 and json.loads(again.stdout)["detail"] == \
        "Already answered: approved by the operator.", again
    assert ("calculator", "done", "approve", "operator", "ok") in approvals(gw)


def test_a_new_conversation_withdraws_the_question_waiting(rig):
    gw, platform, model = rig
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."))     # no answer after it: the turn never goes on
    platform.inject("r", "what is 2+3*4?")
    code = question_code(settled_answers(platform, "r", count=1, gw=gw)[0])
    platform.inject("r", "/new")
    assert settled_answers(platform, "r", count=2, gw=gw)[1].startswith("Started a new conversation.")
    platform.inject("r", f"approve {code}")
    assert settled_answers(platform, "r", count=3, gw=gw)[2] == (
        "This question was withdrawn when the conversation was reset; calculator was not run.")
    assert len(model.requests) == before + 1 and not tool_messages(model, before)
