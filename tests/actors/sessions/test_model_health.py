"""actors/sessions/model_health.py: the model endpoint's state from turn outcomes, and the merge of every shard's
view."""
from __future__ import annotations

import asyncio

import pytest

from actors.agents.base import AgentError, endpoint_name
from actors.messages import ModelOutcome
from actors.sessions.model_health import FAILING, UP, ModelHealth, merge_rows, model_problems, outcome_of_failure

pytestmark = pytest.mark.timeout(10)

GPT = "gpt at http://127.0.0.1:8000/v1"


def failed(at: float, message: str = "HTTP 500: boom", status: int = 500) -> ModelOutcome:
    return outcome_of_failure(GPT, AgentError(message, status), now=at)


def test_failing_from_the_first_failed_turn_and_up_again_at_the_next_success():
    health = ModelHealth()
    health.record(ModelOutcome(GPT, True, at=10.0))
    assert health.as_fact()[0]["state"] == UP and health.as_fact()[0]["since"] == 10.0
    health.record(failed(20.0))
    health.record(failed(30.0, "cannot reach the model service (ClientConnectorError: refused)", None))
    [row] = health.as_fact()
    assert (row["state"], row["since"], row["failed_turns"], row["kind"]) == (FAILING, 20.0, 2, "agent")
    assert row["error"].startswith("cannot reach") and row["error_at"] == 30.0
    assert model_problems([row]) == [f"model {GPT} failing (2 turns failed): {row['error']}"]
    health.record(ModelOutcome(GPT, True, at=40.0))
    [row] = health.as_fact()
    assert (row["state"], row["since"], row["failed_turns"]) == (UP, 40.0, 0)
    assert row["error_at"] == 30.0, "when it last failed, and why, stays visible"
    assert model_problems([row]) == []


def test_an_outcome_older_than_the_newest_changes_nothing():
    health = ModelHealth()
    health.record(ModelOutcome(GPT, True, at=50.0))
    health.record(failed(40.0))
    assert health.as_fact()[0]["state"] == UP


@pytest.mark.parametrize("exc, counts", [
    (AgentError("HTTP 500: boom", 500), True),
    (AgentError("HTTP 401: bad key", 401), True),
    (AgentError("HTTP 404: no such model", 404), True),
    (AgentError("HTTP 429: slow down", 429), True),
    (AgentError("the model service sent nothing for 30s before answering", reason="timeout"), True),
    (ConnectionRefusedError(111, "refused"), True),
    (asyncio.TimeoutError(), True),
    (AgentError("HTTP 400: maximum context length is 8192 tokens", 400), False),   # this request's own fault
    (AgentError("HTTP 413: too large", 413), False),
    (ValueError("a bug in the gateway"), False),                                    # not the model's
])
def test_which_failures_say_the_service_is_failing(exc, counts):
    assert (outcome_of_failure(GPT, exc, now=1.0) is not None) == counts


def test_the_error_is_redacted_and_short():
    outcome = outcome_of_failure(GPT, AgentError("HTTP 401: key sk-secret-0123 refused " + "x" * 500, 401),
                                 ["sk-secret-0123"], now=1.0)
    assert "sk-secret-0123" not in outcome.error and len(outcome.error) <= 200


def test_endpoint_name_leaves_credentials_and_query_out_of_the_url():
    assert endpoint_name("m", "https://user:pw@api.example.com:8443/v1/?key=abc#x") == \
        "m at https://api.example.com:8443/v1"
    assert endpoint_name("m", "http://[::1]:8000/v1") == "m at http://[::1]:8000/v1"


def test_merge_keeps_per_endpoint_the_newest_outcome_of_any_shard():
    one, two = ModelHealth(), ModelHealth()
    one.record(failed(20.0))
    two.record(ModelOutcome(GPT, True, at=25.0))
    two.record(ModelOutcome("other at http://x/v1", True, at=5.0))
    merged = merge_rows([one.as_fact(), two.as_fact(), ()])
    assert [(r["name"], r["state"]) for r in merged] == [(GPT, UP), ("other at http://x/v1", UP)]
    assert merge_rows([two.as_fact(), one.as_fact()])[0]["state"] == UP


def test_a_shard_keeps_a_bounded_number_of_endpoints():
    health = ModelHealth()
    for n in range(200):
        health.record(ModelOutcome(f"m{n} at http://x/v1", True, at=float(n)))
    assert len(health.rows) == 64 and "m199 at http://x/v1" in health.rows and "m0 at http://x/v1" not in health.rows
