import asyncio
import json
import logging
import socket
import time

import pytest

from actors.agents.base import AgentError, AgentRequest
from actors.agents.openai_compat import OpenAICompatAgent, parse_retry_after
from actors.agents.tools import Tool, ToolRegistry, default_registry
from actors.messages import (GatewayNotice, LongToolHint, TextDelta, ToolCallDelta, ToolCallFinished, ToolCallStarted,
                             TurnEnd, WaitingForModel)
from tests.fakes.openai_server import (FakeOpenAIServer, Reply, error_reply, raw_reply, text_chunks, text_reply,
                                       tool_call_reply, with_usage)

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
def server():
    with FakeOpenAIServer() as fake:
        yield fake


def make_agent(server, **options):
    defaults = dict(api_key="sk-test-key-0123456789abcdef", retry_base_s=0.01, idle_timeout_s=2.0,
                    connect_timeout_s=2.0)
    return OpenAICompatAgent(server.base_url, "fake-gpt", **{**defaults, **options})


def request(text="hello", steer=None, turn_id="t1"):
    return AgentRequest(messages=({"role": "user", "content": text},), profile="default", turn_id=turn_id,
                        steer=steer)


async def collect(agent, req, into=None):
    events = [] if into is None else into
    async for event in agent.run(req):
        events.append(event)
    return events


def run(agent, req):
    return asyncio.run(collect(agent, req))


def texts(events):
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_streams_text_and_ends_with_one_turn_end(server):
    server.script(text_reply("Hello there, friend.", pieces=4))
    events = run(make_agent(server, system_prompt="Be brief."), request("hi"))
    assert sum(isinstance(e, TextDelta) for e in events) == 4
    assert isinstance(events[-1], TurnEnd) and sum(isinstance(e, TurnEnd) for e in events) == 1
    assert events[-1].final_text == texts(events) == "Hello there, friend."
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["Authorization"] == "Bearer sk-test-key-0123456789abcdef"
    assert sent.body["stream"] is True and sent.body["model"] == "fake-gpt"
    assert sent.body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert {t["function"]["name"] for t in sent.body["tools"]} == {"clock", "calculator", "text_image"}


def test_tool_round_trip(server):
    server.script(tool_call_reply([("calculator", '{"expression": "2+3*4"}')], pieces=4, text="Let me compute."),
                  text_reply("The answer is 14."))
    events = run(make_agent(server), request("what is 2+3*4?"))
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ToolCallStarted") < kinds.index("ToolCallDelta") < kinds.index("ToolCallFinished")
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    assert (started.call_id, started.name) == ("call_fake_0", "calculator")
    assert "".join(e.arguments_delta for e in events if isinstance(e, ToolCallDelta)) == '{"expression": "2+3*4"}'
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert (finished.ok, finished.result, finished.arguments) == (True, "14", '{"expression": "2+3*4"}')
    assert events[-1].final_text == "Let me compute.\n\nThe answer is 14." == texts(events)
    second = server.requests[1].body["messages"]
    assert second[-2]["role"] == "assistant" and second[-2]["content"] == "Let me compute."
    assert second[-2]["tool_calls"] == [{"id": "call_fake_0", "type": "function", "function": {
        "name": "calculator", "arguments": '{"expression": "2+3*4"}'}}]
    assert second[-1] == {"role": "tool", "tool_call_id": "call_fake_0", "content": "14"}


def test_two_parallel_tool_calls_and_an_unknown_tool(server):
    server.script(tool_call_reply([("calculator", '{"expression": "1+1"}'), ("nope", "{}")]), text_reply("done"))
    events = run(make_agent(server), request())
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(f.name, f.ok) for f in finished] == [("calculator", True), ("nope", False)]
    assert "unknown tool" in finished[1].result
    tool_messages = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_fake_0", "call_fake_1"]


def test_retries_before_output_honouring_retry_after(server):
    server.script(error_reply(429, "slow down", retry_after="0.3"), error_reply(503), text_reply("finally"))
    began = time.monotonic()
    events = run(make_agent(server), request())
    assert time.monotonic() - began >= 0.3
    assert events[-1].final_text == "finally"
    assert len(server.requests) == 3


def test_retries_a_connection_drop_before_any_output(server):
    server.script(Reply(chunks=text_chunks("lost"), drop_after=1), text_reply("second try"))
    events = run(make_agent(server), request())
    assert events[-1].final_text == "second try" and texts(events) == "second try"
    assert len(server.requests) == 2


def test_no_retry_after_output_started(server):
    server.script(Reply(chunks=text_chunks("partial answer here", pieces=3), drop_after=3),
                  text_reply("should never be requested"))
    events = []
    with pytest.raises(AgentError) as caught:
        asyncio.run(collect(make_agent(server), request(), into=events))
    assert len(server.requests) == 1
    assert texts(events) == "partial answer here"[:14]      # two pieces went out before the drop
    assert "mid-answer" in caught.value.message


