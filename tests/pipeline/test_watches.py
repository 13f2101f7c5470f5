"""Watches through the real daemon (docs/background.md, "Watches"): a URL served by a local HTTP server, a file and
an MCP server's resource, looked at every second; a change is answered in the watch's chat once, also when the
daemon is killed -9 right after the change was claimed; a target that does not change starts no turn; a redirect
is refused and said so; the agent's watches (a page, a file under the operator's roots, an MCP resource on a
schedule); a bad ``[watch.NAME]`` table stops the start with exit 78 naming the key.

One daemon for the module (killed and started again by the first test)."""
from __future__ import annotations

import http.server
import json
import os
import signal
import sqlite3
import threading

import pytest

from tests.actor_system import free_port, wait_for
from tests.fakes.mcp.http_process import HttpMcpServer
from tests.fakes.fakeplatform import FakePlatform
from tests.gateway import Gateway
from tests.pipeline.harness import CURSOR, pipeline_gateway, visible

pytestmark = pytest.mark.timeout(240)


class Pages(http.server.BaseHTTPRequestHandler):
    bodies: dict[str, bytes] = {}

    def do_GET(self):
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "file:///etc/passwd")
            self.end_headers()
            return
        body = self.bodies.get(self.path, b"")
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def pages():
    Pages.bodies = {"/status.txt": b"all systems up\nv1\n", "/quiet.txt": b"nothing ever changes here\n",
                    "/agent.txt": b"first\n"}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def platform():
    with FakePlatform() as fake:
        yield fake


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    path = tmp_path_factory.mktemp("watched") / "notes.txt"
    path.write_text("first line\n")
    return path


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """An MCP server (tests/fakes/mcp, streamable HTTP) whose resource status://board serves this file's text."""
    path = tmp_path_factory.mktemp("board") / "board.txt"
    path.write_text("all green\n")
    server = HttpMcpServer(free_port(), board=str(path)).start()
    yield server, path
    server.kill()


@pytest.fixture(scope="module")
def gw(tmp_path_factory, platform, pages, notes, board):
    watches = f"""
# The agent creates watches too (on the local server: private hosts allowed here), two per chat at most
[profiles.default]
agent = {{ tools = ["clock", "calculator", "create_watch"] }}

[agent_watches]
allow_private_hosts = true
min_interval_s = 1
max_per_chat = 2
file_roots = ["{notes.parent}"]

[watch.page]
kind = "url"
target = "{pages}/status.txt"
interval_s = 1
prompt = "the status page changed #think 0.8"
adapter = "fake"
chat = "c-page"

[watch.quiet]
kind = "url"
target = "{pages}/quiet.txt"
interval_s = 1
prompt = "the quiet page changed"
adapter = "fake"
chat = "c-quiet"

[watch.notes]
kind = "file"
target = "{notes}"
interval_s = 1
prompt = "the notes file changed"
adapter = "fake"
chat = "c-notes"

[mcp.board]
url = "{board[0].url}"

[watch.board]
kind = "mcp"
server = "board"
target = "status://board"
interval_s = 1
prompt = "the board changed"
adapter = "fake"
chat = "c-board"

[watch.moved]
kind = "url"
target = "{pages}/moved"
interval_s = 1
prompt = "never told"
adapter = "fake"
chat = "c-moved"
"""
    gateway = pipeline_gateway(tmp_path_factory.mktemp("watches"), platform, extra=watches)
    try:
        gateway.start()
        yield gateway
    finally:
        gateway.cli("stop")
        gateway.kill_everything()


def query(gw, sql: str, args=()) -> list[dict]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(sql, args)]


def changes(gw, watch: str) -> list[dict]:
    return query(gw, "SELECT c.*, i.state AS inbox_state FROM watch_changes c LEFT JOIN inbox i ON i.seq = "
                     "c.inbox_seq WHERE c.watch = ? ORDER BY c.number", (watch,))


def looked_at(gw) -> set[str]:
    return {r["watch"] for r in query(gw, "SELECT watch FROM watch_state")}


def watch_status(gw) -> dict:
    return json.loads(gw.cli("status", "--json").stdout).get("watch") or {}


def settled(platform, chat: str) -> list[dict]:
    return [m for m in visible(platform, chat) if CURSOR not in m["text"]]


def explain(gw, platform) -> str:
    chats = {c: [m["text"][:60] for m in platform.messages(c)] for c in ("c-page", "c-quiet", "c-notes")}
    tail = [line for line in gw.log().splitlines() if " INFO root" not in line][-30:]
    return f"changes: {changes(gw, 'page')}\nchats: {chats}\n" + "\n".join(tail)


