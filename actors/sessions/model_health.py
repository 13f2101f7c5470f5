"""The model endpoint as a component of the gateway's health, like an adapter: its state, its last error and since
when. Pure: no actor, no I/O (tests/actors/sessions/test_model_health.py).

Each turn that asked a model service tells its session shard how it went (``ModelOutcome``: the session sends it
when the turn's answer is complete, or when the agent failed). The shard keeps one ``ModelHealth`` (in memory: a
shard started again knows nothing until its next turn) and shows its rows in the status walk; the root merges the
rows of every shard (``merge_rows``: per endpoint, the newest outcome wins), and ``status``, ``health --ready``,
``/readyz`` and ``/metrics`` read the merged rows.

An endpoint is ``failing`` from the first turn that failed because of it until the next turn that it answers:
``up`` again at once. One failed turn is enough: the client already retried what a retry may cure (4 attempts
with backoff) or waited out its time bound (``first_token_timeout_s``, ``timeout_s``: actors/agents/openai_compat.py),
and a chat user was told. What does not
say the service is down leaves the state as it is: a request the service refused for its own content (HTTP 400, 413,
422: a prompt too long, a content filter) and failures of the gateway itself (``failure_kind`` "other").
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Iterable, Optional

from actors.messages import ModelOutcome
from supervision import tree
from common.chat_errors import DETAIL_STATUSES, failure_kind
from common.redact import redact

UP, FAILING = "up", "failing"
ERROR_CHARS = 200
MAX_ENDPOINTS = 64     # distinct endpoints a shard keeps (profiles name them; reloads may add more over time)


def outcome_of_failure(endpoint: str, exc: BaseException, secrets: Iterable[str] = (),
                       now: Optional[float] = None) -> Optional[ModelOutcome]:
    """The outcome a failed turn tells, or None when the failure says nothing about the service being usable."""
    kind = failure_kind(exc)
    status = getattr(exc, "status", None)
    if kind == "other" or status in DETAIL_STATUSES:
        return None
    message = " ".join(str(getattr(exc, "message", None) or exc or type(exc).__name__).split())
    message = redact(message, list(secrets))
    if len(message) > ERROR_CHARS:
        message = message[:ERROR_CHARS - 1] + "…"
    return ModelOutcome(endpoint, False, message, kind, time.time() if now is None else now)


@dataclass(frozen=True)
class EndpointRow:
    """What status shows of one endpoint. ``since``: when it entered its state; ``at``: its newest outcome."""
    endpoint: str
    state: str
    since: float
    at: float
    error: str = ""                # the last failure's words (kept after a recovery: when it last failed, and why)
    error_at: float = 0.0
    kind: str = ""
    failed_turns: int = 0          # in a row, up to now (0 while up)

    def as_dict(self) -> dict:
        return {"name": self.endpoint, "state": self.state, "since": self.since, "at": self.at, "error": self.error,
                "error_at": self.error_at, "kind": self.kind, "failed_turns": self.failed_turns}


class ModelHealth:
    def __init__(self) -> None:
        self.rows: dict[str, EndpointRow] = {}

    def record(self, outcome: ModelOutcome) -> None:
        row = self.rows.get(outcome.endpoint)
        if row is not None and outcome.at < row.at:
            return   # an older outcome arriving late says nothing new
        if outcome.ok:
            self.rows[outcome.endpoint] = (
                EndpointRow(outcome.endpoint, UP, outcome.at, outcome.at) if row is None else
                replace(row, state=UP, since=outcome.at if row.state != UP else row.since, at=outcome.at,
                        failed_turns=0))
        else:
            since = row.since if row is not None and row.state == FAILING else outcome.at
            self.rows[outcome.endpoint] = EndpointRow(
                outcome.endpoint, FAILING, since, outcome.at, outcome.error, outcome.at, outcome.kind,
                (row.failed_turns if row is not None else 0) + 1)
        while len(self.rows) > MAX_ENDPOINTS:   # the one heard of longest ago goes
            del self.rows[min(self.rows.values(), key=lambda r: r.at).endpoint]

    def as_fact(self) -> tuple:
        """The rows as plain dicts, for a status walk's facts."""
        return tuple(row.as_dict() for row in sorted(self.rows.values(), key=lambda r: r.endpoint))


def merge_rows(row_lists: Iterable[Iterable[dict]]) -> list[dict]:
    """Every shard's rows as one list: per endpoint the row whose outcome is newest (shards see different turns)."""
    merged: dict[str, dict] = {}
    for rows in row_lists:
        for row in rows or ():
            held = merged.get(row["name"])
            if held is None or row["at"] > held["at"]:
                merged[row["name"]] = dict(row)
    return [merged[name] for name in sorted(merged)]


def model_problems(rows: Iterable[dict]) -> list[str]:
    """One line per failing endpoint: ``model gpt at http://... failing (3 turns failed): HTTP 500: boom``."""
    return [f"model {row['name']} failing ({row['failed_turns']} turn{'s' if row['failed_turns'] != 1 else ''} "
            f"failed)" + (f": {row['error']}" if row.get("error") else "")
            for row in rows if row["state"] == FAILING]


def shard_models(root) -> list[dict]:
    """The merged rows of every session shard in a status walk's tree (``root``: a TreeNode)."""
    return merge_rows(dict(n.facts).get("models", ()) for n in tree.find_kind(root, "SessionShard"))
