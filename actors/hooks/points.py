"""The hook points as their call sites use them, one call each: build the event a plugin sees from the gateway's
own records, run the hooks (runner.py), and fold their answers back in.

  dispatch_rows        actors/adapters/intake.py, before a round's rows are stored: kept, rewritten, or not
                       stored (dropped, or answered by the plugin: the answer goes to the chat as a notice does)
  with_context         actors/sessions/session.py, on the shard's loop before the model is called
  turn_record          actors/sessions/session.py, when a turn ends (after its reply was delivered or given up)
  consumer_delivery, sweeper_delivery    the stream consumer and the sweeper, when a reply is delivered
  adapter_state        actors/adapters/base.py, when an adapter's connection goes up or down

The ``make_event(clean)`` builders take ``clean``: the plugin's view of a text (redacted unless granted secrets).
What survives kill -9: nothing of a hook's own. A rewrite is what is stored (so a crash after the commit keeps it);
a crash before the commit re-delivers the round, and the hooks run again on it.
"""
from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Callable

from actors.hooks.events import (Answer, AdapterState, Delivery, Drop, InboundMessage, ModelCall, Rewrite,
                                 ToolCall, TurnRecord)
from actors.hooks.runner import HookRunner, Post, hooks_for
from actors.messages import ConsumerArgs, ToolCallFinished

MAX_CONTEXT_CHARS = 8_000      # what one plugin may add to a model request
MAX_ANSWER_CHARS = 4_000       # what one plugin may answer a message with


# ---------------------------------------------------------------------------------------------- before_dispatch

async def dispatch_rows(runner: HookRunner, rows: list, adapter: str, platform: str, post: Post,
                        answer: Callable[[dict, str, str], None]) -> list:
    """Each row as the plugins leave it: the row (its text rewritten, maybe), or None when a plugin dropped or
    answered it (``answer(source, text, message_id)`` sends the answer). Rows are looked at concurrently: a slow
    hook costs the round its bound once, not once per row."""
    if not rows or not runner.with_hook("before_dispatch"):
        runner.report_load_errors(post)
        return rows
    return list(await asyncio.gather(*(_dispatch_one(runner, row, adapter, platform, post, answer)
                                       for row in rows)))


async def _dispatch_one(runner: HookRunner, row, adapter: str, platform: str, post: Post, answer) -> Any:
    payload = row.payload
    if payload.get("internal"):
        return row             # the gateway's own event (a scheduled run): not a chat message
    source, text = payload["source"], payload.get("text") or ""
    for plugin in runner.with_hook("before_dispatch"):
        clean = runner.clean_for(plugin)
        event = InboundMessage(adapter, platform, str(source.get("chat_id")), source.get("chat_type") or "dm",
                               str(source.get("user_id") or ""), clean(source.get("user_name") or ""),
                               source.get("profile") or "", row.platform_message_id, clean(text),
                               len(payload.get("attachments") or ()))
        ok, verdict = await runner.run_one(plugin, "before_dispatch", event, post)
        if not ok or verdict is None:
            continue
        if isinstance(verdict, Rewrite) and isinstance(verdict.text, str):
            text = runner.redact_out(verdict.text)
        elif isinstance(verdict, Drop):
            return None
        elif isinstance(verdict, Answer) and isinstance(verdict.text, str):
            answer(source, runner.redact_out(verdict.text)[:MAX_ANSWER_CHARS], row.platform_message_id)
            return None
        else:
            runner.failed(post, plugin.name, "before_dispatch", "bad_answer",
                          f"returned {type(verdict).__name__}, not None, Rewrite, Drop or Answer; ignored")
    if text == (payload.get("text") or ""):
        return row
    return dataclasses.replace(row, payload={**payload, "text": text})


# -------------------------------------------------------------------------------------------- before_model_call

async def with_context(runner: HookRunner, session_key: str, request, post: Post):
    """The request with what the plugins add (a system message each, just before the user's message)."""
    plugins = runner.with_hook("before_model_call")
    runner.report_load_errors(post)
    if not plugins:
        return request
    added = []
    for plugin in plugins:
        clean = runner.clean_for(plugin)
        event = ModelCall(session_key, request.profile, request.turn_id, clean(request.last_user_text()),
                          len(request.messages))
        ok, context = await runner.run_one(plugin, "before_model_call", event, post)
        if ok and isinstance(context, str) and context.strip():
            added.append({"role": "system", "content": runner.redact_out(context)[:MAX_CONTEXT_CHARS]})
        elif ok and context is not None:
            runner.failed(post, plugin.name, "before_model_call", "bad_answer",
                          f"returned {type(context).__name__}, not a string; ignored")
    if not added:
        return request
    messages = list(request.messages)
    at = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=len(messages))
    messages[at:at] = added
    return dataclasses.replace(request, messages=type(request.messages)(messages))


# ------------------------------------------------------------------------------------------------- observers

def turn_record(session_key: str, turn, delivered: bool) -> Callable:
    source = turn.event.source
    calls = [e for e in turn.events if isinstance(e, ToolCallFinished)]
    return lambda clean: TurnRecord(
        session_key, source.profile, source.platform, str(source.chat_id), turn.turn_id, turn.kind,
        clean(turn.event.text), clean(turn.final_text or ""),
        tuple(ToolCall(c.name, clean(c.arguments), clean(c.result), c.ok) for c in calls), delivered)


def consumer_delivery(args: ConsumerArgs, text: str, message_ids: tuple) -> Callable:
    return lambda clean: Delivery(args.session_key, args.adapter, str(args.chat_id), args.thread_id,
                                  args.turn_id, clean(text), tuple(message_ids), "consumer")


def tell_delivered(config: dict, bridge, args: ConsumerArgs, text: str, message_ids: tuple) -> None:
    """The stream consumer's call: its reply was delivered."""
    hooks_for(config).fire(bridge, "on_delivery", consumer_delivery(args, text, message_ids))


def sweeper_delivery(obligation, chunks: list, parts: dict) -> Callable:
    t = obligation.target
    text = "\n".join(c for c in chunks if isinstance(c, str))
    return lambda clean: Delivery(obligation.session_key, t.platform, str(t.chat_id), t.thread_id, "",
                                  clean(text), tuple(parts[i] for i in sorted(parts)), "sweeper")


def tell_adapter_state(config: dict, bridge, adapter: str, settings: dict, connected: bool) -> None:
    """The adapter's call: its platform connection (``settings``: its [adapters.NAME] table) came up or went down."""
    platform = settings.get("type") or adapter
    hooks_for(config).fire(bridge, "on_adapter_state", lambda clean: AdapterState(adapter, platform, connected))
