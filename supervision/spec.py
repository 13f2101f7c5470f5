"""Child specs and supervisor flags as plain data, in the manner of Erlang/OTP's supervisor.erl.

A supervisor owns restarts; a child owns nothing of them. Everything a supervisor decides is computed here by pure
functions (restart decision, intensity, backoff) so it can be tested without actors.

Restart types (what happens when a child exits):
  permanent  always restarted
  transient  restarted only after an abnormal exit (a crash, a kill); a child that stops cleanly stays stopped
  temporary  never restarted

Strategies (who is restarted with it):
  one_for_one   only the child that exited
  rest_for_one  that child and every child started after it (they depend on it)
  one_for_all   every child

Intensity: more than ``max_restarts`` restarts within ``period_s`` seconds and the supervisor gives up: it stops its
children, reports ``SupervisorGaveUp`` to its parent and exits (escalation).

Outside causes (a deliberate departure from OTP): a child that crashed because storage was unavailable (a full
disk, a lock another process holds: ``storage.StorageUnavailable``) is restarted after the longest backoff and is
not counted toward intensity. Restarting cannot cure such a cause, and giving up cannot either: escalation would end
in the whole gateway exiting and being started again into the same full disk, dropping every turn in progress. So
the child retries at a slow pace, and the tree carries on by itself once the operator has freed space.
"""
from __future__ import annotations

import enum
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Optional

from common.backoff import backoff_s
from common.config import setting


class Restart(str, enum.Enum):
    PERMANENT = "permanent"
    TRANSIENT = "transient"
    TEMPORARY = "temporary"


class Strategy(str, enum.Enum):
    ONE_FOR_ONE = "one_for_one"
    REST_FOR_ONE = "rest_for_one"
    ONE_FOR_ALL = "one_for_all"


class ChildStatus(enum.StrEnum):
    """A child's (or a cell's) phase as its supervisor sees it. str-valued: the values are the admin tree's node
    states, unchanged.

      STOPPED -> STARTING         launched
      STARTING -> RUNNING         it took its Started and answered (ChildReady); a cell is RUNNING once its host
                                  made it
      RUNNING -> RESTARTING       it exited and its restart type says again, or it is stopped with its group
      RESTARTING -> STARTING      started again after the backoff
      RUNNING -> STOPPED          it exited and is not restarted
      any -> FAILED               its supervisor gave up (a placed child: failing until its host joins again)
      any -> UNAVAILABLE          a placed child's host was lost (started again when the host joins again)
    """
    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    STOPPED = "stopped"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"


class Ending(enum.Enum):
    """How a child's current incarnation is ending, as far as its supervisor knows."""
    UNANNOUNCED = "unannounced"       # nothing said: an exit now is a crash or a kill (abnormal)
    ANNOUNCED = "announced"           # it announced a clean stop (ChildStopping): a transient child stays stopped
    BY_SUPERVISOR = "by_supervisor"   # its supervisor stopped it (a group restart, giving up): that decides its fate


@dataclass(frozen=True)
class ChildSpec:
    name: str
    actor: str                     # dotted path of the actor class, importable in every actor process
    kind: str = ""                 # what the admin views call it (defaults to the class name)
    args: Any = None               # handed to the child in its Started message
    restart: Restart = Restart.PERMANENT
    shutdown_timeout_s: float = 5.0
    # Where the child runs, for a class with an actorSystemCapabilityCheck (common/cluster.py runs_here): e.g.
    # {"gateway.host": "w1"} places it on that member of the convention. None: on this system.
    placement: Optional[dict] = None

    @property
    def kind_name(self) -> str:
        return self.kind or self.actor.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class SupervisorFlags:
    strategy: Strategy = Strategy.ONE_FOR_ONE
    max_restarts: int = 5
    period_s: float = 30.0
    backoff_base_s: float = 0.02
    backoff_max_s: float = 5.0


def should_restart(restart: Restart, abnormal: bool) -> bool:
    if restart is Restart.PERMANENT:
        return True
    if restart is Restart.TRANSIENT:
        return abnormal
    return False


def affected_children(strategy: Strategy, order: list[str], failed: str) -> list[str]:
    """Names to stop and start again, in start order, when ``failed`` exits."""
    if strategy is Strategy.ONE_FOR_ONE or failed not in order:
        return [failed]
    if strategy is Strategy.REST_FOR_ONE:
        return order[order.index(failed):]
    return list(order)


def backoff_delay(recent_restarts: int, flags: SupervisorFlags, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter over the upper half: the first restart is near-immediate, a child that
    keeps dying waits longer each time, and siblings restarted together do not stampede in lockstep."""
    return backoff_s(recent_restarts + 1, flags.backoff_base_s, flags.backoff_max_s, rng or random)


def wait_out_delay(flags: SupervisorFlags, rng: random.Random | None = None) -> float:
    """The restart delay of a child that crashed on an outside cause: the longest backoff, jittered."""
    return (rng or random).uniform(flags.backoff_max_s / 2, flags.backoff_max_s)


@dataclass
class Intensity:
    """Restart timestamps inside the sliding period; ``exceeded`` once more than max_restarts fall inside it."""
    max_restarts: int
    period_s: float
    stamps: deque = field(default_factory=deque)

    def record(self, now: float) -> None:
        self.stamps.append(now)
        self._trim(now)

    def recent(self, now: float) -> int:
        self._trim(now)
        return len(self.stamps)

    def exceeded(self, now: float) -> bool:
        return self.recent(now) > self.max_restarts

    def _trim(self, now: float) -> None:
        while self.stamps and now - self.stamps[0] > self.period_s:
            self.stamps.popleft()


def flags_from_config(config: dict, strategy: Strategy = Strategy.ONE_FOR_ONE) -> SupervisorFlags:
    """The [supervision] section of the configuration as supervisor flags."""
    def value(key: str):
        return setting(config, "supervision", key)
    return SupervisorFlags(strategy=strategy, max_restarts=value("max_restarts"), period_s=value("period_s"),
                           backoff_base_s=value("backoff_base_s"), backoff_max_s=value("backoff_max_s"))
