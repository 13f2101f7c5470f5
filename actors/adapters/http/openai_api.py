"""The OpenAI-compatible endpoint: ``POST /v1/chat/completions`` (streaming and not) and ``GET /v1/models``.

Auth: ``Authorization: Bearer <one of api_tokens>``; anything else is a 401 in OpenAI's error shape, which OpenAI
clients turn into their authentication error.

A request is one turn of a gateway conversation: the LAST user message becomes the inbound event (the session keeps
the history; earlier messages of the request are not replayed); its ``image_url`` parts with ``data:`` URLs become
attachments, cached before the row is stored (content_parts.py, docs/media.md). The conversation is, in order of
preference, the ``user`` field, the ``X-Conversation-Id`` header, or a fresh one per request; it is always scoped to
the bearer token, so two clients never share a conversation by choosing the same name. The response waits for the
turn's reply (``reply_timeout_s``, then 504): one ``chat.completion``, or ``chat.completion.chunk`` events that grow
with the reply's previews, a last chunk with ``finish_reason: "stop"`` and ``data: [DONE]``.

Profiles: ``model`` picks the profile the turn runs under (``resolve_profile``). The profile is part of the session
key, so the same conversation name under two profiles is two sessions with their own history; it is part of the chat
id too (for any profile but the adapter's own), so the replies of two such sessions, which may run at the same time,
never meet in one chat. A model that names no profile this endpoint serves is a 404 ``model_not_found``, never a
silent fallback: a client that asked for one assistant must not get another.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from aiohttp import web

from actors.adapters.intake import SenderOverLimit, TextTooLong
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.http.replies import ReplyWatch, ServiceStopping, StreamCursor
from actors.adapters.http.webhook import API_CHAT_PREFIX, MAX_ID_CHARS
from actors.adapters.http.content_parts import PartRefused, data_url_images
from actors.messages import Attachment, MessageEvent, Source
from supervision.http_serving import BodyTimeout, read_body

ORIGIN = "api"
CONVERSATION_HEADER = "X-Conversation-Id"
IDLE_POLL_S = 0.5       # how often a waiting request looks at its inbox row while nothing happens
FINAL_POLL_S = 0.02     # after the final text arrived: the row is marked done right after the last part lands


PROFILE_PREFIX = "profile:"
ANY_MODEL = "*"         # a [adapters.NAME] models key: the profile of every model name nothing else names


class BadRequest(ValueError):
    pass


class UnknownModel(LookupError):
    """The request's ``model`` names no profile this endpoint serves (answered 404 ``model_not_found``)."""


@dataclass(frozen=True)
class ChatRequest:
    text: str
    model: str
    stream: bool
    user: Optional[str]
    images: tuple = ()            # bytes of the last user message's data: URL images (content_parts.py)


def message_text(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts of which the text parts count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content
                         if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str))
    raise BadRequest("message content must be a string or a list of content parts")


