"""The terminal adapter: ``run_gateway.py chat`` attaches through the admin port and talks to this actor.

State: the terminal attached for each user (its external address), a counter for the bot's message ids.

Messages it takes:
  CliSay        a line typed by USER: written to USER's session inbox (durable before it is acknowledged with
                CliAccepted), then the session supervisor is rung; one that is no valid line (``cli_event``) is
                logged and dropped unanswered: only a broken or hostile client sends one
  CliAskDone    has the reply to inbox row N been delivered? (the terminal waits for it with --message), and did
                the turn fail (so that ``chat --message`` can say so in its exit status)?
  PlatformOp    from stream consumers: shown in the user's terminal (CliShow); always succeeds, since a terminal
                that has gone away has nothing left to show
  InboundStored a worker host's shard stored a line this adapter forwarded: its row here is marked forwarded
  StoreReadResult   a worker's shard says whether a forwarded line is answered: the CliDone that waited for it
  timer forward_walk   every WALK_S while a worker's shard is named: lines not yet stored there go again
Messages it sends: CliAccepted, CliDone, CliShow (to terminals), InboxDoorbell, StoreInbound and StoreRead (to a
worker's shard), OpResult, AdapterConnected.

A user whose session a worker host's shard wins (docs/distribution.md): the line is committed here first, as every
line is (durable before CliAccepted), then sent to that shard as StoreInbound, and marked forwarded once stored
there; a line not stored WALK_S later goes again (the shard's dedup makes a repeat harmless), so kill -9 of either
side loses nothing. Whether its answer came is asked of that shard, by the line's message id.
"""
from __future__ import annotations

import itertools
import time
from typing import Optional

from actors.adapters.payload_fields import MalformedPayload, a_string
from actors.adapters.doorbells import Doorbells
from actors.adapters.forwarding import WALK_PAGE, WALK_S, any_remote, remote_shard
from actors.messages import (AdapterConnected, CliAccepted, CliAskDone, CliDone, CliSay, CliShow, InboundStored,
                             MessageEvent, OpResult, PlatformOp, Source, StoreInbound, StoreRead, StoreReadResult)
from supervision.storage_access import StoreUser
from storage import session_key
from storage.inbox import InboxRow
from supervision.actor import GatewayActor

MAX_LINE = 16_000
MAX_ID_CHARS = 256
RECENT_EVENTS = 200     # transcript events searched for a finished turn: it has just ended, so it is among the last
MAX_ASKS = 256          # done checks waiting for a worker's answer (a terminal asks again when one is dropped)
ASK_TIMEOUT_S = 10.0    # a done check unanswered this long is forgotten
FORWARDED = "forwarded to "   # the reason of a row forwarded to a worker's shard (storage/inbox.py ``forwarded``)


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
    return MessageEvent(source, text[:MAX_LINE], message.message_id, time.time())


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


class CliAdapter(StoreUser, GatewayActor):
    uses_bridge = True

    def __init__(self):
        super().__init__()
        self.terminals: dict[str, object] = {}
        self.ids = itertools.count(1)
        self.announced = False
        self.doorbells = Doorbells()
        self.asks: dict[str, tuple] = {}   # token -> (terminal, seq, when) of a done check a worker's shard answers
        self.walk_armed = False

    def on_start(self, args) -> None:
        self.settings = args if isinstance(args, dict) else {}
        self.open_store()
        self.on_directory(self.directory)

    def on_stop(self) -> None:
        self.close_store()

    def on_directory(self, directory) -> None:
        if directory is not None:
            for address, doorbell in self.doorbells.directory_changed(directory, time.monotonic()):
                self.send(address, doorbell)
            if not self.walk_armed and any_remote(directory):
                self.walk_armed = True   # a worker's shard is named: lines may have to be forwarded
                self.after(WALK_S, "forward_walk")
        if directory is not None and directory.sweeper is not None and self.store is not None:
            self.send(directory.sweeper, AdapterConnected(self.name))

    def on_CliSay(self, message: CliSay, sender) -> None:
        if self.intake_stopped:
            self.send(sender, CliAccepted(message.message_id, -1))
            return
        try:
            event = cli_event(message, self.name, self.settings.get("profile", "default"))
        except MalformedPayload as exc:
            self.log.warning("%s: malformed payload rejected (%s); skipped", self.name, str(exc)[:300])
            return
        self.terminals[message.user] = sender
        key = session_key(event.source, per_user_in_groups=False)
        seq, inserted = self.db(self.store.inbox.put(key, self.name, message.message_id, event.to_payload()))
        self.send(sender, CliAccepted(message.message_id, seq))
        remote = remote_shard(self.directory, key)
        if remote is not None:
            if remote[1] is not None:   # else its host is lost: the walk sends it once the shard is back
                self.send(remote[1], StoreInbound(((seq, key, self.name, message.message_id, event.to_payload()),)))
        elif inserted:
            for address, doorbell in self.doorbells.ring(self.directory, key, seq, time.monotonic()):
                self.send(address, doorbell)

    def on_InboundStored(self, message: InboundStored, sender) -> None:
        self.db(self.store.inbox.forwarded(message.seqs, message.shard))

    def on_timer_forward_walk(self, _data) -> None:
        for row in self.db(self.store.inbox.received_after(self.name, 0, WALK_S, WALK_PAGE)):
            remote = remote_shard(self.directory, row.session_key)
            if remote is not None and remote[1] is not None:
                self.send(remote[1], StoreInbound(((row.seq, row.session_key, row.platform,
                                                    row.platform_message_id, row.payload),)))
        self.after(WALK_S, "forward_walk")

    def on_CliAskDone(self, message: CliAskDone, sender) -> None:
        row = self.db(self.store.inbox.get(message.seq))
        if row is not None and row.state == "done" and (row.reason or "").startswith(FORWARDED):
            self._ask_worker(row, message.seq, sender)
            return
        done = row is not None and row.state in ("done", "dropped")
        error = None
        if done:
            session = self.db(self.store.sessions.current(row.session_key))
            transcript = [] if session is None else self.db(self.store.sessions.load(session.session_id,
                                                                                     last_n=RECENT_EVENTS))
            error = turn_error(row, transcript)
        self.send(sender, CliDone(message.seq, done, error))

    def _ask_worker(self, row: InboxRow, seq: int, terminal) -> None:
        """A forwarded line is done here once stored there: whether it is answered, its shard says."""
        now = time.monotonic()
        for stale in [t for t, (_term, _seq, at) in self.asks.items() if now - at > ASK_TIMEOUT_S]:
            del self.asks[stale]   # its shard never answered (lost with its host): the terminal has asked again
        address = dict(self.directory.shards).get(row.reason[len(FORWARDED):]) if self.directory else None
        if address is None or len(self.asks) >= MAX_ASKS:
            self.send(terminal, CliDone(seq, False, None))   # not known yet: the terminal asks again
            return
        token = f"ask-{next(self.ids)}"
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

    def on_PlatformOp(self, op: PlatformOp, sender) -> None:
        message_id = op.message_id or f"cli-{next(self.ids)}"
        terminal = self.terminals.get(op.chat_id)
        if terminal is not None:
            self.send(terminal, CliShow(op.action, message_id, op.text))
        if op.action != "typing":
            self.send(sender, OpResult(op.op_id, True, message_id))
