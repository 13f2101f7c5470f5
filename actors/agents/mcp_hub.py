"""The MCP servers of one process, each held by a supervised task on the process's MCP thread (docs/mcp.md).

Where it runs: a session shard's agents share one event loop between every chat of the shard. An MCP server is a
subprocess or an HTTP connection whose calls may hang, so every server lives on a separate thread with its own
event loop (one per process, started on first use); the agent awaits a call through
``asyncio.run_coroutine_threadsafe`` and ``wait_for`` with the server's ``timeout_s``, so a hung server only ever
costs the one tool call that waits on it, never another chat's turn.

Supervision (a supervised task, not a child actor: a connection is a per-process resource the process's agents
share, like an HTTP client; an actor per server would put every call through a second mailbox for nothing): each
server's task is a small state machine

    starting --connected, tools listed--> ready --ping fails / a call finds the connection closed--> restarting
    restarting --backoff (``SERVER_RESTARTS``, common/backoff.py)--> starting        any --stop--> stopped

and while it is not ready its tools are kept as last listed but a call is answered, at once, that the server is
unavailable and why, so the model can tell the user or do without. Nothing of it is stored: after a kill -9 the
servers are started again by the first agent built in the new process (a stdio server's process is the daemon's
child and gets EOF on its stdin when the daemon dies).

``ensure`` applies a configuration: servers added are started, removed or changed ones stopped (``reload``).
"""
from __future__ import annotations

import asyncio
import base64
import logging
import os
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Mapping, Optional

from common.backoff import backoff_s
from common.mcp_config import McpServerSpec, server_specs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestartPolicy:
    """How a crashed server comes back: the backoff before restart number n is ``backoff_s(n, base_s, cap_s)``; the
    count goes back to zero once a server has stayed ready ``stable_s``."""
    base_s: float = 0.5
    cap_s: float = 30.0
    stable_s: float = 60.0
    ping_every_s: float = 2.0        # how often a ready server is asked whether it still answers
    connect_timeout_s: float = 30.0  # starting and listing tools must take no longer


SERVER_RESTARTS = RestartPolicy()
MAX_BINARY_BYTES = 20 * 1024 * 1024  # an image or file in a result larger than this is refused (base64 text bound)


class ServerUnavailable(Exception):
    pass


@dataclass
class ServerState:
    spec: McpServerSpec
    status: str = "starting"          # starting | ready | restarting | stopped
    tools: tuple = ()                 # of mcp.types.Tool, as last listed
    last_error: str = ""
    restarts: int = 0
    ready_since: float = 0.0
    calls_in_flight: int = 0          # made and not yet ended (bounded by the spec's max_calls_in_flight)

    def describe(self) -> dict:
        return {"name": self.spec.name, "transport": self.spec.transport, "status": self.status,
                "tools": [t.name for t in self.tools], "restarts": self.restarts, "last_error": self.last_error,
                "calls_in_flight": self.calls_in_flight}


