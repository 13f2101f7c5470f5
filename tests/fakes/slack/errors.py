"""How the fake Web API fails, and how it reads parameters.

Slack answers HTTP 200 with ``{"ok": false, "error": "<code>"}`` for every refusal it decides on, and keeps other
statuses for rate limits (429 with ``Retry-After``) and its own failures (5xx). Parameters may come as a query
string, a form body or a JSON body, so every value may be a string ("true", "123") or a JSON value.
"""
from __future__ import annotations

import json
import math
from typing import Any, Optional


class ApiError(Exception):
    """A Web API refusal: the ``error`` code, the HTTP status (200 unless said), and extra body fields."""

    def __init__(self, error: str, status: int = 200, retry_after: Optional[int] = None, **extra):
        super().__init__(error)
        self.error, self.status, self.retry_after, self.extra = error, status, retry_after, extra

    def body(self) -> dict:
        return {"ok": False, "error": self.error, **self.extra}

    def headers(self) -> dict:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}


def ratelimited(seconds: float) -> ApiError:
    """429 ``ratelimited``: Retry-After is a whole number of seconds, at least 1, as Slack sends it."""
    return ApiError("ratelimited", status=429, retry_after=max(1, math.ceil(seconds - 1e-6)))


def str_param(params: dict, name: str) -> Optional[str]:
    value = params.get(name)
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def bool_param(params: dict, name: str, default: bool) -> bool:
    value = params.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).lower() in ("1", "true", "yes")


def json_param(params: dict, name: str, error: str) -> Any:
    """A structured argument (``blocks``): a JSON value, or a string holding JSON (form and query bodies)."""
    value = params.get(name)
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return json.loads(value)
        except ValueError:
            raise ApiError(error) from None
    return value
