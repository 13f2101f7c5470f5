import asyncio
import threading
import time

import pytest

from actors.agents.base import AgentError, AgentRequest, resolve_api_key, take_steer_messages
from actors.agents.build import build_agent
from actors.agents.offline import CONFIG_HELP, FAKE_SECRET, OfflineAgent, long_answer
from actors.agents.openai_compat import OpenAICompatAgent
from actors.agents.tools import BUILTIN_TOOLS, CalculatorError, Tool, ToolRegistry, calculate, default_registry
from actors.messages import TextDelta, ToolCallDelta, ToolCallFinished, ToolCallStarted, TurnEnd
from common.chat_errors import user_facing_error
from common.redact import redact
from actors.adapters.pacing import utf16_len
from actors.sessions.chunking import plan_chunks

pytestmark = pytest.mark.timeout(20)


def request(*texts, steer=None, turn_id="t1"):
    messages = []
    for text in texts:
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
    return AgentRequest(messages=tuple(messages[:-1]), turn_id=turn_id, steer=steer)


async def collect(agent, req, into=None):
    events = [] if into is None else into
    async for event in agent.run(req):
        events.append(event)
    return events


def run(req, **options):
    return asyncio.run(collect(OfflineAgent(chunk_delay_s=0, **{"test_hooks": True, **options}), req))


def texts(events):
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# ----------------------------------------------------------------------------------------------- offline agent

def test_answer_quotes_the_last_message_and_explains_configuration():
    events = run(request("an earlier question", "hello   there\nfriend"))
    final = events[-1]
    assert isinstance(final, TurnEnd) and final.reason == "complete"
    assert sum(isinstance(e, TurnEnd) for e in events) == 1
    assert sum(isinstance(e, TextDelta) for e in events) >= 4
    assert final.final_text == texts(events)
    assert final.final_text.startswith('You said: "hello there friend"')
    assert "offline agent" in final.final_text and "2 messages from you" in final.final_text
    for key in ("[agent]", "kind", "base_url", "model", "api_key_env", "gateway.toml"):
        assert key in final.final_text
    assert not any(isinstance(e, ToolCallStarted) for e in events)


def test_answer_is_deterministic():
    assert run(request("what is 6*7?")) == run(request("what is 6*7?"))


def test_arithmetic_is_answered_through_the_calculator_tool():
    events = run(request("what is (2+3)*4?"), registry=default_registry(["calculator"]))
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    arguments = "".join(e.arguments_delta for e in events if isinstance(e, ToolCallDelta))
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert started.name == finished.name == "calculator" and started.call_id == finished.call_id
    assert arguments == finished.arguments == '{"expression": "(2+3)*4"}'
    assert (finished.ok, finished.result) == (True, "20")
    assert events.index(started) < events.index(finished)
    assert "(2+3)*4 = 20" in events[-1].final_text


def test_tool_hook_forces_a_call_and_time_question_uses_the_clock():
    forced = run(request("#tool please"))
    assert any(isinstance(e, ToolCallFinished) and e.ok for e in forced)
    clock = next(e for e in run(request("what time is it?")) if isinstance(e, ToolCallFinished))
    assert clock.name == "clock" and clock.result.endswith("+00:00")


@pytest.mark.parametrize("length", [0, 37, 4096, 20_000])
def test_long_hook_gives_exactly_n_characters_with_a_fence(length):
    events = run(request(f"#long {length}"))
    final = events[-1].final_text
    assert len(final) == length == len(long_answer(length, f"#long {length}"))
    if length > 4096:
        assert "```python\n" in final
        chunks = plan_chunks(final, 4096, utf16_len)
        assert len(chunks) >= 2 and any(c.closed for c in chunks)   # a cut fell inside the fence


def test_slow_hook_paces_chunks():
    began = time.monotonic()
    events = run(request("#slow 0.02 hi"))
    pauses = sum(isinstance(e, TextDelta) for e in events) - 1
    assert time.monotonic() - began >= 0.02 * pauses


