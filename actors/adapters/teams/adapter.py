"""TeamsAdapter: one Microsoft Teams bot (Azure Bot Service): Bot Framework activities in, the Bot Connector REST API
out (actors/adapters/teams/README.md). A leaf process actor: the base (base.py) runs its intake and its lanes.

Why the protocol directly and no SDK: the Bot Framework SDK for Python (botbuilder) is retired, and it takes the
OpenID metadata URL, the tokens' issuer and the token endpoint from class-level constants (``ChannelValidation``,
``AuthenticationConstants``) and keeps the signing keys in a process-wide cache: pointing it at a local fake
(tests/fakes/teams) means patching its internals. The protocol is two documented token checks and four REST calls,
written here against Microsoft's reference.

States: not connected -> connected (the messaging endpoint listens and the token endpoint gave the app an access
token) -> back to not connected on a failure (the base reconnects with backoff; an app id or secret refused is
"refused": reported down and asked again every ``refused_retry_s``). The endpoint keeps listening from the first
connect on, so a token endpoint outage never turns the Connector's activities away.

Intake (webhook_server.py): the bearer token is verified (auth.py: signature against the Connector's published keys,
issuer, audience = the app id, expiry, its serviceUrl claim = the activity's, its key endorsed for the channel)
before the activity is taken; a refused request is answered 401, logged once with its reason, nothing stored. An
activity that is no input (conversationUpdate, typing, a channel message not mentioning the bot) is answered and
skipped with a log line; one committed in this life already (``<id>@<conversation>``) is answered without a write;
otherwise its serviceUrl is learned (serviceurls.py), and the row is stored with the offset that holds the
conversations' service URLs, and the Connector is answered 200 only after that commits. The inbox's (adapter,
message) dedup covers a repeat after a restart. What survives kill -9: a committed row and the serviceUrl of its
conversation (one transaction); an activity cut before its commit was never answered 2xx, and the Connector sends
it again.

Buttons (cards.py): a tool approval's question and /model's listing carry an Adaptive Card of Action.Submit buttons;
a press is a message activity with a ``value``, judged by the kit's press logic (presses.py) and stored as the
presser's typed answer under its own activity id, the question updated once settled. Files (files.py): small images
go out inline (base64 in the message, ``inline_image``); any other file, in a personal chat, with a file consent
card whose context carries the offer sealed (nothing kept here while the user decides), uploaded on the user's Allow
(a ``fileConsent/invoke``, acted on before it is answered 200) and shown with a file info card; in a group chat or a
channel refused. Images pasted in are fetched from the activity's own Connector with the bot's token, files shared
from OneDrive or SharePoint by their download link without it (``download_attachment``).

Outbound: a part is an activity POSTed to the conversation (in a channel, as a reply to the thread's first post:
``replyToId``) at the conversation's serviceUrl; streaming updates are PUT of the sent activity, paced by the kit
(platform.py: 1.5 s apart, within Teams' 7 a second and 60 in 30 s per conversation); deletes are DELETE (an
activity already gone is done); typing is a ``typing`` activity. No idempotency key exists on the Connector, so the
adapter derives none: a send whose answer was lost is re-sent under the kit's re-sent mark. 429 and 412 are a
FloodError on the conversation's lane with the Retry-After (client.py).
"""
from __future__ import annotations

import base64
import collections
import dataclasses
import logging
import time
from typing import Any, Optional

from actors.adapters.errors import MessageNotFoundError, PermanentError, TooLongError
from actors.adapters.http_session import HttpSession
from actors.adapters.intake_styles import WebhookAdapter
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.adapters.presses import REFUSED, SETTLED, ButtonPresses, JudgedPress, press_outcome
from actors.adapters.push_server import StoredThisLife
from actors.adapters.teams.auth import BotTokens, ChannelKeys, check_activity
from actors.adapters.teams.cards import ANSWER_FIELD, Press, card_attachments, is_press, press_of
from actors.adapters.teams.client import ConnectorAPI, classify, put_file
from actors.adapters.teams.files import (Accepted, Declined, Offer, consent_answer, consent_card, file_host_allowed,
                                         file_info_card, is_consent_answer, sealing_key)
from actors.adapters.teams.inbound import (SHARED_REF, conversation_id, event_from_activity, message_key,
                                           skip_reason)
from actors.adapters.teams.platform import TOKEN_URL
from actors.adapters.teams.serviceurls import ServiceUrlRefused, ServiceUrls
from actors.adapters.teams.webhook_server import ActivityServer
from actors.approvals.answers import Answerer
from actors.media.outgoing import unsent_line
from actors.messages import Attachment, MessageEvent, OutgoingFile, PlatformOp
from supervision.http_serving import http_limits

