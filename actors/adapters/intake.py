"""The inbound path of every adapter, on its bridge loop: connect, fetch or be pushed to, sort the batch through the
access policy, store it durably with the offset that acknowledges it, ring the sessions; reconnect with backoff.

``InboundPath`` is a mixin of ``PlatformAdapter`` (base.py), split out to keep each file to one concern; it reads
the adapter's ``store``, ``offset``, ``gatekeeper``, ``normalise`` and ``event_profile``, and hands results to the
actor thread through ``_loop_bridge.post`` (only the actor thread calls Thespian, logging included).

What survives kill -9: a round's rows and the offset that acknowledges them commit in one transaction before the
platform hears of the offset, so an acknowledged event is on disk (G1) and a re-delivered one is deduplicated (G2).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable

import msgpack

from actors.adapters.errors import RetryableError
from actors.adapters.outbound import backoff_s
from actors.messages import AdapterConnection, MessageEvent, OpResult, PlatformOp
from actors.adapters.sender_limits import NOTICE, charge_time, sender_of
from storage import InboundItem, Store, StorageUnavailable, session_key
from storage.inbox import PENDING_STATES
from common.config import setting
from common.redact import redact

RETRY_KINDS = ("retryable", "flood")


class MalformedPayload(ValueError):
    """normalise() refuses a payload; the reason is logged, the payload skipped (and acknowledged)."""


class SenderOverLimit(Exception):
    """An event offered one at a time (``emit(..., refuse_over_limit=True)``) is over its sender's limit: the caller
    answers its client directly (a web chat error frame, HTTP 429) instead of a notice through the platform."""


class TextTooLong(Exception):
    """An event offered one at a time is longer than ``[gateway] max_text_chars``: the caller answers its client
    directly (a web chat error frame, HTTP 413) instead of a notice through the platform."""


def too_long_notice(length: int, limit: int) -> str:
    return (f"Your message is {length:,} characters long; I take at most {limit:,} characters in one message, so I "
            "did not read it. Please send it in shorter parts.")


class IntakeFailed(RuntimeError):
    """The intake task ended with an error it did not handle (a bug): the adapter crashes and is restarted. A
    platform refusing the configuration is not one of them (``InboundPath._refused``)."""


# ------------------------------------------------------------------------------ loop thread -> actor thread

@dataclass(frozen=True)
class _LogLine:
    level: int
    text: str


@dataclass(frozen=True)
class _Ingested:
    rings: tuple                   # ((session_key, seq), ...): new rows, or seq 0 for "look at this inbox"


@dataclass(frozen=True)
class _Connected:
    pass


@dataclass(frozen=True)
class _IntakeRetrying:
    """An intake attempt failed and will be retried (what `status` shows as the adapter's last error)."""
    error: str                     # redacted
    attempt: int


@dataclass(frozen=True)
class _OpDone:
    ticket: int
    result: OpResult


class InboundPath:
    async def run_intake(self, emit) -> None:
        """Push-style adapters override this (see base.py); polling ones implement ``fetch`` instead."""
        raise NotImplementedError

    async def _intake_forever(self) -> None:
        push_style = type(self).run_intake is not InboundPath.run_intake
        failures = 0
        while True:
            self._healthy = False
            try:
                if self.store is None:  # in the loop: a database busy with another opener is worth a retry
                    await self._open_store()
                if not self._budgets.loaded:
                    if banned := await self._budgets.load(self.store, self.name):
                        self._say(logging.INFO, "%s: %d chat(s) still under a rate-limit ban from before the "
                                  "restart", self.name, banned)
                await self.connect()
                if push_style:
                    self._became_healthy()
                    await self.run_intake(self._emit)
                    raise RetryableError("the platform ended the intake stream")
                while True:
                    raws, offset = await self.fetch()
                    self._became_healthy()
                    if raws or (offset is not None and offset != self.offset):
                        await asyncio.shield(self._ingest(raws, offset))
            except asyncio.CancelledError:
                await _quietly(self.disconnect())
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                kind, retry_after = self.classify(exc)
                if kind not in RETRY_KINDS:
                    await self._refused(kind, exc)
                    failures = 0
                    continue
                if self._healthy:
                    self._loop_bridge.post(AdapterConnection(self.name, False))
                # A platform that answered resets the backoff; unavailable storage behind it does not (the fetch
                # succeeds every time, the write never: without this the retries would spin at the first delay).
                failures = 1 if self._healthy and not isinstance(exc, StorageUnavailable) else failures + 1
                delay = max(retry_after, backoff_s(failures, self.reconnect_base_s, self.reconnect_max_s))
                self._say(logging.WARNING, "%s: intake error (%s: %s); reconnecting in %.2fs (attempt %d)",
                          self.name, kind, self._clean(exc), delay, failures)
                self._loop_bridge.post(_IntakeRetrying(self._clean(exc), failures))
                await _quietly(self.disconnect())
                await asyncio.sleep(delay)

    async def _refused(self, kind: str, exc: Exception) -> None:
        """The platform refuses what the configuration gives it (a revoked token, a wrong URL): no retry soon will
        cure that. The adapter stays up, shows as down with the reason (``status``, ``health --ready``), and asks
        again every REFUSED_RETRY_S (a token fixed on the platform's side, a service back from maintenance). It
        used to crash instead: its restarts spent its supervisor's intensity within seconds, and the escalation
        took the whole gateway down, every other adapter with it."""
        if self._healthy:
            self._loop_bridge.post(AdapterConnection(self.name, False))
        self._say(logging.ERROR, "%s: the platform refuses this adapter (%s: %s); asking again in %.0fs (fix "
                  "[adapters.%s] and restart, or run `doctor`)", self.name, kind, self._clean(exc),
                  self.refused_retry_s, self.name)
        self._loop_bridge.post(_IntakeRetrying(f"refused: {self._clean(exc)}", 1))
        await _quietly(self.disconnect())
        await asyncio.sleep(self.refused_retry_s)

    def _became_healthy(self) -> None:
        if not self._healthy:
            self._healthy = True
            self._loop_bridge.post(_Connected())
            self._loop_bridge.post(AdapterConnection(self.name, True))

    def link_changed(self, up: bool, error: str = "", attempt: int = 0) -> None:
        """For a push-style adapter that reconnects inside ``run_intake`` (the Discord gateway resumes its session
        there): what `status` and the metrics show of its connection. Down: the error and the attempt, as the
        retries of ``_intake_forever`` show theirs; up again: connected, and the sweeper told, as after any
        reconnection."""
        if up:
            self._became_healthy()
            return
        if self._healthy:
            self._healthy = False
            self._loop_bridge.post(AdapterConnection(self.name, False))
        self._loop_bridge.post(_IntakeRetrying(self._clean(error), attempt))

    async def _open_store(self) -> None:
        state_dir = Path(self.config["gateway"]["state_dir"])
        state_dir.mkdir(parents=True, exist_ok=True)
        # Inline on this loop (storage/inline.py): each call runs to its end here, without aiosqlite's two thread
        # hops per call (the larger part of an adapter's CPU per message). A write that meets the lock (a shard's
        # handler holds it while it runs) waits with asyncio sleeps between attempts, so the loop goes on serving
        # the platform meanwhile: blocked in SQLite's own busy wait, a 10,000-chat burst stalled the loop long
        # enough for its sends to time out. The retries are bounded (INLINE_RETRY_BUDGET_S), past which the intake
        # backs off as from any unavailable storage.
        self.store = await Store.open(state_dir / "gateway.db", setting(self.config, "storage", "durability"),
                                      inline=True, waits_on_loop=True)
        self.offset = await self.store.inbox.get_offset(self.name)
        # A kill -9 between a commit and its doorbells leaves rows nobody rang, and the session supervisor scans
        # only when it starts itself: ring every session with work once (a doorbell only says "look").
        waiting = await self.store.inbox.sessions_with_pending()
        if waiting:
            self._loop_bridge.post(_Ingested(tuple((key, 0) for key in waiting)))

    async def _emit(self, raws: list, offset: Any = None, refuse_over_limit: bool = False) -> list:
        """For push-style adapters: store a batch; acknowledge the platform only after this returns."""
        return await asyncio.shield(self._ingest(raws, offset, refuse_over_limit))

    async def _ingest(self, raws: list, offset: Any, refuse_over_limit: bool = False) -> list:
        rows = []
        for raw in raws:
            try:
                rows.append(self._inbound_item(raw))
            except MalformedPayload as exc:
                self._reject(str(exc))
            except Exception as exc:  # noqa: BLE001 - a normalise bug must not block the rows after it
                self._reject(f"{type(exc).__name__}: {exc}")
        # G5: senders the access policy does not admit never reach the inbox (actors/adapters/access.py).
        rows = await self.gatekeeper.admit(self.store, rows, self._send_unasked, self._say)
        rows, charged = await self._within_limits(rows, refuse_over_limit)
        rows, charged = self._within_text_limit(rows, charged, refuse_over_limit)
        committed = offset if offset is not None else self.offset
        # The rows and the offset that acknowledges them commit in ONE transaction, before the platform hears of
        # the offset (the next fetch sends it). kill -9 before the commit: neither is on disk, the platform
        # re-delivers the round. kill -9 after: both are, and a re-delivery (the ack was lost) hits the
        # (platform, message id) dedup: inserted=False, no second row, no second doorbell (G1, G2).
        try:
            results = await self.store.inbox.put_many_and_commit_offset(rows, self.name, committed)
        except BaseException:
            for sender in charged:    # nothing was stored: the platform or the page sends these again
                self.sender_limits.refund(sender)
            raise
        for sender, (_seq, inserted) in zip(charged, results):
            if sender is not None and not inserted:   # a re-delivery of a row already stored: charged once only
                self.sender_limits.refund(sender)
        self.offset = committed
        rings = tuple((row.session_key, seq) for row, (seq, inserted) in zip(rows, results) if inserted)
        if rings:
            self._loop_bridge.post(_Ingested(rings))
        return results

    async def _within_limits(self, rows: list, refuse_over_limit: bool) -> tuple[list, list]:
        """The rows that stay within their sender's limits (sender_limits.py), and for each kept row the sender it
        was charged to (None: not charged), so that a row not stored after all is refunded. The others are
        acknowledged with the round and never stored. A sender over the limit hears of it once per streak."""
        limits, now, wall_now, kept, charged = self.sender_limits, time.monotonic(), time.time(), [], []
        if not limits.policy.enabled:
            return rows, [None] * len(rows)
        for row in rows:
            sender = sender_of(row.payload)
            if row.payload.get("internal") or sender is None:
                kept.append(row)
                charged.append(None)
                continue
            admitted = limits.take(sender, charge_time(row.payload.get("sent_at"), wall_now, now))
            if admitted and limits.busy(sender) and limits.policy.max_queued_turns:
                # Only a sender who used part of their burst can have built a queue: count it then, not always.
                counts = await self.store.inbox.counts(row.session_key)
                waiting = sum(counts[s] for s in PENDING_STATES) + sum(k.session_key == row.session_key for k in kept)
                admitted = not limits.queue_full(waiting)
                if not admitted:
                    limits.refund(sender)      # the message is turned away, not spent
                    limits.limited += 1
            if admitted:
                kept.append(row)
                charged.append(sender)
            elif refuse_over_limit:
                raise SenderOverLimit(NOTICE)
            elif limits.notice_due(sender):
                source = row.payload["source"]
                self._say(logging.INFO, "%s: sender %s is over the sender limit; skipping their messages until "
                          "they slow down (%d skipped so far)", self.name, sender, limits.limited)
                self._send_unasked(PlatformOp(op_id=f"limit-{row.platform_message_id}", action="send",
                                              chat_id=str(source["chat_id"]), text=NOTICE,
                                              thread_id=source.get("thread_id"),
                                              chat_type=source.get("chat_type") or "dm"))
        return kept, charged

    def _within_text_limit(self, rows: list, charged: list, refuse: bool) -> tuple[list, list]:
        """The rows whose text is within ``[gateway] max_text_chars``, with their charges. A longer message is
        answered with a notice saying so and never stored (it stays charged to its sender: the limits bound these
        notices as they bound turns). A platform re-delivering it after a crash before the round's commit has it
        answered again, as nothing of it was kept."""
        limit = setting(self.config, "gateway", "max_text_chars")
        kept, kept_charged = [], []
        for row, sender in zip(rows, charged):
            length = len(row.payload.get("text") or "")
            if length <= limit or row.payload.get("internal"):
                kept.append(row)
                kept_charged.append(sender)
                continue
            notice = too_long_notice(length, limit)
            if refuse:
                raise TextTooLong(notice)
            self._say(logging.INFO, "%s: a message of %d characters is over [gateway] max_text_chars (%d); the "
                      "sender is told", self.name, length, limit)
            source = row.payload["source"]
            self._send_unasked(PlatformOp(op_id=f"long-{row.platform_message_id}", action="send",
                                          chat_id=str(source["chat_id"]), text=notice,
                                          thread_id=source.get("thread_id"), chat_type=source.get("chat_type") or "dm"))
        return kept, kept_charged

    def _send_unasked(self, op: PlatformOp) -> None:
        """A message the adapter sends on its own (a pairing code): through the chat's lane and budget, answered
        to no one (its ticket is in no actor's hands)."""
        self._lanes.submit(op.chat_id, (None, op))

    def _inbound_item(self, raw: Any) -> InboundItem:
        event = self.normalise(raw)
        if not isinstance(event, MessageEvent):
            raise MalformedPayload(f"normalise returned {type(event).__name__}, not a MessageEvent")
        if not event.platform_message_id:
            raise MalformedPayload("no platform message id")
        # A configured secret a user typed (pasted by mistake, or fished for) goes no further than here: not into
        # the inbox, the transcript, the model's context or the log.
        text = redact(event.text, self.configured_secrets, shapes=False)
        if text != event.text:
            event = dataclasses.replace(event, text=text)
        # Platform = the adapter's name: two bots on one platform keep their chats, ids and offsets apart.
        event = dataclasses.replace(event, source=dataclasses.replace(event.source, platform=self.name,
                                                                      profile=self.event_profile(event)))
        try:
            key = session_key(event.source, per_user_in_groups=self.per_user_in_groups)
        except ValueError as exc:
            raise MalformedPayload(str(exc)) from None
        payload = dataclasses.asdict(event)  # MessageEvent.from_payload's shape: source as a dict
        try:
            msgpack.packb(payload, use_bin_type=True)  # one unstorable payload must not fail its whole round
        except (TypeError, ValueError, OverflowError) as exc:
            raise MalformedPayload(f"not storable: {exc}") from None
        return InboundItem(key, self.name, str(event.platform_message_id), payload)

    def _reject(self, reason: str) -> None:
        self.malformed += 1
        self._say(logging.WARNING, "%s: malformed payload rejected (%s); skipped, %d so far", self.name,
                  self._clean(reason), self.malformed)


async def _quietly(step: Awaitable, timeout: float = 2.0) -> None:
    try:
        await asyncio.wait_for(step, timeout)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - closing: the connection is being given up anyway
        pass
