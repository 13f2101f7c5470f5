"""A streaming client for OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, OpenRouter, llama.cpp).

One request per model step: POST {base_url}/chat/completions with stream=true, read the SSE chunks, turn content
into TextDelta and tool-call fragments into ToolCallStarted/ToolCallDelta. When the model asks for tools, run them
through the registry, append the assistant and tool messages, and ask again (at most ``max_tool_rounds`` times).
A call the turn's guard holds (``AgentRequest.approvals``, docs/approvals.md) is not run: the run ends with an
``ApprovalNeeded`` and ``TurnEnd(reason="awaiting_approval")``; the turn goes on later from ``AgentRequest.open_step``.

Retries (connection errors, 429, 5xx; Retry-After honoured) happen only while nothing of that request has been
yielded: once output began, a retry would show the user the same words twice.

Two time bounds: ``first_token_timeout_s`` from sending a request to the first chunk of its answer (any chunk of
the stream, a role-only or reasoning one too; keep-alive comments are not an answer), and ``idle_timeout_s``
(``timeout_s``) for silence once the answer flows. A hung service is given up on after the first, not the second.
While a request waits for its first output, a ``WaitingForModel`` goes out every ``wait_hint_s``: the chat shows
that the answer is still coming.

Token counts: every request asks for them (``stream_options: {"include_usage": true}``, a last chunk with ``usage``
and no choices); the turn's sums travel in its TurnEnd for the log. A service that refuses the option (HTTP 400 or
422, as older servers do for a field they do not know) is asked again without it, and never again by this agent.

Long because: one model request's whole life (the retries, both time bounds, the stream's steps, the tool rounds,
the token counts) reads top to bottom in one place; split, each part would need the others' state.
"""
from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Optional

import aiohttp
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from actors.agents.base import AgentError, AgentRequest, OpenStep, StreamEvent, endpoint_name, take_steer_messages
from actors.agents.sse import DONE, iter_sse_payloads
from actors.agents.tools import ToolRegistry, default_registry
from actors.messages import (AWAITING_APPROVAL, TOKEN_LIMIT, ApprovalNeeded, GatewayNotice, LongToolHint, TextDelta,
                             ToolCallDelta, ToolCallFinished, ToolCallStarted, TurnEnd, WaitingForModel)
from common.backoff import backoff_s
from common.chat_errors import failure_kind
from common.redact import redact

__all__ = ["AgentError", "OpenAICompatAgent"]

log = logging.getLogger(__name__)

_MESSAGE_CHARS = 200
# From a request sent to the first chunk of its answer. Hosted services send their first chunk within a second or
# two, a local server loading a cold model within ~20 s; past 30 s the service is taken for hung, and the chat is
# told at once instead of after the whole-answer bound (timeout_s, 120 s). A model that thinks for longer without
# streaming anything (a service that sends no reasoning chunks, a large prompt on a CPU) needs it raised.
FIRST_TOKEN_TIMEOUT_S = 30.0
# A connect timeout is a connection failure (retry); a read timeout is a slow model (don't). aiohttp < 3.10 lacks it.
_CONNECT_TIMEOUT = getattr(aiohttp, "ConnectionTimeoutError", ())


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS - 1] + "…"


class _NoFirstToken(Exception):
    """The first-token bound passed (``_first_token_bound``): told apart from aiohttp's own timeouts."""


@contextlib.asynccontextmanager
async def _first_token_bound(first_by: Optional[float]) -> AsyncIterator[None]:
    """Raise _NoFirstToken when the loop time ``first_by`` passes inside (None: no bound)."""
    bound = asyncio.timeout_at(first_by)
    try:
        async with bound:
            yield
    except TimeoutError:
        if bound.expired():
            raise _NoFirstToken() from None
        raise


class _UsageRefused(Exception):
    """The service refused a request that asked for token counts (stream_options): ask again without."""

    def __init__(self, error: AgentError):
        super().__init__(error.message)
        self.error = error