REMEMBERED_ACTIVITIES = 4096   # activities committed in this life, for answering a repeat without a write
REMEMBERED_NAMES = 4096        # senders' display names, for "Approved by NAME" (a restart falls back to the id)
REMEMBERED_REFUSALS = 4096     # (presser, question) told why their press does not count: told once in a life
TEXT_LIMIT = 20000
# An inline image travels in the message as base64 (4/3 of its size) and Teams refuses a message past about 28 KB:
# 20,000 bytes of image leave room for its caption and the activity's fields.
INLINE_IMAGE_BYTES = 20_000
INLINE_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif")
CAPTION_LIMIT = 1000


def token_url(settings: dict) -> str:
    return settings["oauth_url"] or TOKEN_URL.format(tenant=settings["tenant_id"] or "botframework.com")


class TeamsAdapter(ButtonPresses, WebhookAdapter):
    def __init__(self):
        super().__init__()
        self.init_presses()
        self._names: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._refusals_told: collections.OrderedDict[tuple, None] = collections.OrderedDict()
        self.skipped = 0              # activities answered without becoming input
        self.stored_this_life = StoredThisLife(REMEMBERED_ACTIVITIES)   # repeats answered without a write
        self._api: Optional[ConnectorAPI] = None
        self._channel_keys: Optional[ChannelKeys] = None
        self._http: Optional[HttpSession] = None
        self._urls: Optional[ServiceUrls] = None
        self._urls_unsaved = False    # a conversation's serviceUrl learned and not yet committed
        self._consents_done: collections.OrderedDict[str, None] = collections.OrderedDict()   # consent answers

    # -------------------------------------------------------------------------------------------------- intake
    async def connect(self) -> None:
        await self.service_urls()
        if self.push_server.server is None:
            await self._serve_activities()
        await self.api().tokens.token()   # a refused app id or secret fails here: PermanentError (refused)

    def http(self) -> HttpSession:
        if self._http is None:
            self._http = HttpSession()
        return self._http

    def api(self) -> ConnectorAPI:
        if self._api is None:
            s = self.settings
            self._api = ConnectorAPI(BotTokens(self.http(), s["app_id"], s["app_password"], token_url(s)),
                                     rate_limit_wait_s=s["rate_limit_wait_s"])
        return self._api

    async def service_urls(self) -> ServiceUrls:
        """The conversations' Connectors, as the last committed offset left them (serviceurls.py)."""
        if self._urls is None:
            await self.intake.open_store()
            offset = self.offset if isinstance(self.offset, dict) else {}
            remembered = offset.get("service_urls") if isinstance(offset.get("service_urls"), dict) else None
            self._urls = ServiceUrls(self.settings["service_url"], self.settings["allowed_service_urls"], remembered)
        return self._urls

    async def _serve_activities(self) -> None:
        def on_error(text: str) -> None:
            self.say(logging.WARNING, "%s: an activity was not stored (%s); the Connector sends it again",
                     self.name, self.clean_error(text))

        s = self.settings
        self._channel_keys = ChannelKeys(self.http(), s["openid_metadata_url"])
        urls = self._urls

        def check(claims: dict, activity: dict) -> None:
            check_activity(claims, activity, self._channel_keys.endorsements)
            urls.checked_url(activity["serviceUrl"])

        server = ActivityServer(s["webhook_host"], s["webhook_port"], s["webhook_path"],
                                verify=lambda header: self._channel_keys.verify(header, s["app_id"], s["issuer"]),
                                check=check, deliver=self._deliver_to(self.intake.emit), on_error=on_error,
                                on_refused=self.intake.reject, limits=http_limits(self.config))
        port = await server.start()   # a port that is taken raises here: retried, nothing half-started is kept
        self.push_server.server = server
        self.say(logging.INFO, "%s: Teams activities on %s:%d%s", self.name, s["webhook_host"], port,
                 s["webhook_path"])

    def _deliver_to(self, emit):
        async def store(activity: dict) -> None:
            # The conversation's serviceUrl commits with its row (the offset): a reply after kill -9 finds it.
            # One learned by a store that failed goes with the next one.
            conversation = conversation_id(activity)
            if conversation is not None and self._urls.learn(conversation, activity["serviceUrl"]):
                self._urls_unsaved = True
            await emit([activity], self._urls.snapshot() if self._urls_unsaved else None)
            self._urls_unsaved = False

        async def deliver(activity: dict) -> None:
            """Store one activity (or skip it); the Connector is answered when this returns."""
            self._learn_name(activity)
            if is_consent_answer(activity):
                await self._answer_consent(activity)
                return
            if is_press(activity):
                await self._take_press(activity, store)
                return
            if (reason := skip_reason(activity)) is not None:
                self.skipped += 1
                self.say(logging.INFO, "%s: skipped %s (not input)", self.name, reason)
                return
            await self.stored_this_life.store_once(message_key(activity), lambda: store(activity))
        return deliver

    def _learn_name(self, activity: dict) -> None:
        sender = activity.get("from") if isinstance(activity.get("from"), dict) else {}
        user, name = sender.get("id"), sender.get("name")
        if isinstance(user, str) and isinstance(name, str) and name.strip() and len(user) <= 512:
            self._names.pop(user, None)
            self._names[user] = name.strip()[:200]
            while len(self._names) > REMEMBERED_NAMES:
                self._names.popitem(last=False)

    def mention(self, user_id: str) -> str:
        """How a settled question names who answered: their display name as last seen, else their id."""
        return self._names.get(user_id, user_id)

    def normalise(self, raw: Any) -> MessageEvent:
        if isinstance(raw, dict) and ANSWER_FIELD in raw:
            event = event_from_activity(dict(raw, text=raw[ANSWER_FIELD]), self.name, self.profile)
            return dataclasses.replace(event, addressed=True)   # a press on the bot's own card speaks to it
        return event_from_activity(raw, self.name, self.profile)

    # ------------------------------------------------------------------------------------------- button presses
    async def _take_press(self, activity: dict, store) -> None:
        """A press that may answer its question is stored like a message, under its activity's id, before the
        Connector is answered: a delivery again after a kill -9 is either before that commit (stored now) or the
        same row (the inbox's duplicate). Every press is then answered off the intake (``_answer_press``)."""
        press = press_of(activity)
        if press is None:
            self.skipped += 1
            self.say(logging.INFO, "%s: skipped a card submit that is none of ours", self.name)
            return
        judged = await self.judge_press(activity, Answerer(self.name, press.conversation, press.user_id),
                                        press.data, ANSWER_FIELD)
        if judged.kept:
            await self.stored_this_life.store_once(message_key(activity), lambda: store(judged.raw))
        self.acknowledge_press(message_key(activity), lambda: self._answer_press(press, judged))

    async def _answer_press(self, press: Press, judged: JudgedPress) -> None:
        """A stored press: the question is updated once the session has decided (its card gone). A press on a
        question already settled: updated now to what became of it. Any other press: told why in the
        conversation, as a reply to the question (Teams shows nothing to one member alone), once per presser and
        question in a life, so a hostile presser cannot make the bot say it again and again."""
        question = await self.store.ledger.part_text(self.name, press.conversation, press.question_id)
        answerer = Answerer(self.name, press.conversation, press.user_id)
        kind, text = press_outcome(judged, answerer, question or "", time.time(), self.mention)
        url = (await self.service_urls()).for_conversation(press.conversation)

        async def update(settled: str) -> None:
            if question is not None:   # not a reply of ours (or no longer in the ledger): left as it is
                await self.api().update(url, press.conversation, press.question_id,
                                        dict(_message(settled, "update"), id=press.question_id))
        if kind == SETTLED:
            await update(text)
        elif kind == REFUSED:
            told = (press.user_id, press.question_id)
            if told in self._refusals_told:
                return
            self._refusals_told[told] = None
            while len(self._refusals_told) > REMEMBERED_REFUSALS:
                self._refusals_told.popitem(last=False)
            reply = dict(_message(f"{self.mention(press.user_id)}: {text}", "reply"), replyToId=press.question_id)
            await self.api().send(url, press.conversation, reply, reply_to=press.question_id)
        elif judged.approval is not None:   # stored; a /model button's press is answered by the session's reply
            self.edit_when_settled(judged.approval.approval_id, question or "", update, self.mention)

    # ------------------------------------------------------------------------------------------------ outbound
    async def send_message(self, op: PlatformOp) -> str:
        buttons = card_attachments(await self.question_buttons(op))
        return await self._post_activity(op, _message(op.text, "send", buttons))

    async def _post_activity(self, op: PlatformOp, activity: dict) -> str:
        reply_to = op.thread_id or None
        if reply_to:
            activity["replyToId"] = reply_to
        url = (await self.service_urls()).for_conversation(op.chat_id)
        answer = await self.api().send(url, op.chat_id, activity, reply_to=reply_to)
        sent = answer.get("id")
        if not isinstance(sent, str) or not sent:
            raise PermanentError("the Connector answered the send without an activity id", method="send")
        return sent

    async def send_file(self, op: PlatformOp) -> str:
        """A small image (``INLINE_IMAGE_TYPES``, at most ``INLINE_IMAGE_BYTES``) as an inline attachment of a message
        activity, in every conversation type: its bytes as a base64 ``data:`` URI in ``contentUrl`` (no upload, no
        Graph permission), its caption as the text. Any other file in a personal chat: a file consent card
        (files.py), the bytes uploaded once the user allows it (``_answer_consent``); the card's activity is the
        part's message id. In a group chat or a channel, where file consent does not apply: refused (a permanent
        failure: the reply shows the file's line in its place, saying why)."""
        file = op.file
        if file.mime in INLINE_IMAGE_TYPES and file.size <= INLINE_IMAGE_BYTES:
            activity = inline_image(file.mime, file.name, await self.file_bytes(file), file.caption)
            return await self._post_activity(op, activity)
        if not is_personal(op):
            raise PermanentError("Teams takes a bot's file only in a personal chat (with the user's consent); in a "
                                 "group chat or a channel it would have to be put in SharePoint (not built)",
                                 method="send")
        data = await self.file_bytes(file)   # one swept from the cache is refused now, not after the user allows
        offer = Offer(op.chat_id, file.cache_key, file.name or "file", file.mime, len(data),
                      int(time.time() + self.settings["file_consent_ttl_s"]))
        return await self._post_activity(op, consent_card(offer, self._sealing_key(), file.caption))

    def _sealing_key(self) -> bytes:
        return sealing_key(self.settings["app_password"])

    async def _answer_consent(self, activity: dict) -> None:
        """A user's Allow or Decline on a file consent card, acted on before the invoke is answered 200: on an
        Allow the bytes are uploaded and the file's card sent; on a Decline, or an offer that expired, the file's
        line says so. An answer repeated in this life (the Connector's retry) is not acted on twice; one delivered
        again after a kill -9 cut it before its 200 is acted on again (an upload session that already finished
        refuses it: logged). A failure to upload or to tell is logged and answered 200 all the same: the card
        stays, and Allow pressed again starts a new upload session."""
        conversation = conversation_id(activity)
        key = message_key(activity)
        if conversation is None or key is None or key in self._consents_done:
            return
        self._consents_done[key] = None
        while len(self._consents_done) > REMEMBERED_ACTIVITIES:
            self._consents_done.popitem(last=False)
        answer = consent_answer(activity, conversation, self._sealing_key(), time.time())
        url = (await self.service_urls()).for_conversation(conversation)
        reply_to = activity.get("replyToId") if isinstance(activity.get("replyToId"), str) else None
        try:
            if isinstance(answer, Accepted):
                await self._upload(answer)
                await self.api().send(url, conversation, file_info_card(answer))
                self.say(logging.INFO, "%s: %s uploaded to the user's OneDrive", self.name, answer.name)
                return
            if answer.offer is None:   # not ours, or altered: nothing to tell the user
                self.say(logging.WARNING, "%s: a file consent answer refused: %s", self.name, answer.why)
                return
            why = "the user declined it" if isinstance(answer, Declined) else f"not sent: {answer.why}"
            line = unsent_line(OutgoingFile(answer.offer.cache_key, answer.offer.mime, "document", answer.offer.name,
                                            size=answer.offer.size), why)
            await self.api().send(url, conversation, dict(_message(line, "send"), textFormat="plain"))
        except Exception as exc:  # noqa: BLE001 - the card stays: a new Allow tries again
            self.say(logging.WARNING, "%s: a file consent answer was not carried out (%s)%s", self.name,
                     self.clean_error(exc), f" (card {reply_to[:40]})" if reply_to else "")

    async def _upload(self, accepted: Accepted) -> None:
        s = self.settings
        if not file_host_allowed(accepted.upload_url, tuple(s["file_hosts"]), tuple(s["allowed_service_urls"])):
            raise PermanentError("the upload URL is on no host of file_hosts", method="upload")
        data = await self.file_bytes(OutgoingFile(accepted.offer.cache_key, accepted.offer.mime))
        await put_file(self.http(), accepted.upload_url, data, self.api().redact)

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        """An image pasted into a message: ``GET`` its contentUrl (on the activity's verified Connector, inbound.py)
        with the bot's access token; a file shared from OneDrive or SharePoint: ``GET`` its pre-authenticated
        download link, without the token, on a host of ``file_hosts`` only. At most ``cap`` bytes."""
        if attachment.ref.startswith(SHARED_REF):
            return await self._download_shared(attachment.ref[len(SHARED_REF):], cap)
        try:
            (await self.service_urls()).checked_url(attachment.ref.split("v3/attachments/", 1)[0])
        except ServiceUrlRefused as exc:
            raise AttachmentGone(str(exc)) from None
        api = self.api()
        headers = {"Authorization": f"Bearer {await api.tokens.token()}"}
        return await self._download(attachment.ref, cap, headers)

    async def _download_shared(self, url: str, cap: int) -> bytes:
        s = self.settings
        if not file_host_allowed(url, tuple(s["file_hosts"]), tuple(s["allowed_service_urls"])):
            raise AttachmentGone("the shared file's download link is on no host of file_hosts")
        return await self._download(url, cap, None)

    async def _download(self, url: str, cap: int, headers: Optional[dict]) -> bytes:
        api = self.api()
        try:
            return await self.http().download(
                url, cap, lambda size: AttachmentTooLarge(size, cap), op="get_attachment",
                refused=lambda status, body, answer_headers: classify("get_attachment", status, body, answer_headers),
                redact=api.redact, headers=headers)
        except PermanentError as exc:
            raise AttachmentGone(self.clean_error(exc)) from None

    async def edit_message(self, op: PlatformOp) -> None:
        # An update replaces the whole activity: a question keeps its card, any other text has none.
        activity = dict(_message(op.text, "update", card_attachments(await self.question_buttons(op))),
                        id=_activity_id(op))
        url = (await self.service_urls()).for_conversation(op.chat_id)
        await self.api().update(url, op.chat_id, _activity_id(op), activity)

    async def delete_message(self, op: PlatformOp) -> None:
        url = (await self.service_urls()).for_conversation(op.chat_id)
        try:
            await self.api().delete(url, op.chat_id, _activity_id(op))
        except MessageNotFoundError:
            pass      # gone already: what a delete wants

    async def send_typing(self, op: PlatformOp) -> None:
        url = (await self.service_urls()).for_conversation(op.chat_id)
        await self.api().send(url, op.chat_id, {"type": "typing"})

    async def close(self) -> None:
        await self.push_server.close()
        api, self._api = self._api, None
        http, self._http = self._http, None
        for client in (api, http):
            if client is not None:
                await client.close()


