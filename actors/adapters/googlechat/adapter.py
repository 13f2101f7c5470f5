"""GoogleChatAdapter: one Google Chat app on an HTTP endpoint: interaction events in, the Chat API out
(actors/adapters/googlechat/README.md). A leaf process actor: the base (base.py) runs its intake and its lanes.

States: not connected -> connected (the event endpoint listens and the token endpoint gave the service account an
access token) -> back to not connected on a failure (the base reconnects with backoff; a key file that is missing or
refused is "refused": reported down and asked again every ``refused_retry_s``). The endpoint keeps listening from the
first connect on, so an API outage never turns Google Chat's events away.

Intake (webhook_server.py): the bearer token is verified (auth.py: the signature against Google's published keys,
issuer, audience, expiry) before anything is parsed; a refused request is answered 401, logged once with its
reason, nothing stored. An event that is no message (REMOVED_FROM_SPACE, ADDED_TO_SPACE without a message) is
answered and skipped with a log line; a ``CARD_CLICKED`` on one of our buttons is a press (below); a message
committed in this life already (its resource name) is answered without a write; otherwise the row is stored and
Google is answered ``{}`` only after it commits. The inbox's (adapter, message name) dedup covers a repeat after a
restart. What survives kill -9: a committed row
(Google was answered after it); an event cut before its commit was never answered 2xx, and Google Chat shows the
user that the app did not respond (it does not deliver the event again).

No answer goes in the HTTP response (Chat allows a message there, within 30 s): the row is stored first and the
turn answers later through the API, as on every platform; a synchronous answer would have to come before the commit
or hold Google's request for the whole turn.

Buttons (docs/approvals.md): a tool approval's question and /model's listing carry a ``cardsV2`` card of buttons
(cards.py), found again from the question's text and the approval row (presses.py), so a question sent again after
a crash carries the same card. A press (``CARD_CLICKED``) that may answer is stored as the presser's typed answer
under its press id (message, presser, event time: cards.py says why that names one press) before Google is
answered ``{}``; a repeat of the same POST is the inbox's duplicate. Chat also takes an ``actionResponse`` of type
``UPDATE_MESSAGE`` as the answer to a click on the app's message, but what the question becomes is known only once
the session has decided, after that answer: the question is patched then through the API (its text says who
answered, its card removed: ``updateMask=text,cardsV2``). A press on a settled question patches it to what became of
it; any other press is refused with a private message (``privateMessageViewer``: the presser alone sees it; Chat
allows private messages under app authentication, which the service account is), with a requestId of its own press.
A lost patch or notice costs the presser an unchanged card, never an answer. A press cut by a kill -9 before its
row committed was never answered 2xx: Chat tells the presser the app did not respond, and the card is still there
to press again.

Files in: a message's uploaded files (``attachmentDataRef``) are fetched with ``media.download`` under the app's
token by the kit's media intake before the row is stored (``download_attachment``); a Google Drive file
(``driveDataRef``) is stored as unavailable: its bytes come only from the Drive API under the user's own
authorisation. Files out: none. ``media.upload`` "requires user authentication"
(developers.google.com/workspace/chat/api/reference/rest/v1/media/upload: scopes ``chat.messages.create``,
``chat.messages``, ``chat.import``), and the app calls the API as itself (``chat.bot``), so a reply's file becomes
its line in the text.

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
import time
import uuid
from typing import Any, Optional

from actors.adapters.errors import MessageNotFoundError, PermanentError, TooLongError
from actors.adapters.googlechat.auth import (ChatKeys, ServiceAccount, ServiceAccountTokens, default_certs_url,
                                             service_account_from)
from actors.adapters.googlechat.cards import (ANSWER_FIELD, CARD_CLICKED, Press, event_from_press, mention,
                                              press_of, question_cards)
from actors.adapters.googlechat.client import ChatAPI
from actors.adapters.googlechat.inbound import event_from_chat, message_name, skip_reason
from actors.adapters.googlechat.webhook_server import EventServer
from actors.adapters.http_session import HttpSession
from actors.adapters.idempotency import platform_key
from actors.adapters.intake_styles import WebhookAdapter
from actors.adapters.presses import SETTLED, STORED, ButtonPresses, JudgedPress, press_outcome
from actors.adapters.push_server import StoredThisLife
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.approvals.answers import Answerer
from actors.messages import Attachment, MessageEvent, PlatformOp
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


def notice_request_id(press: Press) -> str:
    """The requestId of the private notice answering one press: one per press, in every life."""
    return str(uuid.uuid5(REQUEST_IDS, f"{press.space}\nnotice\n{press.press_id}"))


class GoogleChatAdapter(ButtonPresses, WebhookAdapter):
    def __init__(self):
        super().__init__()
        self.init_presses()
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
            if event.get("type") == CARD_CLICKED:
                await self._take_press(emit, event)
                return
            if (reason := skip_reason(event)) is not None:
                self.skipped += 1
                self.say(logging.INFO, "%s: skipped %s (not input)", self.name, reason)
                return
            await self.stored_this_life.store_once(message_name(event), lambda: emit([event], None))
        return deliver

    def normalise(self, raw: Any) -> MessageEvent:
        if isinstance(raw, dict) and ANSWER_FIELD in raw:
            return event_from_press(raw, self.name, self.profile)
        return event_from_chat(raw, self.name, self.profile)

    # ------------------------------------------------------------------------------------------- button presses
    async def _take_press(self, emit, event: dict) -> None:
        """A press that may answer its question is stored before Google is answered (a repeat of the same POST is
        the same row: the inbox's duplicate, or no write at all in this life); every press is then answered off
        the intake."""
        press = press_of(event)
        if press is None:
            self.skipped += 1
            self.say(logging.INFO, "%s: skipped a card click that is none of our buttons", self.name)
            return
        judged = await self.judge_press(event, Answerer(self.name, press.space, press.user_id), press.data,
                                        ANSWER_FIELD)
        if judged.kept:
            await self.stored_this_life.store_once(press.press_id, lambda: emit([judged.raw], None))
        self.acknowledge_press(press.press_id, lambda: self._answer_press(press, judged))

    async def _answer_press(self, press: Press, judged: JudgedPress) -> None:
        """A stored press: the question patched once the session has decided; a press on a settled question: the
        message patched to what became of it (card gone); any other: told why, privately."""
        kind, text = press_outcome(judged, Answerer(self.name, press.space, press.user_id), press.message_text,
                                   time.time(), mention)

        async def settle(settled: str) -> None:
            await (await self.api()).patch(press.message_name, settled[:TEXT_LIMIT], cards=[])
        if kind == STORED and judged.approval is not None:   # (a /model button's: the session's reply says)
            self.edit_when_settled(judged.approval.approval_id, press.message_text, settle, mention)
        elif kind == SETTLED:
            await settle(text)
        else:
            await (await self.api()).create(press.space, text, notice_request_id(press), thread=press.thread,
                                            private_viewer=press.user_id)

    # ------------------------------------------------------------------------------------------------ outbound
    async def send_message(self, op: PlatformOp) -> str:
        if len(op.text) > TEXT_LIMIT:
            raise TooLongError(f"{len(op.text)} characters, over {TEXT_LIMIT}", method="create")
        if not op.text.strip():
            raise PermanentError("Google Chat refuses an empty text", method="create")
        cards = question_cards(await self.question_buttons(op))
        message = await (await self.api()).create(op.chat_id, op.text, request_id(op), thread=op.thread_id,
                                                   cards=cards)
        name = message.get("name")
        if not isinstance(name, str) or not name.startswith(op.chat_id + "/messages/"):
            raise PermanentError("the create answered no message of the space", method="create")
        return name

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        """A user's uploaded file: ``media.download`` of its resource name with the app's token (client.py), at
        most ``cap`` bytes; one the API refuses for good (gone, not the app's to read) is given up at once."""
        try:
            return await (await self.api()).download(self.http(), attachment.ref, cap,
                                                      lambda size: AttachmentTooLarge(size, cap))
        except PermanentError as exc:
            raise AttachmentGone(self.clean_error(exc)) from None

    async def edit_message(self, op: PlatformOp) -> None:
        if len(op.text) > TEXT_LIMIT:
            raise TooLongError(f"{len(op.text)} characters, over {TEXT_LIMIT}", method="patch")
        cards = question_cards(await self.question_buttons(op))   # a preview edited into the question: its card
        await (await self.api()).patch(_message_name(op), op.text, cards=cards)

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
