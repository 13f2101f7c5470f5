"""The agent's ``create_watch`` tool, decided by the turn's session (task_tool.py, docs/background.md "Watches the
agent creates"): a public web page read every interval, whose change runs the watch's prompt as a turn of the chat
that created it, as a ``[watch.NAME]`` table's change does (actors/watcher.py reads the stored ones).

Bounds, from ``[agent_watches]``: at most ``max_per_chat`` watches per chat (a call past it is refused, and said
so), an interval of ``min_interval_s`` to 7 days, an http(s) URL whose host is not on a private network (an address
given is checked here; a name is resolved and checked at each read, on the watcher's thread), a prompt of at most
2,000 characters. A ``[watch.NAME]`` table's own bounds on the read (timeout, size, no redirects) hold too.

The chat sees its watches with ``/watches`` and stops one with ``/unwatch N`` (the row goes; the watcher stops
looking at it at its next read of the stored watches, within seconds).

What survives kill -9: the watch's row, written in the handler that records the call's result (task_tool.py).
"""
from __future__ import annotations

import ipaddress
import urllib.parse
from typing import Any

from actors.messages import MessageEvent
from actors.sessions.tasks import parse_number
from common.config import setting

MAX_PROMPT_CHARS = 2000
MAX_INTERVAL_S = 7 * 86400


def refusal(values: dict, min_interval_s: float, allow_private: bool) -> str:
    """Why the call's arguments make no watch ('' when they do)."""
    url, interval, prompt = values.get("url"), values.get("interval_s"), values.get("prompt")
    parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or len(url) > 2000:
        return "not created: 'url' must be an http:// or https:// URL with a host"
    if not allow_private and _private_literal(parts.hostname):
        return (f"not created: {parts.hostname!r} is on a private network; a watch reads public hosts only "
                f"(the gateway's [agent_watches] allow_private_hosts)")
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or \
            not min_interval_s <= interval <= MAX_INTERVAL_S:
        return f"not created: 'interval_s' must be {min_interval_s:g} to {MAX_INTERVAL_S} seconds, got {interval!r}"
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > MAX_PROMPT_CHARS:
        return f"not created: 'prompt' must be a non-empty string of at most {MAX_PROMPT_CHARS} characters"
    return ""


def _private_literal(host: str) -> bool:
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return not ipaddress.ip_address(host).is_global
    except ValueError:
        return False   # a name: resolved and checked at each read (actors/scheduling/watches.py)


def created_text(number: int, url: str, interval_s: float) -> str:
    return (f"Created watch #{number}: {url} is read every {interval_s:g}s; when it changed, the prompt runs in "
            f"this chat with what changed.")


def refused_text(count: int, limit: int) -> str:
    return (f"not created: this chat has {count} watch(es) and may have {limit} (the gateway's [agent_watches] "
            f"max_per_chat)")


def decide(session, event: MessageEvent, values: Any, origin_ref: str) -> tuple[bool, str, bool]:
    """Create the chat's watch for the call ``origin_ref``, in this handler: (ok, the call's result, whether the
    call created it before)."""
    config = session.config
    values = values if isinstance(values, dict) else {}
    why = refusal(values, max(1.0, setting(config, "agent_watches", "min_interval_s")),
                  setting(config, "agent_watches", "allow_private_hosts"))
    if why:
        return False, why, False
    limit = setting(config, "agent_watches", "max_per_chat")
    created = session.db(session.store.agent_watches.create(
        session.key, dict(vars(event.source)), values["url"], float(values["interval_s"]), values["prompt"].strip(),
        limit, origin_ref))
    if created.watch is None:
        return False, refused_text(created.count, limit), False
    watch = created.watch
    if not created.again:
        session.log.info("watch %s created by the agent (#%d of this chat)", watch.name, watch.number,
                         extra=session.log_fields())
    return True, created_text(watch.number, watch.target, watch.interval_s), created.again


# -------------------------------------------------------------------------------------- the chat's commands

def listing(watches: list) -> str:
    if not watches:
        return "The agent watches nothing for this chat (it can, with its create_watch tool, where offered)."
    lines = ["Pages the agent watches for this chat:"]
    lines += [f"#{w.number} {w.target} every {w.interval_s:g}s: \u201c{' '.join(w.prompt.split())[:80]}\u201d"
              for w in watches]
    lines.append("/unwatch N stops one.")
    return "\n".join(lines)


def show(session, command, seqs: list, event: MessageEvent) -> None:
    """``/watches``: the watches the agent created in this chat."""
    session.reply_turn(seqs, event, listing(session.db(session.store.agent_watches.of_chat(session.key))))


def unwatch(session, command, seqs: list, event: MessageEvent) -> None:
    """``/unwatch N``: the chat's watch #N goes (its row, in this handler's transaction)."""
    number = parse_number(command.args)
    if number is None:
        session.reply_turn(seqs, event, "Usage: /unwatch N \u2014 stops watch #N (/watches lists them).")
        return
    removed = session.db(session.store.agent_watches.remove(session.key, number))
    session.reply_turn(seqs, event, f"Stopped watch #{number} ({removed.target})." if removed is not None else
                       f"There is no watch #{number} in this chat; /watches lists them.")