def test_fail_hooks_raise_with_a_fake_secret_that_redaction_removes():
    with pytest.raises(AgentError) as caught:
        run(request("#fail"))
    assert FAKE_SECRET in str(caught.value)
    assert FAKE_SECRET not in redact(str(caught.value))
    assert FAKE_SECRET not in user_facing_error(caught.value)
    events = []
    with pytest.raises(AgentError):
        asyncio.run(collect(OfflineAgent(chunk_delay_s=0, test_hooks=True), request("#failmid"), into=events))
    assert len(events) == 1 and isinstance(events[0], TextDelta)


def test_steer_is_noted_in_the_next_chunk():
    steer = asyncio.Queue()

    async def scenario():
        events = []
        async for event in OfflineAgent(chunk_delay_s=0).run(request("hello", steer=steer)):
            if not events:
                steer.put_nowait("also mention cats")
            events.append(event)
        return events

    events = asyncio.run(scenario())
    assert "(noted: also mention cats)" in events[1].text
    assert "(noted: also mention cats)" in events[-1].final_text
    assert steer.empty()


def test_cancellation_propagates_mid_answer():
    async def scenario():
        events = []
        task = asyncio.ensure_future(collect(OfflineAgent(chunk_delay_s=10), request("hi"), into=events))
        while not events:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return events

    events = asyncio.run(asyncio.wait_for(scenario(), 5))
    assert len(events) == 1 and not any(isinstance(e, TurnEnd) for e in events)


# ------------------------------------------------------------------------------------------------------- tools

@pytest.mark.parametrize("expression, result", [
    ("2+3*4", "14"), ("-(2**3) % 5", "2"), ("2**-1", "0.5"), ("0.1+0.2", "0.3"), ("7/2", "3.5"), ("6/3", "2"),
    ("(1+2)*(3+4)", "21"), ("+5", "5"),
])
def test_calculator(expression, result):
    assert calculate(expression) == result


@pytest.mark.parametrize("expression", [
    "__import__('os').system('true')", "abs(-1)", "x + 1", "True + 1", "9**9**9", "2**100000", "1/0", "10 % 0",
    "1.5**100000", "(-8)**0.5", "[1, 2]", "1 if 1 else 2", "1 << 5", "'a' * 3", "(" * 300 + "1" + ")" * 300, "",
])
def test_calculator_refuses(expression):
    with pytest.raises(CalculatorError):
        calculate(expression)


def test_registry_call_never_raises():
    async def broken(arguments):
        raise RuntimeError("disk on fire")

    registry = ToolRegistry([*BUILTIN_TOOLS.values(), Tool("broken", "fails", {"type": "object"}, broken)])

    async def scenario():
        return [await registry.call("calculator", '{"expression": "1+1"}'),
                await registry.call("calculator", "{bad json"),
                await registry.call("calculator", "[1]"),
                await registry.call("calculator", '{"expression": "1/0"}'),
                await registry.call("missing", "{}"),
                await registry.call("broken", ""),
                await registry.call("clock", "")]

    results = asyncio.run(scenario())
    assert results[0] == (True, "2")
    assert results[1][0] is False and "not valid JSON" in results[1][1]
    assert results[2][0] is False and "JSON object" in results[2][1]
    assert results[3] == (False, "tool calculator failed: CalculatorError: division by zero")
    assert results[4][0] is False and "unknown tool 'missing'" in results[4][1] and "calculator" in results[4][1]
    assert results[5] == (False, "tool broken failed: RuntimeError: disk on fire")
    assert results[6][0] is True and "T" in results[6][1]