class _Retryable(Exception):
    def __init__(self, error: AgentError, retry_after: Optional[float] = None):
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after


def parse_retry_after(headers: Any) -> Optional[float]:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), if present."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


@dataclass
class _Call:
    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""
    started: bool = False


@dataclass
class _Step:
    """What one model request produced."""
    label: str
    text: str = ""
    calls: dict = field(default_factory=dict)          # index -> _Call
    finish_reason: Optional[str] = None
    done: bool = False
    tokens: Optional[tuple] = None                     # (prompt, completion) from the last usage seen

    def feed(self, chunk: dict) -> list[StreamEvent]:
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            code = error.get("code") if isinstance(error, dict) else None
            raise AgentError(f"model error: {_short(message)}", code if isinstance(code, int) else None)
        self.tokens = _tokens(chunk.get("usage")) or self.tokens
        choices = _choices(chunk)
        if not choices:                                   # usage-only chunks, heartbeats
            return []
        choice = next((c for c in choices if c.get("index", 0) == 0), choices[0])
        delta = choice.get("delta") or choice.get("message") or {}
        events: list[StreamEvent] = []
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text += content
            events.append(TextDelta(content))
        for position, fragment in enumerate(delta.get("tool_calls") or []):
            events.extend(self._feed_tool_call(position, fragment))
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        return events

    def _feed_tool_call(self, position: int, fragment: dict) -> list[StreamEvent]:
        index = fragment.get("index")
        index = index if isinstance(index, int) else position
        call = self.calls.setdefault(index, _Call(index))
        call.id = call.id or fragment.get("id") or ""
        function = fragment.get("function") or {}
        name = function.get("name")
        if name and not call.started:
            call.name = name if not call.name or name == call.name else call.name + name
        arguments = function.get("arguments")
        if isinstance(arguments, (dict, list)):              # some servers send the object itself
            arguments = json.dumps(arguments)
        arguments = arguments if isinstance(arguments, str) else ""
        events: list[StreamEvent] = []
        if not call.started and call.name:
            events.extend(self._start(call))
        call.arguments += arguments
        if call.started and arguments:
            events.append(ToolCallDelta(call.id, arguments))
        return events

    def _start(self, call: _Call) -> list[StreamEvent]:
        call.started = True
        call.id = call.id or f"call_{self.label}_{call.index}"
        events: list[StreamEvent] = [ToolCallStarted(call.id, call.name or "unknown")]
        if call.arguments:                        # fragments that came before the name
            events.append(ToolCallDelta(call.id, call.arguments))
        return events

    def finish(self) -> list[StreamEvent]:
        return [e for call in self.calls.values() if not call.started for e in self._start(call)]

    def assistant_message(self) -> dict:
        return {"role": "assistant", "content": self.text or None,
                "tool_calls": [{"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                               for c in self.ordered_calls()]}

    def ordered_calls(self) -> list[_Call]:
        return [self.calls[i] for i in sorted(self.calls)]


def _tokens(usage: Any) -> Optional[tuple]:
    """(prompt, completion) tokens of a ``usage`` object, None when it has no such counts."""
    if not isinstance(usage, dict):
        return None
    counts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    if not any(isinstance(n, int) and not isinstance(n, bool) for n in counts):
        return None
    return tuple(n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0 for n in counts)


def over_budget(tokens: Optional[tuple], budget: Optional[int]) -> bool:
    """Whether a run's tokens so far (prompt, completion) reached its budget (None: no bound, or none counted)."""
    return budget is not None and tokens is not None and sum(tokens) >= budget


def _added_tokens(total: Optional[tuple], step: Optional[tuple]) -> Optional[tuple]:
    if step is None:
        return total
    return step if total is None else (total[0] + step[0], total[1] + step[1])


def _choices(payload: Any) -> list[dict]:
    return [c for c in (payload.get("choices") or []) if isinstance(c, dict)] if isinstance(payload, dict) else []


def _is_output(payload: Any) -> bool:
    """Whether a chunk carries something the user would see, or an error: the point of no retry."""
    if not isinstance(payload, dict):
        return False
    deltas = [c.get("delta") or c.get("message") or {} for c in _choices(payload)]
    return bool(payload.get("error")) or any(d.get("content") or d.get("tool_calls") for d in deltas)


def _is_finished(payload: Any) -> bool:
    return payload is DONE or any(c.get("finish_reason") for c in _choices(payload))


class _Response:
    """An open response whose first chunks (up to the first output) were read while retrying was still safe."""

    def __init__(self, response: aiohttp.ClientResponse):
        self.response = response
        self.buffered: list[Any] = []
        if response.content_type == "application/json":   # a server that ignored stream=true
            self._payloads = self._whole_json()
        else:
            self._payloads = iter_sse_payloads(response.content.iter_any())

    async def _whole_json(self) -> AsyncIterator[Any]:
        try:
            body = await self.response.json(content_type=None)
        except ValueError:
            raise AgentError("the model service answered with invalid JSON") from None
        for choice in _choices(body):
            for position, call in enumerate((choice.get("message") or {}).get("tool_calls") or []):
                call.setdefault("index", position)
        yield body
        yield DONE

    async def prime(self, first_by: Optional[float] = None) -> bool:
        """Read up to the first output or the end. False: the stream ended having said nothing at all.
        ``first_by``: the loop time by which the first payload must have come (else TimeoutError)."""
        if first_by is not None:
            try:
                async with _first_token_bound(first_by):
                    first = await anext(self._payloads)
            except StopAsyncIteration:
                return False
            self.buffered.append(first)
            if _is_output(first) or first is DONE:
                return True
        async for payload in self._payloads:
            self.buffered.append(payload)
            if _is_output(payload) or payload is DONE:
                return True
        return any(_is_finished(p) for p in self.buffered)       # an empty answer is still an answer

    async def payloads(self) -> AsyncIterator[Any]:
        while self.buffered:
            yield self.buffered.pop(0)
        async for payload in self._payloads:
            yield payload

    async def close(self) -> None:
        await self._payloads.aclose()
        self.response.close()


def _connection_error(exc: BaseException, idle_timeout_s: float, output_started: bool) -> AgentError:
    if isinstance(exc, TimeoutError) and not isinstance(exc, _CONNECT_TIMEOUT):
        where = "mid-answer" if output_started else "before answering"
        return AgentError(f"the model service sent nothing for {idle_timeout_s:g}s {where}", reason="timeout")
    if output_started:
        return AgentError(f"the model stream broke off mid-answer ({type(exc).__name__}: {_short(exc)})",
                          reason="broken")
    # A connect timeout too: nothing answered at that address, as with a refused connection.
    return AgentError(f"cannot reach the model service ({type(exc).__name__}: {_short(exc)})",
                      reason="dns" if failure_kind(exc) == "dns" else "unreachable")


class OpenAICompatAgent:
    supports_steer = True

    def __init__(self, base_url: str, model: str, api_key: Optional[str] = None, *,
                 registry: Optional[ToolRegistry] = None, system_prompt: Optional[str] = None,
                 connect_timeout_s: float = 10.0, idle_timeout_s: float = 120.0, max_tool_rounds: int = 5,
                 max_attempts: int = 4, retry_base_s: float = 0.5, retry_max_wait_s: float = 30.0,
                 long_tool_hint_s: float = 5.0, extra_body: Optional[dict] = None,
                 extra_headers: Optional[dict] = None, first_token_timeout_s: float = FIRST_TOKEN_TIMEOUT_S,
                 wait_hint_s: float = 5.0):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.endpoint = endpoint_name(model, base_url)    # how status names it (actors/sessions/model_health.py)
        self.registry = registry if registry is not None else default_registry()
        self.system_prompt = system_prompt
        self.connect_timeout_s = connect_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.first_token_timeout_s = first_token_timeout_s    # 0: none (then idle_timeout_s bounds the wait too)
        self.wait_hint_s = wait_hint_s
        self.max_tool_rounds = max_tool_rounds
        self.max_attempts = max_attempts
        self.retry_base_s = retry_base_s
        self.retry_max_wait_s = retry_max_wait_s
        self.long_tool_hint_s = long_tool_hint_s
        self.extra_body = dict(extra_body or {})
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **(extra_headers or {})}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        # Ask for token counts until the service refuses the option; extra_body's own stream_options win.
        self.asks_usage = "stream_options" not in self.extra_body

    def _initial_messages(self, request: AgentRequest) -> list[dict]:
        messages = [dict(m) for m in request.messages]
        if self.system_prompt and not (messages and messages[0].get("role") == "system"):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages

    async def run(self, request: AgentRequest) -> AsyncIterator[StreamEvent]:
        messages = self._initial_messages(request)
        answer = ""
        await self.registry.prepare()    # tool sources still starting (MCP servers: actors/agents/mcp_tools.py)
        tokens: Optional[tuple] = None
        timeout = aiohttp.ClientTimeout(total=None, connect=self.connect_timeout_s,
                                        sock_connect=self.connect_timeout_s, sock_read=self.idle_timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            if request.open_step is not None:     # a turn a question paused, answered since: its step goes on
                paused = False
                async for event in self._open_step(request.open_step, messages, request):
                    paused = paused or isinstance(event, ApprovalNeeded)
                    yield event
                if paused:
                    yield TurnEnd(reason=AWAITING_APPROVAL, final_text=answer, tokens=tokens)
                    return
            for step_number in range(self.max_tool_rounds + 1):
                messages.extend(take_steer_messages(request.steer))     # steer lands at the next model call
                step = _Step(label=f"{request.turn_id or 'turn'}_{step_number}")
                separate = bool(answer) and not answer[-1].isspace()
                async for event in self._stream_step(http, messages, step):
                    if isinstance(event, TextDelta) and separate:
                        separate = False
                        answer += "\n\n"
                        yield TextDelta("\n\n")               # text before and after a tool call are paragraphs
                    answer += event.text if isinstance(event, TextDelta) else ""
                    yield event
                tokens = _added_tokens(tokens, step.tokens)
                if not step.calls:
                    break
                if over_budget(tokens, request.token_budget):   # its calls' results would need another model call
                    for call in step.ordered_calls():
                        yield ToolCallFinished(call.id, call.name, call.arguments,
                                               "not run: the turn used up its tokens", ok=False)
                    yield TurnEnd(reason=TOKEN_LIMIT, final_text=answer, tokens=tokens)
                    return
                if step_number == self.max_tool_rounds:
                    for call in step.ordered_calls():     # every started call gets its end, even unrun
                        yield ToolCallFinished(call.id, call.name, call.arguments, "not run: too many tool rounds",
                                               ok=False)
                    yield GatewayNotice(f"Stopped after {self.max_tool_rounds} rounds of tool calls.", "warning")
                    break
                messages.append(step.assistant_message())
                paused = False
                async for event in self._run_calls(step.ordered_calls(), messages[-1], messages, request):
                    paused = paused or isinstance(event, ApprovalNeeded)
                    yield event
                if paused:     # the calls wait for a person's yes: the turn goes on once answered (OpenStep)
                    yield TurnEnd(reason=AWAITING_APPROVAL, final_text=answer, tokens=tokens)
                    return
        yield TurnEnd(reason="complete", final_text=answer, tokens=tokens)

    async def _open_step(self, step: OpenStep, messages: list[dict], request: AgentRequest
                         ) -> AsyncIterator[StreamEvent]:
        """The paused step again: its assistant message, the results its calls have, then the calls still to run
        (one the guard holds asks again: an ApprovalNeeded)."""
        messages.append(dict(step.assistant_message))
        messages.extend({"role": "tool", "tool_call_id": call_id, "content": text} for call_id, text in step.answered)
        calls = [_Call(index, call_id, name, arguments, True) for index, (call_id, name, arguments)
                 in enumerate(step.to_run)]
        async for event in self._run_calls(calls, step.assistant_message, messages, request):
            yield event

    async def _run_calls(self, calls: list, step_message: dict, messages: list[dict], request: AgentRequest
                         ) -> AsyncIterator[StreamEvent]:
        """Run a step's calls in order, each result appended to ``messages``. A call the turn's guard holds ends
        it with an ApprovalNeeded: neither that call nor a later one runs (the model's order is kept)."""
        guard = request.approvals
        for position, call in enumerate(calls):
            if guard is not None and guard.holds(call.id, call.name):
                later = tuple((c.id, c.name, c.arguments) for c in calls[position + 1:])
                yield ApprovalNeeded(call.id, call.name, call.arguments, dict(step_message), later)
                return
            result = ""
            async for event in self._run_tool(call, request):
                if isinstance(event, ToolCallFinished):
                    result = event.result
                yield event
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    async def _run_tool(self, call: _Call, request: AgentRequest) -> AsyncIterator[StreamEvent]:
        task = asyncio.ensure_future(self.registry.run(call.name, call.arguments, request.media, request.memory,
                                                       request.session_tools, call.id))
        started = time.monotonic()
        try:
            while not (await asyncio.wait({task}, timeout=self.long_tool_hint_s))[0]:
                yield LongToolHint(call.id, call.name, round(time.monotonic() - started, 1))
        finally:
            task.cancel()              # no-op when done; stops the tool when the turn is interrupted
        answer = task.result()
        yield ToolCallFinished(call.id, call.name, call.arguments, answer.text, answer.ok, answer.files)

    def _request_body(self, messages: list[dict]) -> dict:
        body = {"model": self.model, "messages": messages, "stream": True, **self.extra_body}
        if self.asks_usage:
            body["stream_options"] = {"include_usage": True}
        if len(self.registry):
            body["tools"] = self.registry.openai_schema()
        return body

    async def _stream_step(self, http: aiohttp.ClientSession, messages: list[dict],
                           step: _Step) -> AsyncIterator[StreamEvent]:
        opening = asyncio.ensure_future(self._open_asking_usage(http, messages))
        started = time.monotonic()
        try:
            while not (await asyncio.wait({opening}, timeout=self.wait_hint_s))[0]:
                yield WaitingForModel(round(time.monotonic() - started, 1))
        finally:
            opening.cancel()           # no-op when done; stops the request when the turn is interrupted
        response = opening.result()
        try:
            async for payload in response.payloads():
                if payload is DONE:
                    step.done = True
                    break
                for event in step.feed(payload):
                    yield event
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            if step.finish_reason is None:     # after finish_reason only a usage chunk or [DONE] was missing
                raise _connection_error(exc, self.idle_timeout_s, output_started=True) from None
        finally:
            await response.close()
        if not step.done and step.finish_reason is None:
            raise AgentError("the model stream ended before the answer was complete")
        for event in step.finish():
            yield event

    async def _open_asking_usage(self, http: aiohttp.ClientSession, messages: list[dict]) -> _Response:
        try:
            return await self._open(http, self._request_body(messages))
        except _UsageRefused as refused:
            self.asks_usage = False
            try:
                response = await self._open(http, self._request_body(messages))
            except AgentError:
                self.asks_usage = True     # refused without the option too: the option was not the cause
                raise
            log.info("the model service refused stream_options (%s); token counts are not asked for from now on",
                     redact(refused.error.message))
            return response

    async def _open(self, http: aiohttp.ClientSession, body: dict) -> _Response:
        # The log says what is done: a retry is announced when its wait begins (before_sleep), never for the last
        # attempt, which tenacity also asks a wait of before its stop rule gives up; the give-up has a line of its own.
        retrying = AsyncRetrying(stop=stop_after_attempt(self.max_attempts), wait=self._wait_before_retry,
                                 retry=retry_if_exception_type(_Retryable), before_sleep=self._announce_retry,
                                 reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._attempt(http, body)
        except _Retryable as exc:
            log.warning("model request failed (%s); attempt %d of %d, giving up", redact(str(exc)),
                        self.max_attempts, self.max_attempts)
            raise exc.error from None
        raise AssertionError("unreachable: tenacity either returns or raises")

    def _wait_before_retry(self, retry_state: Any) -> float:
        exc = retry_state.outcome.exception()
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return exc.retry_after
        return backoff_s(retry_state.attempt_number, self.retry_base_s, self.retry_max_wait_s)

    def _announce_retry(self, retry_state: Any) -> None:
        log.warning("model request failed (%s); attempt %d of %d, retrying in %.2fs",
                    redact(str(retry_state.outcome.exception())), retry_state.attempt_number, self.max_attempts,
                    retry_state.next_action.sleep)

    async def _attempt(self, http: aiohttp.ClientSession, body: dict) -> _Response:
        """One request, read up to its first output. Raises _Retryable for what a retry may cure."""
        first_by = (asyncio.get_running_loop().time() + self.first_token_timeout_s
                    if self.first_token_timeout_s > 0 else None)
        try:
            async with _first_token_bound(first_by):
                raw = await http.post(self.url, json=body, headers=self.headers)
        except _NoFirstToken:
            raise self._no_first_token() from None    # a hung model is not cured by asking it again
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            error = _connection_error(exc, self.idle_timeout_s, output_started=False)
            if isinstance(exc, TimeoutError) and not isinstance(exc, _CONNECT_TIMEOUT):
                raise error from None       # a slow model is not cured by asking it again
            raise _Retryable(error) from None
        if raw.status != 200:
            error = AgentError(f"HTTP {raw.status}: {await _error_detail(raw)}", raw.status)
            retry_after = parse_retry_after(raw.headers)
            raw.release()
            if raw.status in (408, 409, 429) or raw.status >= 500:
                if retry_after is not None and retry_after > self.retry_max_wait_s:
                    raise AgentError(f"{error.message} (retry after {retry_after:.0f}s)", raw.status)
                raise _Retryable(error, retry_after)
            if raw.status in (400, 422) and "stream_options" in body and self.asks_usage:
                raise _UsageRefused(error)
            raise error
        response = _Response(raw)
        try:
            answered = await response.prime(first_by)
        except _NoFirstToken:
            await response.close()
            raise self._no_first_token() from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            await response.close()
            error = _connection_error(exc, self.idle_timeout_s, output_started=False)
            if isinstance(exc, TimeoutError) and not isinstance(exc, _CONNECT_TIMEOUT):
                raise error from None
            raise _Retryable(error) from None
        except BaseException:
            await response.close()
            raise
        if not answered:
            await response.close()
            raise _Retryable(AgentError("the model service closed the stream without answering"))
        return response

    def _no_first_token(self) -> AgentError:
        return AgentError(f"the model service sent no first token within {self.first_token_timeout_s:g}s "
                          "(first_token_timeout_s)", reason="timeout")


async def _error_detail(response: aiohttp.ClientResponse) -> str:
    try:
        raw = (await response.content.read(4096)).decode("utf-8", "replace")
    except (aiohttp.ClientError, TimeoutError, OSError):
        raw = ""
    try:
        data = json.loads(raw)
        error = data.get("error", data) if isinstance(data, dict) else data
        message = error.get("message") or error.get("detail") or raw if isinstance(error, dict) else error
    except ValueError:
        message = raw
    return _short(message or response.reason or "no detail")
