"""The inbound path of an adapter, on its bridge loop: connect, fetch or be pushed to, route each event (its profile,
hence its session key, and whether a group message is taken: actors/profiles/routes.py), sort the batch through the
access policy and the sender limits, store it durably with the offset that acknowledges it, ring the sessions;
reconnect with backoff.

``Intake`` is a component of ``PlatformAdapter`` (base.py): it owns the inbound state (the committed offset, the
access policy, the sender limits, whether the platform answered since the last connect) and asks the platform side
of its adapter for the rest through ``IntakePlatform``, the whole of what it reads there. It runs on the loop thread
only and hands results to the actor thread through the ``post`` it is given (only the actor thread calls Thespian,
logging included).

What survives kill -9: a round's rows and the offset that acknowledges them commit in one transaction before the
platform hears of the offset, so an acknowledged event is on disk (G1) and a re-delivered one is deduplicated (G2).
Attachments are fetched into the media cache before that commit (media_intake.py), so an acknowledged event's
files are on disk too. Plugins' before_dispatch hooks run before it as well (actors/hooks/points.py): what is stored
is the text as they rewrote it, and a round the platform delivers again runs them again.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Protocol

import msgpack

from actors.adapters.access import AccessPolicy, Gatekeeper
from actors.adapters.errors import RetryableError
from actors.adapters.media_intake import resolve_media
from actors.adapters.outbound import backoff_s
from actors.hooks.points import dispatch_rows
from actors.hooks.runner import hooks_for
from actors.messages import AdapterConnection, Attachment, MessageEvent, OpResult, PlatformOp
from actors.adapters.addressing import Addressing
from actors.profiles.routes import effective_respond
from actors.adapters.sender_limits import NOTICE, LimitPolicy, SenderLimits, charge_time, sender_of
from actors.adapters import registry
from actors.adapters.connection_lease import ConnectionLease, LeaseGone, intake_lease
from storage import InboundItem, LeaseLost, MediaCache, Store, StorageUnavailable
from storage.location import store_location
from storage.inbox import PENDING_STATES
from common.config import setting
from common.redact import configured_secrets, redact
from actors.adapters.payload_fields import MalformedPayload  # noqa: F401 - adapters import it from here

RETRY_KINDS = ("retryable", "flood")


class NotAddressed(Exception):
    """A group message not addressed to the bot, on a route that answers only addressed ones (routes.py): skipped
    (and acknowledged with its round), neither stored nor answered."""


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
    platform refusing the configuration is not one of them (``Intake._refused``)."""


# ------------------------------------------------------------------------------ loop thread -> actor thread

@dataclass(frozen=True)
class LogLine:
    level: int
    text: str


@dataclass(frozen=True)
class Ingested:
    rings: tuple                   # ((session_key, seq), ...): new rows, or seq 0 for "look at this inbox"
    rows: tuple = ()               # the new rows, ((seq, key, platform, message id, payload), ...): for a worker's
                                   # shard, forwarded (forwarding.py)


@dataclass(frozen=True)
class IntakeConnected:
    pass


@dataclass(frozen=True)
class IntakeRetrying:
    """An intake attempt failed and will be retried (what `status` shows as the adapter's last error)."""
    error: str                     # redacted
    attempt: int


@dataclass(frozen=True)
class OpDone:
    ticket: int
    result: OpResult