def test_a_blocking_tool_runs_off_the_loop_and_is_bounded_in_time():
    loop_ran = threading.Event()

    def waits_for_the_loop(arguments):
        # On the loop itself this would wait in vain: nothing else could run until it returned.
        return "the loop ran meanwhile" if loop_ran.wait(5) else "the loop was blocked"

    def never_ends(arguments):
        loop_ran.wait(30)
        return "too late"

    registry = ToolRegistry([Tool("computes", "", {"type": "object"}, waits_for_the_loop, blocking=True),
                             Tool("forever", "", {"type": "object"}, never_ends, blocking=True, timeout_s=0.2)])

    async def scenario():
        async def mark():
            await asyncio.sleep(0.01)
            loop_ran.set()
        loop_ran.clear()
        marker = asyncio.ensure_future(mark())
        computed = await registry.call("computes", "{}")
        await marker
        loop_ran.clear()
        timed_out = await registry.call("forever", "{}")
        loop_ran.set()   # lets the abandoned worker thread end (asyncio.run waits for it)
        return computed, timed_out

    computed, timed_out = asyncio.run(scenario())
    assert computed == (True, "the loop ran meanwhile")
    assert timed_out == (False, "tool forever took longer than 0.2s; gave up waiting for it")
    assert BUILTIN_TOOLS["calculator"].blocking, "the calculator computes: off the loop"


def test_unknown_builtin_tool_and_duplicate_registration():
    with pytest.raises(ValueError):
        default_registry(["calculator", "shell"])
    with pytest.raises(ValueError):
        ToolRegistry([BUILTIN_TOOLS["clock"]] * 2)
    assert default_registry([]).openai_schema() == []


# ------------------------------------------------------------------------------------------------- build_agent

def test_build_agent_defaults_to_offline():
    agent = build_agent({})
    assert isinstance(agent, OfflineAgent) and agent.supports_steer
    assert isinstance(build_agent(None), OfflineAgent)
    assert isinstance(build_agent({"model": "m"}), OfflineAgent)       # no base_url: nothing to call


def test_build_agent_openai_with_key_from_environment():
    agent = build_agent({"model": "gpt-4o-mini", "base_url": "http://localhost:1/v1/", "timeout_s": 7,
                         "api_key_env": "MY_KEY", "system_prompt": "hi", "tools": ["clock"]},
                        env={"MY_KEY": "sk-from-env"})
    assert isinstance(agent, OpenAICompatAgent)
    assert agent.url == "http://localhost:1/v1/chat/completions"
    assert agent.headers["Authorization"] == "Bearer sk-from-env"
    assert agent.idle_timeout_s == 7 and agent.registry.names() == ["clock"]


def test_api_key_resolution_and_bad_configs():
    assert resolve_api_key({"api_key": "direct"}, env={"OPENAI_API_KEY": "env"}) == "direct"
    assert resolve_api_key({}, env={"OPENAI_API_KEY": "env"}) == "env"
    assert resolve_api_key({}, env={}) is None
    with pytest.raises(ValueError):
        build_agent({"kind": "openai"})
    with pytest.raises(ValueError):
        build_agent({"kind": "telepathy"})


def test_take_steer_messages_accepts_text_and_messages():
    queue = asyncio.Queue()
    queue.put_nowait("plain")
    queue.put_nowait({"role": "user", "content": "dict"})
    assert take_steer_messages(queue) == [{"role": "user", "content": "plain"}, {"role": "user", "content": "dict"}]
    assert take_steer_messages(queue) == [] and take_steer_messages(None) == []


def test_config_help_mentions_every_key():
    for key in ("kind", "base_url", "model", "api_key_env"):
        assert f"{key} =" in CONFIG_HELP


def test_the_test_hooks_are_plain_text_without_fault_injection():
    """On the defaults a chat user's "#slow 3600" or "#long 1000000" is only words: the hooks need the operator's
    [debug] fault_injection (the agent is built with test_hooks from it)."""
    text = "hold it #slow 3600 #long 999999 #fail #tool"
    events = asyncio.run(collect(OfflineAgent(chunk_delay_s=0), request(text)))
    [end] = [e for e in events if isinstance(e, TurnEnd)]
    assert 'You said: "hold it #slow 3600' in end.final_text and len(end.final_text) < 2000
    assert not [e for e in events if isinstance(e, ToolCallStarted)], "#tool forced nothing"
    assert len(run(request("#long 50"))[-1].final_text) == 50, "with the hooks on, the same words are hooks"