class _Server:
    """One server's supervised task and its live session (only touched on the hub's loop)."""

    def __init__(self, spec: McpServerSpec, policy: RestartPolicy):
        self.state = ServerState(spec)
        self.policy = policy
        self.session = None
        self.broken = asyncio.Event()    # a call found the connection gone: restart without waiting for the ping
        # Set when the live session ends (a failed ping, the process gone, a stop): the calls still waiting on it
        # are answered then, not at their timeout (an HTTP server that went away never answers them at all).
        self.session_ended = asyncio.Event()
        self.settled = asyncio.Event()   # the first start ended: ready, or failed (then restarting)
        self.task: Optional[asyncio.Task] = None

    async def supervise(self) -> None:
        attempt = 0
        while True:
            self.state.status = "starting" if attempt == 0 else "restarting"
            try:
                await self._serve()
                error = "the connection ended"
            except asyncio.CancelledError:
                self.state.status, self.session = "stopped", None
                self.session_ended.set()
                raise
            except BaseException as exc:  # noqa: BLE001 - whatever ends a session, the server is restarted
                error = describe_error(exc)
            self.session = None
            self.state.last_error = error
            self.session_ended.set()      # its calls in flight end now, saying why
            self.settled.set()
            if self.state.ready_since and time.monotonic() - self.state.ready_since > self.policy.stable_s:
                attempt = 0
            attempt += 1
            self.state.restarts += 1
            self.state.status, self.state.last_error, self.state.ready_since = "restarting", error, 0.0
            delay = backoff_s(attempt, self.policy.base_s, self.policy.cap_s)
            log.warning("mcp server %s stopped (%s); restarting in %.1fs", self.state.spec.name, error, delay)
            await asyncio.sleep(delay)

    async def _serve(self) -> None:
        from mcp import ClientSession   # the SDK loads where agents run (the shards), not with the registry
        async with _transport(self.state.spec) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await asyncio.wait_for(session.initialize(), self.policy.connect_timeout_s)
                listed = await asyncio.wait_for(session.list_tools(), self.policy.connect_timeout_s)
                self.state.tools = tuple(listed.tools)
                self.session, self.state.status = session, "ready"
                self.session_ended = asyncio.Event()   # this session's: the calls made on it wait on it
                self.state.ready_since, self.state.last_error = time.monotonic(), ""
                self.broken.clear()
                self.settled.set()
                log.info("mcp server %s ready: %d tools", self.state.spec.name, len(self.state.tools))
                while True:
                    try:
                        await asyncio.wait_for(self.broken.wait(), self.policy.ping_every_s)
                        return
                    except asyncio.TimeoutError:
                        pass
                    await asyncio.wait_for(session.send_ping(), self.policy.ping_every_s * 2)

    async def call(self, tool: str, arguments: dict) -> Any:
        session, spec = self.session, self.state.spec
        if session is None or self.state.status != "ready":
            raise ServerUnavailable(self.unavailable_reason())
        if self.state.calls_in_flight >= spec.max_calls_in_flight:   # refused, not queued: said now, not at timeout
            raise ServerUnavailable(f"MCP server {spec.name!r} already has {self.state.calls_in_flight} calls in "
                                    "flight (its max_calls_in_flight); this call was not made, try again later")
        self.state.calls_in_flight += 1
        ended = self.session_ended
        answer = asyncio.ensure_future(
            session.call_tool(tool, arguments, read_timeout_seconds=timedelta(seconds=spec.timeout_s + 1)))
        session_over = asyncio.ensure_future(ended.wait())
        try:
            await asyncio.wait((answer, session_over), return_when=asyncio.FIRST_COMPLETED)
            if not answer.done():     # the session ended under the call: its answer will never come
                raise ServerUnavailable(f"MCP server {spec.name!r} stopped answering during the call (the connection "
                                        f"was lost: {self.state.last_error or 'it was stopped'}); it is being "
                                        "restarted")
            return answer.result()
        except (asyncio.CancelledError, ServerUnavailable):
            raise
        except Exception as exc:
            from mcp.shared.exceptions import McpError   # the SDK loads on the MCP thread (see _run_loop)
            said = str(exc).lower()
            if isinstance(exc, McpError) and "timed out" in said:
                raise asyncio.TimeoutError() from None    # the SDK's own bound (just past ours): a slow call
            if isinstance(exc, McpError) and "closed" not in said:
                raise     # the server answered with an error: it is alive
            self.broken.set()
            raise ServerUnavailable(f"MCP server {self.state.spec.name!r} stopped answering during the call "
                                    f"({describe_error(exc)}); it is being restarted") from None
        finally:
            answer.cancel()          # no-op when answered; else the call is dropped on the client's side
            session_over.cancel()
            self.state.calls_in_flight -= 1   # answered, failed or cancelled (its timeout, a cut turn): slot free

    def unavailable_reason(self) -> str:
        why = f" (last error: {self.state.last_error})" if self.state.last_error else ""
        return f"MCP server {self.state.spec.name!r} is {self.state.status}{why}; its tools are unavailable for now"


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return describe_error(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}"[:300]


def _transport(spec: McpServerSpec, environ=None):
    """The SDK's transport context for a server: yields (read stream, write stream, ...). ``environ``: where the
    variables that ``env`` and ``headers`` name are looked up (this process's environment by default)."""
    environ = os.environ if environ is None else environ
    if spec.transport == "stdio":
        # the SDK loads on the MCP thread (see _run_loop), never with the registry
        from mcp.client.stdio import StdioServerParameters, stdio_client
        missing = [variable for _, variable in spec.env if variable not in environ]
        if missing:
            raise ServerUnavailable(f"environment variable {missing[0]} (for env) is not set")
        # Only these variables (and the SDK's safe defaults: PATH, HOME, ...) reach the server: not the daemon's
        # secrets.
        env = {name: environ[variable] for name, variable in spec.env}
        return stdio_client(StdioServerParameters(command=spec.command, args=list(spec.args), env=env or None,
                                                  cwd=spec.cwd or None))
    from mcp.client.streamable_http import streamablehttp_client   # as above: loaded on the MCP thread
    missing = [variable for _, variable in spec.headers if variable not in environ]
    if missing:
        raise ServerUnavailable(f"environment variable {missing[0]} (for headers) is not set")
    headers = {header: environ[variable] for header, variable in spec.headers}
    return streamablehttp_client(spec.url, headers=headers or None, timeout=spec.timeout_s)


