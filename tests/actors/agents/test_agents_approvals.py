"""actors/agents/openai_compat.py with a turn's approval guard (docs/approvals.md): a held call is neither run nor
followed by another model request, the calls before it run, and a turn answered since goes on from the open step
with exactly the messages the OpenAI format needs."""
from __future__ import annotations

import asyncio

import pytest

from actors.agents.base import AgentRequest, ApprovalGuard, OpenStep
from actors.agents.openai_compat import OpenAICompatAgent
from actors.messages import AWAITING_APPROVAL, ApprovalNeeded, ToolCallFinished, TurnEnd
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply

pytestmark = pytest.mark.timeout(20)

CLOCK = ("clock", "{}")
CALCULATOR = ("calculator", '{"expression": "2+3*4"}')


@pytest.fixture
def server():
    with FakeOpenAIServer() as fake:
        yield fake


def agent_for(server) -> OpenAICompatAgent:
    return OpenAICompatAgent(server.base_url, "fake-gpt", api_key="sk-test-key-0123456789abcdef", retry_base_s=0.01,
                             idle_timeout_s=2.0, connect_timeout_s=2.0)


def guarded(*names: str, approved: frozenset = frozenset()) -> ApprovalGuard:
    return ApprovalGuard(needs=lambda name: name in names, approved=approved)


def run(agent, **request):
    async def collect():
        return [e async for e in agent.run(AgentRequest(messages=({"role": "user", "content": "go"},), turn_id="t1",
                                                        **request))]
    return asyncio.run(collect())


def test_a_held_call_is_not_run_and_the_model_is_not_asked_again(server):
    server.script(tool_call_reply([CLOCK, CALCULATOR], text="Let me look."), text_reply("never asked"))
    events = run(agent_for(server), approvals=guarded("calculator"))
    assert [e.name for e in events if isinstance(e, ToolCallFinished)] == ["clock"]   # the call before it ran
    [needed] = [e for e in events if isinstance(e, ApprovalNeeded)]
    assert (needed.call_id, needed.name, needed.arguments, needed.later) == ("call_fake_1", "calculator",
                                                                             CALCULATOR[1], ())
    assert [c["id"] for c in needed.step["tool_calls"]] == ["call_fake_0", "call_fake_1"]
    assert needed.step["content"] == "Let me look."
    assert events[-1] == TurnEnd(reason=AWAITING_APPROVAL, final_text="Let me look.", tokens=events[-1].tokens)
    assert len(server.requests) == 1


def test_the_calls_after_a_held_one_wait_with_it_in_the_models_order(server):
    server.script(tool_call_reply([CALCULATOR, CLOCK]))
    events = run(agent_for(server), approvals=guarded("calculator"))
    assert not [e for e in events if isinstance(e, ToolCallFinished)]
    [needed] = [e for e in events if isinstance(e, ApprovalNeeded)]
    assert needed.later == (("call_fake_1", "clock", "{}"),)


def test_an_approved_call_runs_when_the_turn_goes_on_and_then_the_model_is_asked(server):
    server.script(tool_call_reply([CLOCK, CALCULATOR], text="Let me look."))
    first = run(agent_for(server), approvals=guarded("calculator"))
    needed = next(e for e in first if isinstance(e, ApprovalNeeded))
    clock_result = next(e.result for e in first if isinstance(e, ToolCallFinished))
    server.script(text_reply("It is 14."))
    step = OpenStep(needed.step, answered=(("call_fake_0", clock_result),),
                    to_run=((needed.call_id, needed.name, needed.arguments), *needed.later))
    events = run(agent_for(server), approvals=guarded("calculator", approved=frozenset({needed.call_id})),
                 open_step=step)
    [ran] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert (ran.call_id, ran.result, ran.ok) == ("call_fake_1", "14", True)
    assert events[-1].reason == "complete" and events[-1].final_text == "It is 14."
    sent = server.requests[-1].body["messages"]
    assert sent[-3] == needed.step
    assert sent[-2:] == [{"role": "tool", "tool_call_id": "call_fake_0", "content": clock_result},
                         {"role": "tool", "tool_call_id": "call_fake_1", "content": "14"}]


def test_a_refused_call_is_answered_with_its_refusal_and_nothing_runs(server):
    server.script(tool_call_reply([CALCULATOR]))
    needed = next(e for e in run(agent_for(server), approvals=guarded("calculator")) if isinstance(e, ApprovalNeeded))
    server.script(text_reply("Understood, I will not compute it."))
    refusal = "Approval was denied for this call of calculator; it was not run."
    events = run(agent_for(server), approvals=guarded("calculator"),
                 open_step=OpenStep(needed.step, answered=((needed.call_id, refusal),)))
    assert not [e for e in events if isinstance(e, ToolCallFinished)]
    assert server.requests[-1].body["messages"][-1] == {"role": "tool", "tool_call_id": "call_fake_0",
                                                        "content": refusal}
    assert events[-1].final_text == "Understood, I will not compute it."


def test_a_later_held_call_of_the_open_step_asks_again(server):
    server.script(tool_call_reply([CALCULATOR, ("calculator", '{"expression": "1+1"}')]))
    needed = next(e for e in run(agent_for(server), approvals=guarded("calculator")) if isinstance(e, ApprovalNeeded))
    requests_before = len(server.requests)
    step = OpenStep(needed.step, to_run=((needed.call_id, needed.name, needed.arguments), *needed.later))
    events = run(agent_for(server), approvals=guarded("calculator", approved=frozenset({needed.call_id})),
                 open_step=step)
    assert [e.result for e in events if isinstance(e, ToolCallFinished)] == ["14"]
    [again] = [e for e in events if isinstance(e, ApprovalNeeded)]
    assert (again.call_id, again.later) == ("call_fake_1", ())
    assert events[-1].reason == AWAITING_APPROVAL and len(server.requests) == requests_before
