"""The ``[watch.NAME]`` tables: each a URL or a file looked at every ``interval_s``, whose change starts a turn in a
chat (docs/background.md, "Watches"). Pure: the configuration in, checked watches out (a ``ConfigError`` naming the
key otherwise, so the launcher exits 78); the bounded read of a target; the short description of a change; the
inbox row a change puts in its conversation's inbox.

    [watch.status-page]
    kind = "url"                    # url | file | mcp
    target = "https://example.com/status.txt"   # http(s) URL; an absolute file path for kind = "file"; a
                                    # resource's URI for kind = "mcp" (with server = "NAME", an [mcp.NAME] server)
    interval_s = 60                 # how often it is looked at (at least 1)
    schedule = "0 9 * * 1-5"        # or: looked at at the times of a cron schedule (instead of every interval_s)
    timezone = "UTC"                # the schedule's
    prompt = "The status page changed; tell me what it means."
    adapter = "telegram"            # where the answer goes, as for [cron.NAME]: adapter, chat, chat_type, thread
    chat = "123456789"
    profile = "default"
    timeout_s = 10                  # a URL's whole fetch (1..60)
    max_bytes = 262144              # the most content read (1..16 MiB); a larger target is refused, not cut
    enabled = true

An MCP resource is read (``resources/read``) over a session opened for that look and closed after it: a server
that hangs or is gone costs that look only, refused and said once.

A URL is fetched with GET, no redirects followed (a 3xx is refused: a redirect could lead anywhere, a ``file:`` URL
included), http and https only. The first look at a target only records it; a later look whose content hash differs
from the stored one is a change.
"""
from __future__ import annotations

import asyncio
import difflib
import hashlib
import http.client
import ipaddress
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from actors.messages import MessageEvent, Source
from actors.scheduling.jobs import KEYS as JOB_KEYS
from actors.scheduling.jobs import (CHAT_KEYS, REQUIRED, _value_errors, chat_source, each_table,
                                   typed_values)
from actors.scheduling.schedule import Schedule, ScheduleError, parse_schedule
from common.config import ConfigError, did_you_mean, raise_gathered, setting
from common.mcp_config import server_specs
from storage import InboundItem, WATCH_PLATFORM, session_key

KINDS = ("url", "file", "mcp")
MAX_BYTES_LIMIT = 16 * 1024 * 1024
DIFF_CHARS = 1500          # the most of a change's description put in the prompt
KEYS: dict[str, tuple] = {
    "kind": ((str,), REQUIRED),
    "target": ((str,), REQUIRED),
    "interval_s": ((int, float), 60),
    "timeout_s": ((int, float), 10),
    "max_bytes": ((int,), 256 * 1024),
    "server": ((str,), ""),            # kind "mcp": the [mcp.NAME] server whose resource ``target`` is read
    "schedule": ((str,), ""),          # "": every interval_s; else the cron times it is looked at
    "timezone": ((str,), "UTC"),
    **{key: JOB_KEYS[key] for key in CHAT_KEYS},   # prompt, adapter, chat... as a [cron.NAME] table's
}


@dataclass(frozen=True)
class Watch:
    name: str
    kind: str
    target: str
    interval_s: float
    prompt: str
    adapter: str
    chat: str
    profile: str = "default"
    chat_type: str = "dm"
    thread: Optional[str] = None
    timeout_s: float = 10.0
    max_bytes: int = 256 * 1024
    enabled: bool = True
    schedule: Optional[Schedule] = None   # looked at at its times, instead of every interval_s
    key: Optional[str] = None        # a watch the agent created: its chat's conversation key, as it was then
    public_only: bool = False        # a watch the agent created: a host on a private network is refused
    server: Any = None               # kind "mcp": the McpServerSpec of the server whose resource is read
    server_name: str = ""            # kind "mcp": its name (a stored watch's server may be gone from the config)
    file_roots: tuple = ()           # a file watch the agent created: read only while its real path is under these

    def source(self) -> Source:
        return chat_source(f"watch:{self.name}", self)

    def session_key(self) -> str:
        """The conversation a change joins: the chat's (or its thread's), as a cron run's; or the one the agent
        created the watch in."""
        return self.key or session_key(self.source())