async def list_server_tools(spec: McpServerSpec, environ=None, timeout_s: float = 30.0) -> list:
    """Start (or connect to) a server once, list its tools and stop: ``doctor``'s check. Raises what went wrong."""
    from mcp import ClientSession   # the SDK loads only where it is used (doctor, the shards)

    async def listed() -> list:
        async with _transport(spec, environ) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                return list((await session.list_tools()).tools)
    return await asyncio.wait_for(listed(), timeout_s)


async def read_server_resource(spec: McpServerSpec, uri: str, max_bytes: int, environ=None) -> bytes:
    """Connect to a server once, read the resource ``uri`` and stop: a watch's look (actors/scheduling/watches.py).
    Its contents as bytes (texts as UTF-8, blobs decoded), at most ``max_bytes`` + 1 of them (the caller refuses a
    larger one). Raises what went wrong (the caller bounds the time)."""
    from mcp import ClientSession   # the SDK loads only where it is used
    from pydantic import AnyUrl

    async with _transport(spec, environ) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.read_resource(AnyUrl(uri))
    content = b""
    for part in result.contents:
        text = getattr(part, "text", None)
        content += text.encode("utf-8") if text is not None else base64.b64decode(getattr(part, "blob", "") or "")
        if len(content) > max_bytes:
            break
    return content[:max_bytes + 1]


class McpHub:
    """The process's MCP servers (see the module docstring). Thread-safe: ``ensure``, ``states`` and ``call`` may be
    used from any thread or loop."""

    def __init__(self, policy: RestartPolicy = SERVER_RESTARTS):
        self.policy = policy
        self._servers: dict[str, _Server] = {}
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._generation = -1
        self._applied: Optional[dict] = None    # the servers the last ensure asked for (applied on the MCP thread)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=_run_loop, args=(loop,), name="mcp-servers", daemon=True).start()
                self._loop = loop
            return self._loop

    def ensure(self, specs: dict[str, McpServerSpec], generation: int = 0) -> None:
        """Run exactly these servers (a configuration's): start the new, stop the removed and the changed. A
        configuration older than one applied already is ignored (a cell started before a reload)."""
        with self._lock:
            if generation < self._generation:
                return
            self._generation = generation
            if self._applied == specs:
                return
            self._applied = dict(specs)
        # Not waited for: the caller is a cell's handler on the shard, which must never wait on the MCP thread.
        asyncio.run_coroutine_threadsafe(self._apply(dict(specs)), self._ensure_loop())

    async def _apply(self, specs: dict[str, McpServerSpec]) -> None:
        for name in list(self._servers):
            if specs.get(name) != self._servers[name].state.spec:
                server = self._servers.pop(name)
                server.task.cancel()
                log.info("mcp server %s stopped (configuration)", name)
        for name, spec in specs.items():
            if name not in self._servers:
                server = _Server(spec, self.policy)
                server.task = asyncio.get_running_loop().create_task(server.supervise(), name=f"mcp-{name}")
                self._servers[name] = server

    async def settled(self, wanted: Callable[[str], bool], timeout_s: float) -> None:
        """Wait (from any loop), at most ``timeout_s``, until the first start of each server whose name ``wanted``
        takes has ended: so the first turn of a fresh process is offered the tools of servers that start quickly."""
        async def all_settled() -> None:
            # on the MCP thread: after any ensure submitted before (its servers exist), and the events are its loop's
            waiting = [server.settled.wait() for name, server in self._servers.items()
                       if wanted(name) and not server.settled.is_set()]
            if waiting:
                await asyncio.wait_for(asyncio.gather(*waiting), timeout_s)
        future = asyncio.run_coroutine_threadsafe(all_settled(), self._ensure_loop())
        try:
            await asyncio.wrap_future(future)
        except asyncio.TimeoutError:
            pass
        finally:
            future.cancel()

    def configured(self) -> bool:
        """Whether any configuration was applied here (servers run, or were asked for, in this process)."""
        with self._lock:
            return self._applied is not None

    def states(self) -> list[ServerState]:
        return [server.state for server in list(self._servers.values())]

    def state(self, name: str) -> Optional[ServerState]:
        server = self._servers.get(name)
        return server.state if server else None

    async def call(self, server_name: str, tool: str, arguments: dict) -> Any:
        """The server's ``CallToolResult``, awaited from any loop; bounded by the server's ``timeout_s``
        (asyncio.TimeoutError past it, the call cancelled on the MCP thread). ServerUnavailable when the server is
        not ready or breaks during the call; the SDK's McpError when the server answers with an error."""
        server = self._servers.get(server_name)
        if server is None:
            raise ServerUnavailable(f"MCP server {server_name!r} is not configured any more")
        future = asyncio.run_coroutine_threadsafe(server.call(tool, arguments), self._ensure_loop())
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), server.state.spec.timeout_s)
        finally:
            future.cancel()    # no-op when done; on a timeout or a cut turn, stops the call on the MCP thread


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    import mcp  # noqa: F401 - the SDK is large: loaded here, before the loop runs, not on it (nor on a shard's)
    loop.run_forever()


