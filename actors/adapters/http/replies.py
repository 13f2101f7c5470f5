"""Replies for HTTP requests that wait for them (the OpenAI-compatible endpoint): which platform operations belong
to which waiting request, the text they add up to, and what a streaming client has not seen yet.

Everything here runs on the adapter's loop thread; nothing touches the network.

Attribution: the first part of a reply is a ``send`` whose ``reply_to`` is the inbound message id of the request;
later parts (a reply over the text limit) are sends without ``reply_to`` and belong to the chat's current reply;
edits and deletes name the message they change. A session runs one turn at a time, so the operations of two
replies in one chat never interleave.
"""
from __future__ import annotations

import asyncio
from typing import Optional

from actors.messages import PlatformOp

CURSOR = "▍"                 # the stream consumer's "still writing" mark at the end of a preview
# The consumer's progress line, shown below the answer while a tool runs (⚙) or while the model has sent nothing
# yet (⏳, actors/sessions/reply_text.py): never part of the answer a client is streamed.
TOOL_PROGRESS = ("⚙", "⏳")


class ServiceStopping(Exception):
    """The adapter is stopping: a waiting request is answered 503 now instead of being cut by the shutdown."""


def visible_preview(text: str) -> str:
    """The answer inside a streaming preview: without the cursor, the transient tool progress line and trailing
    whitespace (which the final text may drop), so that what is streamed stays a prefix of the final text."""
    text = text.rstrip().removesuffix(CURSOR).rstrip()
    head, _sep, tail = text.rpartition("\n\n")
    if tail.startswith(TOOL_PROGRESS):
        text = head
    return text.rstrip()


def common_prefix_length(a: str, b: str) -> int:
    length = 0
    for x, y in zip(a, b):
        if x != y:
            break
        length += 1
    return length


class StreamCursor:
    """What a streaming client has been sent. Deltas only ever append: a preview that rewrites text already sent
    ends the previews, and the final text continues from the longest prefix the client already has."""

    def __init__(self):
        self.sent = ""
        self.diverged = False

    def preview(self, text: str) -> str:
        """The delta for a new preview ("" if nothing new can be sent)."""
        text = visible_preview(text)
        if self.diverged:
            return ""
        if not text.startswith(self.sent):
            self.diverged = True
            return ""
        delta, self.sent = text[len(self.sent):], text
        return delta

    def final(self, text: str) -> str:
        """The last delta, for the reply's final text."""
        delta = text[common_prefix_length(self.sent, text):]
        self.sent += delta
        return delta


class ReplyWatch:
    """One waiting request: the parts of its reply (platform message id -> text, in send order)."""

    def __init__(self, chat_id: str, inbound_id: str):
        self.chat_id, self.inbound_id = chat_id, inbound_id
        self.seq: Optional[int] = None
        self.parts: dict[str, str] = {}
        self.files: dict[str, dict] = {}      # platform message id -> the content part of a file the reply carries
        self.message_ids: set[str] = set()
        self.saw_final = False
        self.changed = asyncio.Event()

    def text(self) -> str:
        return "".join(self.parts.values())


class ReplyBook:
    """The waiting requests of every chat, and the routing of operations to them."""

    def __init__(self):
        self._watches: dict[str, list[ReplyWatch]] = {}
        self._current: dict[str, Optional[ReplyWatch]] = {}
        self._by_message: dict[str, ReplyWatch] = {}

    def open(self, chat_id: str, inbound_id: str) -> ReplyWatch:
        """Start waiting for the reply to ``inbound_id`` (before its inbox row exists: see ``stored``)."""
        watch = ReplyWatch(chat_id, inbound_id)
        self._watches.setdefault(chat_id, []).append(watch)
        return watch

    def stored(self, watch: ReplyWatch, seq: int) -> None:
        """The request's inbox row is durable: its state says when the turn is finished."""
        watch.seq = seq

    def close(self, watch: ReplyWatch) -> None:
        watches = self._watches.get(watch.chat_id, [])
        if watch in watches:
            watches.remove(watch)
        if not watches:
            self._watches.pop(watch.chat_id, None)
        if self._current.get(watch.chat_id) is watch or not watches:
            self._current.pop(watch.chat_id, None)
        for message_id in watch.message_ids:
            self._by_message.pop(message_id, None)

    def waiting(self) -> list[ReplyWatch]:
        return [w for watches in self._watches.values() for w in watches]

    def apply(self, op: PlatformOp, message_id: str, file_part: Optional[dict] = None) -> bool:
        """Route one operation (``file_part``: a file send's content part); False if no waiting request takes it
        (the client has gone: nothing to show)."""
        if op.action == "send":
            watch = self._owner_of_send(op)
            if watch is not None and file_part is not None:
                watch.files[message_id] = file_part   # a part of the answer after its text
                watch.parts[message_id] = ""
            elif watch is not None:
                watch.parts[message_id] = op.text
                watch.message_ids.add(message_id)
                self._by_message[message_id] = watch
        else:
            watch = self._by_message.get(op.message_id or "")
            if watch is not None and op.action == "edit":
                watch.parts[op.message_id] = op.text
            elif watch is not None and op.action == "delete":
                watch.parts.pop(op.message_id, None)
        if watch is None:
            return False
        watch.saw_final = watch.saw_final or op.final
        watch.changed.set()
        return True

    def _owner_of_send(self, op: PlatformOp) -> Optional[ReplyWatch]:
        if op.reply_to is None:
            return self._current.get(op.chat_id)
        watch = next((w for w in self._watches.get(op.chat_id, ()) if w.inbound_id == op.reply_to), None)
        if watch is not None or op.chat_id in self._watches:
            self._current[op.chat_id] = watch   # a reply to someone else: its later parts are not ours either
        return watch
