"""Background tasks through the real daemon and the fake platform (docs/background.md): ``/bg`` runs in its own
session while the chat goes on, and its result reaches the chat once, also across a kill -9 of the daemon; ``/new``
while a task runs keeps its result out of the new conversation (fail closed); a sixth task at once is refused;
``/cancel N`` stops one mid-stream; a long result comes as a file. The agent starts a task too, through its
``start_background_task`` tool (the offline agent calls it for "background task: PROMPT"): one task per call, also
when a kill -9 comes right after the call and the turn is resumed.

One daemon for the module; the last two tests kill it with SIGKILL (while a task runs; after its end was decided
but before its result went out) and start it again. The offline agent's ``#slow S`` (S seconds between its
answer's ~28 pieces) makes a task run for as long as a test needs it to."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import urllib.parse
import urllib.request

import pytest

from tests.actor_system import wait_for
from tests.console.helpers import console_port
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.openai_server import MODEL, FakeOpenAIServer, tool_call_reply, with_usage
from tests.pipeline.harness import CURSOR, pipeline_gateway, visible

pytestmark = pytest.mark.timeout(240)

DEADLINE_S = 60   # a daemon-level event on a loaded 2-core machine


AGENT = """[agent]
chunk_delay_s = 0.0

[profiles.default]
agent = {{ tools = ["clock", "calculator", "text_image", "start_background_task"] }}

# A model that counts tokens, for the chat whose tasks are bounded in tokens
[profiles.thrifty]
task_max_tokens = 1000
agent = {{ kind = "openai", base_url = "{base_url}", model = "{model}", api_key = "sk-test-key-0123456789abcdef" }}

[[routes]]
adapter = "fake"
chat = "bg-tokens"
profile = "thrifty"
"""


@pytest.fixture(scope="module")
def platform():
    with FakePlatform() as fake:
        yield fake


@pytest.fixture(scope="module")
def model():
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture(scope="module")
def gw(tmp_path_factory, platform, model):
    gateway = pipeline_gateway(tmp_path_factory.mktemp("tasks"), platform,
                               agent=AGENT.format(base_url=model.base_url, model=MODEL))
    try:
        gateway.start()
        yield gateway
    finally:
        gateway.cli("stop")
        gateway.kill_everything()


def query(gw, sql: str, args: tuple = ()) -> list[dict]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(sql, args)]


def tasks_of(gw) -> list[dict]:
    return query(gw, "SELECT * FROM tasks ORDER BY started_at")


def settled(platform, chat: str) -> list[str]:
    return [m["text"] for m in visible(platform, chat) if CURSOR not in m["text"]]


def wait_texts(gw, platform, chat: str, ok, what: str) -> list[str]:
    """Wait until ``ok(texts)`` for the chat's settled messages; on a timeout, say what the chat and log showed."""
    try:
        return wait_for(lambda: ok(settled(platform, chat)) and settled(platform, chat), DEADLINE_S, 0.05, what)
    except AssertionError as exc:
        tail = [line for line in gw.log().splitlines() if " INFO root" not in line][-30:]
        raise AssertionError(f"{exc}\nchat: {[t[:80] for t in settled(platform, chat)]}\n" + "\n".join(tail)) \
            from None


def with_text(texts: list[str], fragment: str) -> list[str]:
    return [t for t in texts if fragment in t]


def transcript_texts(gw, session_id: str) -> list[str]:
    """Every text the transcript of ``session_id`` holds (a payload is msgpack; its text is in it as UTF-8)."""
    return [bytes(r["payload"]).decode("utf-8", "replace")
            for r in query(gw, "SELECT payload FROM transcript WHERE session_id = ? ORDER BY seq", (session_id,))]


def task_row(gw, chat: str, number: int) -> dict:
    rows = [t for t in tasks_of(gw) if t["number"] == number and chat_key(gw, chat) == t["origin_key"]]
    assert len(rows) == 1, rows
    return rows[0]