def under_roots(path: str, roots) -> bool:
    """Whether ``path``'s real path (links resolved) lies under one of ``roots``."""
    real = os.path.realpath(path)
    return any(os.path.commonpath([real, os.path.realpath(root)]) == os.path.realpath(root) for root in roots)


def stored_watch(row, allow_private: bool = False, servers: Optional[Mapping] = None, file_roots=()) -> Watch:
    """A watch the agent created (storage/agent_watches.py) as the watcher reads it: a URL (its host checked at each
    read unless private hosts are allowed), a file (read only while under ``file_roots``) or an MCP server's
    resource (``servers``: the configured ones by name; a server no longer configured is refused at each look, said
    so), into the chat's own conversation (its key as it was when created), every interval or on its schedule."""
    source, kind = row.source, getattr(row, "kind", "url")
    server = (servers or {}).get(row.server) if kind == "mcp" else None
    schedule = None
    if getattr(row, "schedule", ""):
        try:
            schedule = parse_schedule(row.schedule, row.timezone)
        except ScheduleError:
            schedule = None   # checked when created; a time zone gone from the system since: its interval then
    return Watch(row.name, kind, row.target, row.interval_s or 3600.0, row.prompt, str(source.get("platform", "")),
                 str(source.get("chat_id", "")), source.get("profile") or "default", source.get("chat_type") or "dm",
                 source.get("thread_id"), schedule=schedule, key=row.session_key, public_only=not allow_private,
                 server=server, server_name=getattr(row, "server", ""),
                 file_roots=tuple(file_roots) if kind == "file" else ())


def agent_watches_offered(config: Mapping) -> bool:
    """Whether a profile offers create_watch: the watcher runs then, for the watches the agent creates."""
    return any("create_watch" in ((table or {}).get("agent") or {}).get("tools", ())
               for table in (config.get("profiles") or {}).values() if isinstance(table, dict))


class ReadRefused(Exception):
    """A target that could not be read, or was refused (too large, a redirect, an error status); the message says
    which. No change is claimed for it: the next look tries again."""


def validate_watches(config: Mapping) -> dict[str, Watch]:
    """Every ``[watch.NAME]`` table as a Watch, in name order; one ConfigError naming every bad key of every watch."""
    return each_table(config, "watch", "a watch", "status-page", lambda file, name, table, adapters, profiles:
                      _watch(file, name, table, adapters, profiles, config))


def _watch(file: str, name: str, table: Any, adapters: Mapping, profiles: set, config: Mapping) -> Watch:
    where = f"[watch.{name}]"
    values = typed_values(file, where, table, KEYS, "a watch needs kind, target, prompt, adapter and chat")
    errors = _value_errors(file, where, dict(values, catch_up="latest"), adapters, profiles,
                            setting(config, "gateway", "max_text_chars"))
    errors += _target_errors(file, where, values)
    server = None
    if values["kind"] == "mcp":
        server = server_specs(config, file).get(values["server"])
        if server is None:
            known = sorted(server_specs(config, file))
            errors.append(ConfigError(file, f"{where} server", f"a mcp watch names a configured [mcp.NAME] server, "
                                                               f"got {values['server']!r}; configured: "
                                                               f"{', '.join(known) or 'none'}"))
    schedule = None
    if values["schedule"]:
        try:
            schedule = parse_schedule(values["schedule"], values["timezone"], time.time())
        except ScheduleError as exc:
            errors.append(ConfigError(file, f"{where} schedule", str(exc)))
    raise_gathered(errors)
    thread = str(values["thread"]) if str(values["thread"]) != "" else None
    return Watch(name, values["kind"], values["target"], float(values["interval_s"]), values["prompt"],
                 values["adapter"], str(values["chat"]), values["profile"], values["chat_type"], thread,
                 float(values["timeout_s"]), values["max_bytes"], values["enabled"], schedule, server=server)