class IntakePlatform(Protocol):
    """What the intake reads of its adapter: the platform's own hooks (base.py lists what each does) and the
    settings the adapter holds. Read at each use, so a setting changed on the adapter applies from the next round."""
    name: str
    config: dict
    store: Optional[Store]              # the adapter's one store, shared with its outbound side
    media_cache: Optional[MediaCache]   # where attachments are fetched to, opened with the store
    settings: dict                      # the adapter's validated [adapters.NAME] table
    profile: str                        # its ``profile`` key: the profile of its chats no route names another for
    configured_secrets: list            # the whole gateway's secrets, redacted from what users write
    per_user_in_groups: bool
    push_style: bool                    # run_intake(emit) rather than fetch()
    reconnect_base_s: float
    reconnect_max_s: float
    refused_retry_s: float

    async def ready_storage(self) -> Store: ...       # the adapter's store, opened, its chat budgets loaded
    async def connect(self) -> None: ...
    async def disconnect(self) -> None: ...
    async def fetch(self) -> tuple[list, Any]: ...
    async def run_intake(self, emit) -> None: ...
    def normalise(self, raw: Any) -> MessageEvent: ...
    def classify(self, exc: BaseException) -> tuple[str, float]: ...
    def event_profile(self, event: MessageEvent) -> str: ...
    def send_unasked(self, op: PlatformOp) -> None: ...
    def report_progress(self) -> None: ...            # the intake's proof of life (liveness.py)
    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes: ...


