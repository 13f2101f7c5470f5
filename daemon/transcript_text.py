"""A stored conversation as people read it (pure functions over ``storage.cli.session_show`` results).

``event_lines``: one event of ``sessions show``: when, who, what (a message whole, a tool call with its arguments,
a tool's result). ``markdown``: a whole transcript for ``sessions export --format markdown``, readable as it is and
rendered anywhere markdown is. Every text from a chat or a tool has its control characters made visible
(``escape_controls``, line by line): an escape sequence in a stored message must not drive the operator's terminal.
"""
from __future__ import annotations

import json
import time
from typing import Any

from common.redact import escape_controls

RESULT_SHOWN_CHARS = 2000    # of a tool's result in `sessions show` (the export keeps it whole)


def escape_lines(text: str) -> str:
    """``escape_controls`` line by line: the line breaks stay."""
    return "\n".join(escape_controls(line) for line in text.split("\n"))


def when(ts: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if isinstance(ts, (int, float)) and ts else "-"


def arguments_text(arguments: Any) -> str:
    """A tool call's arguments on one line: JSON as the model sent it (re-encoded compactly when it parses)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, ensure_ascii=False, separators=(", ", ": "))


def event_body(event: dict, result_chars: int | None = RESULT_SHOWN_CHARS) -> str:
    """What an event says: a message's text (and its error), a tool call as ``name(arguments)``, a tool's result
    (cut at ``result_chars``; None: whole)."""
    payload = event.get("payload")
    payload = payload if isinstance(payload, dict) else {"text": payload}
    kind = event.get("kind")
    if kind == "tool_call":
        return f"{payload.get('name') or '?'}({arguments_text(payload.get('arguments'))})"
    if kind == "tool_result":
        result = str(payload.get("result") or "")
        if result_chars is not None and len(result) > result_chars:
            result = result[:result_chars] + f"… ({len(result) - result_chars:,} more characters)"
        return f"{payload.get('name') or '?'} {'→' if payload.get('ok', True) else 'failed:'} {result}".rstrip()
    text = str(payload.get("text") or payload.get("name") or payload.get("result") or "").strip()
    if payload.get("error"):   # a failed turn's answer is often the error itself: said once
        text += "\n(error)" if str(payload["error"]).strip() == text else f"\n(error: {payload['error']})"
    return text.strip()


def event_lines(event: dict) -> list[str]:
    """One event of ``sessions show``: a head (number, time, role, kind) and the body under its start."""
    head = f"  #{event['seq']:<5} {when(event.get('created_at'))}  {event['role']:<9} {event['kind']:<11} "
    body = [escape_controls(line) for line in event_body(event).splitlines()] or [""]
    return [(head + body[0]).rstrip()] + [(" " * len(head) + line).rstrip() for line in body[1:]]


ROLE_TITLES = {"user": "User", "assistant": "Assistant", "tool": "Tool", "system": "System"}


def markdown(result: dict) -> str:
    """The whole conversation of a ``session_show`` result (every event) as a markdown document."""
    s = result["session"]
    lines = [f"# {escape_controls(s.get('title') or 'Conversation ' + s['short_id'])}", "",
             f"- session: `{s['session_id']}` ({s['state']})", f"- key: `{s['session_key']}`",
             f"- user: {escape_controls(s.get('user') or '?')}", f"- started: {when(s.get('created_at'))}",
             f"- last change: {when(s.get('updated_at'))}", f"- messages: {s.get('messages', 0)}", ""]
    for event in result["events"]:
        kind, role = event["kind"], event["role"]
        stamp = when(event.get("created_at"))
        if kind == "tool_call":
            payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
            lines += [f"**Tool call** `{escape_controls(str(payload.get('name') or '?'))}` · {stamp}", "",
                      fenced(arguments_text(payload.get("arguments")), "json"), ""]
        elif kind == "tool_result":
            payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
            outcome = "result" if payload.get("ok", True) else "failed"
            lines += [f"**Tool {outcome}** `{escape_controls(str(payload.get('name') or '?'))}` · {stamp}", "",
                      fenced(str(payload.get("result") or "")), ""]
        else:
            title = ROLE_TITLES.get(role, role.title()) + ("" if kind == "message" else f" ({kind})")
            lines += [f"## {title} · {stamp}", "", escape_lines(event_body(event, None)) or "_(empty)_", ""]
    return "\n".join(lines).rstrip() + "\n"


def fenced(text: str, language: str = "") -> str:
    """``text`` in a code fence longer than any run of backticks inside it (so it cannot close the fence)."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{escape_lines(text)}\n{fence}"
