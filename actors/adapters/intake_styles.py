"""The three ways messages reach an adapter, each a ``PlatformAdapter`` with its intake made concrete: a platform
subclasses the one that matches its ``Platform.intake`` (platform.py), and ``test_contract.py`` checks that it does.

    PollingAdapter     "poll": the adapter asks (Telegram's getUpdates, Matrix's /sync, the fake): ``fetch()``
                       returns one round from ``self.offset``; the kit stores it with the offset that acknowledges
                       it, and every round that comes back is progress. Silence bound: the long poll's wait plus
                       the request's timeout.
    StreamingAdapter   "socket": the platform pushes on a connection the adapter opens (Discord's gateway, Slack's
                       Socket Mode, IRC, Signal's event stream): ``run_intake(emit)``; a batch stored is progress,
                       and the adapter calls ``report_progress()`` for what shows the connection alive while no
                       message comes (a heartbeat acknowledged, a pong, any line). Silence bound: from the
                       platform's heartbeat or keep-alive.
    ServingAdapter     "server": the platform or a browser calls a server the adapter runs (webhooks, the web chat,
                       the HTTP API): ``run_intake(emit)`` serves until cancelled; the kit proves the server alive
                       by connecting to its own port (liveness.probe_server) ``PROBES_BEFORE_STALLED`` times
                       per silence bound: ``SERVER_PROBE_S`` apart by default, closer under a shorter
                       ``max_silence_s``.

    MailboxAdapter     "actor": messages come as actor mail (the terminal chat, through the admin port): a handler
                       on the actor thread ``offer``s each to the kit's intake. No connection: no silence bound.

A platform with two modes (Telegram: polling or a webhook; Slack: Socket Mode or the Events API) subclasses the
style of its default mode and overrides ``push_style`` and ``normal_silence_s`` from its settings.
"""
from __future__ import annotations

import abc
import asyncio
import math
from typing import Any, Awaitable, Callable

from actors.adapters.base import PlatformAdapter
from actors.adapters.liveness import SERVED_SILENCE_S
from actors.adapters.push_server import KeptPushServer


class PollingAdapter(PlatformAdapter):
    """An adapter that asks the platform for what is new: ``fetch`` is its intake."""

    @property
    def push_style(self) -> bool:
        return False

    @abc.abstractmethod
    async def fetch(self) -> tuple[list, Any]:
        """One round (loop): the raw events after ``self.offset`` and the offset that acknowledges them (None:
        unchanged). Polling with the new offset must tell the platform the round is had: the kit commits rows and
        offset together before the next ``fetch`` runs."""


class StreamingAdapter(PlatformAdapter):
    """An adapter the platform pushes to over a connection the adapter opens: ``run_intake`` is its intake."""

    @property
    def push_style(self) -> bool:
        return True

    @abc.abstractmethod
    async def run_intake(self, emit) -> None:
        """Forever (loop): read the connection, ``await emit(raws, offset)`` per batch, acknowledge the platform
        after it returns, and ``report_progress()`` on each proof of life. Returning means the platform closed the
        stream; raising means it failed: either way the kit reconnects."""


class ServingAdapter(PlatformAdapter):
    """An adapter whose platform calls a server it runs: ``run_intake`` starts the server and serves until it is
    cancelled; ``served_url`` names where, and the kit probes that address for liveness."""

    @property
    def push_style(self) -> bool:
        return True

    @abc.abstractmethod
    async def run_intake(self, emit) -> None:
        """Serve (loop) until cancelled: each request's events go through ``await emit(raws, offset)`` before the
        caller is answered 2xx."""

    @abc.abstractmethod
    def served_url(self) -> str | None:
        """The URL the server listens on once it does (any thread), None before: the kit's probe connects there."""

    def normal_silence_s(self) -> float:
        return SERVED_SILENCE_S


class WebhookAdapter(ServingAdapter):
    """A ServingAdapter whose platform pushes to a small server of the adapter's (a ``PushServer``): its ``connect``
    starts one into ``push_server.server`` the first time; it then stays up between connection attempts, so the
    platform's pushes are still taken while its API refuses, and closes when the intake stops (a drain) and in the
    adapter's ``close``. WeCom, WhatsApp, LINE."""

    def __init__(self):
        super().__init__()
        self.push_server = KeptPushServer()

    async def disconnect(self) -> None:
        if self.intake_stopped:
            await self.push_server.close()

    def served_url(self) -> str | None:
        return self.push_server.url()

    async def run_intake(self, emit) -> None:
        await asyncio.get_running_loop().create_future()  # the push server delivers; serve until cancelled


class MailboxAdapter(PlatformAdapter):
    """An adapter whose messages come as actor mail: its handlers (actor thread) ``offer`` each raw message, and the
    kit stores it as it stores any platform's round, then hands the outcome to the handler's coroutine."""

    def __init__(self):
        super().__init__()
        self._emit = None
        self._intake_up = asyncio.Event()    # set on the loop once run_intake holds the emit
        self.connection.local = True         # no connection to show: `status` says "up" while it runs

    @property
    def push_style(self) -> bool:
        return True

    def normal_silence_s(self) -> float:
        return math.inf     # no connection that could go silent

    async def run_intake(self, emit) -> None:
        self._emit = emit
        self._intake_up.set()
        await asyncio.Event().wait()     # the offers do the work until the intake is cancelled

    def offer(self, raw: Any, outcome: Callable[[Awaitable[list]], Awaitable[None]]) -> None:
        """Store ``raw`` through the kit's intake (actor thread): ``outcome(stored)`` runs on the loop, awaiting
        ``stored`` for the round's results ((seq, inserted) per stored row; none if a plugin took it) or the
        refusal raised (SenderOverLimit, TextTooLong: intake.py)."""
        self.bridge.submit(self._offered(raw, outcome), tag="offer")

    async def _offered(self, raw: Any, outcome) -> None:
        await self._intake_up.wait()     # the first offers may come while the store is being opened
        await outcome(self._emit([raw], None, refuse_over_limit=True))