class Intake:
    """State: ``offset`` (committed with the last rows; None until the store is open), ``healthy`` (the platform
    answered since the last connect), ``malformed`` (payloads refused so far), the ``gatekeeper`` (access policy)
    and the ``sender_limits``. Collaborators: the platform side of the adapter, ``post`` (an item for the actor
    thread), ``say(level, fmt, *args)`` (a log line through the actor thread) and ``clean(error)`` (an error as
    text, the adapter's secrets redacted)."""

    def __init__(self, platform: IntakePlatform, post: Callable[[Any], None], say: Callable[..., None],
                 clean: Callable[[Any], str]):
        self.platform = platform
        self.post = post
        self.say = say
        self.clean = clean
        self.offset: Any = None
        self._offset_read = False
        self.lease: Optional[ConnectionLease] = None   # on a host sharing the database: the intake's lease
        self.healthy = False
        self.malformed = 0
        self.unaddressed = 0     # group messages skipped: not addressed to the bot, on a route answering only those
        self.addressing = Addressing(platform)   # which conversation a message belongs to (addressing.py)
        self.gatekeeper = Gatekeeper("", AccessPolicy())   # replaced at the adapter's start from its table
        self.sender_limits = SenderLimits(LimitPolicy())   # likewise

    async def run_forever(self) -> None:
        platform, failures = self.platform, 0
        self.lease = self._lease()
        while True:
            self.healthy = False
            try:
                await self.open_store()
                if self.lease is not None and self.lease.fence is None:
                    await self.lease.hold()
                    self._offset_read = False   # another host may have moved it while it held the lease
                    await self.open_store()
                await platform.connect()
                await (self.lease.guard(self._rounds()) if self.lease is not None else self._rounds())
            except asyncio.CancelledError:
                await _quietly(platform.disconnect())
                if self.lease is not None:
                    await _quietly(self.lease.close())
                raise
            except LeaseGone:
                if self.healthy:
                    self.post(AdapterConnection(platform.name, False))
                self.post(IntakeRetrying("another host holds this connection's lease", 1))
                await _quietly(platform.disconnect())
            except Exception as exc:  # noqa: BLE001 - classified below
                kind, retry_after = platform.classify(exc)
                if kind not in RETRY_KINDS:
                    await self._refused(kind, exc)
                    failures = 0
                    continue
                if self.healthy:
                    self.post(AdapterConnection(platform.name, False))
                # A platform that answered resets the backoff; unavailable storage behind it does not (the fetch
                # succeeds every time, the write never: without this the retries would spin at the first delay).
                failures = 1 if self.healthy and not isinstance(exc, StorageUnavailable) else failures + 1
                delay = max(retry_after, backoff_s(failures, platform.reconnect_base_s, platform.reconnect_max_s))
                self.say(logging.WARNING, "%s: intake error (%s: %s); reconnecting in %.2fs (attempt %d)",
                         platform.name, kind, self.clean(exc), delay, failures)
                self.post(IntakeRetrying(self.clean(exc), failures))
                await _quietly(platform.disconnect())
                await asyncio.sleep(delay)

    async def _rounds(self) -> None:
        platform = self.platform
        if platform.push_style:
            self._became_healthy()
            await platform.run_intake(self.emit)
            raise RetryableError("the platform ended the intake stream")
        while True:
            raws, offset = await platform.fetch()
            platform.report_progress()     # a round came back: the connection is alive (liveness.py)
            self._became_healthy()
            if raws or (offset is not None and offset != self.offset):
                await asyncio.shield(self.ingest(raws, offset))

    def _lease(self) -> Optional[ConnectionLease]:
        """The intake's lease on a host sharing the database (connection_lease.py), else None."""
        platform = self.platform
        wanted = intake_lease(platform.config, registry.entry_of(platform.settings).serves(platform.settings),
                              platform.name)
        if wanted is None:
            return None
        location = store_location(platform.config.get("storage") or {}, None)
        return ConnectionLease(*wanted, open_store=lambda: Store.open(location), say=self.say)

    async def poll_window(self, wanted_s: float) -> float:
        """How long a long poll may wait now: ``wanted_s``, or less so that it ends while this host surely holds
        the intake's lease (connection_lease.py)."""
        return wanted_s if self.lease is None else await self.lease.window(wanted_s)

    async def open_store(self) -> Store:
        """The adapter's store (opened in the loop: a database busy with another opener is worth a retry) and, the
        first time, the offset committed with the last rows."""
        store = await self.platform.ready_storage()
        if not self._offset_read:
            self.offset = await store.inbox.get_offset(self.platform.name)
            self._offset_read = True
        return store

    async def _refused(self, kind: str, exc: Exception) -> None:
        """The platform refuses what the configuration gives it (a revoked token, a wrong URL): no retry soon will
        cure that. The adapter stays up, shows as down with the reason (``status``, ``health --ready``), and asks
        again every REFUSED_RETRY_S (a token fixed on the platform's side, a service back from maintenance). It
        used to crash instead: its restarts spent its supervisor's intensity within seconds, and the escalation
        took the whole gateway down, every other adapter with it."""
        if self.healthy:
            self.post(AdapterConnection(self.platform.name, False))
        self.say(logging.ERROR, "%s: the platform refuses this adapter (%s: %s); asking again in %.0fs (fix "
                 "[adapters.%s] and restart, or run `doctor`)", self.platform.name, kind, self.clean(exc),
                 self.platform.refused_retry_s, self.platform.name)
        self.post(IntakeRetrying(f"refused: {self.clean(exc)}", 1))
        await _quietly(self.platform.disconnect())
        await asyncio.sleep(self.platform.refused_retry_s)

    def _became_healthy(self) -> None:
        if not self.healthy:
            self.platform.report_progress()    # the silence that counts starts at the connection, not before it
            self.healthy = True
            self.post(IntakeConnected())
            self.post(AdapterConnection(self.platform.name, True))

    def link_changed(self, up: bool, error: str = "", attempt: int = 0) -> None:
        """For a push-style adapter that reconnects inside ``run_intake`` (the Discord gateway resumes its session
        there): what `status` and the metrics show of its connection. Down: the error and the attempt, as the
        retries of ``run_forever`` show theirs; up again: connected, and the sweeper told, as after any
        reconnection."""
        if up:
            self._became_healthy()
            return
        if self.healthy:
            self.healthy = False
            self.post(AdapterConnection(self.platform.name, False))
        self.post(IntakeRetrying(self.clean(error), attempt))

    async def emit(self, raws: list, offset: Any = None, refuse_over_limit: bool = False) -> list:
        """For push-style adapters: store a batch; acknowledge the platform only after this returns."""
        self.platform.report_progress()
        return await asyncio.shield(self.ingest(raws, offset, refuse_over_limit))

    async def ingest(self, raws: list, offset: Any, refuse_over_limit: bool = False) -> list:
        rows = []
        for raw in raws:
            try:
                rows.append(self.item(raw))
            except NotAddressed:
                self.unaddressed += 1
            except MalformedPayload as exc:
                self.reject(str(exc))
            except Exception as exc:  # noqa: BLE001 - a normalise bug must not block the rows after it
                self.reject(f"{type(exc).__name__}: {exc}")
        # G5: senders the access policy does not admit never reach the inbox (actors/adapters/access.py).
        rows = await self.gatekeeper.admit(self.platform.store, rows, self.platform.send_unasked, self.say)
        rows, charged = await self._within_limits(rows, refuse_over_limit)
        rows, charged = self._within_text_limit(rows, charged, refuse_over_limit)
        rows, charged = await self._through_hooks(rows, charged)
        rows, charged = await self._with_media(rows, charged)
        committed = offset if offset is not None else self.offset
        # The rows and the offset that acknowledges them commit in ONE transaction, before the platform hears of
        # the offset (the next fetch sends it). kill -9 before the commit: neither is on disk, the platform
        # re-delivers the round. kill -9 after: both are, and a re-delivery (the ack was lost) hits the
        # (platform, message id) dedup: inserted=False, no second row, no second doorbell (G1, G2).
        try:
            results = await self.platform.store.inbox.put_many_and_commit_offset(
                rows, self.platform.name, committed, fences=self.lease.fences if self.lease is not None else ())
        except BaseException as exc:
            for sender in charged:    # nothing was stored: the platform or the page sends these again
                self.sender_limits.refund(sender)
            if isinstance(exc, LeaseLost) and self.lease is not None:
                self.lease.lost_by_commit()   # another host polls now: this round is its to take again
            raise
        for sender, (_seq, inserted) in zip(charged, results):
            if sender is not None and not inserted:   # a re-delivery of a row already stored: charged once only
                self.sender_limits.refund(sender)
        self.offset = committed
        new = [(seq, row) for row, (seq, inserted) in zip(rows, results) if inserted]
        if new:
            self.post(Ingested(tuple((row.session_key, seq) for seq, row in new),
                                tuple((seq, r.session_key, r.platform, r.platform_message_id, r.payload)
                                      for seq, r in new)))
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
                counts = await self.platform.store.inbox.counts(row.session_key)
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
                self.say(logging.INFO, "%s: sender %s is over the sender limit; skipping their messages until "
                         "they slow down (%d skipped so far)", self.platform.name, sender, limits.limited)
                self.platform.send_unasked(PlatformOp(op_id=f"limit-{row.platform_message_id}", action="send",
                                           chat_id=str(source["chat_id"]), text=NOTICE,
                                           thread_id=source.get("thread_id"),
                                           chat_type=source.get("chat_type") or "dm"))
        return kept, charged

    def _within_text_limit(self, rows: list, charged: list, refuse: bool) -> tuple[list, list]:
        """The rows whose text is within ``[gateway] max_text_chars``, with their charges. A longer message is
        answered with a notice saying so and never stored (it stays charged to its sender: the limits bound these
        notices as they bound turns). A platform re-delivering it after a crash before the round's commit has it
        answered again, as nothing of it was kept."""
        limit = setting(self.platform.config, "gateway", "max_text_chars")
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
            self.say(logging.INFO, "%s: a message of %d characters is over [gateway] max_text_chars (%d); the "
                     "sender is told", self.platform.name, length, limit)
            source = row.payload["source"]
            self.platform.send_unasked(PlatformOp(op_id=f"long-{row.platform_message_id}", action="send",
                                       chat_id=str(source["chat_id"]), text=notice,
                                       thread_id=source.get("thread_id"), chat_type=source.get("chat_type") or "dm"))
        return kept, kept_charged

    async def _through_hooks(self, rows: list, charged: list) -> tuple[list, list]:
        """The rows as plugins' before_dispatch hooks leave them (actors/hooks/points.py): rewritten, or not stored
        (dropped, or answered by the plugin; the sender stays charged, as for a message over the text limit). A
        hook that fails or overruns leaves its row as it was."""
        platform = self.platform

        def answer(source: dict, text: str, message_id: str) -> None:
            platform.send_unasked(PlatformOp(op_id=f"hook-{message_id}", action="send", chat_id=str(source["chat_id"]),
                                             text=text, thread_id=source.get("thread_id"),
                                             chat_type=source.get("chat_type") or "dm"))
        kept = await dispatch_rows(hooks_for(platform.config), rows, platform.name,
                                   platform.settings.get("type") or platform.name, self.post, answer)
        return [r for r in kept if r is not None], [c for r, c in zip(kept, charged) if r is not None]

    async def _with_media(self, rows: list, charged: list) -> tuple[list, list]:
        """The rows with their attachments fetched into the media cache before the round commits (the order is
        media_intake.py's); a row with a file over the cap is answered with a notice and not stored."""
        platform = self.platform

        def notify(source: dict, text: str) -> None:
            platform.send_unasked(PlatformOp(op_id=f"media-{time.monotonic_ns()}", action="send",
                                             chat_id=str(source["chat_id"]), text=text,
                                             thread_id=source.get("thread_id"),
                                             chat_type=source.get("chat_type") or "dm"))
        resolved = await resolve_media(rows, platform.settings.get("type") or platform.name,
                                       platform.download_attachment, platform.media_cache, self._say_plain, notify)
        return ([r for r in resolved if r is not None],
                [c for r, c in zip(resolved, charged) if r is not None])

    def _say_plain(self, level: int, fmt: str, *args) -> None:
        """``say`` with the adapter's name first and any exception among the arguments cleaned (redacted)."""
        self.say(level, "%s: " + fmt, self.platform.name, *(self.clean(a) if isinstance(a, BaseException) else a
                                                             for a in args))

    def item(self, raw: Any) -> InboundItem:
        event = self.platform.normalise(raw)
        if not isinstance(event, MessageEvent):
            raise MalformedPayload(f"normalise returned {type(event).__name__}, not a MessageEvent")
        if not event.platform_message_id:
            raise MalformedPayload("no platform message id")
        # A configured secret a user typed (pasted by mistake, or fished for) goes no further than here: not into
        # the inbox, the transcript, the model's context or the log.
        text = redact(event.text, self.platform.configured_secrets, shapes=False)
        if text != event.text:
            event = dataclasses.replace(event, text=text)
        # Platform = the adapter's name: two bots on one platform keep their chats, ids and offsets apart.
        source = dataclasses.replace(event.source, platform=self.platform.name)
        # The route decides here, before the key is made: the profile is part of the key, so two profiles in one
        # chat are two sessions with two transcripts (actors/profiles/routes.py).
        route = self.addressing.route(source)
        if (source.chat_type != "dm" and event.addressed is False and not event.text.lstrip().startswith("/")
                and effective_respond(route, self.platform.settings) == "addressed"):
            raise NotAddressed()
        try:
            source, key = self.addressing.keyed(source, self.platform.event_profile(event), route)
        except ValueError as exc:
            raise MalformedPayload(str(exc)) from None
        event = dataclasses.replace(event, source=source)
        payload = dataclasses.asdict(event)  # MessageEvent.from_payload's shape: source as a dict
        try:
            msgpack.packb(payload, use_bin_type=True)  # one unstorable payload must not fail its whole round
        except (TypeError, ValueError, OverflowError) as exc:
            raise MalformedPayload(f"not storable: {exc}") from None
        return InboundItem(key, self.platform.name, str(event.platform_message_id), payload)

    def take_config(self, config: dict) -> None:
        """A reload (on the adapter's actor thread): the routes and the group default apply from the next event on
        (the loop thread reads each once per event, old or new, never a mix); secrets are only added (a turn that
        started before may hold one the reload dropped). The connection, its token and the adapter's own table stay
        as started: they need a restart."""
        platform = self.platform
        self.addressing.take_config(config)
        platform.per_user_in_groups = bool(setting(config, "sessions", "per_user_in_groups"))
        platform.configured_secrets = list(dict.fromkeys(platform.configured_secrets + configured_secrets(config)))

    def reject(self, reason: str) -> None:
        self.malformed += 1
        self.say(logging.WARNING, "%s: malformed payload rejected (%s); skipped, %d so far", self.platform.name,
                 self.clean(reason), self.malformed)


async def _quietly(step: Awaitable, timeout: float = 2.0) -> None:
    try:
        await asyncio.wait_for(step, timeout)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - closing: the connection is being given up anyway
        pass