def chat_key(gw, chat: str) -> str:
    """The session key of the fake platform's chat ``chat`` (the sessions' stored source names it)."""
    keys = {r["session_key"] for r in query(gw, "SELECT session_key, source FROM sessions")
            if f"{chat}".encode() in bytes(r["source"]) and ".task-" not in r["session_key"]}
    assert len(keys) == 1, keys
    return keys.pop()


KEY_IN_PROMPT = "sk-" + "Q" * 24   # a credential's shape: the operator's views redact it


def console(base: str, read: str, **args) -> dict:
    """A read of the console's API (GET /api/READ), as its pages make it."""
    with urllib.request.urlopen(f"{base}/api/{read}?{urllib.parse.urlencode(args)}", timeout=30) as response:
        return json.loads(response.read())


def current_session(gw, key: str) -> str:
    [row] = query(gw, "SELECT session_id FROM sessions WHERE session_key = ? AND state = 'active'", (key,))
    return row["session_id"]


def test_a_task_runs_in_its_own_session_while_the_chat_goes_on_and_reports_back_once(gw, platform):
    chat = "bg-main"
    platform.inject(chat, "/bg look into tides #slow 0.3")
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Started task #1"), "the task's number at once")
    # The chat goes on: a message sent now is answered while the task still runs, in the chat's own session.
    platform.inject(chat, "meanwhile, hello")
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "meanwhile, hello"), "the chat's own answer")
    assert task_row(gw, chat, 1)["state"] == "started", "the chat was answered while the task ran"
    assert not with_text(texts, "Task #1"), "nothing of the task shows while it runs (no preview)"
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Task #1 finished"), "the task's result")
    [result] = with_text(texts, "Task #1 finished")
    assert 'You said: "look into tides' in result, result
    sent = [m["text"] for m in platform.messages(chat) if "look into tides" in m["text"]]
    assert sent == [result], f"one message ever showed the task's answer (no preview, no second copy): {sent}"
    task = task_row(gw, chat, 1)
    assert task["state"] == "done" and task["task_key"] == chat_key(gw, chat) + ".task-1", task
    # Its own session and transcript hold the prompt and the answer; the chat's holds only the one-line record.
    [own] = query(gw, "SELECT session_id FROM sessions WHERE session_key = ?", (task["task_key"],))
    assert any("look into tides" in t for t in transcript_texts(gw, own["session_id"]))
    chat_transcript = transcript_texts(gw, current_session(gw, chat_key(gw, chat)))
    assert sum("background task #1 finished: You said" in t for t in chat_transcript) == 1, chat_transcript
    assert not any("/bg look into tides" in t and "I am the offline agent" in t for t in chat_transcript)
    # /tasks lists it; the operator's CLI shows it whole.
    platform.inject(chat, "/tasks")
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Tasks of this chat"), "the task list")
    assert "#1 done" in with_text(texts, "Tasks of this chat")[0]
    shown = json.loads(gw.cli("tasks", "show", task["task_key"], "--json", check=True).stdout)["task"]
    assert shown["state"] == "done" and "look into tides" in shown["result"], shown
    # Delivered once, and the task's inbox row is the gateway's own (no platform traffic for the idle clock).
    assert len(with_text(settled(platform, chat), "Task #1 finished")) == 1
    [row] = query(gw, "SELECT platform, state FROM inbox WHERE session_key = ?", (task["task_key"],))
    assert row == {"platform": "task", "state": "done"}, row


def test_a_long_result_comes_as_a_file_with_its_start_in_the_message(gw, platform):
    chat = "bg-long"
    platform.inject(chat, "/bg write it all down #long 4000")
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Task #1 finished"), "the long result")
    assert "(The whole result, 4000 characters, is in task-1-result.md.)" in with_text(texts, "Task #1 finished")[0]
    files = wait_for(lambda: [m["file"] for m in visible(platform, chat) if m.get("file")], DEADLINE_S, 0.05,
                     "the result's file")
    result = task_row(gw, chat, 1)["result"]
    assert len(result) == 4000 and [(f["name"], f["size"], f["sha256"]) for f in files] == \
        [("task-1-result.md", len(result.encode()), hashlib.sha256(result.encode()).hexdigest())], files


