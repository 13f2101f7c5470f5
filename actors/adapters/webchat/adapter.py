"""The web chat adapter: the gateway's own chat page, served on the configured host (loopback by default).

    [adapters.web]
    type = "webchat"
    host = "127.0.0.1"       # the one interface it listens on
    port = 8765              # 0: the OS picks a free port; the address is logged either way
    profile = "default"

Push style: the server (server.py) calls ``handle_frame`` for every frame a page sends; a message goes through the
base's ``emit``, so it is in the inbox before the page gets its ack. Outbound operations are pushed to the visitor's
open tabs; with no tab open they still succeed: the answer is in the transcript, and a page that connects asks for
the history. The server outlives intake stops (drain): pages still receive answers and can read their history, but
new messages are answered with a retryable error until the intake runs again.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from typing import Any, Optional

from actors.adapters.intake_styles import ServingAdapter
from actors.adapters.forwarding import remote_shard
from actors.adapters.remote_reads import ReadWanted, RemoteReadFailed, RemoteReads
from actors.adapters.intake import SenderOverLimit, TextTooLong
from actors.adapters.payload_fields import MalformedPayload, a_string, an_object
from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, RetryableError,
                                    TooLongError)
from actors.adapters.webchat import earlier, protocol
from actors.adapters.webchat.presses import ANSWER_FIELD, WebChatPresses
from actors.adapters.webchat.address_limits import AddressLimits, address_policy
from actors.adapters.webchat.protocol import (CLIENT_MESSAGE_ID, VISITOR_ID, Outbox, error_frame,
                                              frame_id, op_frame)
from actors.adapters.webchat.server import WebChatServer
from actors.adapters.webchat.welcome import agent_facts
from actors.adapters.media_intake import cached
from actors.adapters.webchat.uploads import MAX_FILES_PER_MESSAGE, UPLOAD_WINDOW_S, UPLOADS_PER_WINDOW, Uploads
from actors.media.limits import cap_for, too_large_notice
from actors.media.names import display_name
from actors.media.sniff import RASTER, sniff
from actors.messages import Attachment, MessageEvent, PlatformOp, Source, StoreReadResult
from storage import StorageError
from storage.media import valid_key
from supervision.http_serving import http_limits
from common.config import setting

MAX_ATTEMPTS_KEPT = 200            # per chat and action, fault-injection runs only
REMOTE_READ_TIMEOUT_S = 5.0        # the history of a chat on a worker host: past it the page is told to retry


class WebChatAdapter(WebChatPresses, ServingAdapter):
    def __init__(self):
        super().__init__()
        self.init_presses()
        self.server: Optional[WebChatServer] = None
        self.outbox = Outbox()
        self._store_batch = None              # the base's emit while the intake runs, else None
        self.uploads = Uploads()              # files uploaded until a message names them (uploads.py)
        # Message ids are unique across restarts of this actor: a page may still hold ids of an earlier instance.
        self._id_prefix = f"w{secrets.token_hex(4)}"
        self._ids = itertools.count(1)
        self._floods_left, self._flood_retry_after, self._violations = 0, 0.0, 0
        self._banned_until: dict[str, float] = {}
        self._attempts: dict[tuple[str, str], list] = {}
        self.remote_reads: Optional[RemoteReads] = None   # histories of chats on a worker's shard (from connect)

    # -------------------------------------------------------------------------------------------------- intake
    async def connect(self) -> None:
        # The server starts once and stays up across intake restarts (see the module docstring).
        if self.server is not None:
            return
        self.remote_reads = RemoteReads(self.bridge.post, self.bridge.call)
        host, port = self.settings["host"].strip(), self.settings["port"]   # defaults: the registry's
        # Retryable, not a crash: a bad web chat setting must not take the other adapters down with it (the
        # supervisor escalates a crash loop to the root); the warning repeats until the configuration is fixed.
        if not host:
            raise RetryableError("host is empty; name one interface (an empty host would listen on all of them)")
        if port > 65535:
            raise RetryableError(f"port {port} is not a TCP port (0-65535)")
        if self.settings["max_tabs"] < 1:
            raise RetryableError(f"max_tabs is {self.settings['max_tabs']}: at least one tab must be allowed")
        server = WebChatServer(host, port, self, http_limits(self.config), self.settings["max_tabs_per_client"],
                               max_tabs=self.settings["max_tabs"], address_limits=AddressLimits(
                                   address_policy(self.settings)), behind_proxy=self.settings["behind_proxy"],
                               upload_timeout_s=self.settings["upload_timeout_s"],
                               on_refused=lambda reason: self.say(logging.WARNING, "%s: %s", self.name, reason),
                               login_token=self.settings["login_token"])
        port = await server.start()
        self.server = server
        self.say(logging.INFO, "%s: web chat serving on http://%s/ (port %d)", self.name, _host_port(host, port), port)
        if host in ("0.0.0.0", "::") and not self.settings["login_token"]:
            self.say(logging.WARNING, "%s: the web chat listens on every interface (host %s) and has no login: "
                      "anyone who reaches the port can chat (set [adapters.%s] login_token)", self.name, host,
                      self.name)

    def served_url(self) -> Optional[str]:
        server = self.server
        return f"http://{_host_port(server.host, server.port)}/" if server is not None else None

    async def run_intake(self, emit) -> None:
        self._store_batch = emit
        try:
            await asyncio.Event().wait()   # the server's handlers do the work until the intake is cancelled
        finally:
            self._store_batch = None

    async def disconnect(self) -> None:
        self._store_batch = None

    async def close(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await server.stop()

    def normalise(self, raw: Any) -> MessageEvent:
        an_object(raw, "message")
        visitor, message_id, text = raw.get("visitor"), raw.get("id"), raw.get("text")
        if not isinstance(visitor, str) or not VISITOR_ID.fullmatch(visitor):
            raise MalformedPayload("bad visitor id")
        if not isinstance(message_id, str) or not CLIENT_MESSAGE_ID.fullmatch(message_id):
            raise MalformedPayload("message id must be 1-64 of A-Z a-z 0-9 _ -")
        a_string(text, "text")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise MalformedPayload("text is not valid Unicode (a lone surrogate)") from None
        attachments = tuple(Attachment.from_payload(a) for a in raw.get("attachments") or ())
        if ANSWER_FIELD in raw:   # a press kept as the visitor's answer (_take_press): its words
            text = a_string(raw[ANSWER_FIELD], ANSWER_FIELD)
        if not text.strip() and not attachments:
            raise MalformedPayload("text is empty")
        # Visitor-scoped dedup key: one visitor's ids can never shadow another's messages in the inbox.
        return MessageEvent(source=self._source(visitor), text=text, platform_message_id=f"{visitor}:{message_id}",
                            received_at=time.time(), attachments=attachments)

    def _source(self, visitor: str) -> Source:
        return Source(platform=self.name, chat_id=visitor, chat_type="dm", user_id=visitor, profile=self.profile)

    def _key(self, visitor: str) -> str:
        """The visitor's conversation, keyed as its messages are (its route's profile, a linked identity)."""
        return self.intake.addressing.keyed(self._source(visitor), self.profile)[1]

    # ------------------------------------------------------------------------------ frames (server callbacks)
    async def handle_frame(self, visitor: str, frame: dict) -> Optional[dict]:
        kind = frame["type"]
        if kind == "ping":
            return {"type": "pong"}
        if kind == "history":
            return await self._history(visitor)
        if kind == "message":
            return await self._take_message(visitor, frame)
        if kind == "press":
            return await self._take_press(visitor, frame)
        if kind == "conversations":
            return await self._conversations(visitor)
        if kind == "conversation":
            return await self._earlier_conversation(visitor, frame)
        return self._debug(visitor, frame)

    def reject_frame(self, visitor: str, reason: str) -> None:
        self.intake.reject(f"visitor {visitor}: {reason}")

    def log_line(self, level: int, text: str) -> None:
        self.say(level, "%s: %s", self.name, text)

    def page_facts(self, visitor: str) -> dict:
        """What the hello frame tells a page besides its visitor (protocol.py): read at each connect, so a page
        opened after a configuration reload is told the new values."""
        profile = self.intake.addressing.keyed(self._source(visitor), self.profile)[0].profile
        return {"max_text_chars": setting(self.config, "gateway", "max_text_chars"),
                **agent_facts(self.config, profile)}

    def upload_refusal(self, visitor: str) -> Optional[dict]:
        """Why an upload is refused before a byte of it is read (``{"error", "status"}``), or None."""
        if self.media_cache is None or self._store_batch is None:
            return {"error": "the gateway is not taking files right now; try again", "status": 503}
        if self.uploads.full(visitor, time.monotonic()):
            self.reject_frame(visitor, "over the upload limit")
            return {"error": f"at most {UPLOADS_PER_WINDOW} files in {UPLOAD_WINDOW_S / 60:.0f} minutes; wait a "
                             "little", "status": 429}
        return None

    def new_upload(self):
        """Where an upload's bytes go as they arrive (storage/media.py, ``Incoming``)."""
        return self.media_cache.incoming()

    async def take_upload(self, visitor: str, incoming, name: str) -> dict:
        """An uploaded file, whole on disk: cached and described from its bytes; the page names it by ``file`` in a
        message. A refusal is ``{"error", "status"}`` (the HTTP status the page gets). ``incoming`` is committed
        or discarded here, whatever happens."""
        try:
            if self.media_cache is None:
                return {"error": "the gateway is not taking files right now; try again", "status": 503}
            if not incoming.size:
                return {"error": "the file is empty", "status": 400}
            cap = cap_for("webchat", "document")
            if incoming.size > cap:
                return {"error": too_large_notice(incoming.size, cap, display_name(name)), "status": 413}
            if not self.uploads.allow(visitor, time.monotonic()):
                self.reject_frame(visitor, "over the upload limit")
                return {"error": f"at most {UPLOADS_PER_WINDOW} files in {UPLOAD_WINDOW_S / 60:.0f} minutes; wait "
                                 "a little", "status": 429}
            key = await asyncio.to_thread(incoming.commit)
            incoming = None
            data = await asyncio.to_thread(self.media_cache.read, key)
            if data is None:    # evicted at once: a quota smaller than this one file
                return {"error": "the gateway has no room for this file now; try again later", "status": 503}
            attachment = await asyncio.to_thread(_cached_upload, self.media_cache, data, name)
        finally:
            if incoming is not None:
                incoming.discard()
        self.uploads.remember(visitor, attachment)
        return {"file": attachment["cache_key"], "name": attachment["name"], "kind": attachment["kind"],
                "mime": attachment["mime"], "size": attachment["size"]}

    async def _attachments(self, visitor: str, keys: Any) -> list:
        """The attachments a message frame names (``files``: hashes of this visitor's uploads); ValueError says
        what is wrong."""
        if keys is None:
            return []
        if not isinstance(keys, list) or len(keys) > MAX_FILES_PER_MESSAGE or not all(map(valid_key, keys)):
            raise ValueError(f"files must be a list of at most {MAX_FILES_PER_MESSAGE} upload ids")
        found = []
        for key in keys:
            attachment = self.uploads.get(visitor, key)
            if attachment is None:   # uploaded before a restart: described again from the cache
                data = await asyncio.to_thread(self.media_cache.read, key) if self.media_cache else None
                if data is None:
                    raise ValueError("an attached file is no longer here; attach it again")
                attachment = await asyncio.to_thread(_cached_upload, self.media_cache, data, "")
            found.append(attachment)
        return found

    async def _take_message(self, visitor: str, frame: dict) -> dict:
        raw = {"visitor": visitor, "id": frame.get("id"), "text": frame.get("text")}
        reference = frame_id(frame)
        try:
            raw["attachments"] = await self._attachments(visitor, frame.get("files"))
        except ValueError as exc:
            self.reject_frame(visitor, str(exc))
            return error_frame(str(exc), reference)
        try:
            self.normalise(raw)   # checked here too, to tell the page why; the base checks again (cheap)
        except MalformedPayload as exc:
            self.reject_frame(visitor, str(exc))
            return error_frame(str(exc), reference)
        stored = await self._store(visitor, raw, reference)
        if isinstance(stored, dict):
            return stored
        return {"type": "ack", "id": reference, "duplicate": not stored}

    async def _store(self, visitor: str, raw: dict, reference: Optional[str]):
        """``raw`` stored through the intake: whether it is new (False: a duplicate), or the error frame that says
        why not."""
        emit = self._store_batch
        if emit is None:
            return error_frame("the gateway is not taking messages right now; will retry", reference, retry=True)
        try:
            results = await emit([raw], None, True)
        except SenderOverLimit as exc:   # the page shows it; the visitor sends again later
            return error_frame(str(exc), reference)
        except TextTooLong as exc:       # the page shows it; the visitor sends it in shorter parts
            self.reject_frame(visitor, str(exc))
            return error_frame(str(exc), reference)
        except Exception as exc:  # noqa: BLE001 - storage trouble: the page keeps the message and retries
            self.say(logging.WARNING, "%s: could not store a message of visitor %s: %s", self.name, visitor,
                      self.clean_error(exc))
            return error_frame("the gateway could not store the message yet; will retry", reference, retry=True)
        if not results:
            return error_frame("the message was rejected", reference)
        _seq, inserted = results[0]
        return bool(inserted)

    async def _history(self, visitor: str) -> dict:
        key = self._key(visitor)
        if self.store is None:  # the base opens it before the server starts and closes it after the server stops
            return error_frame("the history is not available right now; will retry", retry=True)
        remote = remote_shard(self.directory, key)   # the chat's session lives on a worker host's shard
        try:
            if remote is None:
                info = await self.store.sessions.current(key)
                events = await self.store.sessions.load(info.session_id, last_n=protocol.HISTORY_EVENTS) if info \
                    else []
                waiting = await self.store.inbox.rows_in_state(key, ("received", "taken"))
            else:
                events, waiting = await self._history_elsewhere(key, remote)
        except (StorageError, RemoteReadFailed) as exc:
            self.say(logging.WARNING, "%s: history of visitor %s unavailable: %s", self.name, visitor,
                      self.clean_error(exc))
            return error_frame("the history is not available right now; will retry", retry=True)
        try:
            messages = await self._with_buttons(visitor, protocol.conversation(events, waiting))
        except StorageError as exc:
            self.say(logging.WARNING, "%s: history of visitor %s unavailable: %s", self.name, visitor,
                     self.clean_error(exc))
            return error_frame("the history is not available right now; will retry", retry=True)
        return {"type": "history", "messages": messages, "live": self.outbox.live(visitor)}

    async def _conversations(self, visitor: str) -> dict:
        """The visitor's conversations, the current one and those New chat left (earlier.py), newest first."""
        key = self._key(visitor)
        if self.store is None:
            return earlier.refusal("conversations", "the list is not available right now; try again", retry=True)
        if remote_shard(self.directory, key) is not None:
            return earlier.refusal("conversations", "the earlier conversations of this chat are kept on another host "
                                                    "and cannot be listed here")
        try:
            sessions = await self.store.sessions.list(session_key=key, limit=earlier.LISTED)
            items = [earlier.list_item(info, await self.store.sessions.load(info.session_id,
                                                                            last_n=earlier.PREVIEW_EVENTS))
                     for info in sessions]
        except StorageError as exc:
            self.say(logging.WARNING, "%s: conversations of visitor %s unavailable: %s", self.name, visitor,
                      self.clean_error(exc))
            return earlier.refusal("conversations", "the list is not available right now; try again", retry=True)
        return {"type": "conversations", "items": items}

    async def _earlier_conversation(self, visitor: str, frame: dict) -> dict:
        """One of the visitor's conversations, to read; any session id not of the visitor's own key (forged,
        guessed, another visitor's) is answered as one that does not exist."""
        session_id, key = earlier.session_id_of(frame), self._key(visitor)
        if self.store is None:
            return earlier.refusal("conversation", "the conversation is not available right now; try again", retry=True)
        try:
            info = await self.store.sessions.get(session_id) if session_id is not None else None
            if not earlier.is_visitors(info, key):
                self.reject_frame(visitor, f"asked for a conversation not its own ({str(frame.get('id'))[:80]!r})")
                return earlier.refusal("conversation", earlier.NOT_YOURS)
            events = await self.store.sessions.load(session_id, last_n=protocol.HISTORY_EVENTS)
        except StorageError as exc:
            self.say(logging.WARNING, "%s: a conversation of visitor %s unavailable: %s", self.name, visitor,
                      self.clean_error(exc))
            return earlier.refusal("conversation", "the conversation is not available right now; try again", retry=True)
        return {"type": "conversation", "id": session_id, "current": info.state in ("active", "suspended"),
                "messages": protocol.conversation(events)}

    async def _history_elsewhere(self, key: str, remote: tuple) -> tuple[list, list]:
        """The history a worker host's shard holds, and the chat's messages still waiting: there, or here until
        they are forwarded (each shown once)."""
        name, address = remote
        if address is None or self.remote_reads is None:
            raise RemoteReadFailed(f"{name} is not running now")
        found = await self.remote_reads.read(address, "conversation", (("session_key", key),
                                                                       ("last_n", protocol.HISTORY_EVENTS)),
                                             REMOTE_READ_TIMEOUT_S)
        there = {row.platform_message_id for row in found["waiting"]}
        here = [row for row in await self.store.inbox.rows_in_state(key, ("received",))
                if row.platform_message_id not in there]
        return found["events"], found["waiting"] + here

    def on_bridge(self, item) -> None:
        if isinstance(item, ReadWanted):
            self.send(item.address, item.read)
        else:
            super().on_bridge(item)

    def on_StoreReadResult(self, message: StoreReadResult, sender) -> None:
        if self.remote_reads is not None:
            self.remote_reads.answered(message)

    # ---------------------------------------------------------------------------------------------- outbound
    async def send_message(self, op: PlatformOp) -> str:
        self._check_length(op)
        self._fault_point(op)
        message_id = f"{self._id_prefix}-{next(self._ids)}"
        reply_to = protocol.client_id(op.reply_to)
        buttons = await self.question_buttons(op)
        self.outbox.record(op.chat_id, message_id, op.text, op.final, reply_to=reply_to)
        await self._push(op.chat_id, op_frame("send", message_id, op.text, op.final, reply_to, kind=op.kind,
                                              buttons=buttons))
        return message_id

    async def send_file(self, op: PlatformOp) -> str:
        self._fault_point(op)
        if not await asyncio.to_thread(self.media_cache.has, op.file.cache_key):   # the page fetches it from there
            raise PermanentError("the file is no longer in the media cache", method="send_file")
        message_id = f"{self._id_prefix}-{next(self._ids)}"
        reply_to = protocol.client_id(op.reply_to)
        self.outbox.record(op.chat_id, message_id, op.file.caption, True, reply_to=reply_to)
        await self._push(op.chat_id, op_frame("send", message_id, op.file.caption, True, reply_to,
                                              file=op.file.to_part()))
        return message_id

    async def media_for(self, visitor: str, key: str) -> Optional[tuple[bytes, dict]]:
        """A file of this visitor's conversations (its bytes and what the transcript says of it), or None: a page
        gets only the files its own chat names, in the current conversation or an earlier one it can open."""
        if self.store is None or not valid_key(key):
            return None
        try:
            # Its own upload (the page shows it at once, before a turn writes it to the transcript), else a file
            # one of its conversations names (the current one first: listed newest first).
            file = self.uploads.get(visitor, key)
            if file is None:
                for info in await self.store.sessions.list(session_key=self._key(visitor), limit=earlier.LISTED):
                    file = await self.store.media.file_in_session(info.session_id, key)
                    if file is not None:
                        break
        except StorageError as exc:
            self.say(logging.WARNING, "%s: a file of visitor %s unavailable: %s", self.name, visitor,
                      self.clean_error(exc))
            return None
        data = await asyncio.to_thread(self.media_cache.read, key) if file is not None else None
        return None if data is None else (data, file)

    async def edit_message(self, op: PlatformOp) -> None:
        self._check_length(op)
        known = self.outbox.get(op.chat_id, op.message_id)
        if known is not None and known["deleted"]:
            raise MessageNotFoundError("the message was deleted", method="edit")
        self._fault_point(op)
        buttons = await self.question_buttons(op)   # a preview edited into the question
        self.outbox.record(op.chat_id, op.message_id, op.text, op.final)
        await self._push(op.chat_id, op_frame("edit", op.message_id, op.text, op.final,
                                              known["reply_to"] if known else None, kind=op.kind, buttons=buttons))

    async def delete_message(self, op: PlatformOp) -> None:
        self._fault_point(op)
        self.outbox.mark_deleted(op.chat_id, op.message_id)
        await self._push(op.chat_id, op_frame("delete", op.message_id))

    async def send_typing(self, op: PlatformOp) -> None:
        await self._push(op.chat_id, op_frame("typing", None))

    def _check_length(self, op: PlatformOp) -> None:
        if len(op.text) > self.pacing.text_limit:
            raise TooLongError(f"text is {len(op.text)} characters; the limit is {self.pacing.text_limit}",
                               method=op.action)

    async def _push(self, visitor: str, frame: dict) -> None:
        # No tab open, or a tab that fails: still a success. The transcript holds the answer; pages reload it.
        if self.server is not None:
            await self.server.push(visitor, frame)

    # --------------------------------------------------------------------- fault injection (conformance suite)
    def _fault_point(self, op: PlatformOp) -> None:
        """Where a platform would refuse an operation (429). Armed only by [debug] fault_injection: the page itself
        never floods, but the conformance suite checks that the base waits out a 429 through this adapter too."""
        if not self.debug_enabled():
            return
        now = time.monotonic()
        banned_for = self._banned_until.get(op.chat_id, 0.0) - now
        flood = banned_for > 0 or (op.action == "send" and self._floods_left > 0)
        attempts = self._attempts.setdefault((op.chat_id, op.action), [])
        attempts.append({"at": time.time(), "status": 429 if flood else 200})
        del attempts[:-MAX_ATTEMPTS_KEPT]
        if banned_for > 0:
            self._violations += 1
            raise FloodError(banned_for, method=op.action)
        if flood:
            self._floods_left -= 1
            self._banned_until[op.chat_id] = now + self._flood_retry_after
            raise FloodError(self._flood_retry_after, method=op.action)

    def _debug(self, visitor: str, frame: dict) -> dict:
        if not self.debug_enabled():
            self.reject_frame(visitor, f"{frame['type']} refused: [debug] fault_injection is off")
            return error_frame("debug frames need [debug] fault_injection")
        if frame["type"] == "debug.floods":
            count, retry_after = frame.get("count"), frame.get("retry_after")
            if type(count) is not int or not isinstance(retry_after, (int, float)):
                return error_frame("debug.floods needs an integer count and a number retry_after")
            self._floods_left, self._flood_retry_after = count, float(retry_after)
        elif frame["type"] == "debug.hold_send":     # this visitor's next recorded send (base.py, send_hold.py)
            self.send_hold.arm(visitor)
        elif frame["type"] == "debug.clear":
            self._floods_left = 0
            self._banned_until.clear()
            self.send_hold.release()
        action = frame.get("op") if isinstance(frame.get("op"), str) else "send"
        return {"type": "debug", "attempts": list(self._attempts.get((visitor, action), ())),
                "sent": self.outbox.of(visitor), "violations": self._violations,
                "held": self.send_hold.held[1] if self.send_hold.held else None}


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _cached_upload(cache, data: bytes, name: str) -> dict:
    """Blocking (a file write, an image header): the upload in the cache, as the attachment payload a message
    carries; a raster image is a photo, audio a voice note (a recording picked in the page: transcribed, and answered
    with a voice note where the profile has voice replies), anything else a document (its type sniffed
    from the bytes)."""
    key = cache.put(data)
    mime = sniff(data, name)
    kind = "photo" if mime in RASTER else "voice" if mime.startswith("audio/") else "document"
    return dict(vars(cached(Attachment(kind=kind, name=name), data, key)))
