"""The ``[watch.NAME]`` tables, the bounded read and the change's description (actors/scheduling/watches.py), and a
change's claim in a real SQLite file (storage/watches.py): pure or storage only, no daemon."""
from __future__ import annotations

import asyncio

import pytest

from actors.scheduling.watches import (DIFF_CHARS, ReadRefused, Watch, change_item, content_hash, describe_change,
                                       next_look_at, read_target, validate_watches)
from common.config import ConfigError
from storage import WATCH_PLATFORM, Store

pytestmark = pytest.mark.timeout(30)

ADAPTERS = {"fake": {"type": "fake", "base_url": "http://127.0.0.1:9"}}


def config(**tables) -> dict:
    return {"adapters": ADAPTERS, "watch": tables}


def table(**overrides) -> dict:
    return {"kind": "url", "target": "https://example.com/s.txt", "prompt": "p", "adapter": "fake", "chat": 7,
            **overrides}


def test_a_watch_table_is_checked_into_a_watch_with_its_defaults():
    [watch] = validate_watches(config(page=table())).values()
    assert (watch.name, watch.kind, watch.chat, watch.interval_s, watch.max_bytes) == ("page", "url", "7", 60.0,
                                                                                       256 * 1024)


@pytest.mark.parametrize("overrides, key, reason", [
    ({"kind": "ftp"}, "kind", "must be one of 'url', 'file', 'mcp'"),
    ({"kind": "mcp", "target": "status://board", "server": "nope"}, "server", "configured: none"),
    ({"kind": "mcp", "target": "no uri"}, "target", "resource's URI"),
    ({"target": "file:///etc/passwd"}, "target", "http:// or https://"),
    ({"kind": "file", "target": "notes.txt"}, "target", "absolute path"),
    ({"interval_s": 0}, "interval_s", "1 to 604800"),
    ({"timeout_s": 600}, "timeout_s", "1 to 60"),
    ({"max_bytes": 1 << 30}, "max_bytes", "bytes"),
    ({"adapter": "nope"}, "adapter", "no adapter 'nope'"),
    ({"intervl_s": 5}, "intervl_s", "unknown"),
])
def test_a_bad_watch_names_the_key_and_why(overrides, key, reason):
    with pytest.raises(ConfigError) as refused:
        validate_watches(config(page=table(**overrides)))
    everything = [refused.value, *refused.value.more]
    assert any(e.key == f"[watch.page] {key}" and reason in e.reason for e in everything), everything


def test_the_change_is_a_bounded_line_diff_or_the_sizes_of_binary_content():
    assert "-v1\n+v2" in describe_change(b"a\nv1\n", b"a\nv2\n")
    long = describe_change(b"", ("x" * 100 + "\n").encode() * 100)
    assert len(long) < DIFF_CHARS + 60 and long.endswith("more characters)")
    assert describe_change(b"\xff\x00", b"\xff\x00\x01") == "binary content changed (2 -> 3 bytes)"


def test_a_file_larger_than_max_bytes_or_missing_is_refused_not_cut(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"x" * 11)
    watch = Watch("f", "file", str(path), 1, "p", "fake", "1", max_bytes=10)
    with pytest.raises(ReadRefused, match="larger than max_bytes"):
        read_target(watch)
    path.write_bytes(b"x" * 10)
    assert read_target(watch) == b"x" * 10
    with pytest.raises(ReadRefused, match="cannot read"):
        read_target(Watch("f", "file", str(tmp_path / "gone"), 1, "p", "fake", "1"))


def test_a_change_is_claimed_once_and_its_prompt_stored_with_it(tmp_path):
    watch = Watch("page", "url", "https://example.com/s", 1, "the page changed", "fake", "1")

    async def scenario():
        async with await Store.open(tmp_path / "gateway.db") as store:
            await store.watches.baseline("page", watch.target, content_hash(b"v1"), b"v1")
            seen = (await store.watches.states())["page"]
            item = change_item(watch, 1, describe_change(seen.content, b"v2"), 100.0)
            first = await store.watches.claim_change(seen, content_hash(b"v2"), b"v2", item)
            again = await store.watches.claim_change(seen, content_hash(b"v2"), b"v2", item)   # the same, twice
            rows = await store.inbox.rows_in_state(first.session_key)
            history = await store.watches.changes()
            kept = await store.watches.purge(3600.0)                  # claimed just now: kept
            removed = await store.watches.purge(3600.0, now=1e12)     # past the retention: history gone
            state = (await store.watches.states())["page"]           # the state stays: what is new is decided by it
            return first, again, state, rows, history, (kept, removed)
    first, again, state, rows, changes, purged = asyncio.run(scenario())
    assert purged == (0, 1)
    assert first.inserted and first.outcome == "injected" and not again.inserted
    assert (state.content, state.changes) == (b"v2", 1)
    [row] = rows
    assert row.platform == WATCH_PLATFORM and row.payload["internal"] and "+v2" in row.payload["text"]
    assert [(c["watch"], c["number"], c["inbox_state"]) for c in changes] == [("page", 1, "received")]