def test_new_while_a_task_runs_keeps_its_result_out_of_the_new_conversation(gw, platform):
    chat = "bg-reset"
    platform.inject(chat, f"/bg summarise the archive with {KEY_IN_PROMPT} #slow 0.3")
    wait_texts(gw, platform, chat, lambda t: with_text(t, "Started task #1"), "the task to start")
    key = chat_key(gw, chat)
    before = current_session(gw, key)
    platform.inject(chat, "/new")
    wait_texts(gw, platform, chat, lambda t: with_text(t, "Started a new conversation"), "the reset")
    assert task_row(gw, chat, 1)["state"] == "started", "the reset came while the task ran"
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "An earlier task #1 finished"), "the notice")
    # The chat gets the short notice only, never the result.
    assert not with_text(texts, "Task #1 finished") and not any("summarise the archive" in t for t in texts), texts
    task = task_row(gw, chat, 1)
    assert task["state"] == "kept" and "summarise the archive" in task["result"], task
    after = current_session(gw, key)
    assert after != before
    assert not any("summarise" in t or "background task" in t for t in transcript_texts(gw, after)), \
        "nothing of the task entered the new conversation"
    assert not any("background task" in t for t in transcript_texts(gw, before)), "nor the old one's record"
    # It is kept where the notice says: /tasks N in the chat, and the CLI.
    platform.inject(chat, "/tasks 1")
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Task #1: kept"), "the kept task shown")
    assert "summarise the archive" in with_text(texts, "Task #1: kept")[0]
    assert not any("summarise the archive" in t for t in transcript_texts(gw, after)), \
        "a command's answer is no part of the conversation"
    listed = json.loads(gw.cli("tasks", "list", "--state", "kept", "--json", check=True).stdout)["tasks"]
    assert [t["task_key"] for t in listed] == [task["task_key"]], listed
    # And in the console: the chat's tasks with the kept result, and the kept results of every chat, redacted as
    # `tasks show` prints them; `sessions show` of the chat lists the task in brief.
    base = f"http://127.0.0.1:{console_port(gw)}"
    [shown] = console(base, "tasks", session=after)["tasks"]
    assert (shown["number"], shown["state"], shown["task_key"]) == (1, "kept", task["task_key"]), shown
    assert "summarise the archive" in shown["result"] and KEY_IN_PROMPT not in shown["result"] + shown["prompt"], \
        shown
    assert [t["task_key"] for t in console(base, "tasks", state="kept")["tasks"]] == [task["task_key"]]
    assert [t["state"] for t in console(base, "transcript", session=after)["tasks"]] == ["kept"]
    brief = gw.cli("sessions", "show", after, check=True).stdout
    assert "background task #1 kept" in brief and KEY_IN_PROMPT not in brief, brief


def test_a_sixth_task_is_refused_and_cancel_stops_one_mid_stream(gw, platform):
    chat = "bg-many"
    for n in range(1, 6):
        platform.inject(chat, f"/bg long job {n} #slow 2")
        wait_texts(gw, platform, chat, lambda t, n=n: with_text(t, f"Started task #{n}"), f"task #{n} to start")
    platform.inject(chat, "/bg one too many")
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Not started"), "the sixth refused")
    assert "may run 5 at once" in with_text(texts, "Not started")[0]
    assert len(tasks_of_chat(gw, chat)) == 5, "the refused one left no task"
    # The agent's tool meets the same bound: its refusal is the tool's result, which the answer shows.
    platform.inject(chat, "please start a background task: one more from the agent")
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "start_background_task tool"), "the tool refused")
    assert "Not started: this chat has 5 task(s) running and may run 5 at once" in \
        with_text(texts, "start_background_task tool")[0]
    assert len(tasks_of_chat(gw, chat)) == 5, "the refused call left no task"
    # Mid-stream: its turn has written part of its answer (its session's turn is in flight) when it is stopped.
    key = task_row(gw, chat, 3)["task_key"]
    wait_for(lambda: query(gw, "SELECT r.turn_token FROM runtime_state r JOIN sessions s USING (session_id) "
                               "WHERE s.session_key = ? AND r.turn_token IS NOT NULL", (key,)), DEADLINE_S, 0.05,
             "task #3's turn to start")
    platform.inject(chat, "/cancel 3")
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Task #3 was cancelled"), "task #3 stopped")
    assert with_text(texts, "Stopping task #3")
    task = task_row(gw, chat, 3)
    assert task["state"] == "cancelled" and task["result"].endswith("(stopped)"), task
    assert "api_key_env" not in task["result"], "it was stopped before its answer's end"
    for n in (1, 2, 4, 5):   # the others are stopped too, so the module's last test finds a quiet gateway
        platform.inject(chat, f"/cancel {n}", user=f"helper-{n}")   # one sender's burst stays under its limit
    wait_texts(gw, platform, chat, lambda t: len(with_text(t, "was cancelled")) == 5, "every task stopped")