def test_the_turn_end_carries_the_tokens_of_every_request_asked_for_with_include_usage(server):
    server.script(tool_call_reply([("clock", "{}")]), text_reply("It is noon."))   # each ends with a usage chunk
    events = run(make_agent(server), request("time?"))
    assert all(r.body["stream_options"] == {"include_usage": True} for r in server.requests), server.requests
    assert events[-1].tokens == (18, 24)             # two requests of 9 in, 12 out


def test_a_service_that_refuses_stream_options_is_asked_again_without_and_never_again(server, caplog):
    server.rejects_stream_options = True
    agent = make_agent(server)
    with caplog.at_level(logging.INFO, logger="actors.agents.openai_compat"):
        first = run(agent, request("one"))
    assert first[-1].final_text == "echo: one"
    assert ["stream_options" in r.body for r in server.requests] == [True, False]
    assert any("refused stream_options" in r.getMessage() for r in caplog.records), caplog.text
    assert run(agent, request("two"))[-1].final_text == "echo: two"
    assert ["stream_options" in r.body for r in server.requests] == [True, False, False]


def test_a_bad_request_refused_without_stream_options_too_is_an_error_and_usage_is_still_asked(server):
    server.script(error_reply(400, "context too long"), error_reply(400, "context too long"))
    agent = make_agent(server)
    with pytest.raises(AgentError, match="HTTP 400: context too long"):
        run(agent, request())
    assert run(agent, request("next"))[-1].final_text == "echo: next"
    assert ["stream_options" in r.body for r in server.requests] == [True, False, True]


def test_extra_body_stream_options_are_sent_as_configured(server):
    events = run(make_agent(server, extra_body={"stream_options": {"include_usage": False}}), request())
    assert server.requests[0].body["stream_options"] == {"include_usage": False}
    assert events[-1].tokens == (9, 12)              # the fake sends its usage chunk anyway


def test_client_error_is_not_retried_and_message_is_short(server):
    server.script(error_reply(401, "Incorrect API key provided: sk-test***cdef. " + "x" * 500))
    with pytest.raises(AgentError) as caught:
        run(make_agent(server), request())
    assert caught.value.status == 401
    assert caught.value.message.startswith("HTTP 401: Incorrect API key provided")
    assert len(caught.value.message) < 250
    assert len(server.requests) == 1


def test_gives_up_after_max_attempts(server):
    server.script(*[error_reply(500)] * 3)
    with pytest.raises(AgentError) as caught:
        run(make_agent(server, max_attempts=3), request())
    assert caught.value.status == 500 and len(server.requests) == 3


def test_the_log_announces_only_the_retries_it_makes_and_says_when_it_gives_up(server, caplog):
    """Model down (HTTP 500 every time): each announced retry is waited for and made; the last failure says it gives
    up, with no retry announced after it."""
    asked_at = []
    server.answer = lambda body: asked_at.append(time.monotonic()) or error_reply(500, "boom")
    with caplog.at_level("WARNING", logger="actors.agents.openai_compat"), pytest.raises(AgentError):
        run(make_agent(server, max_attempts=4, retry_base_s=0.2), request())
    failed_at = time.monotonic()
    lines = [r.getMessage() for r in caplog.records if r.name == "actors.agents.openai_compat"]
    assert len(asked_at) == 4, asked_at
    announced = [line for line in lines if "retrying in" in line]
    assert [line.split("; ")[1].split(",")[0] for line in announced] == \
        ["attempt 1 of 4", "attempt 2 of 4", "attempt 3 of 4"], lines
    assert lines[-1].endswith("attempt 4 of 4, giving up") and "HTTP 500: boom" in lines[-1], lines
    for line, before, after in zip(announced, asked_at, asked_at[1:]):
        waited = float(line.rsplit(" ", 1)[1].rstrip("s"))
        assert after - before >= waited * 0.9, f"announced {waited}s, asked again after {after - before:.3f}s"
    assert failed_at - asked_at[-1] < 0.5, "the give-up follows the last attempt without a wait"


def test_retry_after_beyond_the_cap_fails_at_once(server):
    server.script(error_reply(429, retry_after="3600"))
    with pytest.raises(AgentError) as caught:
        run(make_agent(server, retry_max_wait_s=5), request())
    assert caught.value.status == 429 and "retry after 3600s" in caught.value.message
    assert len(server.requests) == 1


def test_idle_timeout_mid_stream(server):
    server.script(Reply(chunks=text_chunks("abc def", pieces=2), delay_between_s=5))
    began = time.monotonic()
    with pytest.raises(AgentError) as caught:
        run(make_agent(server, idle_timeout_s=0.3), request())
    assert time.monotonic() - began < 3
    assert "sent nothing for 0.3s" in caught.value.message
    assert len(server.requests) == 1


