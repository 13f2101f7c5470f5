"""The pure parts of background tasks (actors/sessions/tasks.py): a task's session key and where it is placed, the
numbers a chat types, the states a turn's end gives, and the texts the chat and its transcript are given."""
from __future__ import annotations

import pytest

from actors.profiles.profiles import validate_profiles
from actors.sessions import tasks
from actors.sessions.commands import parse_command
from actors.sessions.session_commands import COMMANDS
from common.config import ConfigError
from common.host_map import place_of, shard_places
from common.shard_map import shard_of
from storage.tasks import Task

pytestmark = pytest.mark.timeout(30)

CHAT = "default.telegram.dm.chat-0a1b2c3d4e5f"


def test_a_tasks_key_names_its_chat_and_number():
    key = tasks.task_key(CHAT, 12)
    assert key == CHAT + ".task-12" and tasks.task_of(key) == (CHAT, 12) and tasks.is_task_key(key)
    assert tasks.task_of(CHAT) is None and not tasks.is_task_key(CHAT + ".thread-task-1")


def test_a_task_lives_on_its_chats_shard_on_one_host_and_across_hosts():
    chats = [f"default.fake.group.chat-{i:04x}" for i in range(200)]
    assert all(shard_of(tasks.task_key(c, 3), 7) == shard_of(c, 7) for c in chats)
    places = shard_places(["leader", "w1", "w2"], 2, leader="leader")
    assert all(place_of(tasks.task_key(c, 9), places) == place_of(c, places) for c in chats)
    assert len({shard_of(c, 7) for c in chats}) == 7, "chats still spread over every shard"


@pytest.mark.parametrize("typed, number", [("3", 3), ("#3", 3), (" 12 ", 12), ("", None), ("three", None),
                                           ("-1", None), ("1 2", None), ("9" * 10, None)])
def test_the_number_a_chat_types(typed, number):
    assert tasks.parse_number(typed) == number


@pytest.mark.parametrize("reason, state", [("complete", "done"), ("stopped", "cancelled"), ("error", "failed"),
                                           ("timed_out", "failed"), ("gave_up", "failed"),
                                           ("awaiting_approval", "failed"), ("interrupted", "failed")])
def test_a_turns_end_gives_the_tasks_state(reason, state):
    assert tasks.final_state(reason) == state


def test_what_the_chat_is_sent_for_each_end():
    assert tasks.result_message(2, "done", "  the answer \n") == "Task #2 finished:\n\nthe answer"
    assert tasks.result_message(2, "cancelled", "half (stopped)").startswith("Task #2 was cancelled.\n\nhalf")
    assert "after 60s" in tasks.result_message(2, "failed", "", timeout_s=60.0)
    assert tasks.result_message(2, "failed", "") == "Task #2 failed."
    asked = tasks.result_message(2, "failed", "so far\n\nReply approve K7 or deny K7", reason="awaiting_approval")
    assert "needs a person's yes" in asked and "K7" not in asked, "the question no one can answer is not shown"
    long = "x" * 5000
    shown = tasks.result_message(2, "done", tasks.long_result_body(long, "task-2-result.md"))
    assert shown.startswith("Task #2 finished:\n\nxxx") and len(shown) < 1000
    assert shown.endswith("(The whole result, 5000 characters, is in task-2-result.md.)")
    assert tasks.kept_notice(4) == ("An earlier task #4 finished after this conversation was reset; its result is "
                                    "kept, not added here. See it with /tasks 4.")


def test_the_chats_transcript_gets_one_line_of_the_result():
    event = tasks.record_event(5, "done", "\n\n  First line of it  \nsecond line\n" + "more " * 100)
    assert event["role"] == "assistant" and event["kind"] == "message" and event["turn_id"] is None
    assert event["payload"]["text"] == "(background task #5 finished: First line of it)"
    assert len(tasks.record_text(5, "done", "y" * 1000)) < 260
    assert tasks.record_text(5, "failed", "") == "(background task #5 failed: no answer)"


def task(number: int, state: str, **kw) -> Task:
    return Task(CHAT, number, "sid", tasks.task_key(CHAT, number), "default", kw.pop("prompt", "dig"), state,
                kw.pop("cancel_requested", False), kw.pop("result", None), None, (), None, 100.0,
                kw.pop("finished_at", None), f"fake:m-{number}")


def test_the_list_and_one_task_as_the_chat_sees_them():
    shown = tasks.listing([task(2, "started", cancel_requested=True), task(1, "kept", finished_at=150.0)], 190.0)
    assert "#2 running for 90s, cancelling: \u201cdig\u201d" in shown and "#1 kept 40s ago" in shown
    assert tasks.listing([], 0.0).startswith("This chat has no tasks")
    kept = tasks.detail(task(1, "kept", result="r" * 4000, finished_at=150.0), 400.0)
    assert kept.startswith("Task #1: kept") and "was not added to this one" in kept and "4000 characters" in kept


def test_the_commands_are_known_and_have_handlers():
    for typed in ("/bg look it up", "/tasks", "/tasks 2", "/cancel 2"):
        command = parse_command(typed)
        assert command.known and command.name in COMMANDS


def test_a_profiles_task_bounds_are_checked():
    profiles = validate_profiles({"profiles": {"p": {"max_tasks": 2, "task_timeout_s": 60}}})
    assert (profiles["p"].max_tasks, profiles["p"].task_timeout_s) == (2, 60.0)
    assert (profiles["default"].max_tasks, profiles["default"].task_timeout_s) == (5, 1800.0)
    for bad in ({"max_tasks": 0}, {"max_tasks": 101}, {"task_timeout_s": 5}):
        with pytest.raises(ConfigError, match="must be"):
            validate_profiles({"profiles": {"p": bad}})


def test_a_direct_chat_linked_to_an_identity_since_has_moved():
    from actors.messages import Source
    from storage import session_key
    dm = Source("tg", "42", "dm", user_id="42")
    plain, linked = session_key(dm), session_key(dm, identity="ann")
    assert not tasks.chat_moved(plain, dm, None) and not tasks.chat_moved(linked, dm, "ann")
    assert tasks.chat_moved(plain, dm, "ann") and tasks.chat_moved(linked, dm, None)
    group = Source("tg", "-7", "group", user_id="42")
    assert not tasks.chat_moved(session_key(group), group, "ann"), "a group's conversation is the group's"


def test_a_task_stopped_at_its_token_bound_says_so():
    assert tasks.end_reason("token_limit") == "token_limit" and tasks.end_reason("complete") == "complete"
    assert tasks.final_state("token_limit") == "failed"
    shown = tasks.result_message(3, "failed", "half an answer", reason="token_limit", max_tokens=1000)
    assert shown == ("Task #3 was stopped after using its 1000 tokens (the profile's task_max_tokens).\n\n"
                     "half an answer")
    profiles = validate_profiles({"profiles": {"p": {"task_max_tokens": 5000}}})
    assert (profiles["p"].task_max_tokens, profiles["default"].task_max_tokens) == (5000, 200_000)
    with pytest.raises(ConfigError, match="must be"):
        validate_profiles({"profiles": {"p": {"task_max_tokens": 10}}})
