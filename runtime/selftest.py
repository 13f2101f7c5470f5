"""The start-up self-test: every private internal the seam relies on is there, with the shape it expects.

Each module of runtime/ says what it needs (``missing()``: attributes present, of the expected type, functions
taking the expected parameters and still using the attributes the patch relies on; the frame MAC also the exact
Thespian release and the shape of its transport's source). ``refusal()`` runs them all, in a few milliseconds,
importing and calling nothing of the gateway's own, and patching nothing.

Where it runs: ``start`` before it starts the daemon, the launcher (``run``, what ``start`` starts and what a service
manager runs) and a worker's ``join`` before anything is installed or any actor starts, ``doctor`` (its ``runtime``
line) and the suite (tests/runtime/test_selftest.py). A failed one refuses to start: one message naming this Python
and Thespian, every internal that is missing or changed and the versions the seam was checked against, and exit
``EX_INCOMPATIBLE`` (69, EX_UNAVAILABLE; docs/operations.md). Nothing is started or written before it, so nothing
is left behind; the systemd unit does not restart on it (a new runtime does not fix itself).
"""
from __future__ import annotations

import sys
from typing import Optional

from runtime import (ack_wait, attach_only, child_addresses, convention_timing, frame_mac, held_port, lazy_identify,
                     loop_stepping, loopback, peer_check, poll_selector, thespian_log, versions)

EX_INCOMPATIBLE = 69   # EX_UNAVAILABLE (sysexits.h): what the gateway needs of its runtime is not there
# Every module of the seam, each with its ``missing()``.
SEAM = (loop_stepping, loopback, peer_check, frame_mac, held_port, ack_wait, poll_selector, lazy_identify,
        child_addresses, convention_timing, thespian_log, attach_only)


def problems() -> list[str]:
    """Each internal that is missing or not of the expected shape, named (empty: all are there)."""
    found: list[str] = []
    for module in SEAM:
        try:
            found += module.missing()
        except Exception as exc:  # noqa: BLE001 - a check that cannot run is itself a shape the seam did not expect
            found.append(f"{module.__name__}.missing() failed ({type(exc).__name__}: {exc})")
    return found


def verdict(found: list[str]) -> str:
    """What ``found`` (not empty) means, naming this runtime and the checked ones (doctor's line)."""
    return (f"this runtime ({versions.this_runtime()}) lacks internals the gateway relies on: {'; '.join(found)}. "
            f"The gateway is checked on {versions.checked()} (runtime/versions.py); run it on one of those.")


def refusal(found: Optional[list[str]] = None) -> Optional[str]:
    """The one message a start is refused with, or None when every internal is there."""
    found = problems() if found is None else found
    return f"refused to start: {verdict(found)}" if found else None


def unchecked_python() -> Optional[str]:
    """A note when this Python is not one the seam was checked on (every internal may still be there)."""
    if sys.version_info[:2] in versions.CHECKED_PYTHON:
        return None
    this = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return f"Python {this} is not one the gateway was checked on ({versions.checked()})"
