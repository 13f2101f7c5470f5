"""The [cron.NAME] tables (actors/scheduling/jobs.py): every bad key is a ConfigError naming it, and a run's inbox
row is an internal event of its chat's conversation whose message id is the run's."""
from __future__ import annotations

import pytest

from actors.messages import MessageEvent
from actors.scheduling.jobs import manual_run_id, run_item, schedule_run_id, validate_jobs
from common.config import ConfigError, validate
from storage import CRON_PLATFORM, session_key

GOOD = {"schedule": "0 9 * * *", "prompt": "Good morning: what is on today?", "adapter": "fake", "chat": 42}


def config(**jobs) -> dict:
    raw = {"adapters": {"fake": {"type": "fake"}}, "profiles": {"work": {}}, "cron": jobs}
    return validate(raw, "gw.toml") | {"_source": "gw.toml"}


def test_a_job_with_its_defaults():
    [job] = validate_jobs(config(morning=GOOD)).values()
    assert (job.name, job.schedule.expression, job.adapter, job.chat, job.profile, job.chat_type, job.thread,
            job.catch_up, job.enabled, job.schedule.timezone) == ("morning", "0 9 * * *", "fake", "42", "default",
                                                                  "dm", None, "latest", True, "UTC")


@pytest.mark.parametrize("change,key,why", [
    ({"schedule": "61 * * * *"}, "schedule", "not a cron expression"),
    ({"schedule": 9}, "schedule", "expected a string"),
    ({"timezone": "Nowhere/Land"}, "timezone", "unknown"),
    ({"adapter": "telegram"}, "adapter", "no adapter 'telegram' is configured"),
    ({"profile": "play"}, "profile", "no profile 'play'"),
    ({"catch_up": "all"}, "catch_up", "must be one of 'latest', 'skip'"),
    ({"chat_type": "room"}, "chat_type", "must be one of"),
    ({"prompt": "  "}, "prompt", "must not be empty"),
    ({"prompt": "x" * 16_001}, "prompt", "max_text_chars"),
    ({"chat": ""}, "chat", "must not be empty"),
    ({"enabled": "yes"}, "enabled", "expected true or false"),
    ({"every": "day"}, "every", "unknown key"),
], ids=["bad-cron", "not-a-string", "zone", "adapter", "profile", "catch-up", "chat-type", "empty-prompt",
        "long-prompt", "empty-chat", "enabled", "unknown-key"])
def test_each_bad_key_is_named(change, key, why):
    with pytest.raises(ConfigError, match=why) as caught:
        validate_jobs(config(morning={**GOOD, **change}), now=1.0)
    assert caught.value.key == f"[cron.morning] {key}" and caught.value.file == "gw.toml"


def test_the_default_web_chat_is_an_adapter_a_job_may_answer_in():
    raw = validate({"cron": {"hello": {**GOOD, "adapter": "web"}}}, "gw.toml")
    assert validate_jobs(raw)["hello"].adapter == "web"
    with pytest.raises(ConfigError, match="no adapter 'web' is configured"):
        validate_jobs(config(hello={**GOOD, "adapter": "web"}))   # [adapters] given: the default is not there


def test_a_missing_key_and_a_bad_name_are_named():
    with pytest.raises(ConfigError, match="missing") as caught:
        validate_jobs(config(morning={k: v for k, v in GOOD.items() if k != "chat"}))
    assert caught.value.key == "[cron.morning] chat"
    with pytest.raises(ConfigError, match="lower-case") as caught:
        validate_jobs(config(**{"Morning Run": GOOD}))
    assert caught.value.key == "[cron.Morning Run]"


def test_a_job_that_is_not_a_table_is_refused_at_load():
    with pytest.raises(ConfigError, match="must be a table"):
        validate({"cron": {"morning": "0 9 * * *"}}, "gw.toml")


def test_a_run_is_an_internal_event_of_its_chats_conversation():
    [job] = validate_jobs(config(morning={**GOOD, "profile": "work", "chat_type": "group", "thread": 7})).values()
    run_id = schedule_run_id("morning", 1_767_258_000.0)
    item = run_item(job, run_id, now=1_767_258_000.4)
    event = MessageEvent.from_payload(item.payload)
    assert item.platform == CRON_PLATFORM and item.platform_message_id == run_id == "morning:schedule:1767258000"
    assert event.internal and event.text == GOOD["prompt"] and event.source.user_id is None
    assert (event.source.platform, event.source.chat_id, event.source.thread_id, event.source.profile) == \
        ("fake", "42", "7", "work")
    assert item.session_key == session_key(event.source) == job.session_key()
    assert item.session_key.startswith("work.fake.group.chat-") and ".thread-" in item.session_key
    assert manual_run_id("morning", "abc") != run_id