def test_a_change_is_answered_once_across_a_kill_and_an_unchanged_target_starts_nothing(gw, platform, notes):
    wait_for(lambda: looked_at(gw) >= {"page", "quiet", "notes"}, 60, 0.05, "the first look at every target")
    try:
        # A change of the page: one turn, in the watch's chat, told what changed.
        Pages.bodies["/status.txt"] = b"all systems up\nv2\n"
        wait_for(lambda: settled(platform, "c-page"), 60, 0.05, "the answer to the page's first change")
        [first] = settled(platform, "c-page")
        assert "the status page changed" in first["text"] and "+v2" in first["text"], first
        # A change of the file, likewise.
        notes.write_text("first line\nsecond line\n")
        wait_for(lambda: settled(platform, "c-notes"), 60, 0.05, "the answer to the file's change")
        assert "+second line" in settled(platform, "c-notes")[0]["text"]
        # kill -9 right after the next change was claimed (its turn thinks 0.8 s: the answer is not out yet).
        Pages.bodies["/status.txt"] = b"all systems down\nv3\n"
        wait_for(lambda: len(changes(gw, "page")) == 2, 60, 0.005, "the page's second change to be claimed")
        os.kill(gw.launcher_pid, signal.SIGKILL)
        gw.assert_no_process_left()
        killed = changes(gw, "page")[-1]
        assert killed["inbox_state"] in ("received", "taken"), f"the kill came before the answer: {killed}"
        gw.start()
        wait_for(lambda: len(settled(platform, "c-page")) >= 2, 60, 0.05, "the claimed change answered after the "
                                                                          "restart")
        wait_for(lambda: all(r["state"] == "done" for r in query(gw, "SELECT state FROM inbox")), 60, 0.05,
                 "every change answered")
        # Quiet afterwards: two more looks at every target by the restarted watcher change nothing.
        wait_for(lambda: watch_status(gw).get("looks", 0) >= 10, 60, 0.2, "two rounds of looks after the restart")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(gw, platform)}") from None
    assert [c["number"] for c in changes(gw, "page")] == [1, 2], explain(gw, platform)
    assert changes(gw, "page")[-1]["inbox_state"] == "done"
    texts = [m["text"] for m in visible(platform, "c-page")]
    assert len(texts) == 2 and "+v3" in texts[1], explain(gw, platform)
    assert changes(gw, "quiet") == [] and visible(platform, "c-quiet") == []


def test_a_change_of_an_mcp_servers_resource_is_answered_in_its_chat(gw, platform, board):
    _server, path = board
    wait_for(lambda: "board" in looked_at(gw), 60, 0.05, "the first look at the MCP resource")
    path.write_text("all green\none red\n")
    try:
        wait_for(lambda: settled(platform, "c-board"), 60, 0.05, "the answer to the resource's change")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(gw, platform)}") from None
    [answer] = settled(platform, "c-board")
    assert "the board changed" in answer["text"] and "+one red" in answer["text"], answer
    assert [c["number"] for c in changes(gw, "board")] == [1]


def test_a_redirect_is_refused_and_said_so_and_status_shows_the_watches(gw):
    wait_for(lambda: watch_status(gw).get("refused", 0) >= 1, 60, 0.2, "the redirect to be refused")
    assert "watch moved: HTTP 302: a redirect (to 'file:///etc/passwd') is not followed" in gw.log()
    assert watch_status(gw)["watches"] == 5
    assert "moved" not in looked_at(gw) and changes(gw, "moved") == []
    assert "watches      5 watched" in gw.cli("status", check=True).stdout


def listed(gw) -> dict:
    return {w["name"]: w for w in json.loads(gw.cli("watches", "list", "--json", check=True).stdout)["watches"]}