def test_a_task_past_its_token_bound_is_stopped_and_says_so(gw, platform, model):
    chat = "bg-tokens"
    # Every model call of the task asks for the calculator again and is counted 600 tokens: the second call
    # passes the profile's 1000, and the model is asked nothing more.
    model.answer = lambda body: with_usage(tool_call_reply([("calculator", '{"expression": "2+3"}')]), 500, 100)
    try:
        platform.inject(chat, "/bg add things up forever")
        texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Task #1 was stopped"), "the task stopped")
    finally:
        model.answer = None
    assert "Task #1 was stopped after using its 1000 tokens (the profile's task_max_tokens)." in \
        with_text(texts, "Task #1 was stopped")[0]
    [task] = tasks_of_chat(gw, chat)
    assert task["state"] == "failed", task
    asked = [r for r in model.requests if "add things up forever" in json.dumps(r.body)]
    assert len(asked) == 2, f"no model call past the bound: {len(asked)}"


def tool_results(gw, chat: str) -> list[str]:
    """The start_background_task results the chat's transcript holds (one per call the session recorded)."""
    rows = query(gw, "SELECT payload FROM transcript WHERE session_id = ? AND kind = 'tool_result' ORDER BY seq",
                 (current_session(gw, chat_key(gw, chat)),))
    return [bytes(r["payload"]).decode("utf-8", "replace") for r in rows
            if b"start_background_task" in bytes(r["payload"])]


def test_the_agent_starts_a_task_with_its_tool_and_the_result_comes_back_once(gw, platform):
    chat = "bg-tool"
    platform.inject(chat, "please start a background task: what is 6*7")
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "start_background_task tool"), "the chat's answer")
    assert "Started background task #1" in with_text(texts, "start_background_task tool")[0]
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Task #1 finished"), "the task's result")
    [result] = with_text(texts, "Task #1 finished")
    assert "I used the calculator tool: 6*7 = 42" in result, "the task ran its own prompt as its own turn"
    [task] = tasks_of_chat(gw, chat)
    assert task["state"] == "done" and task["prompt"] == "what is 6*7", task
    assert task["origin_ref"].startswith("tool:") and task["origin_ref"].endswith("-1"), \
        "keyed by the turn and the call's id"
    [recorded] = tool_results(gw, chat)
    assert "Started background task #1" in recorded, "the call's result is in the chat's transcript, once"
    assert len(with_text(settled(platform, chat), "Task #1")) == 1


def tasks_of_chat(gw, chat: str) -> list[dict]:
    return [t for t in tasks_of(gw) if t["origin_key"] == chat_key(gw, chat)]