_HUB: Optional[McpHub] = None
_HUB_LOCK = threading.Lock()


def process_hub() -> McpHub:
    """This process's hub (one per process: its agents share the servers)."""
    global _HUB
    with _HUB_LOCK:
        if _HUB is None:
            _HUB = McpHub()
        return _HUB


def process_summary(config: Optional[Mapping] = None) -> Optional[str]:
    """This process's servers and their tools in one line, for ``tree`` and ``status`` (the shard's facts): e.g.
    ``files ready [read, list]; web restarting [search]``. A server ``config`` names that is not running here yet
    (they start with the process's first turn) is shown ``not started``; None when there is none of either."""
    running = {state.spec.name: state for state in (_HUB.states() if _HUB is not None else ())}
    configured = server_specs(config) if config else {}
    shown = [f"{name} {state.status} [{', '.join(t.name for t in state.tools)}]" for name, state in running.items()]
    shown += [f"{name} not started (with the first turn here)" for name in configured if name not in running]
    return "; ".join(sorted(shown)) or None


def apply_reload(config: Mapping) -> None:
    """A reload's servers, applied at once where servers run already (added ones start, removed or changed ones
    stop), so a chat's next turn, and ``tree``, see the new set; a process that has not started any waits for its
    first turn, as at start."""
    if _HUB is not None and _HUB.configured():
        _HUB.ensure(server_specs(config), int(config.get("_generation") or 0))


def result_parts(result: Any, max_chars: int) -> tuple[bool, str, list[tuple[bytes, str]]]:
    """(ok, text for the model bounded to ``max_chars``, [(bytes, file name)]) of a ``CallToolResult``."""
    texts, files = [], []
    for number, part in enumerate(result.content or ()):
        kind = getattr(part, "type", "")
        if kind == "text":
            texts.append(part.text)
        elif kind in ("image", "audio"):
            files.append(_binary(part.data, part.mimeType, f"{kind}-{number + 1}", texts))
        elif kind == "resource":
            resource = part.resource
            if getattr(resource, "blob", None) is not None:
                files.append(_binary(resource.blob, resource.mimeType or "", f"file-{number + 1}", texts))
            else:
                texts.append(getattr(resource, "text", "") or "")
        elif kind == "resource_link":
            texts.append(f"[resource: {part.uri}]")
    if not result.content and getattr(result, "structuredContent", None) is not None:
        texts.append(str(result.structuredContent))
    text = "\n".join(texts)
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[result cut: {len(text)} characters, only the first {max_chars} shown]"
    return not result.isError, text, [f for f in files if f is not None]


_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp",
               "audio/mpeg": "mp3", "audio/ogg": "ogg", "audio/wav": "wav", "application/pdf": "pdf"}


def _binary(data: str, mime: str, stem: str, notes: list) -> Optional[tuple[bytes, str]]:
    if len(data) > MAX_BINARY_BYTES * 4 // 3 + 4:
        notes.append(f"[{stem}: larger than {MAX_BINARY_BYTES // (1024 * 1024)} MB; not sent]")
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        notes.append(f"[{stem}: not valid base64; not sent]")
        return None
    return raw, f"{stem}.{_EXTENSIONS.get(mime, 'bin')}"
