"""The terminal adapter: ``run_gateway.py chat`` attaches through the admin port and talks to this actor.

A regular adapter on the kit (``MailboxAdapter``, actors/adapters/intake_styles.py): its lines come as actor mail
instead of from a network, and everything else is the kit's, as for every platform: the access policy, the text
bound, plugins' hooks, the one transaction that stores a line before the terminal hears ``CliAccepted``, doorbells
to this host's shards or the row forwarded to a worker host's shard (actors/adapters/forwarding.py), the chat's lane
and budget for what the bot shows, the ledger's records of sends.

State: the terminal attached for each user (its external address), what was shown to a user while no terminal of
theirs was known (unseen.py: shown when one speaks), the done checks a worker's shard answers, the
ids of the messages it deleted (the last MAX_DELETED: an edit of one fails not_found, as on a platform, instead of
showing it again; a restart forgets them, and an edit of a message deleted in an earlier life is passed on).

Messages it takes (besides those of ``PlatformAdapter``, base.py):
  CliSay        a line typed by USER: offered to the kit's intake (stored, then CliAccepted with its inbox seq; a
                refusal, such as a drain or a line over ``[gateway] max_text_chars``, answers seq -1 and why); one
                that is no valid line (``cli_event``) is logged and dropped unanswered: only a broken or hostile
                client sends one
  CliAskDone    has the reply to inbox row N been delivered? (the terminal waits for it with --message), and did
                the turn fail (so that ``chat --message`` can say so in its exit status)?
  StoreReadResult   a worker's shard says whether a forwarded line is answered: the CliDone that waited for it
Messages it sends: CliAccepted, CliDone, CliShow (to terminals), StoreRead (to a worker's shard), and the kit's.

What survives kill -9: the inbox rows (a line is durable before CliAccepted); a terminal whose line was not
accepted sends it again with the same message id, which the inbox deduplicates. The replies the ledger recovers
in the new life are kept for each user until their terminal speaks (unseen.py), then shown to it.
"""
from __future__ import annotations

import functools
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Optional

from actors.adapters.cli.unseen import UnseenShows
from actors.adapters.errors import MessageNotFoundError, TooLongError
from actors.adapters.intake import SenderOverLimit, TextTooLong
from actors.adapters.intake_styles import MailboxAdapter
from actors.adapters.pacing import LENGTH_FUNCTIONS
from actors.adapters.payload_fields import MalformedPayload, a_string
from actors.messages import (CliAccepted, CliAskDone, CliDone, CliSay, CliShow, MessageEvent, PlatformOp, Source,
                             StoreRead, StoreReadResult)
from storage.inbox import InboxRow

MAX_ID_CHARS = 256
RECENT_EVENTS = 200     # transcript events searched for a finished turn: it has just ended, so it is among the last
MAX_ASKS = 256          # done checks waiting for a worker's answer (a terminal asks again when one is dropped)
ASK_TIMEOUT_S = 10.0    # a done check unanswered this long is forgotten
MAX_DELETED = 10_000    # deleted message ids kept, so that an edit of one is answered not_found
FORWARDED = "forwarded to "   # the reason of a row forwarded to a worker's shard (storage/inbox.py ``forwarded``)
NOT_TAKEN = "the gateway answered the message without a turn (a plugin took it)"