def test_watches_list_shows_each_watchs_last_look_last_change_and_next_look(gw):
    shown = listed(gw)
    assert sorted(shown) == ["board", "moved", "notes", "page", "quiet"], shown
    page, quiet, moved = shown["page"], shown["quiet"], shown["moved"]
    assert page["last_change"]["number"] == 2 and page["last_change"]["outcome"] == "injected", page
    assert page["changes"] == 2 and page["chat"] == "fake:c-page" and page["interval_s"] == 1, page
    assert quiet["last_change"] is None and quiet["last_look"] is not None, quiet
    assert quiet["next_look"] == pytest.approx(quiet["last_look"] + 1), "the last look and the interval"
    # Looks that find nothing new move the last look on.
    first = quiet["last_look"]
    wait_for(lambda: listed(gw)["quiet"]["last_look"] > first, 60, 0.2, "a later look at the quiet page")
    assert moved["last_look"] is None and moved["last_change"] is None, "a refused read is no look"
    text = gw.cli("watches", "list", check=True).stdout
    assert "page  url " in text and "last change: #2 " in text and "told" in text, text
    text = gw.cli("watches", "show", "page", check=True).stdout
    assert "prompt:      the status page changed" in text and "; inbox row: done" in text, text
    missing = gw.cli("watches", "show", "nothing")
    assert missing.returncode == 1 and "no watch 'nothing'" in missing.stdout + missing.stderr


def test_a_reload_adds_a_watch_on_a_schedule_and_takes_it_out_again(gw, platform, tmp_path):
    extra = tmp_path / "extra.txt"
    extra.write_text("one\n")
    original = gw.config.read_text()
    gw.config.write_text(original + f"""
[watch.extra]
kind = "file"
target = "{extra}"
interval_s = 3600
schedule = "*/2 * * * * *"
prompt = "the extra file changed"
adapter = "fake"
chat = "c-extra"
""")
    try:
        result = gw.cli("reload")
        assert result.returncode == 0, result
        assert "[watch.extra]" in result.stdout, result.stdout
        gw.wait_log("watch: 6 watch(es) after a reload")
        wait_for(lambda: "extra" in looked_at(gw), 60, 0.05, "the first look at the new watch")
        extra.write_text("one\ntwo\n")
        wait_for(lambda: settled(platform, "c-extra"), 60, 0.05, "the answer to the new watch's change")
        assert "+two" in settled(platform, "c-extra")[0]["text"], "looked at on its schedule, not every hour"
        assert 'extra  file ' in gw.cli("watches", "list", check=True).stdout
        assert 'at "*/2 * * * * *" -> fake:c-extra' in gw.cli("watches", "list", check=True).stdout
    finally:
        gw.config.write_text(original)
    result = gw.cli("reload")
    assert result.returncode == 0, result
    gw.wait_log("watch: 5 watch(es) after a reload")
    extra.write_text("one\ntwo\nthree\n")
    assert listed(gw)["extra"]["configured"] is False, "still listed, as removed, while its state is stored"
    # Looked at no more: two rounds of looks at the others, and no change of it claimed.
    looks = watch_status(gw)["looks"]
    wait_for(lambda: watch_status(gw).get("looks", 0) >= looks + 10, 60, 0.2, "two more rounds of looks")
    assert [c["number"] for c in changes(gw, "extra")] == [1] and len(settled(platform, "c-extra")) == 1


def test_the_agent_creates_a_watch_whose_change_is_answered_in_its_chat_and_a_third_is_refused(gw, platform, pages):
    chat = "c-agent"
    platform.inject(chat, f"please watch {pages}/agent.txt every 1 seconds: the agent's page changed")
    wait_for(lambda: settled(platform, chat), 60, 0.05, "the answer to the request")
    [answer] = [m["text"] for m in settled(platform, chat)]
    assert f"I used the create_watch tool: Created watch #1: {pages}/agent.txt is read every 1s" in answer, answer
    [row] = query(gw, "SELECT name, number, target FROM agent_watches")
    assert row["number"] == 1 and row["target"] == f"{pages}/agent.txt", row
    wait_for(lambda: row["name"] in looked_at(gw), 60, 0.05, "the first look at the agent's watch")
    Pages.bodies["/agent.txt"] = b"first\nsecond\n"
    try:
        wait_for(lambda: len(settled(platform, chat)) >= 2, 60, 0.05, "the change answered in the chat")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(gw, platform)}") from None
    told = settled(platform, chat)[1]["text"]
    assert "the agent's page changed" in told and "+second" in told, told
    assert [c["number"] for c in changes(gw, row["name"])] == [1]
    shown = listed(gw)[row["name"]]
    assert shown["chat"] == "fake:c-agent" and shown["last_change"]["number"] == 1, shown
    # The chat's bound: a second watch, then a third refused, said as the tool's result.
    for n, expected in ((2, "Created watch #2"), (3, "may have 2 (the gateway's [agent_watches] max_per_chat)")):
        platform.inject(chat, f"please watch {pages}/quiet.txt every 5 seconds: number {n}")
        wait_for(lambda n=n: len(settled(platform, chat)) >= n + 1, 60, 0.05, f"the answer to request {n}")
        assert expected in settled(platform, chat)[n]["text"], settled(platform, chat)[n]["text"]
    assert len(query(gw, "SELECT 1 FROM agent_watches")) == 2
    # The chat lists them and stops one.
    platform.inject(chat, "/watches")
    wait_for(lambda: len(settled(platform, chat)) >= 5, 60, 0.05, "the list")
    shown = settled(platform, chat)[4]["text"]
    assert f"#1 {pages}/agent.txt every 1s" in shown and f"#2 {pages}/quiet.txt every 5s" in shown, shown
    platform.inject(chat, "/unwatch 2")
    wait_for(lambda: len(settled(platform, chat)) >= 6, 60, 0.05, "the watch stopped")
    assert settled(platform, chat)[5]["text"] == f"Stopped watch #2 ({pages}/quiet.txt)."
    assert [r["number"] for r in query(gw, "SELECT number FROM agent_watches")] == [1]


