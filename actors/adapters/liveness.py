"""Liveness of an intake: a connection that looks up but carries nothing is found and restarted.

The failure the peers' users meet most is the zombie connection: a bot that shows online for hours and answers
nothing, because its socket is half-open (a NAT or proxy dropped it without a close) or its loop is stuck. No error
is ever raised, so no retry path runs. The kit's rule (docs/adapters.md, liveness):

* every intake reports **progress** whenever it has proof that the platform is still talking to it: a poll round
  that came back (``Intake`` reports it after each ``fetch``), a batch stored (``emit``), a heartbeat acknowledged
  (Discord's op 11), a pong or any line (IRC, Slack), a server that still accepts a connection (``probe_server``);
* every adapter declares the **longest silence that is normal** for it (``PlatformAdapter.normal_silence_s``), which
  ``[adapters.NAME] max_silence_s`` may override;
* an intake that believes itself connected and has shown no progress for longer than that bound is **stalled**: its
  adapter logs it, counts it and crashes, and its supervisor restarts it with fresh connections (a restart is what
  a stuck loop needs too: it cannot be trusted to reconnect itself).

``Liveness`` is the pure part (no actor, no loop: tests/actors/adapters/test_liveness.py); the adapter's actor
thread asks ``stalled(now)`` on a timer while its loop thread calls ``progress(now)``. The two threads share two
floats: a float assignment is atomic under the GIL, and a read that misses the newest progress by one check errs
towards waiting, never towards a false restart (the bound is seconds, the check interval a fraction of it).

What survives kill -9: nothing here needs to. A restart reconnects from the offset committed with the last rows
(intake.py), so what the platform sent while the connection was a zombie is fetched or re-delivered then.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, Optional
from urllib.parse import urlsplit

CHECK_FRACTION = 4          # the actor thread checks this many times per bound
MIN_CHECK_S = 0.25
MIN_SILENCE_S = 1.0         # a bound below this would restart healthy adapters on a loaded machine
SERVER_PROBE_S = 10.0       # a serving adapter connects to its own port this often, by default
SERVER_PROBE_TIMEOUT_S = 5.0
PROBES_BEFORE_STALLED = 3    # a server that missed this many probes in a row is taken for dead
SERVED_SILENCE_S = PROBES_BEFORE_STALLED * SERVER_PROBE_S   # a serving intake's bound, by default


class IntakeStalled(RuntimeError):
    """The intake believed itself connected and showed no progress past its bound: the adapter crashes on purpose
    and its supervisor restarts it (the zombie connection, docs/adapters.md)."""


@dataclass
class Liveness:
    """State: ``bound_s`` (the longest normal silence), ``last_progress`` (monotonic time of the last proof of life,
    or of the connection), ``stalls`` (how many times this adapter's intake was found stalled, this life)."""
    bound_s: float
    last_progress: float = field(default_factory=time.monotonic)
    stalls: int = 0

    def __post_init__(self) -> None:
        self.bound_s = max(MIN_SILENCE_S, float(self.bound_s))

    def progress(self, now: Optional[float] = None) -> None:
        """Proof that the platform is still talking to the intake (loop thread)."""
        self.last_progress = time.monotonic() if now is None else now

    def silent_for(self, now: float) -> float:
        return max(0.0, now - self.last_progress)

    def stalled(self, now: float, connected: bool) -> bool:
        """Whether a connected intake has been silent past its bound (actor thread). A disconnected one is the
        intake's own business: it is reconnecting with backoff and says so in ``status``."""
        if not connected or self.silent_for(now) <= self.bound_s:
            return False
        self.stalls += 1
        return True

    @property
    def check_every_s(self) -> float:
        return max(MIN_CHECK_S, self.bound_s / CHECK_FRACTION)

    @property
    def probe_every_s(self) -> float:
        """How often a serving intake probes its own server: ``PROBES_BEFORE_STALLED`` probes fit in the bound,
        so ``max_silence_s`` alone sets both (the declared bound, ``PROBES_BEFORE_STALLED * SERVER_PROBE_S``,
        gives ``SERVER_PROBE_S``), and one probe lost to a loaded moment is never a restart."""
        return self.bound_s / PROBES_BEFORE_STALLED


def silence_bound(declared: float, configured: float) -> float:
    """The bound in force: ``[adapters.NAME] max_silence_s`` when set (> 0), else what the adapter declares."""
    return configured if configured and configured > 0 else declared


def served_address(url: Optional[str]) -> Optional[tuple[str, int]]:
    """Where a server serving ``url`` is reached from this machine: (host, port), a wildcard bind answered on
    loopback; None while it serves nothing (a pure function)."""
    if not url:
        return None
    parts = urlsplit(url)
    if not parts.port:
        return None
    host = parts.hostname or ""
    return {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host), parts.port


async def probe_server(address_of: Callable[[], Optional[tuple[str, int]]], on_progress: Callable[[], None],
                       every_s: float = SERVER_PROBE_S, timeout_s: float = SERVER_PROBE_TIMEOUT_S) -> None:
    """A serving intake's proof of life, forever (cancelled with the adapter's loop): every ``every_s`` a TCP
    connection to its own listening port, accepted within ``timeout_s``, is progress. A server whose accept loop
    died, or a loop too stuck to run this, shows none, and the adapter is restarted. ``address_of()`` is None while
    nothing listens (an adapter that serves nothing, or not yet): nothing is probed then."""
    while True:
        address = address_of()
        if address is not None:
            try:
                _reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), timeout_s)
            except (OSError, asyncio.TimeoutError):
                pass       # no progress: past the bound the adapter is restarted
            else:
                writer.close()
                on_progress()
        await asyncio.sleep(every_s)
