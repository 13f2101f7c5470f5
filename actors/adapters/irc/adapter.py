"""IrcAdapter: one nick on one IRC server (RFC 1459 / RFC 2812), asyncio streams directly (actors/adapters/irc/README.md).

Why no client library: the protocol is small (lines.py, registration.py, link.py), and what the gateway needs of it
is what libraries hide: the line the server relays counted in bytes with our prefix, each line confirmed by the
server before the next, and the flood bucket shared by every target.

Intake (push style). ``IrcLink`` registers (password, SASL PLAIN, nick collisions), joins the configured channels
and queues each PRIVMSG; ``run_intake`` hands the lines that are input (events.is_input) to the intake, which
commits them before the next is taken. IRC acknowledges nothing and replays nothing: a line sent while the adapter
is away, or still in its queue at a kill -9, is gone (the server keeps no history); what reached the inbox is kept
(G1) and taken once (G2). A lost connection ends ``run_intake`` and the base reconnects with backoff.

Outbound. IRC has no edits: the consumer sends the final answer once (pacing ``supports_edit = False``), cut into
parts of at most ``text_limit`` bytes; each part is one or more PRIVMSG lines within 512 bytes as relayed. A part's
lines are kept (``Progress``) by the reply part they belong to (the ledger's obligation and index) until all are
confirmed, so a retry after a dropped connection or a restarted server goes on from the first unconfirmed line; the
one line the dead connection may or may not have delivered goes again after the re-sent marker. A part's id is made
up here (there is none on IRC). An edit or a delete of a part answers ok and changes nothing: a line in a channel
cannot be changed (the consumer and the sweeper send no edits to a platform without them: a part on it stays as
sent, and a reply marked as re-sent carries the marker on the first part that goes out again).

State: the link (one connection at a time: nick, prefix, channels joined, the flood bucket), the progress of
the parts in flight (bounded, PARTS_KEPT). Messages: those of every
``PlatformAdapter`` (base.py): PlatformOp in, OpResult out; doorbells to the sessions of committed lines.

What survives kill -9: the ledger's record of the parts confirmed (their ids) and of the intent of the one in
flight; the lines of that part already sent are not known to the next life, which sends the part again after the
re-sent marker (docs/design.md §2.6: a send whose outcome died with the process).
"""
from __future__ import annotations

import collections
import itertools
from typing import Any, Optional

from actors.adapters.intake_styles import StreamingAdapter
from actors.adapters.queued_intake import next_batch
from actors.adapters.errors import PermanentError, RetryableError, TooLongError
from actors.adapters.irc.inbound import event_from_line, is_input
from actors.adapters.irc.formatting import is_channel, privmsg_budget, split_for_irc
from actors.adapters.irc.link import IrcLink, LinkLost, Progress, TargetRefused
from actors.adapters.irc.registration import MAX_UNDERSCORES
from actors.adapters.pacing import resent_marker, utf8_len
from actors.messages import MessageEvent, PlatformOp

BATCH = 100                        # inbound lines committed in one round at most
PARTS_KEPT = 1000                  # parts whose progress is kept (a bound: each holds a few lines)
MIN_BUDGET = 100                   # bytes of text per line below which our prefix as shown is not believed
ABSENT_RETRY_S = 2.0               # a private message to a nick that is not on the server: asked again after this


class IrcAdapter(StreamingAdapter):
    def __init__(self):
        super().__init__()
        self.link: Optional[IrcLink] = None
        self.skipped = 0                   # lines received that were no input (channel chatter, CTCP)
        self._parts: collections.OrderedDict = collections.OrderedDict()
        self._sent = itertools.count(1)

    def _link(self) -> IrcLink:
        if self.link is None:
            self.link = IrcLink(self.settings, self.name, self.say, alive=self.report_progress)
        return self.link

    # -------------------------------------------------------------------------------------------------- intake
    def normal_silence_s(self) -> float:
        # The link pings the server after ping_interval_s of silence and gives the connection up after
        # ping_timeout_s with no line at all (link.py): a line comes at least that often on a live connection.
        return self.settings["ping_timeout_s"] + self.settings["ping_interval_s"]

    async def connect(self) -> None:
        link = self._link()
        if not link.ready.is_set():
            await link.open()

    async def disconnect(self) -> None:
        if self.link is None:
            return
        if self.intake_stopped and self.link.ready.is_set():
            return            # draining: the answers in flight still go out on this connection
        await self.link.close()

    async def run_intake(self, emit) -> None:
        link = self._link()
        while True:
            batch = await next_batch(link.inbound, link.closed,
                                     lambda: link.failure or LinkLost("the connection ended"), BATCH)
            wanted = [raw for raw in batch if is_input(raw)]
            self.skipped += len(batch) - len(wanted)
            if wanted:
                await emit(wanted)

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_line(raw, self.name, self.profile)

    # ------------------------------------------------------------------------------------------------ outbound
    def _budget(self, target: str) -> int:
        """Bytes of text per line to ``target``: counted with our prefix as the server showed it, its nick part as
        long as the longest nick this adapter may end up with after a reconnect."""
        link, s = self.link, self.settings
        prefix = link.own_prefix if link is not None else None
        if prefix and "!" in prefix:
            longest = max([s["nick"] + "_" * MAX_UNDERSCORES, *s["alt_nicks"], link.nick], key=len)
            budget = privmsg_budget(target, longest + prefix[prefix.index("!"):])
            if budget >= MIN_BUDGET:
                return budget
        return privmsg_budget(target)    # unknown, or a prefix so long it cannot be right: the longest there is

    async def send_message(self, op: PlatformOp) -> str:
        if utf8_len(op.text) > self.pacing.text_limit:
            raise TooLongError(f"{utf8_len(op.text)} bytes, over {self.pacing.text_limit}", method="PRIVMSG")
        target = op.chat_id
        if not target or any(c in target for c in " ,\r\n\0"):
            raise PermanentError(f"{target!r} is no IRC target", method="PRIVMSG")
        key = (op.ledger[0], op.ledger[2]) if op.ledger is not None else op.op_id
        progress = self._parts.get(key)
        if progress is None:
            progress = Progress(split_for_irc(op.text, self._budget(target)))
            self._parts[key] = progress
            while len(self._parts) > PARTS_KEPT:
                self._parts.popitem(last=False)
        try:
            await self._link().send_part(target, progress, resent_marker(self.config))
        except TargetRefused as exc:
            if exc.code == "401" and not is_channel(target):
                raise RetryableError(f"{target} is not on the server now", method="PRIVMSG",
                                     retry_after=ABSENT_RETRY_S) from None
            if exc.code == "404" and is_channel(target):
                raise RetryableError(f"cannot send to {target} now ({exc})", method="PRIVMSG",
                                     retry_after=ABSENT_RETRY_S) from None
            self._parts.pop(key, None)
            raise
        self._parts.pop(key, None)
        return f"{self.link.epoch}.out{next(self._sent)}"

    async def delete_message(self, op: PlatformOp) -> None:
        """Nor taken back."""

    async def close(self) -> None:
        if self.link is not None:
            await self.link.close(self.settings["quit_message"])
