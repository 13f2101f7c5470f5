import pytest

from actors.sessions.commands import (KNOWN_COMMANDS, Command, help_text, parse_command, suggest_command,
                                      unknown_command_reply)


@pytest.mark.parametrize("text, name, args", [
    ("/new", "new", ""),
    ("/reset", "new", ""),
    ("/STOP", "stop", ""),
    ("  /status  ", "status", ""),
    ("/queue show all", "queue", "show all"),
    ("/retry@MyBot", "retry", ""),
    ("/undo@my_bot  last two\nlines", "undo", "last two\nlines"),
    ("/help", "help", ""),
    ("/frobnicate now", "frobnicate", "now"),
])
def test_parse_commands(text, name, args):
    command = parse_command(text)
    assert command is not None
    assert (command.name, command.args) == (name, args)


@pytest.mark.parametrize("text", ["hello", "", "/", "/ new", "//new", "/etc/hosts is a file", "a /new", "/new!",
                                  "/ünïcode"])
def test_ordinary_text_is_not_a_command(text):
    assert parse_command(text) is None


def test_alias_keeps_what_was_typed_and_bot_name():
    command = parse_command("/Reset@SomeBot")
    assert command == Command(name="new", args="", typed="reset", bot="SomeBot")
    assert command.known


def test_command_for_another_bot_is_ignored():
    assert parse_command("/stop@other_bot", bot_username="my_bot") is None
    assert parse_command("/stop@My_Bot", bot_username="@my_bot").name == "stop"
    assert parse_command("/stop", bot_username="my_bot").name == "stop"


def test_unknown_command_is_not_known():
    assert not parse_command("/frobnicate").known


def test_help_lists_every_command_and_the_alias():
    text = help_text()
    for name in KNOWN_COMMANDS:
        assert f"/{name}" in text
    assert "/reset" in text


def test_unknown_command_reply_suggests_a_close_match_and_lists_known():
    reply = unknown_command_reply("stpo")
    assert "Unknown command /stpo" in reply
    assert "Did you mean /stop?" in reply
    for name in KNOWN_COMMANDS:
        assert f"/{name}" in reply
    assert "Did you mean" not in unknown_command_reply("zzzzzz")


def test_suggestion_covers_aliases():
    assert suggest_command("rest") in ("reset", "retry")
    assert suggest_command("stats") == "status"
    assert suggest_command("qqqqq") is None


def test_every_known_command_has_its_handler_in_the_session_table():
    from actors.sessions.commands import KNOWN_COMMANDS
    from actors.sessions.session_commands import COMMANDS
    assert set(COMMANDS) == set(KNOWN_COMMANDS)
