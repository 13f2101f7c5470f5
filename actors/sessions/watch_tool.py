"""The agent's ``create_watch`` tool, decided by the turn's session (task_tool.py, docs/background.md "Watches the
agent creates"): a public web page, or a resource of an MCP server the turn's profile offers, read every interval or
at the times of a cron schedule, whose change runs the watch's prompt as a turn of the chat that created it, as a
``[watch.NAME]`` table's change does (actors/watcher.py reads the stored ones).

Bounds, from ``[agent_watches]``: at most ``max_per_chat`` watches per chat (a call past it is refused, and said
so), an interval of ``min_interval_s`` to 7 days (a schedule firing no oftener than that), an http(s) URL whose host
is not on a private network (an address given is checked here; a name is resolved and checked at each read, on the
watcher's thread), a file only under the operator's ``file_roots`` (none by default: a chat must not read the
gateway's own files), a prompt of at most 2,000 characters. A ``[watch.NAME]`` table's own bounds on the read
(timeout, size, no redirects) hold too.

The chat sees its watches with ``/watches`` and stops one with ``/unwatch N`` (the row goes; the watcher stops
looking at it at its next read of the stored watches, within seconds).

What survives kill -9: the watch's row, written in the handler that records the call's result (task_tool.py).
"""
from __future__ import annotations

import ipaddress
import os
import re
import time
import urllib.parse
from typing import Any

from actors.messages import MessageEvent
from actors.scheduling.schedule import ScheduleError, parse_schedule
from actors.scheduling.watches import under_roots
from actors.sessions.tasks import parse_number
from common.config import setting
from common.mcp_config import server_specs
from storage import WatchAsked

MAX_PROMPT_CHARS = 2000
MAX_INTERVAL_S = 7 * 86400
RESOURCE_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$")


def refusal(values: dict, min_interval_s: float, allow_private: bool, servers=(), file_roots=()) -> str:
    """Why the call's arguments make no watch ('' when they do). ``servers``: the MCP servers whose resources the
    turn's profile may watch; ``file_roots``: the directories whose files the agent may watch."""
    url, server, resource = values.get("url"), values.get("mcp_server"), values.get("resource")
    interval, schedule, prompt = values.get("interval_s"), values.get("schedule"), values.get("prompt")
    path = values.get("file")
    if sum(x is not None for x in (url, server, path)) != 1:
        return ("not created: give one of 'url' (a web page), 'file' (a file) or 'mcp_server' and 'resource' "
                "(an MCP resource)")
    if path is not None:
        why = file_refusal(path, file_roots)
        if why:
            return why
    elif server is not None:
        if not isinstance(server, str) or server not in servers:
            return (f"not created: 'mcp_server' must be one of the MCP servers offered here "
                    f"({', '.join(sorted(servers)) or 'none'}), got {server!r}")
        if not isinstance(resource, str) or not RESOURCE_URI.match(resource) or len(resource) > 2000:
            return "not created: 'resource' must be the resource's URI (scheme://...)"
    else:
        parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or len(url) > 2000:
            return "not created: 'url' must be an http:// or https:// URL with a host"
        if not allow_private and _private_literal(parts.hostname):
            return (f"not created: {parts.hostname!r} is on a private network; a watch reads public hosts only "
                    f"(the gateway's [agent_watches] allow_private_hosts)")
    if schedule is not None:
        why = _schedule_refusal(schedule, values.get("timezone", "UTC"), min_interval_s)
        if why:
            return why
    elif isinstance(interval, bool) or not isinstance(interval, (int, float)) or \
            not min_interval_s <= interval <= MAX_INTERVAL_S:
        return f"not created: 'interval_s' must be {min_interval_s:g} to {MAX_INTERVAL_S} seconds, got {interval!r}"
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > MAX_PROMPT_CHARS:
        return f"not created: 'prompt' must be a non-empty string of at most {MAX_PROMPT_CHARS} characters"
    return ""


