"""MattermostAdapter: one bot account (or personal access token) on one server; the WebSocket event stream for
intake, REST v4 for replies (actors/adapters/mattermost/README.md).

Why no client library: mattermostdriver (the Python driver) keeps its own reconnect loop and hands events to a
callback without waiting for it, and has no notion of an offset to resume from; what the adapter needs is a
WebSocket with four kinds of frames and seven REST calls, spoken here with aiohttp.

Intake. ``EventStream`` (websocket.py) opens the stream and authenticates; each ``posted`` event that is input
(inbound.skip_reason: a person's post, in a channel only when it mentions the bot unless ``require_mention =
false``) is committed with the offset ``{"create_at": ms}``, the newest post creation time seen, in one
transaction. The stream has no replay of its own across connections, so after every (re)connection, and whenever
the stream's ``seq`` skips a number, the adapter asks the REST API for the posts of each of its channels created
since that offset (less ``RECOVERY_OVERLAP_MS``, for posts that arrived out of order) and commits those that are
input: nothing posted while the connection was down, or the adapter dead, is lost. Posts are deduplicated by id
here within this life (``REMEMBERED_POSTS``) and by the inbox across lives, so a post fetched again is stored once.
At the very first start there is no offset: the adapter commits "now" and answers nothing older.

State (loop thread): ``bot_id``/``bot_username`` (from ``GET /users/me``), the stream, ``high_water`` (the newest
``create_at`` seen this life), the ids of posts handled this life, counters (``skipped``, ``recovered``). What
survives kill -9: the offset committed with the last rows; the rest is rebuilt on start.

Outbound. ``POST /posts`` with ``root_id`` (``op.thread_id``: the answer goes into the thread it was asked in) and
``pending_post_id`` (from the op's id: a retry of one operation carries the same one, and Mattermost answers a
repeated create within 30 s with the post the first one made). The server forgets it after 30 s, so the gateway
does not count on it (no ``idempotent_send``): instead a part of a reply carries its place in the ledger in its
props (``gateway_part``), and a send whose answer was lost is looked for by it (``find_lost_copy``) before the
reply is re-sent with the mark. Streaming edits are ``PUT /posts/{id}/patch``, deletes ``DELETE /posts/{id}``;
typing is the stream's ``user_typing`` action (REST while the stream is down). Files: a user's come as the post's
``file_ids`` and are fetched with ``GET /files/{id}``; the agent's go up with ``POST /files`` and then a post
carrying the file's id. The bot's status reactions are ``POST /reactions`` by emoji name (formatting.emoji_name),
its earlier one on the post removed first.
"""
from __future__ import annotations

import collections
import logging
import time
from typing import Any, Optional

from actors.adapters.errors import MessageNotFoundError, PermanentError
from actors.adapters.intake_styles import StreamingAdapter
from actors.adapters.lost_copies import Unresolved
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.adapters.mattermost.client import MattermostREST
from actors.adapters.mattermost.formatting import emoji_name, to_post
from actors.adapters.mattermost.inbound import (create_at_of, event_from_post, is_post_id, raw_from_event,
                                                raw_from_rest, skip_reason)
from actors.adapters.mattermost.websocket import EventStream
from actors.messages import Attachment, MessageEvent, PlatformOp

REMEMBERED_POSTS = 4096             # post ids handled in this life, for skipping a repeat without a write
RECOVERY_OVERLAP_MS = 5000          # posts of several channels may reach the stream a little out of order
RECOVERY_BATCH = 100                # missed posts committed per transaction
LOST_COPY_WINDOW_MS = 24 * 3600 * 1000   # how far back a lost copy is looked for
PART_PROP = "gateway_part"


def part_label(ledger: Optional[tuple]) -> Optional[str]:
    """The label a reply's part carries in its props: the obligation and the part's index (not the fence: a copy
    sent by an earlier owner of the reply is still that part)."""
    if not ledger:
        return None
    obligation_id, _fence, index = ledger
    return f"{obligation_id}.{index}"


