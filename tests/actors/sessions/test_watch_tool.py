"""The watches the agent creates (actors/sessions/watch_tool.py, storage/agent_watches.py, docs/background.md): the
arguments a call may give, the private hosts refused (given as an address at the call, resolved at each read), the
per-chat bound and one watch per call in storage, and how the watcher reads a stored watch. The daemon's whole path
(a watch created by the offline agent, its change answered in its chat): tests/pipeline/test_watches.py."""
from __future__ import annotations

import asyncio

import pytest

from actors.agents.offline import _choose_tool
from actors.scheduling.watches import agent_watches_offered, private_host_refusal, stored_watch
from actors.sessions import watch_tool
from storage import Store, WatchAsked

pytestmark = pytest.mark.timeout(30)

GOOD = {"url": "https://example.com/status", "interval_s": 600, "prompt": "say what changed"}


@pytest.mark.parametrize("change, why", [
    ({}, ""), ({"url": "ftp://example.com/x"}, "http:// or https://"), ({"url": "https:///nohost"}, "with a host"),
    ({"url": 7}, "http:// or https://"), ({"url": "http://127.0.0.1:8080/x"}, "private network"),
    ({"url": "http://localhost/x"}, "private network"), ({"url": "http://[::1]/x"}, "private network"),
    ({"url": "http://169.254.169.254/latest"}, "private network"), ({"url": "http://10.1.2.3/"}, "private network"),
    ({"interval_s": 59}, "must be 60 to 604800"), ({"interval_s": True}, "interval_s"),
    ({"interval_s": "600"}, "interval_s"), ({"prompt": " "}, "'prompt'"),
    ({"prompt": "x" * (watch_tool.MAX_PROMPT_CHARS + 1)}, "'prompt'")])
def test_the_arguments_a_call_may_give(change, why):
    found = watch_tool.refusal({**GOOD, **change}, 60.0, allow_private=False)
    assert (why in found and found.startswith("not created")) if why else found == ""


MCP = {"mcp_server": "notes", "resource": "status://board", "interval_s": 600, "prompt": "say what changed"}


@pytest.mark.parametrize("change, why", [
    ({}, ""), ({"mcp_server": "other"}, "one of the MCP servers offered here (notes)"),
    ({"resource": "no uri"}, "'resource' must be the resource's URI"),
    ({"url": "https://example.com/"}, "give one of 'url'"),
    ({"schedule": "0 0 9 * * 1-5", "interval_s": None}, ""),
    ({"schedule": "*/10 * * * * *"}, "fires every 10s; the shortest allowed is 60s"),
    ({"schedule": "not cron"}, "'schedule'"), ({"schedule": "0 9 * * *", "timezone": "Mars/Olympus"}, "'schedule'")])
def test_an_mcp_resource_or_a_schedule_the_agent_may_ask_for(change, why):
    found = watch_tool.refusal({k: v for k, v in {**MCP, **change}.items() if v is not None}, 60.0, False,
                               servers=["notes"])
    assert (why in found and found.startswith("not created")) if why else found == "", found


def test_a_stored_watch_of_an_mcp_resource_on_a_schedule_is_read_from_the_configured_server():
    from common.mcp_config import server_specs

    class Row:
        name, session_key, target, interval_s, prompt = "agent-y", "default.fake.dm.c1", "status://board", 0.0, "p"
        kind, server, schedule, timezone = "mcp", "notes", "0 0 9 * * 1-5", "UTC"
        source = {"platform": "fake", "chat_id": "c1", "chat_type": "dm", "thread_id": None, "profile": "default"}
    servers = server_specs({"mcp": {"notes": {"url": "http://127.0.0.1:9/mcp"}}})
    watch = stored_watch(Row(), servers=servers)
    assert (watch.kind, watch.target, watch.server.name, watch.schedule.expression) == (
        "mcp", "status://board", "notes", "0 0 9 * * 1-5")
    gone = stored_watch(Row(), servers={})
    assert gone.server is None and gone.server_name == "notes", "a server gone from the configuration: refused"
    from actors.scheduling.watches import ReadRefused, read_target
    with pytest.raises(ReadRefused, match="'notes' is not configured"):
        read_target(gone)


def test_private_hosts_are_allowed_only_where_the_gateway_says_so():
    assert watch_tool.refusal({**GOOD, "url": "http://127.0.0.1:8/x"}, 60.0, allow_private=True) == ""


def test_a_name_is_checked_against_every_address_it_resolves_to():
    def resolving(*addresses):
        return lambda host, port: [(2, 1, 6, "", (a, 0)) for a in addresses]
    assert private_host_refusal("https://example.com/", resolving("93.184.215.14")) == ""
    refused = private_host_refusal("https://sneaky.example/", resolving("93.184.215.14", "192.168.1.5"))
    assert "private network (192.168.1.5)" in refused

    def failing(host, port):
        raise OSError("no such name")
    assert "cannot resolve" in private_host_refusal("https://nowhere.example/", failing)


def page(url: str) -> WatchAsked:
    return WatchAsked(url, 60, "p")