def test_a_task_cut_by_a_kill_of_the_daemon_reports_back_once(gw, platform):
    chat = "bg-kill"
    platform.inject(chat, "/bg count the stars #slow 0.3")
    wait_texts(gw, platform, chat, lambda t: with_text(t, "Started task #1"), "the task to start")
    key = chat_key(gw, chat) + ".task-1"
    wait_for(lambda: query(gw, "SELECT 1 FROM inbox WHERE session_key = ? AND state = 'taken'", (key,)),
             DEADLINE_S, 0.02, "the task's turn to be running")
    os.kill(gw.launcher_pid, signal.SIGKILL)
    gw.assert_no_process_left()
    assert task_row(gw, chat, 1)["state"] == "started", "the kill came while the task ran"
    gw.start()
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Task #1 finished"), "the task's result")
    assert 'You said: "count the stars' in with_text(texts, "Task #1 finished")[0]
    assert "resuming the turn interrupted by a restart" in gw.log(), "resumed as any turn is (G8)"
    # Once: one result message, one task, one inbox row (done), one record in the chat's transcript.
    wait_for(lambda: query(gw, "SELECT state FROM inbox WHERE session_key = ?", (key,)) == [{"state": "done"}],
             DEADLINE_S, 0.05, "the task's row done")
    assert len(with_text(settled(platform, chat), "Task #1")) == 1, settled(platform, chat)
    assert [t["state"] for t in tasks_of_chat(gw, chat)] == ["done"]
    records = [t for t in transcript_texts(gw, current_session(gw, chat_key(gw, chat))) if "background task #1" in t]
    assert len(records) == 1, records


def test_a_task_decided_but_not_delivered_when_the_daemon_is_killed_is_delivered_once_after(gw, platform):
    chat = "bg-decided"
    platform.inject(chat, "/bg tally the votes #slow 0.1")
    wait_texts(gw, platform, chat, lambda t: with_text(t, "Started task #1"), "the task to start")
    key = chat_key(gw, chat) + ".task-1"
    platform.set_faults(p_error=1.0, methods=("send",))   # every send fails now: the result cannot go out
    try:
        wait_for(lambda: [t["state"] for t in tasks_of_chat(gw, chat)] == ["done"], DEADLINE_S, 0.02,
                 "the task's end to be decided")
        os.kill(gw.launcher_pid, signal.SIGKILL)
        gw.assert_no_process_left()
    finally:
        platform.set_faults()
    assert not with_text(settled(platform, chat), "Task #1"), "the kill came before the result went out"
    gw.start()
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "Task #1 finished"), "the result after the restart")
    assert 'You said: "tally the votes' in with_text(texts, "Task #1 finished")[0]
    wait_for(lambda: query(gw, "SELECT state FROM inbox WHERE session_key = ?", (key,)) == [{"state": "done"}],
             DEADLINE_S, 0.05, "the task's row done")
    assert len(with_text(settled(platform, chat), "Task #1")) == 1, settled(platform, chat)
    records = [t for t in transcript_texts(gw, current_session(gw, chat_key(gw, chat))) if "background task #1" in t]
    assert len(records) == 1, "decided once: one record"


def test_a_kill_right_after_the_agent_started_a_task_leaves_one_task_and_one_result(gw, platform):
    chat = "bg-tool-kill"
    # The chat's answer streams slowly (#slow 0.3): the kill lands after the tool's call, before the turn's end.
    platform.inject(chat, "#slow 0.3 start a background task: count the moons #slow 0.1")
    wait_for(lambda: query(gw, "SELECT 1 FROM tasks WHERE prompt = 'count the moons #slow 0.1'"), DEADLINE_S, 0.02,
             "the agent's task to be started")
    os.kill(gw.launcher_pid, signal.SIGKILL)
    gw.assert_no_process_left()
    assert not with_text(settled(platform, chat), "start_background_task tool"), "the kill came before the answer"
    gw.start()
    texts = wait_texts(gw, platform, chat, lambda t: with_text(t, "start_background_task tool") and
                       with_text(t, "Task #1 finished"), "the chat's answer and the task's result")
    assert "resuming the turn interrupted by a restart" in gw.log(), "the chat's turn was resumed (G8)"
    # The resumed turn called the tool again (the offline agent does, with the same call id): the same task.
    assert "Started background task #1" in with_text(texts, "start_background_task tool")[0]
    assert 'You said: "count the moons' in with_text(texts, "Task #1 finished")[0]
    wait_for(lambda: [t["state"] for t in tasks_of_chat(gw, chat)] == ["done"], DEADLINE_S, 0.05,
             "one task, done")
    assert len(with_text(settled(platform, chat), "Task #1")) == 1, settled(platform, chat)
    assert not with_text(settled(platform, chat), "Task #2")
    assert len(tool_results(gw, chat)) == 1, "the call and its result written once, with the task"