def file_refusal(path: Any, roots) -> str:
    """Why the agent may not watch ``path`` ('' when it may): an absolute path whose real path (links resolved)
    lies under one of the operator's ``[agent_watches] file_roots``. Checked again at each read (a link swapped
    since: actors/scheduling/watches.py)."""
    if not roots:
        return ("not created: this gateway lets the agent watch no files (its [agent_watches] file_roots names "
                "none)")
    if not isinstance(path, str) or not os.path.isabs(path) or len(path) > 4000:
        return "not created: 'file' must be an absolute path"
    if not under_roots(path, roots):
        return f"not created: {path!r} is not under the directories this gateway lets the agent watch"
    return ""


def _schedule_refusal(schedule: Any, timezone: Any, min_interval_s: float) -> str:
    """A cron schedule the agent gives: one that fires, no oftener than the shortest interval allowed."""
    if not isinstance(schedule, str) or not isinstance(timezone, str) or len(schedule) > 200:
        return "not created: 'schedule' must be a cron expression (and 'timezone' a time zone name)"
    now = time.time()
    try:
        parsed = parse_schedule(schedule, timezone, now)
    except ScheduleError as exc:
        return f"not created: 'schedule': {exc}"
    first = parsed.next_after(now)
    second = parsed.next_after(first) if first is not None else None
    if second is not None and second - first < min_interval_s:
        return (f"not created: 'schedule' fires every {second - first:g}s; the shortest allowed is "
                f"{min_interval_s:g}s (the gateway's [agent_watches] min_interval_s)")
    return ""


def _private_literal(host: str) -> bool:
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return not ipaddress.ip_address(host).is_global
    except ValueError:
        return False   # a name: resolved and checked at each read (actors/scheduling/watches.py)


def offered_servers(config: dict, choice) -> list[str]:
    """The configured MCP servers a profile offers (its ``mcp`` ToolChoice; every one when it names none)."""
    configured = sorted(server_specs(config))
    return configured if choice is None or choice.servers is None else [s for s in configured
                                                                        if s in choice.servers]


def read_when(watch) -> str:
    return (f"at the times of {watch.schedule!r} ({watch.timezone})" if watch.schedule else
            f"every {watch.interval_s:g}s")


def what(watch) -> str:
    return f"{watch.target} of MCP server {watch.server}" if watch.kind == "mcp" else watch.target


def created_text(watch) -> str:
    return (f"Created watch #{watch.number}: {what(watch)} is read {read_when(watch)}; when it changed, the prompt "
            f"runs in this chat with what changed.")


def refused_text(count: int, limit: int) -> str:
    return (f"not created: this chat has {count} watch(es) and may have {limit} (the gateway's [agent_watches] "
            f"max_per_chat)")


def decide(session, event: MessageEvent, values: Any, origin_ref: str) -> tuple[bool, str, bool]:
    """Create the chat's watch for the call ``origin_ref``, in this handler: (ok, the call's result, whether the
    call created it before)."""
    config = session.config
    values = values if isinstance(values, dict) else {}
    why = refusal(values, max(1.0, setting(config, "agent_watches", "min_interval_s")),
                  setting(config, "agent_watches", "allow_private_hosts"),
                  offered_servers(config, session.profiles.get(event.source.profile).mcp),
                  setting(config, "agent_watches", "file_roots"))
    if why:
        return False, why, False
    limit = setting(config, "agent_watches", "max_per_chat")
    kind = "file" if values.get("file") else "mcp" if values.get("mcp_server") else "url"
    asked = WatchAsked(values.get("url") or values.get("file") or values["resource"],
                       float(values.get("interval_s") or 0.0), values["prompt"].strip(),
                       values.get("mcp_server") or "", values.get("schedule") or "", values.get("timezone") or "UTC",
                       kind)
    created = session.db(session.store.agent_watches.create(session.key, dict(vars(event.source)), asked, limit,
                                                            origin_ref))
    if created.watch is None:
        return False, refused_text(created.count, limit), False
    watch = created.watch
    if not created.again:
        session.log.info("watch %s created by the agent (#%d of this chat)", watch.name, watch.number,
                         extra=session.log_fields())
    return True, created_text(watch), created.again


# -------------------------------------------------------------------------------------- the chat's commands

def listing(watches: list) -> str:
    if not watches:
        return "The agent watches nothing for this chat (it can, with its create_watch tool, where offered)."
    lines = ["What the agent watches for this chat:"]
    lines += [f"#{w.number} {what(w)} {read_when(w)}: \u201c{' '.join(w.prompt.split())[:80]}\u201d"
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
