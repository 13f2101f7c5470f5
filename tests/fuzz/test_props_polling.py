"""Property tests of the long-polling adapters' inbound normalisation: the generic fake platform and Telegram.

The property, for any payload: the base's path (normalise, session key, storability) yields a well-typed event, or
a MalformedPayload that says why; no other exception ever escapes. Telegram's skip filter (``is_input``) must never
raise either, and what it lets through goes the same path.
"""
from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.fake.adapter import FakePlatformAdapter
from actors.adapters.telegram.adapter import TelegramAdapter
from actors.adapters.telegram.inbound import (event_from_update, is_input, message_id_of, strip_bot_mention,
                                              update_ids)
from tests.fuzz.strategies import (FUZZ, any_id, any_int, any_text, check_event, json_value, payloads, plain_text,
                                   run_inbound, tally)

# ------------------------------------------------------------------------------------------------ fake platform
plausible_id = st.one_of(st.integers(1, 10**6).map(str), st.integers(1, 10**6))
fake_update = st.fixed_dictionaries(
    {"id": st.one_of(st.integers(1, 10**9), any_id), "chat": st.one_of(st.text(min_size=1, max_size=12), any_id),
     "text": any_text, "message_id": st.one_of(plausible_id, any_id)},
    optional={"user": st.one_of(st.text(max_size=12), any_id), "thread": st.one_of(st.none(), any_id),
              "chat_type": st.one_of(st.sampled_from(["dm", "group", "channel", "thread", "", "DM"]), json_value)})


fake_plausible = st.fixed_dictionaries(
    {"id": st.integers(1, 10**9), "chat": plain_text, "text": plain_text, "message_id": plausible_id},
    optional={"user": plain_text, "thread": st.none() | plain_text, "chat_type": st.sampled_from(["dm", "group"])})


def fake_adapter() -> FakePlatformAdapter:
    adapter = FakePlatformAdapter()
    adapter.name = "fake"
    return adapter


@FUZZ
@given(payloads(fake_update, fake_plausible))
@example({"id": 1, "chat": None, "text": 42, "message_id": "m-bad"})
@example({"id": 1, "chat": "c", "text": "\ud800", "message_id": 1})         # lone surrogate: not storable
@example({"id": 1, "chat": "c", "text": "x", "message_id": 1, "chat_type": ["dm"]})
def test_fake_platform_update(raw):
    item = run_inbound(fake_adapter(), raw, "fake")
    if item is not None:
        assert item.payload["source"]["chat_id"] == raw["chat"]


# ------------------------------------------------------------------------------------------------------ Telegram
tg_user = st.fixed_dictionaries({"id": st.one_of(st.integers(1, 2**40), any_id), "is_bot": st.booleans()},
                                optional={"username": st.one_of(st.text(max_size=12), json_value),
                                          "first_name": st.one_of(any_text, json_value)})
tg_chat = st.fixed_dictionaries(
    {"id": st.one_of(st.integers(-10**13, 10**13), any_id),
     "type": st.one_of(st.sampled_from(["private", "group", "supergroup", "channel", "forum", ""]), json_value)},
    optional={"title": any_text, "is_forum": st.booleans()})
tg_message = st.fixed_dictionaries(
    {"message_id": st.one_of(st.integers(1, 2**31), any_id), "date": any_int, "chat": tg_chat, "text": any_text},
    optional={"from": st.one_of(tg_user, json_value), "message_thread_id": st.one_of(st.integers(1, 99), any_id),
              "is_topic_message": st.one_of(st.booleans(), json_value),
              "reply_to_message": st.one_of(st.fixed_dictionaries({"message_id": any_id}), json_value),
              "entities": json_value})
tg_update = st.fixed_dictionaries({"update_id": st.one_of(st.integers(1, 2**31), any_id),
                                   "message": st.one_of(tg_message, json_value)},
                                  optional={"edited_message": tg_message, "callback_query": json_value})


tg_plausible = st.fixed_dictionaries({"update_id": st.integers(1, 2**31), "message": st.fixed_dictionaries(
    {"message_id": st.integers(1, 2**31), "date": st.integers(0, 2**31), "text": plain_text,
     "chat": st.fixed_dictionaries({"id": st.integers(-10**13, 10**13),
                                    "type": st.sampled_from(["private", "group", "supergroup", "channel"])})},
    optional={"from": st.fixed_dictionaries({"id": st.integers(1, 2**40), "is_bot": st.just(False),
                                             "username": plain_text}),
              "message_thread_id": st.integers(1, 99), "is_topic_message": st.booleans(),
              "reply_to_message": st.fixed_dictionaries({"message_id": st.integers(1, 99)})})})


def telegram_adapter() -> TelegramAdapter:
    adapter = TelegramAdapter()
    adapter.name, adapter.bot_username = "telegram", "fake_gateway_bot"
    return adapter


@FUZZ
@given(payloads(tg_update, tg_plausible))
@example({"update_id": 1, "message": {"message_id": 1, "date": 0, "text": "x"}})       # no chat
@example({"update_id": 1, "message": {"message_id": 1, "chat": {"id": 5, "type": "private"}, "text": "x",
                                      "from": {"id": 7, "username": ["not", "a", "name"]}}})   # bug: list user_name
@example({"update_id": 1, "message": {"message_id": 1, "chat": {"id": 5, "type": "private"}, "text": "x",
                                      "from": {"id": {"nested": 1}, "first_name": 3}}})        # bug: dict user id
@example({"update_id": 1, "message": "not an object"})
def test_telegram_update(raw):
    adapter = telegram_adapter()
    update_ids([raw])                       # the offset arithmetic sees every update, input or not
    if not is_input(raw):
        tally("telegram", "skipped")        # edits, service messages: acknowledged without a word, by design
        return
    item = run_inbound(adapter, raw, "telegram")
    if item is not None:
        source = item.payload["source"]
        assert source["chat_type"] in ("dm", "group", "thread", "channel")
        assert item.platform_message_id.endswith(f":{raw['message']['message_id']}")


@FUZZ
@given(payloads(tg_update, tg_plausible), st.sampled_from(["", "fake_gateway_bot", "Bot_With_Caps"]))
def test_telegram_event_direct(raw, bot_username):
    """event_from_update alone, as the webhook and the poller both call it: event or MalformedPayload."""
    try:
        event = event_from_update(raw, "telegram", "default", bot_username)
    except MalformedPayload as exc:
        assert str(exc).strip()
        return
    check_event(event)


@FUZZ
@given(st.one_of(any_text, json_value), st.one_of(st.text(max_size=20), any_text))
@example("chat:\u00b2", "bot")            # bug: "²".isdigit() is true, int("²") raised ValueError
def test_telegram_text_helpers_never_raise(text, bot_username):
    if isinstance(text, str):
        assert isinstance(strip_bot_mention(text, bot_username), str)
    reference = text if isinstance(text, str) else None
    result = message_id_of(reference)
    assert result is None or isinstance(result, int)