def test_idle_timeout_before_first_byte_is_not_retried(server):
    server.script(Reply(chunks=text_chunks("late"), delay_before_s=5))
    with pytest.raises(AgentError) as caught:
        run(make_agent(server, idle_timeout_s=0.3), request())
    assert "before answering" in caught.value.message and len(server.requests) == 1


def test_a_model_that_sends_no_first_token_is_given_up_on_long_before_the_idle_bound(server):
    server.script(Reply(chunks=text_chunks("late"), delay_before_s=10))   # headers at once, then nothing
    began = time.monotonic()
    with pytest.raises(AgentError) as caught:
        run(make_agent(server, idle_timeout_s=8.0, first_token_timeout_s=0.5), request())
    assert time.monotonic() - began < 3
    assert caught.value.message == "the model service sent no first token within 0.5s (first_token_timeout_s)"
    assert caught.value.reason == "timeout" and len(server.requests) == 1, "a hung model is not asked again"


def test_the_first_token_bound_covers_the_wait_for_the_response_headers_too(server):
    server.hold(lambda body: True)    # the request is taken and never answered
    try:
        with pytest.raises(AgentError) as caught:
            run(make_agent(server, idle_timeout_s=8.0, first_token_timeout_s=0.5), request())
        assert "no first token within 0.5s" in caught.value.message
    finally:
        server.release()


def test_a_first_chunk_within_the_bound_lets_a_slow_answer_go_on_under_the_idle_bound(server):
    chunks = text_chunks("slow but steady", pieces=3)
    server.script(Reply(chunks=chunks, delay_between_s=0.6))   # the role chunk at once, the words 0.6 s apart
    events = run(make_agent(server, idle_timeout_s=5.0, first_token_timeout_s=0.3), request())
    assert texts(events) == "slow but steady"


def test_while_the_model_is_silent_the_turn_says_it_is_still_waiting(server):
    server.script(Reply(chunks=text_chunks("at last"), delay_before_s=1.2))
    events = run(make_agent(server, first_token_timeout_s=5.0, wait_hint_s=0.3), request())
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    waits = [e for e in events[:first_text] if isinstance(e, WaitingForModel)]
    assert len(waits) >= 2 and all(isinstance(e, WaitingForModel) for e in events[:first_text]), events
    assert [w.elapsed_s for w in waits] == sorted(w.elapsed_s for w in waits) and waits[0].elapsed_s >= 0.3
    assert not [e for e in events[first_text:] if isinstance(e, WaitingForModel)], "none once words flow"
    assert texts(events) == "at last"


def test_a_prompt_answer_sends_no_waiting_sign(server):
    server.script(text_reply("quick"))
    events = run(make_agent(server, wait_hint_s=2.0), request())
    assert not [e for e in events if isinstance(e, WaitingForModel)]


def test_unreachable_server_is_retried_then_reported():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = OpenAICompatAgent(f"http://127.0.0.1:{port}/v1", "m", retry_base_s=0.01, max_attempts=2)
    with pytest.raises(AgentError) as caught:
        asyncio.run(collect(agent, request()))
    assert caught.value.message.startswith("cannot reach the model service")


def test_tolerates_malformed_chunks_comments_usage_and_missing_fields(server):
    server.script(raw_reply([
        ": keep-alive", "",
        "data: {not json", "",
        'data: {"choices": [{"delta": {"content": "Hel"}}]}',        # no blank line after: tolerated
        'data: {"choices": [{"index": 0, "delta": {"content": "lo"}}]}', "",
        'data: {"choices": []}', "",
        'data: {"usage": {"total_tokens": 3}}', "",
        "event: ping", "",
        'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}', "",
    ]))
    events = run(make_agent(server), request())
    assert events[-1].final_text == "Hello"


def test_stream_ending_without_finish_is_an_error_after_output(server):
    server.script(raw_reply(['data: {"choices": [{"delta": {"content": "half"}}]}', ""], done=False))
    events = []
    with pytest.raises(AgentError, match="ended before the answer was complete"):
        asyncio.run(collect(make_agent(server), request(), into=events))
    assert texts(events) == "half" and len(server.requests) == 1


def test_error_chunk_mid_stream(server):
    server.script(raw_reply(['data: {"choices": [{"delta": {"content": "a"}}]}', "",
                             'data: {"error": {"message": "upstream overloaded", "code": 502}}', ""]))
    with pytest.raises(AgentError) as caught:
        run(make_agent(server), request())
    assert caught.value.status == 502 and "upstream overloaded" in caught.value.message


