"""The Telegram adapter's own parts, without an actor system: Update -> MessageEvent, Markdown -> Telegram markup,
and the adapter's coroutines (polling, webhook, outbound) on a plain event loop against the in-process fake Bot API.
The conformance suite (test_conformance.py) runs the same adapter in the real daemon."""
from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from hypothesis import given, settings, strategies as st

from actors.adapters import base, registry
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.errors import PermanentError
from actors.adapters.telegram.adapter import TelegramAdapter
from actors.adapters.telegram.formatting import markdown_to_markdown_v2, render
from actors.adapters.telegram.inbound import event_from_update, is_input, message_id_of, strip_bot_mention
from actors.adapters.telegram.webhook import SECRET_HEADER
from actors.messages import PlatformOp
from storage import session_key
from common.config import ConfigError
from tests.fakes.telegram import FakeTelegram, parse_html, parse_markdown_v2
from tests.fakes.telegram.botapi import ApiError

pytestmark = pytest.mark.timeout(30)
SECRET = "hook_secret-42"


class Posts:
    """Stands in for the bridge: what the loop side hands to the actor thread."""

    def __init__(self):
        self.items = []

    def post(self, item):
        self.items.append(item)

    def lines(self) -> list[str]:
        return [i.text for i in self.items if isinstance(i, base.LogLine)]


class PickyTelegram(FakeTelegram):
    """Refuses the entities of the next ``refusals`` formatted texts (a scripted "can't parse entities")."""
    refusals = 0

    def _parse_text(self, params: dict, too_long: str):
        if params.get("parse_mode") and self.refusals > 0:
            self.refusals -= 1
            raise ApiError(400, "Bad Request: can't parse entities: Can't find end of the entity starting at byte "
                                "offset 5")
        return super()._parse_text(params, too_long)


@pytest.fixture
def tg():
    with PickyTelegram() as fake:
        yield fake


def make_adapter(tg: FakeTelegram, tmp_path, **settings) -> tuple[TelegramAdapter, Posts]:
    adapter = TelegramAdapter()
    adapter.name = "tg"
    adapter.settings = registry.validate_adapter("tg", {"type": "telegram", "token": tg.token,
                                                        "base_url": tg.base_url, "poll_timeout_s": 1.0, **settings})
    adapter.profile = adapter.settings["profile"]
    adapter.pacing = registry.pacing_of(adapter.settings)
    adapter.secrets = registry.secret_values(adapter.settings)
    adapter.config = {"gateway": {"state_dir": str(tmp_path)}, "storage": {"durability": "normal"}}
    adapter._loop_bridge = posts = Posts()
    return adapter, posts


