"""The agent's start_background_task tool (actors/sessions/task_tool.py, actors/agents/tools.py) in its pure parts:
offered only where a profile names it, its call handed to the turn's starter with the call's id, the prompts it
refuses, the key that makes one task per call, and the offline agent's way of calling it. The daemon's whole path
(the task started, its result back once, a kill -9 right after the call): tests/pipeline/test_background_tasks.py."""
from __future__ import annotations

import asyncio
import json

import pytest

from actors.agents.base import AgentRequest
from actors.agents.offline import OfflineAgent
from actors.agents.tools import START_TASK_NAME, default_registry
from actors.messages import ToolCallFinished
from actors.sessions import task_tool

pytestmark = pytest.mark.timeout(30)


class Starter:
    """Stands in for the session's half: records what it was asked and answers as a start would."""

    def __init__(self):
        self.asked = []

    async def call(self, name, values, call_id):
        self.asked.append((name, values, call_id))
        return True, task_tool.started_text(3)


def test_the_tool_is_offered_only_where_a_profile_names_it():
    assert START_TASK_NAME not in default_registry().names()
    assert START_TASK_NAME in default_registry(["clock", START_TASK_NAME]).names()


def test_the_call_reaches_the_turns_starter_with_its_id_and_without_one_it_is_refused():
    registry, starter = default_registry([START_TASK_NAME]), Starter()
    answer = asyncio.run(registry.run(START_TASK_NAME, json.dumps({"prompt": "dig"}), session_tools=starter,
                                      call_id="c-1"))
    assert answer.ok and "Started background task #3" in answer.text
    assert starter.asked == [(START_TASK_NAME, {"prompt": "dig"}, "c-1")]
    refused = asyncio.run(registry.run(START_TASK_NAME, json.dumps({"prompt": "dig"})))
    assert not refused.ok and "cannot run this tool" in refused.text


@pytest.mark.parametrize("prompt, refused", [("dig", ""), ("", "is required"), ("   ", "is required"),
                                             (None, "is required"), (7, "is required"),
                                             ("x" * task_tool.MAX_PROMPT_CHARS, ""),
                                             ("x" * (task_tool.MAX_PROMPT_CHARS + 1), "at most")])
def test_the_prompts_a_call_may_give(prompt, refused):
    why = task_tool.prompt_refusal(prompt)
    assert (refused in why and why) if refused else why == ""


def test_one_task_per_turn_and_call():
    assert task_tool.tool_ref("t1", "c1") == task_tool.tool_ref("t1", "c1")
    assert len({task_tool.tool_ref("t1", "c1"), task_tool.tool_ref("t1", "c2"), task_tool.tool_ref("t2", "c1")}) == 3
    assert task_tool.tool_ref("t1", "c1").startswith("tool:"), "never a platform message's ref (platform:id)"


def run_offline(text: str, names: list) -> list:
    agent, starter = OfflineAgent(default_registry(names), chunk_delay_s=0.0), Starter()

    async def events():
        request = AgentRequest(({"role": "user", "content": text},), turn_id="turn-9", session_tools=starter)
        return [e async for e in agent.run(request)]
    finished = [e for e in asyncio.run(events()) if isinstance(e, ToolCallFinished)]
    return finished, starter.asked


def test_the_offline_agent_calls_it_for_a_background_task_and_only_where_offered():
    finished, asked = run_offline("please start a background task: what is 6*7", ["calculator", START_TASK_NAME])
    assert [f.name for f in finished] == [START_TASK_NAME] and finished[0].ok
    assert asked == [(START_TASK_NAME, {"prompt": "what is 6*7"}, "offline-turn-9-1")], \
        "the same call id in every life of the turn"
    finished, asked = run_offline("please start a background task: what is 6*7", ["calculator"])
    assert [f.name for f in finished] == ["calculator"] and asked == []