def parse_chat_request(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array")
    user_messages = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not user_messages:
        raise BadRequest("'messages' holds no message with role 'user'")
    text = message_text(user_messages[-1].get("content"))
    try:
        images = tuple(data_url_images(user_messages[-1].get("content")))
    except PartRefused as exc:
        raise BadRequest(str(exc)) from None
    if not text.strip() and not images:
        raise BadRequest("the last user message has no text")
    model, stream, user = body.get("model", ""), body.get("stream", False), body.get("user")
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string")
    if not isinstance(stream, bool):
        raise BadRequest("'stream' must be true or false")
    if user is not None and (not isinstance(user, str) or len(user) > MAX_ID_CHARS):
        raise BadRequest(f"'user' must be a string of at most {MAX_ID_CHARS} characters")
    return ChatRequest(text=text, model=model, stream=stream, user=user or None, images=images)


def resolve_profile(model: str, own: str, served: list[str], aliases: dict[str, str]) -> str:
    """The profile a request's ``model`` asks for: none (empty) -> ``own``; ``profile:NAME`` or a bare profile name
    -> that profile; a name in ``aliases`` (the adapter's ``models`` table) -> its profile; else the ``"*"`` alias if
    configured. Anything else, or a profile outside ``served``, raises UnknownModel with a message for the client."""
    available = ", ".join(served)
    if not model:
        return own
    if model.startswith(PROFILE_PREFIX):
        name = model[len(PROFILE_PREFIX):]
        if name in served:
            return name
        raise UnknownModel(f"The model `{model}` names the profile `{name}`, which this endpoint does not serve "
                           f"(profiles: {available}).")
    if model in aliases or (model not in served and ANY_MODEL in aliases):
        name = aliases.get(model, aliases.get(ANY_MODEL))
        if name in served:
            return name
        raise UnknownModel(f"The model `{model}` maps to the profile `{name}`, which this endpoint does not serve "
                           f"(profiles: {available}); the operator's configuration needs fixing.")
    if model in served:
        return model
    raise UnknownModel(f"The model `{model}` does not exist: name a profile as the model, or `profile:NAME` "
                       f"(profiles: {available}).")


def token_owner(token: str) -> str:
    """A short, non-reversible name for a bearer token: safe in chat ids, session records and logs."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]


def conversation_chat_id(token: str, user: Optional[str], conversation: Optional[str], request_id: str,
                         profile: Optional[str] = None) -> str:
    """``profile``: None for the adapter's own profile (whose chat ids carry none), else the request's profile."""
    owner = token_owner(token)
    if profile is not None:
        owner = f"{owner}:profile:{profile}"
    if user:
        return f"{API_CHAT_PREFIX}{owner}:user:{user}"
    if conversation:
        return f"{API_CHAT_PREFIX}{owner}:conversation:{conversation}"
    return f"{API_CHAT_PREFIX}{owner}:request:{request_id}"


def api_event(raw: dict, adapter_name: str, profile: str, served: Optional[list[str]] = None) -> MessageEvent:
    """The MessageEvent of a request the endpoint has already validated (see ``OpenAIEndpoint.chat_completions``);
    its profile is the request's (``raw["profile"]``, one of ``served``), else the adapter's ``profile``."""
    chat_id, user_id, message_id, text = (raw.get(k) for k in ("chat_id", "user_id", "message_id", "text"))
    if not all(isinstance(v, str) and v for v in (chat_id, user_id, message_id)) or not isinstance(text, str):
        raise MalformedPayload("api event without chat_id, user_id, message_id or text")
    chosen = raw.get("profile") or profile
    if chosen != profile and chosen not in (served or ()):
        raise MalformedPayload(f"api event for the profile {chosen!r}, which this endpoint does not serve")
    profile = chosen
    source = Source(platform=adapter_name, chat_id=chat_id, chat_type="dm", user_id=user_id, user_name=user_id,
                    profile=profile)
    attachments = tuple(Attachment.from_payload(a) for a in raw.get("attachments") or ())
    return MessageEvent(source=source, text=text, platform_message_id=message_id, received_at=time.time(),
                        attachments=attachments)


# ----------------------------------------------------------------------------------------------- response shapes

def _error_event(message: str, kind: str, code: Optional[str]) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def error_response(status: int, message: str, kind: str, code: Optional[str]) -> web.Response:
    return web.json_response(_error_event(message, kind, code), status=status)


def completion_body(request_id: str, created: int, model: str, text: str, files: list = ()) -> dict:
    """The answer; with files (a tool's images), ``content`` is a list of parts: the text, then each file."""
    content = [{"type": "text", "text": text}, *files] if files else text
    return {"id": request_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}


def chunk_body(request_id: str, created: int, model: str, delta: dict, finish_reason: Optional[str] = None) -> dict:
    return {"id": request_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def _sse(payload: Any) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n".encode("utf-8")


async def _quietly(write: Awaitable) -> None:
    try:
        await write
    except ConnectionResetError:
        pass


class ClientGone(Exception):
    """The HTTP client disconnected while its reply was on the way."""


# ------------------------------------------------------------------------------------------------- the endpoint

class OpenAIEndpoint:
    """``adapter`` is the HttpApiAdapter (see its "for the endpoints" section)."""

    def __init__(self, adapter):
        self.adapter = adapter

    def bearer_token(self, request: web.Request) -> Optional[str]:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return None
        given_bytes = given.strip().encode("utf-8", "surrogateescape")
        matched = None
        for token in self.adapter.api_tokens:   # every token compared, so the time says nothing about which
            if hmac.compare_digest(token.encode("utf-8"), given_bytes):
                matched = token
        return matched

    def unauthorised(self, request: web.Request) -> web.Response:
        self.adapter.refused(request, "v1: missing or unknown bearer token")
        return error_response(401, "Incorrect or missing API key.", "invalid_request_error", "invalid_api_key")

    async def models(self, request: web.Request) -> web.Response:
        if self.bearer_token(request) is None:
            return self.unauthorised(request)
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "agent-gateway"}
                for name in self.adapter.profile_names()]
        return web.json_response({"object": "list", "data": data})

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        token = self.bearer_token(request)
        if token is None:
            return self.unauthorised(request)
        try:
            body = await read_body(request)
        except BodyTimeout as exc:
            self.adapter.refused(request, f"v1: {exc}")
            return error_response(408, str(exc), "invalid_request_error", "timeout")
        except web.HTTPRequestEntityTooLarge:
            self.adapter.refused(request, "v1: request body too large")
            return error_response(413, "The request body is too large.", "invalid_request_error", "too_large")
        try:
            chat = parse_chat_request(json.loads(body))
        except (ValueError, BadRequest, RecursionError) as exc:   # json's errors are ValueErrors too
            reason = (str(exc) if isinstance(exc, BadRequest) else
                      "invalid JSON: nested too deeply" if isinstance(exc, RecursionError) else f"invalid JSON: {exc}")
            self.adapter.refused(request, f"v1: {reason}")
            return error_response(400, reason, "invalid_request_error", None)
        own = self.adapter.profile
        try:
            profile = resolve_profile(chat.model, own, self.adapter.profile_names(), self.adapter.model_profiles)
        except UnknownModel as exc:
            self.adapter.refused(request, f"v1: {exc}")
            return error_response(404, str(exc), "invalid_request_error", "model_not_found")
        conversation = request.headers.get(CONVERSATION_HEADER, "")[:MAX_ID_CHARS] or None
        request_id = "chatcmpl-" + uuid.uuid4().hex
        chat_id = conversation_chat_id(token, chat.user, conversation, request_id, None if profile == own else profile)
        raw = {"origin": ORIGIN, "chat_id": chat_id, "user_id": chat.user or f"api-{token_owner(token)}",
               "message_id": request_id, "text": chat.text, "profile": profile}
        if chat.images:   # cached before the row, as every platform's files are (actors/adapters/media_intake.py)
            raw["attachments"] = await self.adapter.cache_images(chat.images)
            if raw["attachments"] is None:
                return error_response(503, "The gateway is not accepting messages right now; retry shortly.",
                                      "server_error", "unavailable")
        # Waiting starts before the row exists: the reply's first operation can never arrive unexpected.
        watch = self.adapter.replies.open(chat_id, request_id)
        model, created = chat.model or self.adapter.profile, int(time.time())
        try:
            try:
                stored = await self.adapter.ingest(raw)
            except MalformedPayload as exc:   # e.g. not storable (a lone surrogate); the base logged it already
                return error_response(400, str(exc), "invalid_request_error", None)
            except SenderOverLimit as exc:
                return error_response(429, str(exc), "rate_limit_error", "rate_limit_exceeded")
            except TextTooLong as exc:
                return error_response(413, str(exc), "invalid_request_error", "message_too_long")
            if stored is None:
                return error_response(503, "The gateway is not accepting messages right now; retry shortly.",
                                      "server_error", "unavailable")
            self.adapter.replies.stored(watch, stored[0])
            if chat.stream:
                return await self._stream(request, watch, request_id, created, model)
            text = await self._wait(request, watch)
            if text is None:
                return error_response(504, "The agent did not answer in time.", "timeout", "timeout")
            return web.json_response(completion_body(request_id, created, model, text, list(watch.files.values())))
        except (ClientGone, ConnectionResetError):
            return web.Response(status=499)   # nobody reads it; the turn goes on and its reply is dropped
        finally:
            self.adapter.replies.close(watch)

    async def _stream(self, request: web.Request, watch: ReplyWatch, request_id: str, created: int,
                      model: str) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        try:
            await self._stream_into(request, response, watch, request_id, created, model)
        except (ClientGone, ConnectionResetError):
            pass   # the turn goes on; its reply is dropped
        except ServiceStopping:
            await _quietly(response.write(_sse(_error_event("The gateway is stopping; retry shortly.",
                                                            "server_error", "unavailable"))))
        return response

    async def _stream_into(self, request: web.Request, response: web.StreamResponse, watch: ReplyWatch,
                           request_id: str, created: int, model: str) -> None:
        await response.prepare(request)
        await response.write(_sse(chunk_body(request_id, created, model, {"role": "assistant", "content": ""})))
        cursor = StreamCursor()

        async def on_change(text: str) -> None:
            delta = cursor.preview(text)
            if delta:
                await response.write(_sse(chunk_body(request_id, created, model, {"content": delta})))

        text = await self._wait(request, watch, on_change)
        if text is None:
            await response.write(_sse(_error_event("The agent did not answer in time.", "timeout", "timeout")))
        else:
            delta = cursor.final(text)
            if delta:
                await response.write(_sse(chunk_body(request_id, created, model, {"content": delta})))
            await response.write(_sse(chunk_body(request_id, created, model, {}, "stop")))
            await response.write(_sse("[DONE]"))
        await response.write_eof()

    async def _wait(self, request: web.Request, watch: ReplyWatch,
                    on_change: Optional[Callable[[str], Awaitable[None]]] = None) -> Optional[str]:
        """The reply's final text once the turn is finished; None on timeout. Raises ClientGone."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.adapter.reply_timeout_s
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            try:
                await asyncio.wait_for(watch.changed.wait(), min(FINAL_POLL_S if watch.saw_final else IDLE_POLL_S,
                                                                 remaining))
                changed = True
            except asyncio.TimeoutError:
                changed = False
            watch.changed.clear()   # before any await: a change during on_change is seen by the next round
            if request.transport is None or request.transport.is_closing():
                raise ClientGone()
            if changed and on_change is not None:
                await on_change(watch.text())
            if (watch.saw_final or not changed) and await self.adapter.turn_finished(watch.seq, watch.saw_final):
                return watch.text()