async def until(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
    return value


def perform(adapter: TelegramAdapter, *ops: PlatformOp) -> list:
    async def main():
        try:
            return await asyncio.gather(*(adapter._perform(op) for op in ops))
        finally:
            await adapter.close()
    return asyncio.run(main())


# ------------------------------------------------------------------------------------- Update -> MessageEvent

def update(chat: dict, text="hi", **message) -> dict:
    return {"update_id": 9, "message": {"message_id": 5, "date": 0, "chat": chat, "text": text,
                                        "from": {"id": 77, "is_bot": False, "first_name": "Bo", "username": "bo"},
                                        **message}}


def test_private_group_and_forum_topic_messages_map_to_their_chat_types():
    dm = event_from_update(update({"id": 77, "type": "private"}), "tg", "work")
    assert (dm.source.chat_id, dm.source.chat_type, dm.source.thread_id) == ("77", "dm", None)
    assert dm.platform_message_id == "77:5" and dm.source.user_name == "bo" and dm.source.profile == "work"
    group = event_from_update(update({"id": -100, "type": "supergroup"}, message_thread_id=3,
                                     reply_to_message={"message_id": 2}), "tg", "default")
    assert (group.source.chat_type, group.source.thread_id) == ("group", None), "a reply thread is no topic"
    assert group.reply_to_message_id == "-100:2"
    topic = event_from_update(update({"id": -100, "type": "supergroup", "is_forum": True}, message_thread_id=3,
                                     is_topic_message=True), "tg", "default")
    assert (topic.source.chat_type, topic.source.thread_id) == ("thread", "3")
    assert session_key(topic.source) != session_key(group.source)


def test_the_send_time_is_telegrams_date_when_it_is_one():
    assert event_from_update(update({"id": 1, "type": "private"}, date=1_700_000_000), "tg", "p").sent_at == 1.7e9
    assert event_from_update(update({"id": 1, "type": "private"}, date="soon"), "tg", "p").sent_at is None


def test_edits_media_and_service_messages_are_not_input():
    assert is_input(update({"id": 1, "type": "private"}))
    assert not is_input({"update_id": 1, "edited_message": {"message_id": 1, "text": "changed"}})
    assert not is_input({"update_id": 1, "message": {"message_id": 1, "sticker": {}}})
    assert not is_input({"update_id": 1, "callback_query": {}})
    assert is_input("garbage"), "left to normalise, which rejects it loudly"


@pytest.mark.parametrize("raw, reason", [
    ("garbage", "not an object"),
    ({"update_id": 1, "message": "x"}, "message is str"),
    ({"update_id": 1, "message": {"message_id": 1, "text": "x"}}, "no chat"),
    (update({"id": 1, "type": "private"}, text=None), "text must be a string"),
    (update({"id": 1, "type": "private"}, message_id="7"), "message_id must be an integer"),
    (update({"id": 1, "type": "secret"}), "unknown chat type"),
])
def test_malformed_updates_are_refused_with_a_reason(raw, reason):
    with pytest.raises(MalformedPayload, match=reason):
        event_from_update(raw, "tg", "default")


def test_commands_addressed_to_this_bot_lose_the_mention():
    assert strip_bot_mention("/stop@My_Bot now", "my_bot") == "/stop now"
    assert strip_bot_mention("/stop@other_bot", "my_bot") == "/stop@other_bot"
    assert strip_bot_mention("mail me@my_bot", "my_bot") == "mail me@my_bot"
    assert message_id_of("-100:42") == 42 and message_id_of("7") == 7 and message_id_of(None) is None


# --------------------------------------------------------------------------------------------- formatting

@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab _*[]()~`>#+-=|{}.!\\\n<&é😀")), max_size=60))
def test_markdown_v2_always_parses_and_plain_text_shows_literally(text):
    shown, _entities = parse_markdown_v2(markdown_to_markdown_v2(text))
    if "`" not in text and "*" not in text:
        assert shown == text


def test_code_and_bold_become_entities_in_both_modes():
    source = "**bold** and `a<b>_c` then\n```python\nif x < 1: print('*')\n```"
    for mode, parse in (("HTML", parse_html), ("MarkdownV2", parse_markdown_v2)):
        text, parse_mode = render(source, mode)
        shown, entities = parse(text)
        assert parse_mode == mode
        assert shown.startswith("bold and a<b>_c then\nif x < 1: print('*')")
        assert {e["type"] for e in entities} == {"bold", "code", "pre"}
    assert render(source, "none") == (source, None)


# ------------------------------------------------------------------------------------------------- polling

def test_a_polling_round_stores_messages_and_acknowledges_what_it_skips(tg, tmp_path):
    adapter, posts = make_adapter(tg, tmp_path)
    first = tg.inject_message("hello", chat_id=10)
    tg.inject_message("in a topic, @fake_gateway_bot", chat_type="supergroup", chat_id=-1001, is_forum=True,
                      thread_id=4)
    with tg.mutate() as state:   # an edit and a sticker, as if allowed_updates had let them through
        for kind in ({"edited_message": dict(first["message"], text="edited")},
                     {"message": {"message_id": 9, "date": 0, "chat": {"id": 10, "type": "private"}, "sticker": {}}}):
            state["updates"].append({"update_id": state["next_update_id"], **kind})
            state["next_update_id"] += 1

    async def main():
        await adapter.intake.open_store()
        await adapter.connect()
        raws, offset = await adapter.fetch()
        await adapter.intake.ingest(raws, offset)
        await adapter.fetch()   # this poll confirms the round to Telegram
        await adapter.disconnect()
        rows = await adapter.store.inbox.rows_in_state(session_key(adapter.normalise(raws[1]).source))
        stored = await adapter.store.inbox.get_offset("tg")
        await adapter.store.close()
        return raws, offset, rows, stored

    raws, offset, rows, stored = asyncio.run(main())
    assert len(raws) == 2 and adapter.skipped == 2
    assert offset == stored == first["update_id"] + 4
    assert tg.read(lambda s: s["confirmed_offset"]) == offset and tg.pending_updates() == []
    [row] = rows
    assert row.payload["source"]["chat_type"] == "thread" and row.payload["source"]["thread_id"] == "4"
    assert tg.read(lambda s: s["allowed_updates"]) == ["message", "message_reaction", "callback_query"]
    assert adapter.bot_username == "fake_gateway_bot"


def test_per_user_in_groups_is_a_per_bot_choice(tg, tmp_path):
    adapter, _ = make_adapter(tg, tmp_path, per_user_in_groups=True)
    adapter.bridge = type("Bridge", (), {"submit": lambda self, coro, tag=None: coro.close()})()
    adapter.after = lambda seconds, tag, data=None: None   # no actor system here: timers are not under test
    adapter.on_start(adapter.settings)   # [sessions] says nothing: the bot's own setting decides
    assert ".user-" in adapter.intake.item(update({"id": -5, "type": "group"})).session_key
    assert ".user-" not in adapter.intake.item(update({"id": 5, "type": "private"})).session_key


def test_a_round_rings_each_session_once(tg, tmp_path):
    from actors.messages import InboxDoorbell
    from supervision.messages import Batch, Directory
    adapter, _ = make_adapter(tg, tmp_path)
    sent = []
    adapter.send = lambda address, message: sent.append(message)
    adapter.on_Directory(Directory(1, sessions="sessions"), None)
    adapter.take_bridge_item(base.Ingested((("k1", 1), ("k2", 2), ("k1", 3))))
    adapter.after_bridge_items()
    assert sent == [Batch((InboxDoorbell("k1", 3), InboxDoorbell("k2", 2)))], "one message to the one recipient"


# ------------------------------------------------------------------------------------------------ outbound

def test_sends_reach_topics_as_replies_and_group_chats_get_group_pacing(tg, tmp_path):
    tg.inject_message("question", chat_type="supergroup", chat_id=-1001, is_forum=True, thread_id=4)
    adapter, _ = make_adapter(tg, tmp_path)
    [sent] = perform(adapter, PlatformOp("s1", "send", "-1001", "answer", thread_id="4", reply_to="-1001:1",
                                         chat_type="thread"))
    assert sent.ok
    [message] = [m for m in tg.messages(-1001) if m["outgoing"]]
    assert (message["thread_id"], message["reply_to"], message["text"]) == (4, 1, "answer")
    submitted = []
    adapter.bridge = type("Bridge", (), {"call": lambda self, fn, chat, item: submitted.append(item[1])})()
    adapter.on_PlatformOp(PlatformOp("s2", "edit", "-1001", "x", message_id="2"), "consumer")
    adapter.on_PlatformOp(PlatformOp("s3", "edit", "42", "x", message_id="2"), "consumer")
    assert [op.chat_type for op in submitted] == ["group", "dm"], "negative ids are groups, whoever sends"


@pytest.mark.parametrize("parse_mode", ["HTML", "MarkdownV2"])
def test_refused_markup_is_sent_again_as_plain_text(tg, tmp_path, parse_mode):
    tg.inject_message("hi", chat_id=20)
    adapter, posts = make_adapter(tg, tmp_path, parse_mode=parse_mode)
    tg.refusals = 2   # the send and then the edit
    sent, = perform(adapter, PlatformOp("s1", "send", "20", "**bold** 1.5!"))
    edited, = perform(adapter, PlatformOp("e1", "edit", "20", "**bolder** 2.5!", message_id=sent.message_id))
    assert sent.ok and edited.ok
    [message] = [m for m in tg.messages(20) if m["outgoing"]]
    assert [(h["raw_text"], h["parse_mode"]) for h in message["history"]] == [("**bold** 1.5!", None),
                                                                               ("**bolder** 2.5!", None)]
    assert sum("sent as plain text" in line and parse_mode in line for line in posts.lines()) == 2


def test_the_bot_wide_budget_spaces_operations_across_chats(tg, tmp_path):
    for chat in range(1, 9):
        tg.inject_message("hi", chat_id=chat)
    adapter, _ = make_adapter(tg, tmp_path, bot_ops_per_s=4.0)
    began = time.monotonic()
    results = perform(adapter, *(PlatformOp(f"s{chat}", "send", str(chat), "hello") for chat in range(1, 9)))
    took = time.monotonic() - began
    assert all(r.ok for r in results) and sum(len(tg.ops(chat, "sendMessage")) for chat in range(1, 9)) == 8
    # 4 at once (the burst), then one every 0.25 s: the eighth leaves no sooner than 1 s after the first. Timed here,
    # where the budget spaces departures: on a loaded machine the fake can receive a delayed first few together
    # with the later ones, so its arrival times may be closer than the budget's spacing.
    assert took >= 0.95, took


def test_errors_never_carry_the_token(tg, tmp_path):
    adapter, _ = make_adapter(tg, tmp_path)
    adapter.settings["base_url"] = tg.base_url + "/wrong"
    missing, = perform(adapter, PlatformOp("s1", "send", "1", "x"))
    adapter.settings["base_url"] = "http://127.0.0.1:9"
    adapter.retry_policy = base.RetryPolicy(max_failures=0)
    unreachable, = perform(adapter, PlatformOp("s2", "send", "1", "x"))
    for result in (missing, unreachable):
        assert not result.ok and tg.token.split(":")[1] not in result.error and "bot1" not in result.error
    assert missing.error_kind == "permanent" and unreachable.error_kind == "retryable"


def test_bad_settings_are_config_errors_that_hide_secrets():
    with pytest.raises(ConfigError, match="must be one of"):
        registry.validate_adapter("tg", {"type": "telegram", "token": "1:x", "parse_mode": "Markdown"})
    with pytest.raises(ConfigError, match=r"\[redacted\]"):
        registry.validate_adapter("tg", {"type": "telegram", "token": 123456789})
    with pytest.raises(ConfigError, match="missing"):
        registry.validate_adapter("tg", {"type": "telegram"})


# ------------------------------------------------------------------------------------------------- webhook

def test_webhook_acknowledges_an_update_only_once_it_is_stored(tg, tmp_path):
    adapter, posts = make_adapter(tg, tmp_path, mode="webhook", webhook_port=0, webhook_secret=SECRET)

    async def main():
        real_emit, gate, holding = adapter.intake.emit, asyncio.Event(), asyncio.Event()

        async def gated_emit(raws, offset=None):
            holding.set()
            await gate.wait()
            return await real_emit(raws, offset)
        adapter.intake.emit = gated_emit
        intake = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
        hook = await until(lambda: tg.read(lambda s: s["webhook"]))
        assert hook["secret_token"] == SECRET and hook["url"].endswith("/telegram/webhook")
        async with aiohttp.ClientSession() as http:
            forged = {"update_id": 1, "message": {"message_id": 1, "date": 0, "text": "x",
                                                  "chat": {"id": 3, "type": "private"}}}
            for headers in ({SECRET_HEADER: "wrong"}, {}):
                async with http.post(hook["url"], json=forged, headers=headers) as response:
                    assert response.status == 401
            assert await raw_post(hook["url"], SECRET_HEADER.encode() + b": \xff\xfe\x80") == 401   # not UTF-8
            assert not holding.is_set(), "a refused request never reaches the inbox"
            edit = {"update_id": 2, "edited_message": forged["message"]}
            async with http.post(hook["url"], json=edit, headers={SECRET_HEADER: SECRET}) as response:
                assert response.status == 200 and adapter.skipped == 1
        pushed = tg.inject_message("push me", chat_id=12)
        await asyncio.wait_for(holding.wait(), 10)
        assert tg.webhook_log() == [] and tg.pending_updates() != [], "not stored yet: no answer yet"
        gate.set()
        [delivery] = await until(lambda: [d for d in tg.webhook_log() if d["error"] is None])
        key = session_key(adapter.normalise(pushed).source)
        [row] = await adapter.store.inbox.rows_in_state(key)
        intake.cancel()
        await asyncio.gather(intake, return_exceptions=True)
        await adapter.store.close()
        return pushed, delivery, row

    pushed, delivery, row = asyncio.run(main())
    assert delivery["update_id"] == pushed["update_id"] and row.platform_message_id == "12:1"
    assert row.received_at <= delivery["at"] and tg.pending_updates() == []
    assert any("webhook listening" in line for line in posts.lines())


async def raw_post(url: str, header: bytes) -> int:
    """POST ``{}`` with one raw header line (bytes a client library would refuse to send); the status answered."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    path = "/" + url.split("//", 1)[1].split("/", 1)[1]
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 2\r\nConnection: close\r\n".encode()
                 + header + b"\r\n\r\n{}")
    status = int((await reader.readline()).split()[1])
    writer.close()
    return status


@pytest.mark.parametrize("secret", ["", "   "])
def test_webhook_mode_without_a_secret_is_a_config_error(tg, secret):
    with pytest.raises(ConfigError, match="required in webhook mode"):
        registry.validate_adapter("tg", {"type": "telegram", "token": tg.token, "mode": "webhook",
                                         "webhook_secret": secret})


def test_webhook_mode_without_a_secret_refuses_to_start(tg, tmp_path):
    adapter, _ = make_adapter(tg, tmp_path, mode="webhook", webhook_port=0, webhook_secret="placeholder")
    adapter.settings["webhook_secret"] = ""      # past validation (an older config loaded some other way)

    async def main():
        await adapter.connect()
        try:
            await adapter.run_intake(adapter.intake.emit)
        finally:
            await adapter.disconnect()
    with pytest.raises(PermanentError, match="webhook_secret"):
        asyncio.run(main())
    assert tg.read(lambda s: s["webhook"]) is None


def test_a_group_message_is_addressed_when_it_mentions_or_replies_to_the_bot():
    group = {"id": -100, "type": "supergroup"}
    assert event_from_update(update(group, text="hi all"), "tg", "p", "my_bot").addressed is False
    assert event_from_update(update(group, text="hi @My_Bot"), "tg", "p", "my_bot").addressed is True
    replied = {"message_id": 2, "from": {"id": 1, "is_bot": True, "username": "my_bot"}}
    assert event_from_update(update(group, reply_to_message=replied), "tg", "p", "my_bot").addressed is True
    assert event_from_update(update(group), "tg", "p", "").addressed is None, "the bot's name not known yet"
    assert event_from_update(update({"id": 7, "type": "private"}), "tg", "p", "my_bot").addressed is True


# ------------------------------------------------------------------------------------------------- button presses

def test_a_press_on_a_question_is_stored_once_as_the_answer_and_every_press_is_answered(tg, tmp_path):
    from actors.approvals.answers import button_data, question_text
    from storage import ApprovalRequest
    adapter, _posts = make_adapter(tg, tmp_path)
    hello = tg.inject_message("hello", chat_id=10)

    async def main():
        await adapter.intake.open_store()
        await adapter.connect()
        asked = await adapter.store.approvals.ask(ApprovalRequest(   # asked in the conversation of chat 10
            adapter.conversation_of(hello), "t1", "call_1", "calculator", "{}", "tg", "10", 600.0, "chat", "{}"))
        approval = asked.approval
        # The question goes out with its buttons, found from its text and the stored row.
        sent = await adapter._perform(PlatformOp("q1", "send", "10", question_text(approval, buttons=True)))
        message_id = int(sent.message_id)
        keyboard = tg.messages(10)[-1]["reply_markup"]["inline_keyboard"]
        assert [(b["text"], b["callback_data"]) for b in keyboard[0]] == [
            ("Approve", button_data(approval.approval_id, "approve")), ("Deny", button_data(approval.approval_id, "deny"))]
        yes = tg.press_button(10, message_id, button_data(approval.approval_id, "approve"), user_id=10)
        again = dict(yes)                                    # the same press delivered twice
        with tg.mutate() as state:
            state["updates"].append(dict(again, update_id=state["next_update_id"]))
            state["next_update_id"] += 1
            # a forged or foreign button on the same message: answered, never stored
            state["callback_queries"]["forged"] = {"answer": None}
            state["updates"].append({"update_id": state["next_update_id"], "callback_query": dict(
                yes["callback_query"], id="forged", data="ap:nonesuch000000:y")})
            state["next_update_id"] += 1
        raws, offset = await adapter.fetch()
        await adapter.intake.ingest(raws, offset)
        adapter.answer_presses()
        await until(lambda: tg.callback_answer("forged") and tg.callback_answer(yes["callback_query"]["id"]))
        rows = await adapter.store.inbox.rows_in_state(session_key(adapter.normalise(raws[-1]).source))
        await adapter.disconnect()
        await adapter.store.close()
        return approval, raws, rows, yes["callback_query"]["id"]

    approval, raws, rows, query_id = asyncio.run(main())
    clicks = [r for r in rows if r.platform_message_id.startswith("callback:")]
    assert [(r.platform_message_id, r.payload["text"], r.payload["source"]["user_id"]) for r in clicks] == [
        (f"callback:{query_id}", f"approve {approval.code}", "10")]
    assert tg.callback_answer(query_id)["text"] == "Approved"
    assert tg.callback_answer("forged")["text"] == "This button is no longer valid."
    assert sum(1 for r in raws if "callback_query" in r) == 2     # the forged press was not input


def test_where_each_group_member_has_a_conversation_only_the_askers_press_counts(tg, tmp_path):
    from actors.approvals.answers import NOT_YOURS, button_data
    from storage import ApprovalRequest
    adapter, _posts = make_adapter(tg, tmp_path)
    adapter.per_user_in_groups = True
    asking = tg.inject_message("@fake_gateway_bot hi", chat_id=-100300, chat_type="group", user_id=11)

    async def main():
        await adapter.intake.open_store()
        await adapter.connect()
        approval = (await adapter.store.approvals.ask(ApprovalRequest(
            adapter.conversation_of(asking), "t1", "call_1", "calculator", "{}", "tg", "-100300", 600.0, "chat",
            "{}"))).approval
        data = button_data(approval.approval_id, "approve")
        with tg.mutate() as state:
            chat = state["chats"]["-100300"]
            question = tg.store_message(chat, outgoing=True, text="the question", entities=[])
            question["reply_markup"] = {"inline_keyboard": [[{"text": "Approve", "callback_data": data}]]}
        other = tg.press_button(-100300, question["message_id"], data, user_id=13)["callback_query"]["id"]
        asker = tg.press_button(-100300, question["message_id"], data, user_id=11)["callback_query"]["id"]
        raws, offset = await adapter.fetch()
        await adapter.intake.ingest(raws, offset)
        adapter.answer_presses()
        await until(lambda: tg.callback_answer(other) and tg.callback_answer(asker))
        rows = await adapter.store.inbox.rows_in_state(approval.session_key)
        await adapter.disconnect()
        await adapter.store.close()
        return approval, rows, other, asker

    approval, rows, other, asker = asyncio.run(main())
    assert tg.callback_answer(other)["text"] == NOT_YOURS
    assert tg.callback_answer(asker)["text"] == "Approved"
    assert [(r.platform_message_id, r.payload["text"]) for r in rows if r.platform_message_id.startswith("callback:")] \
        == [(f"callback:{asker}", f"approve {approval.code}")]