def test_a_redirect_is_refused_even_to_the_same_server_and_a_large_page_is_not_cut():
    import http.server
    import threading

    class Pages(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/moved":
                self.send_response(301)
                self.send_header("Location", "/big")
                self.end_headers()
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"x" * 100)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(ReadRefused, match=r"HTTP 301: a redirect \(to '/big'\) is not followed"):
            read_target(Watch("w", "url", f"{base}/moved", 1, "p", "fake", "1", timeout_s=5))
        with pytest.raises(ReadRefused, match="larger than max_bytes"):
            read_target(Watch("w", "url", f"{base}/big", 1, "p", "fake", "1", timeout_s=5, max_bytes=99))
        assert read_target(Watch("w", "url", f"{base}/big", 1, "p", "fake", "1", timeout_s=5)) == b"x" * 100
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_that_drips_its_page_is_refused_at_timeout_s():
    import http.server
    import threading
    import time

    class Drip(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.1)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(ReadRefused, match=r"took longer than timeout_s \(1s\)"):
            read_target(Watch("w", "url", f"http://127.0.0.1:{server.server_address[1]}/", 1, "p", "fake", "1",
                              timeout_s=1))
        assert time.monotonic() - started < 5, "refused near its bound, not after the whole page"
    finally:
        server.shutdown()
        server.server_close()


def test_a_reload_that_changes_the_watches_takes_them_at_once():
    from actors.config_reload import merge
    planned = merge(config(page=table()), config(page=table(interval_s=5), other=table()))
    assert planned.changed == ("[watch.other]", "[watch.page]") and planned.needs_restart == ()
    assert planned.config["watch"] == {"page": table(interval_s=5), "other": table()}


def test_a_watch_on_a_schedule_is_looked_at_at_its_times():
    [watch] = validate_watches(config(page=table(schedule="*/10 * * * * *", interval_s=3600))).values()
    assert watch.schedule.expression == "*/10 * * * * *"
    assert next_look_at(watch, 1_000_003.0) == 1_000_010.0, "the next time of the schedule, not the interval"
    [plain] = validate_watches(config(page=table(interval_s=30))).values()
    assert plain.schedule is None and next_look_at(plain, 1_000_003.0) == 1_000_033.0
    assert watch == validate_watches(config(page=table(schedule="*/10 * * * * *", interval_s=3600)))["page"], \
        "the same table read again is the same watch (a reload does not look at it again at once)"
    with pytest.raises(ConfigError) as refused:
        validate_watches(config(page=table(schedule="every tuesday")))
    assert refused.value.key == "[watch.page] schedule" and "fields" in refused.value.reason
    with pytest.raises(ConfigError, match="time zone"):
        validate_watches(config(page=table(schedule="0 9 * * *", timezone="Mars/Olympus")))


def test_an_mcp_resource_is_read_each_look_and_a_server_that_is_gone_is_refused_saying_so(tmp_path):
    """kind = "mcp": the resource of a real MCP server (tests/fakes/mcp, over streamable HTTP) read at each look,
    so a change of what it serves is seen; a server that is not there is a refused look that names it."""
    from tests.actor_system import free_port
    from tests.fakes.mcp.http_process import HttpMcpServer
    board = tmp_path / "board.txt"
    board.write_text("all green\n")
    server = HttpMcpServer(free_port(), board=str(board)).start()
    try:
        tables = {"adapters": ADAPTERS, "mcp": {"tools": {"url": server.url}},
                  "watch": {"board": table(kind="mcp", server="tools", target="status://board", max_bytes=64)}}
        [watch] = validate_watches(tables).values()
        assert read_target(watch) == b"all green\n"
        board.write_text("one red\n")
        assert read_target(watch) == b"one red\n", "each look reads the resource as it is now"
        board.write_text("x" * 100)
        with pytest.raises(ReadRefused, match="larger than max_bytes"):
            read_target(watch)
    finally:
        server.kill()
    with pytest.raises(ReadRefused, match="from MCP server 'tools'"):
        read_target(watch)