def next_look_at(watch: Watch, now: float) -> float:
    """When a watch looked at ``now`` (wall-clock seconds) is looked at next: the schedule's next time, or the
    interval later; a schedule with no time left, never (infinity)."""
    if watch.schedule is None:
        return now + watch.interval_s
    due = watch.schedule.next_after(now)
    return float("inf") if due is None else due


def _target_errors(file: str, where: str, values: Mapping) -> list[ConfigError]:
    errors = []
    kind, target = values["kind"], values["target"]
    if kind not in KINDS:
        errors.append(ConfigError(file, f"{where} kind", f"must be one of {', '.join(map(repr, KINDS))}, got "
                                                         f"{kind!r}{did_you_mean(kind, KINDS)}"))
    elif kind == "url":
        parts = urllib.parse.urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            errors.append(ConfigError(file, f"{where} target", f"a url watch takes an http:// or https:// URL "
                                                               f"with a host, got {target!r}"))
    elif kind == "mcp":
        if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$", target):
            errors.append(ConfigError(file, f"{where} target", f"a mcp watch takes the resource's URI (e.g. "
                                                               f"file:///notes.txt, status://board), got {target!r}"))
    elif not os.path.isabs(target):
        errors.append(ConfigError(file, f"{where} target", f"a file watch takes an absolute path, got {target!r}"))
    if not 1 <= values["interval_s"] <= 7 * 86400:
        errors.append(ConfigError(file, f"{where} interval_s", f"must be 1 to 604800 seconds, got "
                                                               f"{values['interval_s']!r}"))
    if not 1 <= values["timeout_s"] <= 60:
        errors.append(ConfigError(file, f"{where} timeout_s", f"must be 1 to 60 seconds, got {values['timeout_s']!r}"))
    if not 1 <= values["max_bytes"] <= MAX_BYTES_LIMIT:
        errors.append(ConfigError(file, f"{where} max_bytes", f"must be 1 to {MAX_BYTES_LIMIT} bytes, got "
                                                              f"{values['max_bytes']!r}"))
    return errors


# ------------------------------------------------------------------------------------------------------- reading
class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Every 3xx stays an HTTPError: a redirect could lead anywhere (another host, a ``file:`` URL)."""
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None

    def http_error_302(self, req, fp, code, msg, headers):
        return None

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


_OPENER = urllib.request.build_opener(_NoRedirects())


def read_target(watch: Watch) -> bytes:
    """The target's content, at most ``max_bytes``; ReadRefused saying why not. Blocks up to ``timeout_s`` (a URL)."""
    if watch.kind == "file":
        if watch.key is not None and not under_roots(watch.target, watch.file_roots):
            raise ReadRefused(f"{watch.target} is not under the directories the agent may watch ([agent_watches] "
                              f"file_roots): not read")
        try:
            with open(watch.target, "rb") as handle:
                content = handle.read(watch.max_bytes + 1)
        except OSError as exc:
            raise ReadRefused(f"cannot read {watch.target}: {exc.strerror or exc}") from None
    elif watch.kind == "mcp":
        content = _read_resource(watch)
    else:
        if watch.public_only:
            refusal = private_host_refusal(watch.target)
            if refusal:
                raise ReadRefused(refusal)
        try:
            deadline = time.monotonic() + watch.timeout_s
            with _OPENER.open(urllib.request.Request(watch.target, method="GET"), timeout=watch.timeout_s) as reply:
                content = _read_until(reply, watch.max_bytes + 1, deadline, watch)
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                where = (exc.headers.get("Location") or "")[:200] if exc.headers else ""
                raise ReadRefused(f"HTTP {exc.code}: a redirect (to {where!r}) is not followed") from None
            raise ReadRefused(f"HTTP {exc.code} from {watch.target}") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            raise ReadRefused(f"cannot fetch {watch.target}: {getattr(exc, 'reason', exc)}") from None
    if len(content) > watch.max_bytes:
        raise ReadRefused(f"{watch.target} is larger than max_bytes ({watch.max_bytes:,}); refused, not cut")
    return content


