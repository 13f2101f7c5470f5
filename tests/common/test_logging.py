"""The log formatters and the redaction filter: what an operator's log file may and may not contain."""
from __future__ import annotations

import io
import json
import logging
import logging.config
import pickle
from types import SimpleNamespace

import pytest

from storage.keys import session_key
from common import config as config_mod
from common.logging_setup import (JsonFormatter, Redact, TextFormatter, hide_session_keys, key_hash, log_settings, tag_actor_process, thespian_log_defs)
from common.redact import configured_secrets

TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"
CONFIGURED = "plain-words-configured-secret"
KEY = session_key(SimpleNamespace(platform="telegram", chat_id="-100123", chat_type="group", thread_id="7",
                                  user_id=None, profile="default"))


def make_record(msg: str, *args, level=logging.INFO, name="gateway.Session", exc_info=None, **extra):
    record = logging.LogRecord(name, level, __file__, 1, msg, args, exc_info)
    record.__dict__.update(extra)
    return record


def emit(record, fmt: str, secrets=(CONFIGURED,)) -> str:
    assert Redact(secrets).filter(record)
    return (JsonFormatter() if fmt == "json" else TextFormatter()).format(record)


def test_key_hash_is_short_stable_and_hides_the_key():
    assert key_hash(KEY) == key_hash(KEY) and len(key_hash(KEY)) == 12
    assert key_hash(KEY) != key_hash(KEY + "x")
    hidden = hide_session_keys(f"restarting session:{KEY} now; also {KEY}.")
    assert hidden == f"restarting session#{key_hash(KEY)} now; also session#{key_hash(KEY)}."


def test_a_json_line_has_the_fields_and_the_structured_extras():
    record = make_record("turn %s ended", "t1", session=key_hash(KEY), platform="telegram", turn="t1",
                         actor="Session", actor_name="session:" + KEY)
    entry = json.loads(emit(record, "json"))
    assert entry["level"] == "INFO" and entry["logger"] == "gateway.Session" and entry["msg"] == "turn t1 ended"
    assert entry["ts"].endswith("+00:00") and "T" in entry["ts"]
    assert entry["pid"] == record.process and entry["actor"] == "Session"
    assert entry["session"] == key_hash(KEY) and entry["platform"] == "telegram" and entry["turn"] == "t1"
    assert entry["actor_name"] == "session#" + key_hash(KEY)


def test_the_actor_kind_comes_from_the_logger_name_when_the_process_is_not_tagged():
    assert json.loads(emit(make_record("x", name="gateway.Watchdog"), "json"))["actor"] == "Watchdog"
    assert "actor" not in json.loads(emit(make_record("x", name="gateway.launcher"), "json"))
    assert "actor" not in json.loads(emit(make_record("x", name="storage.db"), "json"))


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_secrets_and_session_keys_are_redacted_in_every_part_of_a_record(fmt):
    try:
        raise RuntimeError(f"boom with {TELEGRAM_TOKEN} in {KEY}")
    except RuntimeError:
        import sys
        exc_info = sys.exc_info()
    record = make_record("calling https://api.telegram.org/bot%s/getUpdates for %s with %s; Bearer abcdefgh12345678",
                         TELEGRAM_TOKEN, KEY, CONFIGURED, level=logging.ERROR, exc_info=exc_info,
                         chat=f"see {CONFIGURED}")
    line = emit(record, fmt)
    for raw in (TELEGRAM_TOKEN, CONFIGURED, KEY, "abcdefgh12345678"):
        assert raw not in line
    assert "[redacted]" in line and "session#" + key_hash(KEY) in line and "RuntimeError" in line
    if fmt == "json":
        entry = json.loads(line)
        assert "\n" not in line and "Traceback" in entry["exc"] and entry["chat"] == "see [redacted]"
    else:
        assert "Traceback" in line and "chat=see [redacted]" in line


def test_a_record_forwarded_by_thespian_is_redacted_too():
    """Thespian's forwarder sends a pickled record with the message already formatted and args dropped."""
    record = make_record("token %s", TELEGRAM_TOKEN)
    record.msg, record.args, record.actorAddress = record.getMessage(), None, "ActorAddr-(T|:1234)"
    forwarded = pickle.loads(pickle.dumps(record))
    assert TELEGRAM_TOKEN not in emit(forwarded, "json")