def _message(text: str, method: str, attachments: Optional[list] = None) -> dict:
    if len(text) > TEXT_LIMIT:
        raise TooLongError(f"{len(text)} characters, over {TEXT_LIMIT}", method=method)
    if not text.strip():
        raise PermanentError("Teams refuses an empty message", method=method)
    message = {"type": "message", "text": text, "textFormat": "markdown"}
    if attachments:
        message["attachments"] = attachments
    return message


def inline_image(mime: str, name: str, data: bytes, caption: str = "") -> dict:
    """A message activity showing ``data`` (an image of ``INLINE_IMAGE_TYPES``, at most ``INLINE_IMAGE_BYTES``)
    inline, with ``caption`` as its text; PermanentError for anything else."""
    if mime not in INLINE_IMAGE_TYPES:
        raise PermanentError(f"Teams takes a bot's {mime} only as a file of OneDrive or SharePoint (a consent card "
                             f"in a personal chat); images ({', '.join(INLINE_IMAGE_TYPES)}) go inline",
                             method="send")
    if len(data) > INLINE_IMAGE_BYTES:
        # Permanent, not too long: a file is no text the sender could split.
        raise PermanentError(f"{len(data)} bytes, over the {INLINE_IMAGE_BYTES} an inline image may have",
                             method="send")
    attachment = {"contentType": mime, "contentUrl": f"data:{mime};base64,{base64.b64encode(data).decode()}",
                  "name": name or "image"}
    activity = {"type": "message", "attachments": [attachment]}
    if caption.strip():
        activity.update(text=caption.strip()[:CAPTION_LIMIT], textFormat="plain")
    return activity


def is_personal(op: PlatformOp) -> bool:
    """A personal chat: a dm whose conversation id is no group chat's or channel's (theirs start ``19:``)."""
    return op.chat_type == "dm" and not op.chat_id.startswith("19:")


def _activity_id(op: PlatformOp) -> str:
    if not isinstance(op.message_id, str) or not op.message_id or len(op.message_id) > 512:
        raise PermanentError(f"{op.action}: {op.message_id!r} is no activity id")
    return op.message_id
