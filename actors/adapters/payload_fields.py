"""The checks every platform's event parser makes of a payload, with one wording for the reason it logs. Pure.

A parser (``normalise`` of an adapter, or its ``events``/``updates`` module) takes a decoded payload it cannot
trust: anything the platform, a proxy or a hostile sender sent. Each check returns the value when it has the
expected type and raises ``MalformedPayload`` otherwise, naming the field (``what``: ``"update 7: text"``) and what
was found; Intake logs that reason and skips the payload, which is acknowledged so it is not re-delivered forever.
"""
from __future__ import annotations

from typing import Any


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