def test_non_streaming_json_answer_is_accepted(server):
    server.script(Reply(as_json={"choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": "whole"}}]}))
    assert run(make_agent(server), request())[-1].final_text == "whole"


def test_tool_rounds_are_bounded(server):
    server.script(*[tool_call_reply([("clock", "{}")]) for _ in range(3)])
    events = run(make_agent(server, max_tool_rounds=2), request())
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [f.ok for f in finished] == [True, True, False]
    assert len(finished) == sum(isinstance(e, ToolCallStarted) for e in events)
    assert any(isinstance(e, GatewayNotice) and "2 rounds" in e.text for e in events)
    assert isinstance(events[-1], TurnEnd) and len(server.requests) == 3


def test_steer_is_folded_into_the_next_model_call(server):
    server.script(tool_call_reply([("clock", "{}")]), text_reply("ok"))
    steer = asyncio.Queue()

    async def scenario():
        events = []
        async for event in make_agent(server).run(request("first", steer=steer)):
            if isinstance(event, ToolCallStarted):
                steer.put_nowait("actually, use UTC")
            events.append(event)
        return events

    asyncio.run(scenario())
    assert server.requests[1].body["messages"][-1] == {"role": "user", "content": "actually, use UTC"}
    assert {"role": "user", "content": "actually, use UTC"} not in server.requests[0].body["messages"]


def test_long_tool_emits_hints_and_cancellation_propagates(server):
    release = asyncio.Event()

    async def slow(arguments):
        await release.wait()
        return "never"

    registry = ToolRegistry([Tool("slow", "waits", {"type": "object", "properties": {}}, slow)])
    server.script(tool_call_reply([("slow", "{}")]))
    agent = make_agent(server, registry=registry, long_tool_hint_s=0.05)

    async def scenario():
        events = []
        task = asyncio.ensure_future(collect(agent, request(), into=events))
        while sum(isinstance(e, LongToolHint) for e in events) < 2 and not task.done():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return events

    events = asyncio.run(scenario())
    hints = [e for e in events if isinstance(e, LongToolHint)]
    assert hints[0].name == "slow" and hints[1].elapsed_s >= hints[0].elapsed_s
    assert not any(isinstance(e, TurnEnd) for e in events)


def test_cancel_mid_stream_closes_cleanly(server):
    content_first = text_chunks("one two three four", pieces=4)[1:]
    server.script(Reply(chunks=content_first, delay_between_s=2))

    async def scenario():
        events = []
        task = asyncio.ensure_future(collect(make_agent(server, idle_timeout_s=5), request(), into=events))
        while not events and not task.done():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return events

    began = time.monotonic()
    events = asyncio.run(scenario())
    assert time.monotonic() - began < 2
    assert texts(events) == content_first[0]["choices"][0]["delta"]["content"]


def test_parse_retry_after():
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None


def test_registry_schema_is_openai_shaped():
    schema = default_registry().openai_schema()
    calculator = next(t for t in schema if t["function"]["name"] == "calculator")
    assert calculator["type"] == "function"
    assert calculator["function"]["parameters"]["required"] == ["expression"]
    json.dumps(schema)


def test_sse_decoder_survives_any_block_boundary():
    from actors.agents.sse import DONE, iter_sse_payloads
    stream = ('data: {"choices": [{"delta": {"content": "héllo 😀"}}]}\r\n\r\n: ping\n\n'
              'data: {"a": 1}\ndata: [DONE]\n\n').encode()

    async def decode(blocks):
        async def source():
            for block in blocks:
                yield block
        return [p async for p in iter_sse_payloads(source())]

    expected = [{"choices": [{"delta": {"content": "héllo 😀"}}]}, {"a": 1}, DONE]
    for cut in range(len(stream) + 1):
        assert asyncio.run(decode([stream[:cut], stream[cut:]])) == expected, cut



def test_a_run_with_a_token_budget_asks_nothing_more_once_it_is_used_up(server):
    call = tool_call_reply([("calculator", '{"expression": "2+3"}')])
    server.script(with_usage(call, 300, 200), with_usage(call, 400, 200))
    req = AgentRequest(messages=({"role": "user", "content": "sum it"},), turn_id="t1", token_budget=1000)
    events = run(make_agent(server, registry=default_registry(["calculator"])), req)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(f.ok, f.result) for f in finished] == [(True, "5"), (False, "not run: the turn used up its tokens")]
    assert events[-1] == TurnEnd(reason="token_limit", final_text="", tokens=(700, 400))
    assert len(server.requests) == 2, "no model call past the budget"
    # Without a budget the same run goes on to its answer.
    server.script(with_usage(call, 300, 200), with_usage(call, 400, 200), text_reply("done"))
    events = run(make_agent(server, registry=default_registry(["calculator"])), request("sum it"))
    assert events[-1].reason == "complete" and events[-1].final_text == "done"
