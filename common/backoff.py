"""The one backoff rule: exponential, capped, jittered over the upper half.

Used by supervisors between restarts (``supervision/spec.py``), by adapters between platform retries and reconnects
(``actors/adapters/outbound.py``, ``intake.py``) and by the model client between attempts. Jitter over the upper half
keeps many retries that started together (siblings restarted at once, sessions hit by one outage) from coming back
in lockstep, while a first retry still waits about ``base_s``.
"""
from __future__ import annotations

import random
from typing import Any


def backoff_s(attempt: int, base_s: float, cap_s: float, rng: random.Random | Any = random) -> float:
    """The wait before retry number ``attempt`` (1 for the first): between half and all of
    ``min(cap_s, base_s * 2 ** (attempt - 1))``."""
    ceiling = min(cap_s, base_s * 2 ** max(0, attempt - 1))
    return rng.uniform(ceiling / 2, ceiling)
