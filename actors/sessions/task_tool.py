"""The tools a turn's session decides (docs/background.md): ``start_background_task`` (a task as ``/bg`` starts one,
actors/sessions/tasks.py ``begin``: the same per-chat ``max_tasks``, the same profile bounds) and ``create_watch``
(a watch of a public URL, watch_tool.py), each offered to a profile whose tools name it (actors/agents/tools.py). A
refusal is the tool's result, which the model reads.

Two halves, on two threads of the shard:

  the agent's loop    ``SessionTools.call`` (the turn's binding, ``AgentRequest.session_tools``) posts a
                      ``SessionToolCall`` to its session through the bridge and waits for the answer
  the session cell    ``on_call``, one handler: what the call asks (the task's row and its prompt's row, or the
                      watch's row) AND the call with its result written to the turn's transcript, then the answer
                      sent back to the loop

What survives kill -9: what the call made and the call's result are written in the one transaction of that
handler, so a restart finds both or neither. Neither: the turn is resumed (G8) and its model may call again, making
it then. Both: the resumed turn's model reads the call's result in its history; and a call made again under the
same turn and call id (an agent that calls as it did before: the offline agent) finds what it made (``tool_ref``
is the row's ``origin_ref``, unique in storage) and is answered the same, with nothing written twice. So one tool
call makes one task, or one watch, across every life of the turn. The answer may reach the loop before the
handler's transaction commits; a crash that loses the transaction takes the loop's run with it (the whole process,
or the cell, whose stop cancels its turn's run), so the model never goes on from something that was not kept.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Callable

from actors.agents.tools import CREATE_WATCH_NAME
from actors.messages import SessionToolCall, ToolCallFinished
from actors.sessions import tasks, turn as turns, watch_tool

MAX_PROMPT_CHARS = 8000          # a task's prompt from a model: a longer one is refused, not cut
ANSWER_WAIT_S = 120.0            # the session answers in one handler; this is only against a session gone for good


def tool_ref(turn_id: str, call_id: str) -> str:
    """The task's ``origin_ref`` for a tool call: one task per turn and call id."""
    return f"tool:{turn_id}:{call_id}"


def started_text(number: int) -> str:
    return (f"Started background task #{number}. Its result will be sent to this chat when it is done (the chat "
            f"sees its tasks with /tasks and can stop this one with /cancel {number}); do not wait for it.")


def prompt_refusal(prompt: Any) -> str:
    """Why a prompt the model gave cannot start a task ('' when it can)."""
    if not isinstance(prompt, str) or not prompt.strip():
        return "not started: 'prompt' (a non-empty string: what the task is to do) is required"
    if len(prompt) > MAX_PROMPT_CHARS:
        return f"not started: the prompt has {len(prompt)} characters; at most {MAX_PROMPT_CHARS}"
    return ""


@dataclass(frozen=True)
class SessionTools:
    """A turn's binding for the tools its session decides, on the agent's loop: asks the turn's session."""
    turn_id: str
    post: Callable                 # the session's bridge post: items go to that cell alone

    async def call(self, name: str, values: dict, call_id: str) -> tuple[bool, str]:
        loop = asyncio.get_running_loop()
        answer = loop.create_future()

        def reply(ok: bool, text: str) -> None:
            if not answer.done():
                answer.set_result((ok, text))
        self.post(SessionToolCall(self.turn_id, call_id, name, json.dumps(values), dict(values), reply))
        try:
            return await asyncio.wait_for(answer, ANSWER_WAIT_S)
        except asyncio.TimeoutError:
            return False, ("no answer from this conversation's session; it may have done it: the chat's /tasks "
                           "lists its tasks, the operator's `watches list` its watches")


def binding(session, turn) -> SessionTools:
    return SessionTools(turn.turn_id, session.bridge.post)


def on_call(session, item: SessionToolCall) -> None:
    """The session's handler of a call: decide, record, answer (module docstring)."""
    ok, text = _decide(session, item)
    session.bridge.call(item.reply, ok, text)


def _decide(session, item: SessionToolCall) -> tuple[bool, str]:
    turn = session.answering(item)
    if turn is None:   # the turn ended (stopped, interrupted) while the call was on its way: its run is going
        return False, "not done: the turn that asked has ended"
    if tasks.is_task_key(session.key):
        ok, text, again = False, "not done: a background task cannot start further work", False
    elif item.name == CREATE_WATCH_NAME:
        ok, text, again = watch_tool.decide(session, turn.event, item.values, tool_ref(turn.turn_id, item.call_id))
    else:
        ok, text, again = _start_task(session, turn, item)
    if again:   # made by this call in an earlier life of the turn: its result was written with it then
        turn.recorded_calls.add(item.call_id)
        return ok, text
    return recorded(session, turn, item, ok, text)


def _start_task(session, turn, item: SessionToolCall) -> tuple[bool, str, bool]:
    """(ok, the call's result, whether the call started this task before)."""
    prompt = item.values.get("prompt")
    refusal = prompt_refusal(prompt)
    if refusal:
        return False, refusal, False
    started = tasks.begin(session, turn.event, prompt.strip(), tool_ref(turn.turn_id, item.call_id))
    if started is None:
        return False, "not started: " + tasks.TOO_LONG_KEY, False
    if started.task is None:
        limit = session.profiles.get(turn.event.source.profile).max_tasks
        return False, tasks.refused_text(started.running, limit), False
    return True, started_text(started.task.number), started.again


def recorded(session, turn, item: SessionToolCall, ok: bool, text: str) -> tuple[bool, str]:
    """The call and its result in the turn's transcript, in this handler (with what it made, if anything); the
    ToolCallFinished that follows from the loop is then not written again (``Turn.recorded_calls``)."""
    finished = turns.redacted_tool_call(ToolCallFinished(item.call_id, item.name, item.arguments, text, ok),
                                        session.secrets)
    session.db(session.store.sessions.append(session.info.session_id, turns.tool_events(turn.turn_id, finished)))
    turn.recorded_calls.add(item.call_id)
    return ok, text