def test_one_watch_per_call_and_at_most_the_chats_limit(tmp_path):
    source = {"platform": "fake", "chat_id": "c1", "chat_type": "group", "thread_id": None, "profile": "default"}

    async def go():
        async with await Store.open(tmp_path / "g.db") as store:
            made = store.agent_watches
            first = await made.create("k1", source, page("https://a/"), 2, "tool:t1:c1")
            again = await made.create("k1", source, page("https://a/"), 2, "tool:t1:c1")
            second = await made.create("k1", source, page("https://b/"), 2, "tool:t1:c2")
            third = await made.create("k1", source, page("https://c/"), 2, "tool:t1:c3")
            other = await made.create("k2", source, page("https://c/"), 2, "tool:t2:c1")
            removed = await made.remove("k1", 2)
            fourth = await made.create("k1", source, page("https://d/"), 2, "tool:t3:c1")
            return first, again, second, third, other, removed, fourth, await made.all()
    first, again, second, third, other, removed, fourth, every = asyncio.run(go())
    assert (first.watch.number, again.again, again.watch, second.watch.number) == (1, True, first.watch, 2)
    assert third.watch is None and third.count == 2, "the chat's limit"
    assert other.watch.number == 1, "numbered per chat"
    assert removed.name == second.watch.name and fourth.watch.number == 2
    assert fourth.watch.name != second.watch.name, "a name is never given again (its stored state is another's)"
    assert len(every) == 3 and first.watch.source == source


def test_the_watcher_reads_a_stored_watch_into_its_chat():
    class Row:
        name, session_key, target, interval_s, prompt = "agent-x", "default.fake.group.c1.u-1", "https://a/", 60.0, "p"
        kind, server, schedule, timezone = "url", "", "", "UTC"
        source = {"platform": "fake", "chat_id": "c1", "chat_type": "group", "thread_id": "7", "profile": "pro"}
    watch = stored_watch(Row())
    assert watch.session_key() == Row.session_key and watch.public_only and watch.kind == "url"
    assert (watch.source().platform, watch.source().chat_id, watch.source().thread_id, watch.source().profile) == \
        ("fake", "c1", "7", "pro")
    assert not stored_watch(Row(), allow_private=True).public_only


def test_the_watcher_runs_where_a_profile_offers_the_tool_and_the_offline_agent_calls_it():
    assert agent_watches_offered({"profiles": {"p": {"agent": {"tools": ["clock", "create_watch"]}}}})
    assert not agent_watches_offered({"profiles": {"p": {"agent": {"tools": ["clock"]}}}})
    assert not agent_watches_offered({})
    name, values = _choose_tool("watch https://example.com/s every 600 seconds: tell me", ["create_watch"])
    assert (name, values) == ("create_watch", {"url": "https://example.com/s", "interval_s": 600.0,
                                               "prompt": "tell me"})
    name, values = _choose_tool("watch mcp notes status://board at '0 0 9 * * *': sum it up", ["create_watch"])
    assert values == {"mcp_server": "notes", "resource": "status://board", "schedule": "0 0 9 * * *",
                      "prompt": "sum it up"}


def test_a_file_the_agent_may_watch_lies_under_the_operators_roots_and_is_checked_again_at_each_read(tmp_path):
    from actors.scheduling.watches import ReadRefused, read_target
    root, outside = tmp_path / "shared", tmp_path / "private"
    root.mkdir()
    outside.mkdir()
    (root / "notes.txt").write_text("hello\n")
    (outside / "secret.txt").write_text("do not tell\n")
    (root / "sneaky.txt").symlink_to(outside / "secret.txt")
    asked = {"file": str(root / "notes.txt"), "interval_s": 600, "prompt": "say what changed"}
    assert "names none" in watch_tool.refusal(asked, 60.0, False), "no roots: no file at all"
    assert watch_tool.refusal(asked, 60.0, False, file_roots=[str(root)]) == ""
    for path, why in ((str(outside / "secret.txt"), "is not under"), (str(root / "sneaky.txt"), "is not under"),
                      (str(root / ".." / "private" / "secret.txt"), "is not under"), ("notes.txt", "absolute")):
        assert why in watch_tool.refusal({**asked, "file": path}, 60.0, False, file_roots=[str(root)]), path

    class Row:
        name, session_key, target = "agent-f", "default.fake.dm.c1", str(root / "notes.txt")
        interval_s, prompt = 60.0, "p"
        kind, server, schedule, timezone = "file", "", "", "UTC"
        source = {"platform": "fake", "chat_id": "c1", "chat_type": "dm", "thread_id": None, "profile": "default"}
    assert read_target(stored_watch(Row(), file_roots=[str(root)])) == b"hello\n"
    (root / "notes.txt").unlink()
    (root / "notes.txt").symlink_to(outside / "secret.txt")   # swapped for a link since it was created
    with pytest.raises(ReadRefused, match="not under the directories the agent may watch"):
        read_target(stored_watch(Row(), file_roots=[str(root)]))
