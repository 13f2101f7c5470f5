"""MatrixAdapter: one account (access token) on one homeserver; ``/sync`` long polls for intake, room events PUT
by transaction id for replies (actors/adapters/matrix/README.md). Unencrypted rooms only.

Why no client library: matrix-nio and mautrix keep the sync token in their own store (or in memory) and advance
it as soon as a response is parsed, before the application has handled the events; the gateway's promise is that
the token moves only in the same transaction as the inbox rows it covers. The part of the protocol a bot needs is
small (client.py), so it is spoken directly with aiohttp, as the Discord adapter does.

Intake (``fetch``, one round per sync). The committed offset is the sync's ``next_batch``: each round asks for
what came after it, and the base (intake.py) commits the round's rows with the new ``next_batch`` in one
transaction, so a kill -9 before the commit makes the next life sync from the old token and get the same events
again (deduplicated by event id), and nothing acknowledged is lost. A bot that never synced takes only where the
stream stands (no history). Invites are answered before the round commits: joined when the access policy admits
the inviter (``open``, ``allow``, a granted user; in ``pairing`` mode also a stranger's direct-chat invite, so that
they can be given a code), otherwise rejected. Joining twice (after a crash) is harmless.

Outbound. A reply's part is ``PUT /rooms/{room}/send/m.room.message/{txnId}`` with the txnId derived from the ledger's
obligation (content.txn_id): after a crash between the PUT leaving and its event id being recorded, the resumed reply
PUTs the same txnId from the same device and the server answers with the event the first PUT made (pacing
``idempotent_send``), so the room holds one event for it and the reply never needs the re-sent mark. Edits are
``m.replace`` events and deletions redactions, each PUT under the op's ``platform_key`` (idempotency.py: the op id
with the content, so an edit made by a later life is never taken for a retry of an earlier one's); the typing
indicator is the room's typing notification. A reply's voice note (docs/media.md, voice replies) is the stored audio
uploaded to the media repository, then an ``m.audio`` voice message (MSC3245) PUT like a text part; a user's voice
message is fetched by its ``mxc://`` URI (authenticated media) and transcribed. A 429's ``retry_after_ms`` is the
base's flood handling (the room waits, the ban is committed).
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from actors.adapters.intake_styles import PollingAdapter
from actors.adapters.idempotency import platform_key
from actors.adapters.errors import MessageNotFoundError, PermanentError, TooLongError
from actors.adapters.matrix import formatting as build
from actors.adapters.matrix.client import MatrixClient
from actors.adapters.matrix.inbound import (FIRST_SYNC_FILTER, SYNC_FILTER, Invite, event_from_sync, is_input,
                                          joins_invite, read_sync)
from actors.adapters.pacing import utf8_len
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.messages import Attachment, MessageEvent, PlatformOp

MAX_KNOWN_ROOMS = 10_000         # room kinds remembered; past it the cache starts again (one lookup per room)


class MatrixAdapter(PollingAdapter):
    def __init__(self):
        super().__init__()
        self.bot_id = ""
        self.skipped = 0                           # sync events handled without becoming input
        self.room_kinds: dict[str, str] = {}       # room id -> dm | group, learnt from its joined members
        self._client: Optional[MatrixClient] = None

    # -------------------------------------------------------------------------------------------------- intake
    def normal_silence_s(self) -> float:
        # A /sync comes back within its wait, or times out past request_timeout_s and the intake reconnects.
        return self.settings["sync_timeout_s"] + self.settings["request_timeout_s"] + 5.0

    async def connect(self) -> None:
        await self._whoami()   # a wrong token fails here: 401 M_UNKNOWN_TOKEN, PermanentError (intake._refused)

    async def _whoami(self) -> str:
        if not self.bot_id:
            me = await self._api().whoami()
            if not isinstance(me, dict) or not isinstance(me.get("user_id"), str):
                raise PermanentError("whoami answered no user_id", method="whoami")
            self.bot_id = me["user_id"]
        return self.bot_id

    async def fetch(self) -> tuple[list, Any]:
        first = not self.offset
        timeout_ms = 0 if first else int(self.settings["sync_timeout_s"] * 1000)
        try:
            body = await self._api().sync(self.offset or None, timeout_ms,
                                          FIRST_SYNC_FILTER if first else SYNC_FILTER)
        except PermanentError as exc:
            if first or exc.status != 400:
                raise
            # The homeserver no longer knows the committed token (its database was replaced or rolled back): no
            # retry can cure that, and nothing it covered can be asked for again. Start from where the stream
            # stands now, as a bot that never synced does, rather than stay refused.
            self.say(logging.ERROR, "%s: the homeserver refused the committed sync token (%s); syncing from now "
                      "on: messages since the last round are not fetched", self.name, self.clean_error(exc))
            first = True
            body = await self._api().sync(None, 0, FIRST_SYNC_FILTER)
        try:
            batch = read_sync(body, self.bot_id)
        except ValueError as exc:
            raise PermanentError(str(exc), method="sync") from None
        for room_id in batch.left | batch.membership_changed:
            self.room_kinds.pop(room_id, None)
        for invite in batch.invites:
            await self._answer_invite(invite)
        if first:
            self.say(logging.INFO, "%s: first sync: taking messages from now on (%d invite(s) answered)",
                      self.name, len(batch.invites))
            return [], batch.next_batch
        raws = []
        for item in batch.messages:
            event = item.get("event")
            if isinstance(event, dict) and event.get("sender") == self.bot_id:
                self.skipped += 1
                continue
            raw = dict(item, kind=await self._room_kind(item.get("room_id")))
            if is_input(raw, self.bot_id, self.settings["require_mention"]):
                raws.append(raw)
            else:
                self.skipped += 1
        return raws, batch.next_batch

    async def _room_kind(self, room_id: Any) -> str:
        """dm for a room of two joined members, else group: asked once per room (and again after its membership
        changed), so a DM that a third person joins becomes a group room from then on."""
        if not isinstance(room_id, str):
            return "group"
        if room_id not in self.room_kinds:
            try:
                joined = (await self._api().joined_members(room_id)).get("joined")
            except PermanentError:   # not a member any more: it cannot be a DM of the bot's
                joined = None
            if len(self.room_kinds) >= MAX_KNOWN_ROOMS:
                self.room_kinds.clear()
            self.room_kinds[room_id] = "dm" if isinstance(joined, dict) and len(joined) <= 2 else "group"
        return self.room_kinds[room_id]

    async def _answer_invite(self, invite: Invite) -> None:
        if await self._admits_inviter(invite):
            try:
                await self._api().join(invite.room_id)
                self.say(logging.INFO, "%s: joined %s on the invite of %s", self.name, invite.room_id,
                          invite.inviter)
                return
            except PermanentError as exc:   # the room is gone, or the invite withdrawn: nothing to join
                self.say(logging.WARNING, "%s: could not join %s: %s", self.name, invite.room_id, self.clean_error(exc))
                return
        self.say(logging.INFO, "%s: invite to %s from %s declined: the access policy does not admit them",
                  self.name, invite.room_id, invite.inviter)
        try:
            await self._api().leave(invite.room_id)
        except PermanentError:
            pass

    async def _admits_inviter(self, invite: Invite) -> bool:
        policy = self.intake.gatekeeper.policy
        granted = False
        if invite.inviter is not None and not policy.admits_without_lookup(invite.inviter):
            granted = invite.inviter in await self.store.access.granted_among(self.name, {invite.inviter})
        return joins_invite(policy, invite, granted)

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_sync(raw, self.name, self.profile, self.bot_id)

    # ------------------------------------------------------------------------------------------------ outbound
    def _api(self) -> MatrixClient:
        if self._client is None:
            self._client = MatrixClient(self.settings["homeserver"], self.settings["access_token"],
                                        request_timeout=self.settings["request_timeout_s"])
        return self._client

    async def send_message(self, op: PlatformOp) -> str:
        if utf8_len(op.text) > self.pacing.text_limit:
            raise TooLongError(f"{utf8_len(op.text):,} bytes of text; the limit is {self.pacing.text_limit:,}",
                               method="send")
        content = build.new_message(op.text, thread_id=op.thread_id, reply_to=op.reply_to)
        return await self._api().send_event(op.chat_id, build.txn_id(op.idempotency_key, platform_key(op)), content)

    async def send_file(self, op: PlatformOp) -> str:
        """A reply's voice note (the only file this adapter is given: pacing ``sends_voice`` without
        ``sends_files``): the stored audio uploaded to the media repository, then an ``m.audio`` voice message
        PUT under the part's transaction id. After a crash the audio may be uploaded again (an unused copy on the
        server), but the PUT's transaction id is the part's, so the room gets one event."""
        if op.file.kind != "voice":
            raise PermanentError(f"Matrix replies carry no {op.file.kind} here, only voice notes", method="send")
        data = await self.file_bytes(op.file)
        mxc = await self._api().upload(data, op.file.mime, op.file.name)
        content = build.voice_message(mxc, op.file.mime, len(data), op.file.caption, thread_id=op.thread_id)
        return await self._api().send_event(op.chat_id, build.txn_id(op.idempotency_key, platform_key(op)), content)

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        """A user's voice message by its ``mxc://`` URI (authenticated media)."""
        try:
            return await self._api().download(attachment.ref, cap, lambda size: AttachmentTooLarge(size, cap))
        except PermanentError as exc:
            raise AttachmentGone(self.clean_error(exc)) from None

    async def edit_message(self, op: PlatformOp) -> None:
        event_id = _event_id(op)
        original = await self._api().get_event(op.chat_id, event_id)
        if not original.get("content") or (original.get("unsigned") or {}).get("redacted_because"):
            raise MessageNotFoundError(f"{event_id} was redacted", method="edit")
        await self._api().send_event(op.chat_id, build.txn_id(None, platform_key(op), "edit"),
                                     build.edit(event_id, op.text))

    async def delete_message(self, op: PlatformOp) -> None:
        await self._api().redact_event(op.chat_id, _event_id(op), build.txn_id(None, platform_key(op), "redact"))

    async def send_typing(self, op: PlatformOp) -> None:
        interval = self.pacing.typing_interval_s or 20.0
        await self._api().typing(op.chat_id, await self._whoami(), int((interval + 10.0) * 1000))

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def _event_id(op: PlatformOp) -> str:
    if not (isinstance(op.message_id, str) and op.message_id.startswith("$") and len(op.message_id) <= 255):
        raise PermanentError(f"{op.action}: {op.message_id!r} is no Matrix event id")
    return op.message_id
