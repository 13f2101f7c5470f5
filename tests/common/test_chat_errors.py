"""What a chat is told when the agent fails: the pure mapping, and the errors the real OpenAI client raises."""
from __future__ import annotations

import asyncio
import socket

import pytest

from actors.agents.base import AgentError, AgentRequest
from actors.agents.openai_compat import OpenAICompatAgent, _connection_error
from common.chat_errors import TEXTS, failure_kind, user_facing_error
from tests.fakes.openai_server import FakeOpenAIServer, Reply, error_reply, text_chunks

pytestmark = pytest.mark.timeout(30)

KEY = "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
INTERNALS = ("127.0.0.1", "Error", "Exception", "ssl:default", "[Errno", "http://", KEY)


def shown_ok(text: str) -> None:
    assert text and "\n" not in text and len(text) < 300, text
    for internal in INTERNALS:
        assert internal not in text, (internal, text)


# --------------------------------------------------------------------------------------------- the pure mapping

@pytest.mark.parametrize("exc, kind", [
    (ConnectionRefusedError(111, "Connection refused"), "unreachable"),
    (ConnectionResetError(104, "Connection reset by peer"), "unreachable"),
    (OSError(113, "No route to host"), "unreachable"),
    (socket.gaierror(-2, "Name or service not known"), "dns"),
    (asyncio.TimeoutError(), "timeout"),
    (TimeoutError("read timed out"), "timeout"),
    (AgentError(f"HTTP 401: Incorrect API key provided: {KEY}", 401), "auth"),
    (AgentError("HTTP 403: forbidden", 403), "auth"),
    (AgentError("HTTP 429: slow down", 429), "rate_limited"),
    (AgentError("HTTP 429: slow down (retry after 90s)", 429), "rate_limited"),
    (AgentError("HTTP 500: boom at 10.0.0.7:8000", 500), "server_error"),
    (AgentError("HTTP 502: bad gateway", 502), "server_error"),
    (AgentError("HTTP 503: overloaded", 503), "server_error"),
    (AgentError("HTTP 408: request timeout", 408), "timeout"),
    (AgentError("HTTP 404: no such route /v1/chat/completions", 404), "refused"),
    (AgentError("HTTP 400: maximum context length is 8192 tokens", 400), "refused"),
    (AgentError("the model stream ended before the answer was complete"), "agent"),
    (ValueError("a bug in the gateway at 0x7f3a"), "other"),
    (RuntimeError(), "other"),
])
def test_each_failure_has_its_kind_and_a_short_text_without_internals(exc, kind):
    assert failure_kind(exc) == kind
    shown_ok(user_facing_error(exc))


def test_what_each_kind_tells_the_user():
    assert user_facing_error(ConnectionRefusedError()) == TEXTS["unreachable"]
    assert "can't reach the model service" in user_facing_error(socket.gaierror(-2, "x"))
    assert "try again in a moment" in user_facing_error(asyncio.TimeoutError())
    assert "credentials" in user_facing_error(AgentError("HTTP 401: bad key", 401))
    assert "rate limited" in user_facing_error(AgentError("HTTP 429: x", 429))
    assert "internal error" in user_facing_error(AgentError("HTTP 503: x", 503))
    assert user_facing_error(ValueError("x")) == "Something went wrong while answering. The operator has been told."
    assert "The operator has been told" in user_facing_error(ConnectionRefusedError())


def test_words_about_the_request_itself_are_kept_redacted_and_short():
    text = user_facing_error(AgentError(f"HTTP 400: maximum context length is 8192 tokens; key={KEY}", 400))
    assert text.startswith("The model service refused this request (maximum context length is 8192 tokens")
    assert KEY not in text
    assert user_facing_error(AgentError("HTTP 404: no route /v1/x", 404)) == \
        "The model service refused this request (HTTP 404); the operator has been told."
    long = user_facing_error(AgentError("HTTP 400: " + "word " * 200, 400))
    assert len(long) < 220 and long.endswith("…).")


def test_the_agents_own_message_is_shown_redacted():
    text = user_facing_error(AgentError(f"offline agent failure requested by #fail (api_key={KEY})"))
    assert text.startswith("The agent failed (offline agent failure requested by #fail (api_key=[redacted]")
    assert text.endswith("The operator has been told.")
    assert "my-configured-secret" not in user_facing_error(AgentError("leaked my-configured-secret"),
                                                           ["my-configured-secret"])


def test_a_named_reason_wins_over_the_message():
    refused = _connection_error(ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)"), 120, False)
    assert refused.reason == "unreachable" and "127.0.0.1" in refused.message   # the operator's log keeps it
    assert _connection_error(socket.gaierror(-2, "Name or service not known"), 120, False).reason == "dns"
    assert _connection_error(TimeoutError(), 120, False).reason == "timeout"
    assert _connection_error(ConnectionResetError(104, "reset"), 120, True).reason == "broken"
    shown_ok(user_facing_error(refused))


# ------------------------------------------------------------------------------------ the real client's errors

def request() -> AgentRequest:
    return AgentRequest(messages=({"role": "user", "content": "hello"},), profile="default", turn_id="t1")


def failure_of(agent: OpenAICompatAgent) -> AgentError:
    async def run():
        async for _event in agent.run(request()):
            pass
    with pytest.raises(AgentError) as caught:
        asyncio.run(run())
    return caught.value


def test_a_dead_model_port_is_unreachable_without_host_port_or_exception_name():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = failure_of(OpenAICompatAgent(f"http://127.0.0.1:{port}/v1", "m", api_key=KEY, max_attempts=1))
    assert str(port) in error.message and "ClientConnectorError" in error.message   # for the operator
    text = user_facing_error(error, [KEY])
    assert text == TEXTS["unreachable"] and str(port) not in text


@pytest.mark.parametrize("reply, kind", [
    (error_reply(401, f"Incorrect API key provided: {KEY}"), "auth"),
    (error_reply(403, "Project not allowed"), "auth"),
    (error_reply(429, "Rate limit reached"), "rate_limited"),
    (error_reply(500, "Internal server error at worker 10.1.2.3"), "server_error"),
    (Reply(chunks=text_chunks("a long answer that breaks"), drop_after=2), "broken"),
    (Reply(chunks=text_chunks("late"), delay_before_s=5), "timeout"),
])
def test_the_real_clients_failures_map_to_their_kind(reply, kind):
    with FakeOpenAIServer() as server:
        server.script(reply)
        agent = OpenAICompatAgent(server.base_url, "m", api_key=KEY, max_attempts=1, idle_timeout_s=0.5,
                                  connect_timeout_s=2.0)
        error = failure_of(agent)
    assert failure_kind(error) == kind, error.message
    shown_ok(user_facing_error(error, [KEY]))
