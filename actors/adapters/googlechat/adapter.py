"""GoogleChatAdapter: one Google Chat app on an HTTP endpoint: interaction events in, the Chat API out
(actors/adapters/googlechat/README.md). A leaf process actor: the base (base.py) runs its intake and its lanes.

States: not connected -> connected (the event endpoint listens and the token endpoint gave the service account an
access token) -> back to not connected on a failure (the base reconnects with backoff; a key file that is missing or
refused is "refused": reported down and asked again every ``refused_retry_s``). The endpoint keeps listening from the
first connect on, so an API outage never turns Google Chat's events away.

Intake (webhook_server.py): the bearer token is verified (auth.py: the signature against Google's published keys,
issuer, audience, expiry) before anything is parsed; a refused request is answered 401, logged once with its
reason, nothing stored. An event that is no message (REMOVED_FROM_SPACE, CARD_CLICKED, ADDED_TO_SPACE without a
message) is answered and skipped with a log line; a message committed in this life already (its resource name) is
answered without a write; otherwise the row is stored and Google is answered ``{}`` only after it commits. The
inbox's (adapter, message name) dedup covers a repeat after a restart. What survives kill -9: a committed row
(Google was answered after it); an event cut before its commit was never answered 2xx, and Google Chat shows the
user that the app did not respond (it does not deliver the event again).

No answer goes in the HTTP response (Chat allows a message there, within 30 s): the row is stored first and the
turn answers later through the API, as on every platform; a synchronous answer would have to come before the commit
or hold Google's request for the whole turn.

Outbound: a part is ``spaces.messages.create`` in the space, into the message's thread where it has one, carrying a
``requestId`` made from ``platform_key(op)`` and the space (idempotency.py): every attempt at one part, in any life,
carries the same id, and Chat answers a repeated one with the message it created, so a kill -9 between a create and
its record shows the part once. Streaming edits are ``patch`` with ``updateMask=text``; deletes are ``delete`` (a
message already gone is done). The text is at most 4,096 characters (refused as too long before it leaves). A 429
is a FloodError on the space's lane (client.py); the space is paced at one write a second (platform.py).
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Optional

from actors.adapters.errors import MessageNotFoundError, PermanentError, TooLongError
from actors.adapters.googlechat.auth import (ChatKeys, ServiceAccount, ServiceAccountTokens, default_certs_url,
                                             service_account_from)
from actors.adapters.googlechat.client import ChatAPI
from actors.adapters.googlechat.inbound import event_from_chat, message_name, skip_reason
from actors.adapters.googlechat.webhook_server import EventServer
from actors.adapters.http_session import HttpSession
from actors.adapters.idempotency import platform_key
from actors.adapters.intake_styles import WebhookAdapter
from actors.adapters.push_server import StoredThisLife
from actors.messages import MessageEvent, PlatformOp
from supervision.http_serving import http_limits

REMEMBERED_MESSAGES = 4096   # message names committed in this life, for answering a repeat without a write
TEXT_LIMIT = 4096
REQUEST_IDS = uuid.UUID("3b0f7e2a-91c4-4d6e-8f25-6a1d0c9b7e44")   # the namespace request ids are made in


def request_id(op: PlatformOp) -> str:
    """The create's requestId: one operation with one content (a keyed send: one part of one reply), in every life
    of the daemon, and never another's (idempotency.py)."""
    return str(uuid.uuid5(REQUEST_IDS, f"{op.chat_id}\n{platform_key(op)}"))


def read_key_file(path: str) -> ServiceAccount:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(64 * 1024)
    except OSError as exc:
        raise PermanentError(f"the service account key file cannot be read: {exc.strerror or exc}") from None
    return service_account_from(text)


