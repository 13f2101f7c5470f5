"""The checks every platform's event parser makes of a payload, with one wording for the reason it logs. Pure.

A parser (``normalise`` of an adapter, or its ``events``/``updates`` module) takes a decoded payload it cannot
trust: anything the platform, a proxy or a hostile sender sent. Each check returns the value when it has the
expected type and raises ``MalformedPayload`` otherwise, naming the field (``what``: ``"update 7: text"``) and what
was found; Intake logs that reason and skips the payload, which is acknowledged so it is not re-delivered forever.

A field the message does without is read leniently instead: ``sent_at`` gives the time the platform says a message
was sent, or None when the field is missing or not a time, and the payload is taken all the same.
"""
from __future__ import annotations

import datetime
import re
from typing import Any, Optional

_FRACTION = re.compile(r"(\.\d{6})\d+")


class MalformedPayload(ValueError):
    """normalise() refuses a payload; the reason is logged, the payload skipped (and acknowledged)."""


def an_object(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise MalformedPayload(f"{what} is {type(value).__name__}, not an object")
    return value


def a_string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise MalformedPayload(f"{what} must be a string, got {type(value).__name__}")
    return value


def a_nonempty_string(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise MalformedPayload(f"{what} must be a non-empty string, got {value!r}")
    return value


def sent_at(stamp: Any) -> Optional[float]:
    """An RFC 3339 time (Google Chat and the Bot Framework write up to nanoseconds) as epoch seconds; None if it is
    none."""
    if not isinstance(stamp, str) or len(stamp) > 40:
        return None
    try:
        return datetime.datetime.fromisoformat(_FRACTION.sub(r"\1", stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