def cli_event(message: CliSay, platform: str, profile: str) -> MessageEvent:
    """The MessageEvent of a terminal line; MalformedPayload names the first problem (a pure function)."""
    for field in ("user", "message_id"):
        value = getattr(message, field, None)
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
            raise MalformedPayload(f"{field} must be a non-empty string of at most {MAX_ID_CHARS} characters")
    text = getattr(message, "text", None)
    a_string(text, "text")
    for field, value in (("user", message.user), ("message_id", message.message_id), ("text", text)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise MalformedPayload(f"{field} is not valid Unicode (a lone surrogate)") from None
    source = Source(platform, message.user, "dm", None, message.user, message.user, profile)
    return MessageEvent(source, text, message.message_id, time.time())


def turn_error(row: InboxRow, transcript: list) -> Optional[str]:
    """Why the answer to the finished inbox ``row`` failed, or None if it did not (a pure function over the
    session's recent ``transcript``): the row refused, or the error notice recorded with the answer of the turn its
    message went into. A row answered without a model turn (a command) has no turn in the transcript: not failed."""
    if row.state == "dropped":
        return row.reason or "the message was not answered"
    turn_id = next((e.turn_id for e in reversed(transcript) if e.role == "user" and e.kind == "message"
                    and isinstance(e.payload, dict) and e.payload.get("inbound_seq") == row.seq), None)
    answer = next((e for e in reversed(transcript) if turn_id is not None and e.turn_id == turn_id
                   and e.role == "assistant" and e.kind == "message"), None)
    if answer is None or not isinstance(answer.payload, dict):
        return None
    return answer.payload.get("error") or None


# ---------------------------------------------------------------------------------- loop -> actor thread
@dataclass(frozen=True)
class _Reply:
    """A message for an external terminal (only the actor thread talks to Thespian)."""
    to: Any
    message: Any


@dataclass(frozen=True)
class _Show:
    """What the bot did in USER's terminal chat."""
    user: str
    show: CliShow


@dataclass(frozen=True)
class _RowRead:
    """The inbox row of a done check, read on the loop: answered here, or asked of the worker's shard."""
    terminal: Any
    seq: int
    row: Optional[InboxRow]
    error: Optional[str]


class CliAdapter(MailboxAdapter):
    def __init__(self):
        super().__init__()
        self.terminals: dict[str, object] = {}
        self.unseen = UnseenShows()        # shown while the user's terminal was not known (actor thread)
        self.asks: dict[str, tuple] = {}   # token -> (terminal, seq, when) of a done check a worker's shard answers
        self.deleted: OrderedDict[str, None] = OrderedDict()   # the ids of messages deleted, newest last (loop)
        self._asked = 0

    def on_start(self, args) -> None:
        args = dict(args or {})
        if not args.get("limits"):
            # The terminal is the operator's own, reached only through the admin port: no per-sender limit.
            args["limits"] = {"per_minute": 0}
        super().on_start(args)

    # -------------------------------------------------------------------------------------------------- intake
    def on_CliSay(self, message: CliSay, sender) -> None:
        if self.intake_stopped:
            self.send(sender, CliAccepted(message.message_id, -1, "the gateway is draining and takes no new "
                                                                  "messages"))
            return
        try:
            event = cli_event(message, self.name, self.profile)
        except MalformedPayload as exc:
            self.log.warning("%s: malformed payload rejected (%s); skipped", self.name, str(exc)[:300])
            return
        self.terminals[message.user] = sender
        for show in self.unseen.take(message.user):    # what a restart's recovered replies showed meanwhile
            self.send(sender, show)
        self.offer(event, functools.partial(self._accepted, message.message_id, sender))

    async def _accepted(self, message_id: str, terminal, stored) -> None:
        """The outcome of an offered line (loop): its inbox seq, or why it was not stored."""
        try:
            results = await stored
        except (SenderOverLimit, TextTooLong) as exc:
            self.post_to_actor(_Reply(terminal, CliAccepted(message_id, -1, str(exc))))
            return
        seq = results[0][0] if results else -1
        self.post_to_actor(_Reply(terminal, CliAccepted(message_id, seq, "" if results else NOT_TAKEN)))

    def normalise(self, raw: Any) -> MessageEvent:
        return raw     # made and checked on the actor thread (cli_event), before it was offered

    # --------------------------------------------------------------------------------------------- done checks
    def on_CliAskDone(self, message: CliAskDone, sender) -> None:
        self.bridge.submit(self._read_row(message.seq, sender), tag="cli_ask")

    async def _read_row(self, seq: int, terminal) -> None:
        store = await self.ready_storage()
        row = await store.inbox.get(seq)
        error = None
        if row is not None and row.state in ("done", "dropped") and not (row.reason or "").startswith(FORWARDED):
            session = await store.sessions.current(row.session_key)
            transcript = [] if session is None else await store.sessions.load(session.session_id,
                                                                                last_n=RECENT_EVENTS)
            error = turn_error(row, transcript)
        self.post_to_actor(_RowRead(terminal, seq, row, error))

    def _answer_done_check(self, read: _RowRead) -> None:
        row = read.row
        if row is not None and row.state == "done" and (row.reason or "").startswith(FORWARDED):
            self._ask_worker(row, read.seq, read.terminal)
            return
        done = row is not None and row.state in ("done", "dropped")
        self.send(read.terminal, CliDone(read.seq, done, read.error if done else None))

    def _ask_worker(self, row: InboxRow, seq: int, terminal) -> None:
        """A forwarded line is done here once stored there: whether it is answered, its shard says."""
        now = time.monotonic()
        for stale in [t for t, (_term, _seq, at) in self.asks.items() if now - at > ASK_TIMEOUT_S]:
            del self.asks[stale]   # its shard never answered (lost with its host): the terminal has asked again
        address = dict(self.directory.shards).get(row.reason[len(FORWARDED):]) if self.directory else None
        if address is None or len(self.asks) >= MAX_ASKS:
            self.send(terminal, CliDone(seq, False, None))   # not known yet: the terminal asks again
            return
        self._asked += 1
        token = f"ask-{self._asked}"
        self.asks[token] = (terminal, seq, now)
        self.send(address, StoreRead("message_outcome", (("platform", row.platform), ("message_id",
                                     row.platform_message_id), ("last_n", RECENT_EVENTS)), token))

    def on_StoreReadResult(self, message: StoreReadResult, sender) -> None:
        terminal, seq, _at = self.asks.pop(message.token, (None, None, None))
        if terminal is None:
            return
        there = (message.result or {}).get("row")
        done = there is not None and there.state in ("done", "dropped")
        error = turn_error(there, message.result["events"]) if done else None
        self.send(terminal, CliDone(seq, done, error))

    def on_bridge(self, item) -> None:
        if isinstance(item, _Reply):
            self.send(item.to, item.message)
        elif isinstance(item, _Show):
            if (terminal := self.terminals.get(item.user)) is not None:
                self.send(terminal, item.show)
            else:
                self.unseen.keep(item.user, item.show)
        elif isinstance(item, _RowRead):
            self._answer_done_check(item)
        else:
            super().on_bridge(item)

    # ------------------------------------------------------------------------------------------------ outbound
    # A terminal that has gone away has nothing left to show: an operation within the text limit succeeds, except
    # the edit of a message this adapter deleted (a terminal would show it again).
    async def send_message(self, op: PlatformOp) -> str:
        self._check_length(op.text)
        message_id = f"cli-{op.op_id}"    # op ids are unique across lives: so is the id shown
        self.post_to_actor(_Show(op.chat_id, CliShow("send", message_id, op.text)))
        return message_id

    async def edit_message(self, op: PlatformOp) -> None:
        self._check_length(op.text)
        if op.message_id in self.deleted:
            raise MessageNotFoundError(f"message {op.message_id} was deleted", method="edit")
        self.post_to_actor(_Show(op.chat_id, CliShow("edit", op.message_id, op.text)))

    async def delete_message(self, op: PlatformOp) -> None:
        self.deleted[op.message_id] = None
        while len(self.deleted) > MAX_DELETED:
            self.deleted.popitem(last=False)
        self.post_to_actor(_Show(op.chat_id, CliShow("delete", op.message_id)))

    def _check_length(self, text: str) -> None:
        length = LENGTH_FUNCTIONS[self.pacing.length](text or "")
        if length > self.pacing.text_limit:
            raise TooLongError(f"text of {length} over the limit of {self.pacing.text_limit}", method="show")

