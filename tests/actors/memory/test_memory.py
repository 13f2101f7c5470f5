"""actors/memory: whose memory a turn uses, what the request reads (bounded), and the remember / forget tools as the
offline agent and the OpenAI-compatible agent reach them, against a real SQLite file."""
from __future__ import annotations

import asyncio
import json

import pytest

from actors.agents.base import AgentRequest
from actors.agents.offline import OfflineAgent, _choose_tool
from actors.agents.tools import BUILTIN_TOOLS, OPT_IN_TOOLS, default_registry
from actors.memory.binding import MemoryBinding
from actors.memory.scope import MemorySettings, entry_refusal, matching, scope_name, section, with_memory
from actors.messages import Source, ToolCallFinished, TurnEnd
from actors.profiles.profiles import validate_profiles
from common.config import ConfigError, validate
from storage import MemoryEntry, Store

BASE = {"agent": {"kind": "offline", "system_prompt": "Base."}}


def entry(memory_id: int, text: str) -> MemoryEntry:
    return MemoryEntry(memory_id, "p", "profile", text, 0.0)


def test_each_mode_names_its_scope_and_a_missing_id_means_no_memory():
    dm = Source("fake", "dm-ann", "dm", None, "ann", profile="p")
    topic = Source("fake", "room", "group", "7", "bob", profile="p")
    assert [scope_name(m, dm) for m in ("off", "user", "chat", "profile")] == [None, "user:fake:ann",
                                                                               "chat:fake:dm-ann", "profile"]
    assert scope_name("chat", topic) == "chat:fake:room:7" and scope_name("user", topic) == "user:fake:bob"
    assert scope_name("user", dm, identity="ada") == "identity:ada"
    assert scope_name("user", Source("cron", "room", "group", None, None)) is None   # a scheduled run: no user


def test_the_section_keeps_the_newest_entries_that_fit_and_says_nothing_when_empty():
    entries = [entry(i, f"fact number {i}") for i in range(1, 41)]
    text = section("user", entries, prompt_bytes=120)
    lines = text.splitlines()
    assert lines[0] == "What you remember about this user:"
    shown = [line for line in lines if line.startswith("- [")]
    assert shown[-1] == "- [40] fact number 40" and len(shown) < 10, shown   # oldest dropped first
    assert sum(len(line.encode()) + 1 for line in shown) <= 120
    assert section("chat", [], 4000) == "" and with_memory("Persona.", "") == "Persona."
    assert with_memory("Persona.", text).startswith("Persona.\n\nWhat you remember about this user:")


def test_refusals_are_clear_and_forgetting_by_words_needs_them_all():
    settings = MemorySettings("user", max_entry_bytes=10)
    assert entry_refusal("  ", settings).startswith("nothing to remember")
    assert "is 11 bytes and an entry holds at most 10" in entry_refusal("é" * 5 + "x", settings)
    assert entry_refusal("short", settings) is None
    entries = [entry(1, "Likes green tea"), entry(2, "likes coffee"), entry(3, "tea at five")]
    assert [e.memory_id for e in matching(entries, "TEA likes")] == [1]
    assert matching(entries, "   ") == []


@pytest.mark.parametrize("table, key, reason", [
    ({"memory": "always"}, "[profiles.p] memory", "must be one of"),
    ({"memory": "user", "memory_max_entries": 0}, "[profiles.p] memory_max_entries", "must be 1 to 1000"),
    ({"memory": "user", "memory_max_entry_bytes": 99999}, "[profiles.p] memory_max_entry_bytes", "must be 1 to"),
    ({"agent": {"tools": ["remember"]}}, "[profiles.p] memory", "set memory = "),
    ({"memory": "chat", "agent": {"tools": ["remember", "memorise"]}}, "[profiles.p.agent] tools", "unknown tool"),
], ids=["mode", "entries", "entry-bytes", "tools-without-memory", "unknown-tool"])
def test_bad_memory_settings_are_refused_naming_the_key(table, key, reason):
    with pytest.raises(ConfigError) as caught:
        validate_profiles(validate({**BASE, "profiles": {"p": table}}, "gw.toml"))
    assert caught.value.key == key and reason in caught.value.reason, caught.value