def test_a_bad_format_string_still_logs_something_clean():
    line = emit(make_record("%d items from %s", "not a number", CONFIGURED), "json")
    assert CONFIGURED not in line and json.loads(line)["msg"]


def test_the_text_format_appends_extras_after_the_message():
    line = emit(make_record("reply not delivered", session="abc123", turn="t9"), "text")
    assert line.endswith("gateway.Session: reply not delivered  session=abc123 turn=t9")


def test_log_defs_configure_a_real_handler_end_to_end(tmp_path):
    """dictConfig with the defs the logger process gets: a record through the root logger comes out as JSON."""
    stream = io.StringIO()
    defs = thespian_log_defs("INFO", "json", [CONFIGURED])
    defs["handlers"]["stderr"]["stream"] = stream
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, root.filters[:])
    try:
        logging.config.dictConfig({**defs, "disable_existing_loggers": False})
        logging.getLogger("gateway.Test").warning("secret %s for %s", CONFIGURED, KEY, extra={"session": "s1"})
        logging.getLogger("thespian.noise").info("not shown")
        logging.getLogger("gateway.Test").debug("below the level")
    finally:
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])
    [line] = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["msg"] == f"secret [redacted] for session#{key_hash(KEY)}" and entry["session"] == "s1"


def test_a_tagged_process_names_its_actor_on_every_record():
    previous = logging.getLogRecordFactory()
    try:
        tag_actor_process("Session", "session:x")
        tag_actor_process("Session", "session:y")  # a second Started re-tags, never stacks factories
        record = logging.getLogger("anything").makeRecord("anything", logging.INFO, __file__, 1, "m", (), None)
        assert (record.actor, record.actor_name) == ("Session", "session:y")
        assert logging.getLogRecordFactory().untagged is previous
    finally:
        logging.setLogRecordFactory(previous)


def test_settings_and_configured_secrets_come_from_the_config(monkeypatch):
    monkeypatch.setenv("GATEWAY_TEST_KEY", "key-from-the-environment")
    config = config_mod.validate({
        "gateway": {"log_level": "debug"},
        "logging": {"format": "json"},
        "agent": {"api_key": "inline-key-123", "api_key_env": "GATEWAY_TEST_KEY"},
        "adapters": {"tg": {"type": "telegram", "token": TELEGRAM_TOKEN, "allowed_tokens": ["t-one", "t-two"],
                            "base_url": "http://x"}},
    }, "test.toml")
    assert log_settings(config) == ("DEBUG", "json")
    config["logging"]["level"] = "warning"
    assert log_settings(config) == ("WARNING", "json")
    assert set(configured_secrets(config)) == {"inline-key-123", "key-from-the-environment", TELEGRAM_TOKEN,
                                               "t-one", "t-two"}
    assert log_settings(config_mod.defaults()) == ("INFO", "text")


def test_an_unknown_log_format_is_a_config_error():
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.validate({"logging": {"format": "xml"}}, "test.toml")
    assert err.value.key == "[logging] format"


def test_text_a_stranger_wrote_cannot_forge_a_log_line_or_drive_the_terminal():
    stranger = "hi\n2026-01-01 00:00:00,000 ERROR gateway.launcher: fake line\x1b]0;owned\x07\x1b[2J"
    line = emit(make_record("user %s said %r", "u1", stranger), "text")
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line
    assert "\\n2026-01-01" in line and "\\x1b]0;owned\\x07" in line


def test_the_first_message_of_every_actor_never_shows_the_configuration_in_its_repr():
    """Started carries the whole configuration, secrets and all; whatever logs a message it holds (Thespian, on a
    message it could not deliver: str() of it) must not write them."""
    from supervision.messages import Started
    config = {"adapters": {"tg": {"type": "telegram", "token": "123456:AAE-not-for-the-log"}}}
    started = Started("tg", "TelegramAdapter", {"n": 1}, config)
    assert "not-for-the-log" not in repr(started) and "not-for-the-log" not in str(started)
    assert started.config is config and pickle.loads(pickle.dumps(started)).config == config, "it still carries it"