class GoogleChatAdapter(WebhookAdapter):
    def __init__(self):
        super().__init__()
        self.skipped = 0              # events answered without becoming input
        self.stored_this_life = StoredThisLife(REMEMBERED_MESSAGES)   # repeats answered without a write
        self._api: Optional[ChatAPI] = None
        self._signing_keys: Optional[ChatKeys] = None
        self._http: Optional[HttpSession] = None

    # -------------------------------------------------------------------------------------------------- intake
    async def connect(self) -> None:
        if self.push_server.server is None:
            await self._serve_events()
        await (await self.api()).tokens.token()   # a refused service account fails here: PermanentError (refused)

    def http(self) -> HttpSession:
        if self._http is None:
            self._http = HttpSession()
        return self._http

    async def api(self) -> ChatAPI:
        if self._api is None:
            s = self.settings
            account = await asyncio.to_thread(read_key_file, s["service_account_file"])
            self._api = ChatAPI(ServiceAccountTokens(self.http(), account, s["oauth_url"]), s["api_base_url"],
                                rate_limit_wait_s=s["rate_limit_wait_s"])
        return self._api

    async def _serve_events(self) -> None:
        def on_error(text: str) -> None:
            self.say(logging.WARNING, "%s: an event was not stored (%s); Google Chat shows the user the app did not "
                     "answer", self.name, self.clean_error(text))

        s = self.settings
        self._signing_keys = ChatKeys(self.http(), s["certs_url"] or default_certs_url(s["audience"]))
        server = EventServer(s["webhook_host"], s["webhook_port"], s["webhook_path"],
                             verify=lambda header: self._signing_keys.verify(header, s["audience"]),
                             deliver=self._deliver_to(self.intake.emit), on_error=on_error,
                             on_refused=self.intake.reject, limits=http_limits(self.config))
        port = await server.start()   # a port that is taken raises here: retried, nothing half-started is kept
        self.push_server.server = server
        self.say(logging.INFO, "%s: Google Chat events on %s:%d%s", self.name, s["webhook_host"], port,
                 s["webhook_path"])

    def _deliver_to(self, emit):
        async def deliver(event: dict) -> None:
            """Store one event (or skip it); Google is answered when this returns."""
            if (reason := skip_reason(event)) is not None:
                self.skipped += 1
                self.say(logging.INFO, "%s: skipped %s (not input)", self.name, reason)
                return
            await self.stored_this_life.store_once(message_name(event), lambda: emit([event], None))
        return deliver

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_chat(raw, self.name, self.profile)

    # ------------------------------------------------------------------------------------------------ outbound
    async def send_message(self, op: PlatformOp) -> str:
        if len(op.text) > TEXT_LIMIT:
            raise TooLongError(f"{len(op.text)} characters, over {TEXT_LIMIT}", method="create")
        if not op.text.strip():
            raise PermanentError("Google Chat refuses an empty text", method="create")
        message = await (await self.api()).create(op.chat_id, op.text, request_id(op), thread=op.thread_id)
        name = message.get("name")
        if not isinstance(name, str) or not name.startswith(op.chat_id + "/messages/"):
            raise PermanentError("the create answered no message of the space", method="create")
        return name

    async def edit_message(self, op: PlatformOp) -> None:
        if len(op.text) > TEXT_LIMIT:
            raise TooLongError(f"{len(op.text)} characters, over {TEXT_LIMIT}", method="patch")
        await (await self.api()).patch(_message_name(op), op.text)

    async def delete_message(self, op: PlatformOp) -> None:
        try:
            await (await self.api()).delete(_message_name(op))
        except MessageNotFoundError:
            pass      # gone already: what a delete wants

    async def close(self) -> None:
        await self.push_server.close()
        api, self._api = self._api, None
        http, self._http = self._http, None
        for client in (api, http):
            if client is not None:
                await client.close()


def _message_name(op: PlatformOp) -> str:
    if not isinstance(op.message_id, str) or not op.message_id.startswith(op.chat_id + "/messages/"):
        raise PermanentError(f"{op.action}: {op.message_id!r} is no message of {op.chat_id}")
    return op.message_id
