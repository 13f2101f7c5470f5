"""HttpApiAdapter: the gateway as an HTTP service (type "http"): a generic signed webhook and an OpenAI-compatible API.

    [adapters.api]
    type = "http"
    host = "127.0.0.1"             # loopback by default
    port = 8088                    # 0: pick a free port (logged at start)
    hmac_secret = "..."            # signs /webhook bodies and reply callbacks; empty: no /webhook
    callback_url = "https://example.org/gateway-replies"
    api_tokens = ["..."]           # bearer tokens of /v1; empty: no /v1
    max_body_bytes = 1048576
    reply_timeout_s = 300.0        # how long /v1/chat/completions waits for its reply
    profile = "default"            # the profile of webhook messages, and of /v1 requests whose model names none
    profiles = ["default", "work"] # the profiles /v1 requests may pick (empty: its own and every [profiles.NAME])
    models = { "gpt-4o-mini" = "work" }   # model names mapped to profiles; "*": every name nothing else names

Push style: the aiohttp server runs on the actor's bridge loop and hands every accepted request to the base's
``emit``, which returns once the inbox row is durable; only then does the client get its 2xx (G1, G2). The server
outlives the intake: after a drain stops the intake, new input is refused with 503 while requests already waiting
still receive their replies; it closes when the actor stops.

Outbound: operations on webhook conversations are POSTed to ``callback_url`` (webhook.py); operations on API
conversations (chat ids ``v1:...``) go to the requests waiting for them (replies.py), or nowhere if the client left.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import uuid
from typing import Any, Awaitable, Callable, Optional

from aiohttp import web

from actors.adapters.intake_styles import ServingAdapter
from actors.adapters.intake import SenderOverLimit, TextTooLong
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.errors import TooLongError
from actors.adapters.http import openai_api, webhook
from actors.adapters.http.content_parts import file_part
from actors.adapters.http.replies import ReplyBook, ServiceStopping
from supervision.http_serving import http_limits, serve
from actors.adapters.media_intake import cached
from actors.messages import Attachment, MessageEvent, PlatformOp
from actors.adapters.pacing import LENGTH_FUNCTIONS
from storage.inbox import FINISHED_STATES, FORWARDED, InboxState

DEFAULT_MAX_BODY_BYTES = 1_048_576
SERVER_SHUTDOWN_S = 1.0
REMEMBERED_SENDS = 4096    # retried sends reuse their message id (an idempotency key for the callback receiver)


class HttpApiAdapter(ServingAdapter):
    def __init__(self):
        super().__init__()
        self.api_tokens: list[str] = []
        self.hmac_secret = ""
        self.reply_timeout_s = 300.0
        self.model_profiles: dict[str, str] = {}
        self.replies = ReplyBook()
        self.bound_port: Optional[int] = None
        self.closing = False
        self._intake_emit: Optional[Callable[[list, Any], Awaitable[list]]] = None
        self._runner: Optional[web.AppRunner] = None
        self._callback: Optional[webhook.CallbackClient] = None
        self._send_ids: collections.OrderedDict = collections.OrderedDict()

    # ------------------------------------------------------------------------------------------ configuration
    def on_start(self, args) -> None:
        for problem in self.configure(args or {}):
            self.log.error("%s: %s", self.name, problem)
        super().on_start(args)
        # The registry redacts scalar secrets only; each token must be redacted on its own.
        self.secrets = [*self.secrets, *self.api_tokens]

    def configure(self, settings: dict) -> list[str]:
        """Read what the endpoints need from the validated table; returns problems worth an error line."""
        problems = []
        tokens = settings.get("api_tokens") or []
        self.api_tokens = [t for t in tokens if isinstance(t, str) and t.strip()]
        if len(self.api_tokens) != len(tokens):
            problems.append(f"api_tokens: {len(tokens) - len(self.api_tokens)} entry(ies) not a non-empty string, "
                            "ignored")
        self.hmac_secret = settings.get("hmac_secret") or ""
        self.reply_timeout_s = float(settings.get("reply_timeout_s") or 300.0)
        if self.hmac_secret and not settings.get("callback_url"):
            problems.append("hmac_secret is set but callback_url is not: webhook replies cannot be delivered")
        if not self.hmac_secret and not self.api_tokens:
            problems.append("neither hmac_secret nor api_tokens is set: every endpoint is disabled")
        models = settings.get("models") or {}
        self.model_profiles = {str(k): v for k, v in models.items() if isinstance(v, str)}
        if len(self.model_profiles) != len(models):
            problems.append("models: every value must be a profile name; the others are refused as unknown models")
        return problems

    def profile_names(self) -> list[str]:
        """The profiles /v1 requests may pick: the ``profiles`` setting, else the adapter's own and every
        configured [profiles.NAME]. A name in ``profiles`` without a [profiles.NAME] table runs on the defaults."""
        chosen = self.settings.get("profiles") or [self.profile, *(self.config.get("profiles") or {})]
        return sorted({self.profile, *(name for name in chosen if isinstance(name, str) and name)})

    def event_profile(self, event: MessageEvent) -> str:
        return event.source.profile   # normalise checked it: the adapter's own, or one a /v1 request may pick

    # ------------------------------------------------------------------------------------------------- intake
    async def connect(self) -> None:
        if self._runner is not None:
            return                     # the server outlives intake reconnects (see the module docstring)
        host, port = self.settings.get("host") or "127.0.0.1", int(self.settings.get("port") or 0)
        app = web.Application(client_max_size=int(self.settings.get("max_body_bytes") or DEFAULT_MAX_BODY_BYTES),
                              middlewares=[_guard(self)])
        routes = []
        if self.hmac_secret:
            app.router.add_post("/webhook", webhook.WebhookEndpoint(self).handle)
            routes.append("POST /webhook")
        if self.api_tokens:
            api = openai_api.OpenAIEndpoint(self)
            app.router.add_post("/v1/chat/completions", api.chat_completions)
            app.router.add_get("/v1/models", api.models)
            routes += ["POST /v1/chat/completions", "GET /v1/models"]
        self._runner, self.bound_port = await serve(app, host, port, shutdown_timeout=SERVER_SHUTDOWN_S,
                                                     limits=http_limits(self.config), on_refused=self.intake.reject)
        self.say(logging.INFO, "%s: listening on http://%s:%d (%s)", self.name, host, self.bound_port,
                  ", ".join(routes) or "no endpoint enabled")

    def served_url(self) -> Optional[str]:
        if self._runner is None or self.bound_port is None:
            return None
        host = self.settings.get("host") or "127.0.0.1"
        return f"http://{f'[{host}]' if ':' in host else host}:{self.bound_port}/"

    async def run_intake(self, emit) -> None:
        self._intake_emit = emit
        try:
            await asyncio.Event().wait()   # requests arrive through the server; this ends only when cancelled
        finally:
            self._intake_emit = None

    async def disconnect(self) -> None:
        self._intake_emit = None           # new input gets 503; waiting requests keep their replies

    async def close(self) -> None:
        self.closing = True
        for watch in self.replies.waiting():
            watch.changed.set()            # wake them to answer 503 now, instead of being cut by the shutdown
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        callback, self._callback = self._callback, None
        if callback is not None:
            await callback.close()

    def normalise(self, raw: Any) -> MessageEvent:
        origin = raw.get("origin") if isinstance(raw, dict) else None
        if origin == webhook.ORIGIN:
            if "unparsable" in raw:
                raise MalformedPayload(raw["unparsable"])
            return webhook.webhook_event(raw.get("body"), self.name, self.profile)
        if origin == openai_api.ORIGIN:
            return openai_api.api_event(raw, self.name, self.profile, self.profile_names())
        raise MalformedPayload(f"unknown origin {origin!r}")

    # ---------------------------------------------------------------------------------------- for the endpoints
    async def ingest(self, raw: dict) -> Optional[tuple[int, bool]]:
        """Store one inbound request durably: (inbox seq, newly inserted), or None if the gateway cannot take it
        now (the client should retry). Raises MalformedPayload with the reason for an invalid one."""
        emit = self._intake_emit
        if emit is None or self.closing:
            return None
        try:
            self.normalise(raw)
        except MalformedPayload:
            await self._store([raw], emit)  # the base logs and counts the rejection, as for every platform
            raise
        results = await self._store([raw], emit)
        if results is None:
            return None
        if not results:
            raise MalformedPayload("the message could not be stored")
        return results[0]

    async def cache_images(self, images: tuple) -> Optional[list]:
        """The attachments (payload dicts) of a request's images, each put in the media cache; None when the cache
        is not open yet (the intake is still starting: the client retries)."""
        cache = self.media_cache
        if cache is None or self.closing:
            return None
        out = []
        for data in images:
            key = await asyncio.to_thread(cache.put, data)
            out.append(dict(vars(cached(Attachment(kind="photo"), data, key))))
        return out

    async def _store(self, raws: list, emit) -> Optional[list]:
        try:
            return await emit(raws, None, True)   # over the sender's limit: SenderOverLimit, answered 429
        except (SenderOverLimit, TextTooLong):
            raise
        except Exception as exc:  # noqa: BLE001 - storage busy or failing: the client retries, nothing was promised
            self.say(logging.WARNING, "%s: could not store an inbound request (%s); answered 503", self.name,
                      self.clean_error(exc))
            return None

    async def turn_finished(self, seq: int, saw_final: bool = False) -> bool:
        """Whether inbox row ``seq`` is finished: its reply is delivered (or the turn gave up on it). A row forwarded
        to a shard on another host is done here once that host has it: its turn is finished when the reply's final
        text came (``saw_final``)."""
        if self.closing:
            raise ServiceStopping()
        store = self.store
        if store is None:
            return False
        try:
            row = await store.inbox.get(seq)
        except Exception:  # noqa: BLE001 - a busy database: the next poll asks again
            return False
        if row is not None and row.state == InboxState.DONE and (row.reason or "").startswith(FORWARDED):
            return saw_final
        return row is None or row.state in FINISHED_STATES

    def refused(self, request: web.Request, reason: str) -> None:
        self.say(logging.WARNING, "%s: refused %s %s from %s: %s", self.name, request.method, request.path,
                  request.remote, reason)

    # ------------------------------------------------------------------------------------------------ outbound
    async def send_message(self, op: PlatformOp) -> str:
        self._check_length(op.text)
        key = (op.chat_id, op.op_id)
        message_id = self._send_ids.get(key) or f"m-{uuid.uuid4().hex[:20]}"
        self._send_ids[key] = message_id
        while len(self._send_ids) > REMEMBERED_SENDS:
            self._send_ids.popitem(last=False)
        await self._deliver(op, message_id)
        return message_id

    async def send_file(self, op: PlatformOp) -> str:
        part = file_part(op.file, await self.file_bytes(op.file))
        message_id = self._send_ids.get((op.chat_id, op.op_id)) or f"m-{uuid.uuid4().hex[:20]}"
        self._send_ids[(op.chat_id, op.op_id)] = message_id
        await self._deliver(op, message_id, part)
        return message_id

    async def edit_message(self, op: PlatformOp) -> None:
        self._check_length(op.text)
        await self._deliver(op, op.message_id)

    async def delete_message(self, op: PlatformOp) -> None:
        await self._deliver(op, op.message_id)

    async def _deliver(self, op: PlatformOp, message_id: str, part: Optional[dict] = None) -> None:
        if op.chat_id.startswith(webhook.API_CHAT_PREFIX):
            self.replies.apply(op, message_id, part)   # no waiting request: the client left, nothing to show
            return
        if self._callback is None:
            self._callback = webhook.CallbackClient(self.settings.get("callback_url") or "", self.hmac_secret)
        await self._callback.post(webhook.callback_payload(op, message_id, part))

    def _check_length(self, text: str) -> None:
        length = LENGTH_FUNCTIONS[self.pacing.length](text)
        if length > self.pacing.text_limit:
            raise TooLongError(f"text of {length} over the limit of {self.pacing.text_limit}", method="http")


def _guard(adapter: HttpApiAdapter):
    """Every request ends in an answer: an unexpected error is logged (by the actor thread) and answered 500."""
    @web.middleware
    async def guard(request: web.Request, handler):
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except ServiceStopping:
            status, message, kind = 503, "The gateway is stopping; retry shortly.", "server_error"
        except Exception as exc:  # noqa: BLE001 - a bug in a handler must not take the server down
            adapter.say(logging.ERROR, "%s: %s %s failed: %s: %s", adapter.name, request.method, request.path,
                         type(exc).__name__, adapter.clean_error(exc))
            status, message, kind = 500, "Internal error; the operator can check the gateway log.", "server_error"
        if request.path.startswith("/v1/"):
            return openai_api.error_response(status, message, kind, None)
        return web.json_response({"error": message}, status=status)
    return guard