def test_the_agent_watches_an_mcp_resource_on_a_schedule_for_its_chat(gw, platform, board):
    _server, path = board
    chat = "c-agent-mcp"
    platform.inject(chat, "please watch mcp board status://board at '*/2 * * * * *': the board moved")
    wait_for(lambda: settled(platform, chat), 60, 0.05, "the answer to the request")
    [answer] = [m["text"] for m in settled(platform, chat)]
    assert ("Created watch #1: status://board of MCP server board is read at the times of '*/2 * * * * *' (UTC)"
            in answer), answer
    [row] = query(gw, "SELECT name, kind, server, schedule FROM agent_watches WHERE kind = 'mcp'")
    assert (row["kind"], row["server"], row["schedule"]) == ("mcp", "board", "*/2 * * * * *"), row
    wait_for(lambda: row["name"] in looked_at(gw), 60, 0.05, "the first look at the agent's watch")
    path.write_text(path.read_text() + "two red\n")
    try:
        wait_for(lambda: len(settled(platform, chat)) >= 2, 60, 0.05, "the change answered in the chat")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(gw, platform)}") from None
    told = settled(platform, chat)[1]["text"]
    assert "the board moved" in told and "+two red" in told, told


def test_the_agent_watches_a_file_under_the_operators_roots_and_nothing_outside_them(gw, platform, notes, tmp_path):
    chat = "c-agent-file"
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("private\n")
    platform.inject(chat, f"please watch file {outside} every 1 seconds: the secret changed")
    wait_for(lambda: settled(platform, chat), 60, 0.05, "the answer to the refused request")
    assert "is not under the directories this gateway lets the agent watch" in settled(platform, chat)[0]["text"]
    platform.inject(chat, f"please watch file {notes} every 1 seconds: the notes moved")
    wait_for(lambda: len(settled(platform, chat)) >= 2, 60, 0.05, "the answer to the request")
    assert f"Created watch #1: {notes} is read every 1s" in settled(platform, chat)[1]["text"]
    [row] = query(gw, "SELECT name FROM agent_watches WHERE kind = 'file'")
    wait_for(lambda: row["name"] in looked_at(gw), 60, 0.05, "the first look at the agent's file watch")
    notes.write_text(notes.read_text() + "a line the agent sees\n")
    try:
        wait_for(lambda: len(settled(platform, chat)) >= 3, 60, 0.05, "the file's change answered in the chat")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(gw, platform)}") from None
    told = settled(platform, chat)[2]["text"]
    assert "the notes moved" in told and "+a line the agent sees" in told, told


def test_a_bad_watch_stops_the_start_with_exit_78_naming_each_key(tmp_path):
    bad = Gateway(tmp_path, extra_toml='[adapters.fake]\ntype = "fake"\nbase_url = "http://127.0.0.1:9"\n'
                                       '[watch.x]\nkind = "ftp"\ntarget = "ftp://h/f"\nprompt = "p"\n'
                                       'adapter = "fake"\nchat = 1\n'
                                       '[watch.y]\nkind = "url"\ntarget = "file:///etc/passwd"\nprompt = "p"\n'
                                       'adapter = "fake"\nchat = 1\ninterval_s = 0\n')
    result = bad.cli("start", "--json")
    assert result.returncode == 78, result
    error = json.loads(result.stdout)
    shown = json.dumps(error)
    assert error["key"] == "[watch.x] kind" and "must be one of 'url', 'file'" in error["reason"], error
    assert "[watch.y] target" in shown and "http:// or https://" in shown, error
    assert "[watch.y] interval_s" in shown, error