def test_memory_tools_are_offered_only_when_named():
    assert set(OPT_IN_TOOLS) <= set(BUILTIN_TOOLS)
    assert not set(OPT_IN_TOOLS) & set(default_registry().names())
    named = default_registry(["clock", "remember", "forget"])
    schema = {t["function"]["name"]: t["function"]["parameters"] for t in named.openai_schema()}
    assert schema["remember"]["required"] == ["text"] and "about" in schema["forget"]["properties"]
    profile = validate_profiles(validate({**BASE, "profiles": {"p": {"memory": "user", "memory_max_entries": 3}}},
                                         "gw.toml"))["p"]
    assert profile.memory == MemorySettings("user", max_entries=3)


def test_the_offline_agent_reads_remember_and_forget_phrases():
    tools = ["remember", "forget", "calculator"]
    assert _choose_tool("Remember that my PIN is 1+2.", tools) == ("remember", {"text": "my PIN is 1+2"})
    assert _choose_tool("please forget about tea", tools) == ("forget", {"about": "tea"})
    assert _choose_tool("forget entry 12", tools) == ("forget", {"id": 12})
    assert _choose_tool("remember that x", ["calculator"]) == (None, {})
    assert _choose_tool("do you remember 2+2?", tools)[0] == "calculator"


async def run_offline(agent: OfflineAgent, text: str, memory) -> ToolCallFinished:
    request = AgentRequest(({"role": "user", "content": text},), "p", "t1", memory=memory)
    events = [e async for e in agent.run(request)]
    assert isinstance(events[-1], TurnEnd)
    [finished] = [e for e in events if isinstance(e, ToolCallFinished)]
    return finished


def test_the_tools_write_their_own_scope_within_its_bounds(tmp_path):
    asyncio.run(asyncio.wait_for(tools_scenario(tmp_path / "gateway.db"), 30))


async def tools_scenario(db_path):
    async with await Store.open(db_path):
        pass   # the file, migrated
    settings = MemorySettings("user", max_entries=2, max_entry_bytes=40)
    ann = MemoryBinding(str(db_path), "normal", "p", "user:fake:ann", settings, "p.fake.dm.chat-1")
    bob = MemoryBinding(str(db_path), "normal", "p", "user:fake:bob", settings)
    other_profile = MemoryBinding(str(db_path), "normal", "q", "user:fake:ann", settings)
    agent = OfflineAgent(registry=default_registry(["remember", "forget"]), chunk_delay_s=0)
    done = await run_offline(agent, "remember that I like green tea", ann)
    assert done.ok and done.result.startswith("remembered as entry") and json.loads(done.arguments) == {
        "text": "I like green tea"}
    assert (await run_offline(agent, "remember that I like green tea", ann)).result.startswith("already remembered")
    too_long = await run_offline(agent, "remember that " + "x" * 41, ann)
    assert not too_long.ok and "at most 40" in too_long.result
    assert (await run_offline(agent, "remember that I live\nin Oslo", ann)).ok
    full = await run_offline(agent, "remember that a third thing", ann)
    assert not full.ok and "this memory is full (2 of 2 entries)" in full.result
    assert (await run_offline(agent, "remember that bob's own", bob)).ok
    assert not (await run_offline(agent, "forget about tea", other_profile)).ok   # another profile: not its entry
    gone = await run_offline(agent, "forget about green TEA", ann)
    assert gone.ok and "I like green tea" in gone.result
    async with await Store.open(db_path) as store:
        left = [(e.profile, e.scope, e.text) for e in await store.memory.listing()]
    assert left == [("p", "user:fake:ann", "I live in Oslo"), ("p", "user:fake:bob", "bob's own")]
    secret = "sk-live-0123456789abcdefghij"
    keyed = MemoryBinding(str(db_path), "normal", "p", "user:fake:cy", settings, secrets=(secret,))
    assert (await run_offline(agent, f"remember that key {secret}", keyed)).ok
    async with await Store.open(db_path) as store:
        [kept] = await store.memory.entries("p", "user:fake:cy")
    assert secret not in kept.text and kept.text.startswith("key "), kept
    nothing = await run_offline(agent, "remember that x", None)
    assert not nothing.ok and "no memory" in nothing.result
