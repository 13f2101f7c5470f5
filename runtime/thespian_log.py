"""A warning written to Thespian's own log (``<state>/thespian.log``), at most once per interval, with a count.

For what happens inside Thespian's transport (a refused peer, a frame whose MAC is wrong): there, a record through
the ``logging`` module would itself be a message through that transport in an actor process, so Thespian's own
``thesplog`` is used, and a flood of refusals writes one line per interval.

Thespian internals relied on (checked against Thespian 4.0.1: runtime/versions.py): ``thespian.system.utilis.
thesplog(msg, *args, **kw)`` with its ``level`` keyword.
"""
from __future__ import annotations

import logging
import time

from runtime.shapes import module, need


class RateLimitedWarning:
    """``note(text, *args)``: counted; written (``text`` formatted with the count first, then ``args``) when
    ``every_s`` has passed since the last line."""

    def __init__(self, every_s: float):
        self.every_s = every_s
        self.since_last = 0
        self.last_at = 0.0

    def note(self, text: str, *args) -> None:
        self.since_last += 1
        now = time.monotonic()
        if now - self.last_at >= self.every_s:
            # Thespian's logger, loaded with the transport it logs for
            from thespian.system.utilis import thesplog
            thesplog(text, self.since_last, *args, level=logging.WARNING)
            self.since_last, self.last_at = 0, now


def missing() -> list[str]:
    problems: list[str] = []
    utilis = module("thespian.system.utilis", problems)
    need(utilis, "thespian.system.utilis", "thesplog", problems, params=("msg",))
    return problems
