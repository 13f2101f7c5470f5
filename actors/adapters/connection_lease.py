"""The lease of a platform connection's intake, when hosts share one database (``[cluster] shared``,
docs/distribution.md): one host at a time polls a bot token or holds its long connection, so two hosts never fight
over one bot (Telegram answers the second poller 409 and drops updates between them).

``intake_lease`` says whether an adapter's intake needs one: on a shared host, every adapter whose messages are not
pushed to a server it runs (a webhook any host can receive behind the operator's load balancer, the web chat). The
lease is ``intake:<adapter name>`` in storage/leases.py.

``ConnectionLease`` runs on the adapter's bridge loop, with a store of its own (an asynchronous connection: a
renewal is never stuck behind the intake's own calls, and a dead database connection is given up on after a
bound). The intake asks it:

  hold()       wait until the lease is this life's (asking again every quarter of the lease time), then keep it
               renewed in a task of its own; the intake reads the committed offset again afterwards, since another
               host may have moved it
  window(s)    how long the next long poll may wait: at most ``s``, and ending ``SAFETY_S`` before the lease could
               have expired by this host's clock (counted from before the renewal was sent, so the database's expiry
               is never earlier), which is what keeps a poll of this host from overlapping the next holder's first
               one even when this host is cut off mid-poll; waits for a renewal when too little is left
  guard(c)     run the intake's round ``c`` until it ends or the lease is lost: then it is cancelled (the long
               connection closed) and ``LeaseGone`` raised
  fences       what the intake's commit of rows and offset checks in its own transaction (storage/leases.py): a
               host that lost its lease commits nothing
  release()    a drain or a stop: the lease goes at once, so another host takes over without waiting for expiry

Lost: the renewal found the token moved (another host took it), or no renewal succeeded before the lease's time was
up (the database is unreachable: this host cannot know whether another took over, so it stops as if one had).

What survives kill -9: nothing here; the lease row stays until it expires (``[cluster] lease_s``), then another
host takes it and resumes from the offset committed with the last rows.
"""
from __future__ import annotations

import asyncio
import datetime
import logging
import secrets
import time
from typing import Any, Awaitable, Callable, Optional

from common.cluster import host_name
from common.config import setting
from storage import Fence, Store, StorageError

SAFETY_S = 1.5          # a poll ends this long before the lease could expire (request latency, clock rates)
LEASE_PREFIX = "intake:"


class LeaseGone(Exception):
    """The intake's lease went to another host (or could not be renewed in time): its round was stopped."""


def intake_lease(config: dict, served: bool, adapter_name: str) -> Optional[tuple[str, str, float]]:
    """(lease name, this host's name, lease time) when this adapter's intake must hold a lease, else None."""
    if not setting(config, "cluster", "shared") or served:
        return None
    return LEASE_PREFIX + adapter_name, host_name(config), float(setting(config, "cluster", "lease_s"))