class MattermostAdapter(StreamingAdapter):
    def __init__(self):
        super().__init__()
        self.bot_id = ""
        self.bot_username = ""
        self.high_water = 0
        self.skipped = 0              # posts handled without becoming input (own posts, bots, not addressed)
        self.recovered = 0            # posts stored by a recovery after a reconnect or a gap
        self._handled: collections.OrderedDict = collections.OrderedDict()
        self._stream: Optional[EventStream] = None
        self._rest: Optional[MattermostREST] = None

    # -------------------------------------------------------------------------------------------------- intake
    def normal_silence_s(self) -> float:
        # A ping leaves every ping_interval_s and its pong is progress; two missed, plus a margin, is a zombie
        # (aiohttp closes the connection itself after half an interval without a pong: this is the wall behind).
        return 2 * float(self.settings["ping_interval_s"]) + 15.0

    async def connect(self) -> None:
        me = await self._api().me()      # a wrong token fails here: 401, PermanentError (intake._refused)
        if not isinstance(me, dict) or not is_post_id(me.get("id")):
            raise PermanentError("GET /users/me answered no user", method="get_me")
        self.bot_id, self.bot_username = me["id"], str(me.get("username") or "")
        await self.disconnect()
        self._stream = EventStream(self.settings["base_url"], self.settings["token"],
                                   float(self.settings["ping_interval_s"]), alive=self.report_progress)
        await self._stream.connect()

    async def disconnect(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.close()

    async def run_intake(self, emit) -> None:
        stream = self._stream
        if stream is None:
            raise PermanentError("the event stream is not open")
        committed = self.offset.get("create_at") if isinstance(self.offset, dict) else None
        if isinstance(committed, int):
            self.high_water = max(self.high_water, committed)
            await self._recover(emit, committed)
        else:     # the first start: what was posted before it is history, not questions
            self.high_water = int(time.time() * 1000)
            await emit([], {"create_at": self.high_water})
        while True:
            event = await stream.next_event()
            if event.gap:
                self.say(logging.WARNING, "%s: the event stream skipped to seq %s: fetching what it missed",
                         self.name, event.seq)
                await self._recover(emit, self.high_water)
            if event.name == "posted":
                await self._take([raw_from_event(event.data)], emit)

    async def _recover(self, emit, since_ms: int) -> None:
        """Store the input posted in the bot's channels after ``since_ms`` (less the overlap). Every channel is
        read before anything is committed, and the posts go in creation order: an offset committed midway (a kill
        -9 during the recovery) never passes a missed post of a channel not yet stored."""
        since = max(0, since_ms - RECOVERY_OVERLAP_MS)
        limit = max(1, int(self.settings["recovery_limit"]))
        missed = []
        for channel in await self._api().my_channels():
            if not isinstance(channel, dict) or not is_post_id(channel.get("id")):
                continue
            last = channel.get("last_post_at")
            if isinstance(last, int) and last <= since:
                continue        # nothing new there: no call
            listing = await self._api().posts_since(channel["id"], since)
            posts = listing.get("posts") if isinstance(listing, dict) else None
            posts = sorted((p for p in (posts.values() if isinstance(posts, dict) else ())
                            if isinstance(p, dict) and isinstance(p.get("create_at"), int) and p["create_at"] > since),
                           key=lambda p: p["create_at"])
            if len(posts) > limit:
                self.say(logging.WARNING, "%s: %d posts in channel %s since the last connection; the newest %d "
                         "are taken (recovery_limit)", self.name, len(posts), channel["id"], limit)
                posts = posts[-limit:]
            missed += [raw_from_rest(p, channel.get("type")) for p in posts]
        missed.sort(key=lambda raw: raw["post"]["create_at"])
        before = self.skipped
        stored = 0
        for start in range(0, len(missed), RECOVERY_BATCH):
            stored += await self._take(missed[start:start + RECOVERY_BATCH], emit)
        self.recovered += stored
        if stored:
            self.say(logging.INFO, "%s: %d missed post(s) fetched (%d skipped)", self.name, stored,
                     self.skipped - before)

    async def _take(self, raws: list, emit) -> int:
        """Commit the input among ``raws`` with the offset that covers them; how many went to the inbox."""
        kept = []
        for raw in raws:
            post = raw.get("post") if isinstance(raw.get("post"), dict) else {}
            post_id = post.get("id")
            if isinstance(post_id, str) and post_id in self._handled:
                continue
            created = create_at_of(raw)
            if created is not None:
                self.high_water = max(self.high_water, created)
            if skip_reason(raw, self.bot_id, self.bot_username, self.settings["require_mention"]) is not None:
                self.skipped += 1
                self._remember(post_id)
                continue
            kept.append(raw)
        if not kept:
            return 0
        await emit(kept, {"create_at": self.high_water})     # committed: rows and offset in one transaction
        for raw in kept:
            self._remember(raw["post"].get("id") if isinstance(raw.get("post"), dict) else None)
        return len(kept)

    def _remember(self, post_id: Any) -> None:
        if isinstance(post_id, str):
            self._handled[post_id] = True
            while len(self._handled) > REMEMBERED_POSTS:
                self._handled.popitem(last=False)

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_post(raw, self.name, self.profile, self.bot_id, self.bot_username)

    # ------------------------------------------------------------------------------------------------ outbound
    def _api(self) -> MattermostREST:
        if self._rest is None:
            self._rest = MattermostREST(self.settings["base_url"], self.settings["token"])
        return self._rest

    async def send_message(self, op: PlatformOp) -> str:
        return await self._create(op, op.text)

    async def _create(self, op: PlatformOp, text: str, file_ids: tuple[str, ...] = ()) -> str:
        label = part_label(op.ledger)
        post = await self._api().create_post(op.chat_id, to_post(text), root_id=op.thread_id,
                                             pending_post_id=f"gw:{op.op_id}",
                                             props={PART_PROP: label} if label else None, file_ids=file_ids)
        if not isinstance(post, dict) or not is_post_id(post.get("id")):
            raise PermanentError("POST /posts answered no post", method="create_post")
        return post["id"]

    async def send_file(self, op: PlatformOp) -> str:
        """Upload the file to the channel, then a post carrying it with its caption. An upload whose post never
        came is an orphan file on the server, seen by no one."""
        data = await self.file_bytes(op.file)
        file_id = await self._api().upload(op.chat_id, op.file.name, op.file.mime, data)
        return await self._create(op, op.file.caption, (file_id,))

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        if not is_post_id(attachment.ref):
            raise AttachmentGone(f"{attachment.ref!r} is no Mattermost file id")
        try:
            return await self._api().download(attachment.ref, cap, lambda size: AttachmentTooLarge(size, cap))
        except PermanentError as exc:
            raise AttachmentGone(self.clean_error(exc)) from None

    async def edit_message(self, op: PlatformOp) -> None:
        await self._api().patch_post(_post_id(op), to_post(op.text))

    async def delete_message(self, op: PlatformOp) -> None:
        try:
            await self._api().delete_post(_post_id(op))
        except MessageNotFoundError:
            pass      # gone already: what a delete wants

    async def send_typing(self, op: PlatformOp) -> None:
        stream = self._stream
        if stream is not None and stream.open:
            await stream.act("user_typing", {"channel_id": op.chat_id, "parent_id": op.thread_id or ""})
            return
        await self._api().typing(await self._bot_id(), op.chat_id, op.thread_id or "")

    async def set_reaction(self, op: PlatformOp) -> None:
        """The bot's reaction on the post becomes ``op.text`` (none for ""): its other reactions there are removed."""
        post_id = _post_id(op)
        try:
            wanted = emoji_name(op.text) if op.text.strip() else ""
        except ValueError as exc:
            raise PermanentError(str(exc), method="add_reaction") from None
        bot_id = await self._bot_id()
        current = {r.get("emoji_name") for r in await self._api().reactions(post_id)
                   if isinstance(r, dict) and r.get("user_id") == bot_id}
        for name in sorted(n for n in current if isinstance(n, str) and n != wanted):
            await self._api().remove_reaction(bot_id, post_id, name)
        if wanted and wanted not in current:
            await self._api().add_reaction(bot_id, post_id, wanted)

    async def _bot_id(self) -> str:
        """Who the bot is, for outbound calls that name it (asked once when the intake has not yet)."""
        if not self.bot_id:
            me = await self._api().me()
            if not isinstance(me, dict) or not is_post_id(me.get("id")):
                raise PermanentError("GET /users/me answered no user", method="get_me")
            self.bot_id = me["id"]
        return self.bot_id

    async def find_lost_copy(self, op: PlatformOp) -> Optional[str]:
        """The post a lost send of this part left: the bot's post in the chat whose props carry the part's label,
        now patched to ``op.text``; None if there is none (the send never landed)."""
        label = part_label(op.ledger)
        if label is None or not is_post_id(op.chat_id):
            raise Unresolved("the send names no part of a reply in a Mattermost channel")
        listing = await self._api().posts_since(op.chat_id, int(time.time() * 1000) - LOST_COPY_WINDOW_MS)
        posts = listing.get("posts") if isinstance(listing, dict) else None
        for post in (posts.values() if isinstance(posts, dict) else ()):
            props = post.get("props") if isinstance(post, dict) and isinstance(post.get("props"), dict) else {}
            if props.get(PART_PROP) == label and not post.get("delete_at") and is_post_id(post.get("id")):
                if post.get("message") != to_post(op.text):
                    await self._api().patch_post(post["id"], to_post(op.text))
                return post["id"]
        return None

    async def close(self) -> None:
        rest, self._rest = self._rest, None
        if rest is not None:
            await rest.close()


def _post_id(op: PlatformOp) -> str:
    if not is_post_id(op.message_id):
        raise PermanentError(f"{op.action}: {op.message_id!r} is no Mattermost post id")
    return op.message_id