def _read_resource(watch: Watch) -> bytes:
    """An MCP server's resource (kind "mcp"): a session of its own for this look, on this thread's own loop, so a
    slow or dead server costs this look only (the watcher reads on a thread: actors/watcher.py)."""
    from actors.agents.mcp_hub import describe_error, read_server_resource   # the SDK loads only for such a watch
    if watch.server is None:
        raise ReadRefused(f"MCP server {watch.server_name!r} is not configured (any more): {watch.target} is not read")

    async def read() -> bytes:
        return await asyncio.wait_for(read_server_resource(watch.server, watch.target, watch.max_bytes),
                                      watch.timeout_s)
    try:
        return asyncio.run(read())
    except asyncio.TimeoutError:
        raise ReadRefused(f"MCP server {watch.server.name!r} did not give {watch.target} within "
                          f"{watch.timeout_s:g}s") from None
    except Exception as exc:  # noqa: BLE001 - whatever the server or the SDK raised: this look is refused, said why
        raise ReadRefused(f"cannot read {watch.target} from MCP server {watch.server.name!r}: "
                          f"{describe_error(exc)}") from None


def private_host_refusal(url: str, resolve=socket.getaddrinfo) -> str:
    """Why the URL's host may not be read for a watch the agent created ('' when it may): an address that is not
    global (loopback, private, link-local, reserved), given or resolved. Resolved again by the fetch itself, so a
    name whose address changes in between (DNS rebinding) is not excluded by this alone."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        addresses = {info[4][0] for info in resolve(host, None)}
    except (OSError, UnicodeError) as exc:
        return f"cannot resolve {host!r}: {exc}"
    for address in sorted(addresses):
        try:
            ip = ipaddress.ip_address(address.split("%")[0])
        except ValueError:
            return f"{host!r} resolves to {address!r}, not an address"
        if not ip.is_global:
            return f"{host!r} is on a private network ({address}): a watch the agent created reads public hosts only"
    return ""


def _read_until(reply, limit: int, deadline: float, watch: Watch) -> bytes:
    """At most ``limit`` bytes of ``reply``, by chunks, within ``deadline``: the socket's timeout bounds each wait,
    not a server that drips a byte at a time."""
    chunks, size = [], 0
    while size < limit:
        if time.monotonic() > deadline:
            raise ReadRefused(f"{watch.target} took longer than timeout_s ({watch.timeout_s:g}s)")
        chunk = reply.read1(min(65536, limit - size))   # what has arrived: read() would wait for the whole size
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def content_hash(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def describe_change(before: Optional[bytes], after: bytes, limit: int = DIFF_CHARS) -> str:
    """A short text diff of the change (at most ``limit`` characters), or its sizes when it is not text."""
    try:
        old, new = (before or b"").decode("utf-8"), after.decode("utf-8")
    except UnicodeDecodeError:
        return f"binary content changed ({len(before or b''):,} -> {len(after):,} bytes)"
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=1))
    text = "\n".join(lines[2:]) or "(whitespace only)"
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit:,} more characters)"


def change_id(watch: str, number: int) -> str:
    """The id of a watch's change number ``number`` (counted in storage, never reused)."""
    return f"{watch}:change:{number}"


def change_item(watch: Watch, number: int, description: str, now: float) -> InboundItem:
    """The inbox row of one change: the watch's prompt and what changed, as an internal event of its conversation.
    Its message id is the change's id, so the same change put twice is one row (the inbox's dedup)."""
    ident = change_id(watch.name, number)
    text = f"{watch.prompt}\n\n[watch {watch.name}: {watch.target} changed]\n{description}"
    event = MessageEvent(source=watch.source(), text=text, platform_message_id=ident, received_at=now, internal=True)
    return InboundItem(watch.session_key(), WATCH_PLATFORM, ident, event.to_payload())