class ConnectionLease:
    """State: the lease's name, this host's name and this life's id, the lease time, the fence while held, the
    monotonic time until which it is surely held, the renewal task, ``renewed`` (set on each renewal) and ``lost``
    (set when it is lost). Collaborators: ``open_store`` (a new asynchronous store) and ``say`` (a log line through
    the actor thread)."""

    def __init__(self, name: str, holder: str, ttl_s: float, open_store: Callable[[], Awaitable[Store]],
                 say: Callable[..., None]):
        self.name, self.holder, self.ttl_s = name, holder, ttl_s
        self.life = secrets.token_hex(8)
        self.open_store, self.say = open_store, say
        self.store: Optional[Store] = None
        self.fence: Optional[Fence] = None
        self.valid_until = 0.0
        self.renewed = asyncio.Event()
        self.lost = asyncio.Event()
        self._renewing: Optional[asyncio.Task] = None
        self._waiting_logged = ""
        self._poll_held = False     # window() is waiting for a renewal (said once in the log)
        self.polls_end_by = 0.0     # wall clock: every poll window granted so far ends by then (said when lost)

    @property
    def fences(self) -> tuple[Fence, ...]:
        return (self.fence,) if self.fence is not None else ()

    def remaining(self) -> float:
        return self.valid_until - time.monotonic() if self.fence is not None else 0.0

    async def _store(self) -> Store:
        if self.store is None:
            self.store = await self.open_store()
        return self.store

    async def hold(self) -> None:
        every = self.ttl_s / 4
        while True:
            sent = time.monotonic()
            try:
                lease = await asyncio.wait_for((await self._store()).leases.take(self.name, self.holder, self.life,
                                                                                 self.ttl_s), every)
            except (StorageError, asyncio.TimeoutError, OSError) as exc:
                self.say(logging.WARNING, "%s: cannot ask for the lease (%s); asking again in %.1fs", self.name,
                         type(exc).__name__, every)
                await self._drop_store()
                lease = None
            if lease is not None:
                self.fence, self.valid_until = lease.fence(), sent + self.ttl_s
                self.lost.clear()
                self.say(logging.WARNING, "%s: this host (%s) holds the lease now (token %d)", self.name,
                         self.holder, lease.token)
                self._waiting_logged = ""
                self._renewing = asyncio.ensure_future(self._keep())
                return
            holders = await self._holder_text()
            if holders != self._waiting_logged:
                self.say(logging.INFO, "%s: held by %s; this host waits for it", self.name, holders)
                self._waiting_logged = holders
            await asyncio.sleep(every)

    async def _holder_text(self) -> str:
        try:
            found = [lease for lease in await (await self._store()).leases.all(self.name) if lease.name == self.name]
        except (StorageError, OSError):
            return "another host"
        return f"{found[0].holder} (token {found[0].token})" if found else "another host"

    async def _keep(self) -> None:
        """Renew every quarter of the lease time; lost when the token moved or the time ran out unrenewed."""
        every = self.ttl_s / 4
        while True:
            await asyncio.sleep(max(0.0, min(every, self.remaining())))
            if self.remaining() <= 0:
                return self._lose("no renewal reached the database within the lease time")
            sent = time.monotonic()
            try:
                kept = await asyncio.wait_for((await self._store()).leases.renew(self.fences, self.ttl_s),
                                              max(0.1, self.remaining()))
            except (StorageError, asyncio.TimeoutError, OSError) as exc:
                self.say(logging.WARNING, "%s: renewal failed (%s); %.1fs of the lease left", self.name,
                         type(exc).__name__, max(0.0, self.remaining()))
                await self._drop_store()
                continue
            if self.name not in kept:
                return self._lose("another host took it")
            self.valid_until = sent + self.ttl_s
            self.renewed.set()
            self.renewed.clear()

    def _lose(self, why: str) -> None:
        if self.fence is None:
            return
        ended = datetime.datetime.fromtimestamp(self.polls_end_by, datetime.timezone.utc)
        polled = (f"; its last poll was to end by {ended.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]} UTC"
                  if self.polls_end_by else "")
        self.say(logging.WARNING, "%s: this host lost the lease (%s): its intake stops%s", self.name, why, polled)
        self.fence, self.valid_until = None, 0.0
        self.lost.set()

    def lost_by_commit(self) -> None:
        """The intake's own commit found the token moved."""
        self._lose("a commit found another host's token")
        if self._renewing is not None:
            self._renewing.cancel()

    async def window(self, wanted_s: float) -> float:
        """Seconds the next long poll may wait (at least 1); waits for a renewal while less is left."""
        while True:
            if self.lost.is_set() or self.fence is None:
                raise LeaseGone(self.name)
            left = self.remaining() - SAFETY_S
            if left >= 1.0:
                self._poll_held = False
                granted = min(wanted_s, left)
                self.polls_end_by = max(self.polls_end_by, time.time() + granted)
                return granted
            if not self._poll_held:   # renewals are failing: the moment this host stops polling, said once
                self._poll_held = True
                self.say(logging.WARNING, "%s: %.1fs of the lease left unrenewed: no poll starts until it is "
                         "renewed", self.name, max(0.0, self.remaining()))
            waiters = [asyncio.ensure_future(self.renewed.wait()), asyncio.ensure_future(self.lost.wait())]
            try:
                await asyncio.wait(waiters, timeout=self.ttl_s / 4, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()

    async def guard(self, round_: Awaitable[Any]) -> Any:
        """Run ``round_`` until it ends or the lease is lost (then it is cancelled and ``LeaseGone`` raised)."""
        work, lost = asyncio.ensure_future(round_), asyncio.ensure_future(self.lost.wait())
        try:
            await asyncio.wait([work, lost], return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
        if work.done():
            return work.result()
        work.cancel()
        try:
            await work
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopped for the lease: its end does not matter
            pass
        raise LeaseGone(self.name)

    async def release(self) -> None:
        fences, self.fence = self.fences, None
        if self._renewing is not None:
            self._renewing.cancel()
        if fences and self.store is not None:
            try:
                await asyncio.wait_for(self.store.leases.release(fences), 2.0)
                self.say(logging.INFO, "%s: lease released", self.name)
            except (StorageError, asyncio.TimeoutError, OSError):
                pass   # it expires on its own

    async def _drop_store(self) -> None:
        store, self.store = self.store, None
        if store is not None:
            try:
                await asyncio.wait_for(store.close(), 1.0)
            except (StorageError, asyncio.TimeoutError, OSError):
                pass

    async def close(self) -> None:
        await self.release()
        await self._drop_store()
