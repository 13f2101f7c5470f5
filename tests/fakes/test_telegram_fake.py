"""The fake Telegram Bot API: request/response shapes, update confirmation, webhooks, limits and faults."""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest
from aiohttp import web

from actors.adapters.errors import (ConflictError, FloodError, FormattingError, MessageNotFoundError,
                                    PermanentError, RetryableError, TooLongError)
from actors.adapters.telegram.client import TelegramAPI
from actors.adapters.telegram.formatting import markdown_to_telegram_html
from tests.fakes.harness import ControlClient, StandaloneFake
from tests.fakes.telegram import DEFAULT_TOKEN, FakeTelegram

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def tg():
    # Flood windows shrunk 20x and a generous burst, so tests that don't study flood control never meet it.
    with FakeTelegram(time_scale=0.05, per_chat_burst=20) as fake:
        yield fake


def with_api(fake: FakeTelegram, scenario):
    async def main():
        async with TelegramAPI(fake.token, base_url=fake.base_url) as api:
            return await scenario(api)
    return asyncio.run(main())


def raw(fake, method, token=None, http_method="GET", query=None, form=None):
    """One plain HTTP call; returns (status, body). Exercises the GET/query and form paths the client doesn't use."""
    url = f"{fake.base_url}/bot{token or fake.token}/{method}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method=http_method), timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_get_me_unknown_token_and_unknown_method(tg):
    assert raw(tg, "getMe") == (200, {"ok": True, "result": {
        "id": 123456789, "is_bot": True, "first_name": "Fake Gateway Bot", "username": "fake_gateway_bot",
        "can_join_groups": True, "can_read_all_group_messages": False, "supports_inline_queries": False}})
    assert raw(tg, "GETME")[0] == 200  # method names are case-insensitive
    assert raw(tg, "getMe", token="1:wrong") == (401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
    assert raw(tg, "sendPigeon") == (404, {"ok": False, "error_code": 404, "description": "Not Found"})


def test_query_and_form_parameters_are_accepted(tg):
    tg.inject_message("hi", chat_id=42)
    status, body = raw(tg, "sendMessage", http_method="POST", form={"chat_id": "42", "text": "<b>x</b>",
                                                                     "parse_mode": "HTML"})
    assert status == 200 and body["result"]["entities"] == [{"type": "bold", "offset": 0, "length": 1}]
    status, body = raw(tg, "sendChatAction", query={"chat_id": 42, "action": "typing"})
    assert (status, body["result"]) == (200, True)


def test_an_update_is_confirmed_once_getupdates_is_called_with_a_higher_offset(tg):
    ids = [tg.inject_message(text, chat_id=42)["update_id"] for text in ("a", "b", "c")]

    async def scenario(api):
        everything = await api.get_updates()
        again = await api.get_updates()  # no offset: nothing confirmed yet
        after_first = await api.get_updates(offset=ids[0] + 1)
        without_offset = await api.get_updates()  # the first stays confirmed
        limited = await api.get_updates(limit=1)
        last_only = await api.get_updates(offset=-1)
        return everything, again, after_first, without_offset, limited, last_only

    everything, again, after_first, without_offset, limited, last_only = with_api(tg, scenario)
    assert [u["update_id"] for u in everything] == ids == [u["update_id"] for u in again]
    assert [u["message"]["text"] for u in after_first] == ["b", "c"] == [u["message"]["text"] for u in without_offset]
    assert [u["message"]["text"] for u in limited] == ["b"]
    assert [u["message"]["text"] for u in last_only] == ["c"]
    assert [u["update_id"] for u in tg.pending_updates()] == [ids[2]]


def test_update_and_message_shapes_for_private_group_and_forum_topic(tg):
    private = tg.inject_message("hi", chat_id=42, user_id=42, username="bob", first_name="Bob")["message"]
    group = tg.inject_message("hey", chat_type="group", chat_id=-5, title="Pals")["message"]
    topic = tg.inject_message("in topic", chat_type="supergroup", chat_id=-1007, is_forum=True, thread_id=3)
    assert private["chat"] == {"id": 42, "type": "private", "first_name": "Bob", "username": "bob"}
    assert private["from"] == {"id": 42, "is_bot": False, "first_name": "Bob", "username": "bob"}
    assert group["chat"] == {"id": -5, "type": "group", "title": "Pals"}
    assert topic["message"]["chat"]["is_forum"] is True and topic["message"]["message_thread_id"] == 3
    assert topic["message"]["is_topic_message"] is True and isinstance(topic["message"]["date"], int)
    edited = tg.inject_edit(42, private["message_id"], "hi, edited")
    assert edited["edited_message"]["text"] == "hi, edited" and "edit_date" in edited["edited_message"]


def test_long_poll_waits_then_wakes_and_a_newer_poller_ends_the_older_with_409(tg):
    async def scenario(api):
        loop = asyncio.get_running_loop()
        first = asyncio.create_task(api.get_updates(timeout=10))
        await loop.run_in_executor(None, tg.wait_for, lambda: tg.stats()["requests"].get("getUpdates") == 1)
        second = asyncio.create_task(api.get_updates(timeout=10))
        with pytest.raises(ConflictError, match="terminated by other getUpdates"):
            await first
        await loop.run_in_executor(None, tg.wait_for, lambda: tg.stats()["requests"].get("getUpdates") == 2)
        tg.inject_message("wake up", chat_id=42)
        return await second

    assert [u["message"]["text"] for u in with_api(tg, scenario)] == ["wake up"]
    # The overlap is counted, and each poll is on record with its caller and how it ended.
    assert tg.stats()["poll_conflicts"] == 1 and tg.stats()["max_polls_pending"] == 2, tg.stats()
    first, second = tg.polls()
    assert (first["status"], first["ended_by"]["id"]) == (409, second["id"])
    assert (second["status"], second["updates"]) == (200, 1)
    assert first["peer"] == second["peer"] == "127.0.0.1" and first["at"] <= second["at"] <= second["ended_at"]


def test_one_poller_at_a_time_counts_no_conflict(tg):
    async def scenario(api):
        for _ in range(3):
            await api.get_updates(timeout=0)
    with_api(tg, scenario)
    assert tg.stats()["poll_conflicts"] == 0 and tg.stats()["max_polls_pending"] == 1, tg.stats()
    assert [p["status"] for p in tg.polls()] == [200, 200, 200]


def test_allowed_updates_filters_later_updates(tg):
    message = tg.inject_message("x", chat_id=42)["message"]
    with_api(tg, lambda api: api.get_updates(offset=-1, allowed_updates=["message"]))
    tg.inject_edit(42, message["message_id"], "x2")
    assert all("edited_message" not in u for u in tg.pending_updates())
    assert tg.stats()["updates_filtered"] == 1


def test_webhook_delivery_with_secret_header_retries_until_2xx(tg):
    received, answers = [], [500, 200, 200]

    async def receiver(request):
        received.append((request.headers.get("X-Telegram-Bot-Api-Secret-Token"), await request.json()))
        return web.Response(status=answers.pop(0))

    async def scenario(api):
        app = web.Application()
        app.router.add_post("/hook", receiver)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            await api.set_webhook(f"http://127.0.0.1:{runner.addresses[0][1]}/hook", secret_token="s3cr3t_-")
            with pytest.raises(ConflictError, match="webhook is active"):
                await api.get_updates()
            tg.inject_message("one", chat_id=42)
            tg.inject_message("two", chat_id=42)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, tg.wait_for, lambda: tg.stats()["webhook_deliveries"] == 2)
            info = await api.get_webhook_info()
            await api.delete_webhook()
            return info, await api.get_updates()
        finally:
            await runner.cleanup()

    info, polled = with_api(tg, scenario)
    assert [secret for secret, _ in received] == ["s3cr3t_-"] * 3
    assert [update["message"]["text"] for _, update in received] == ["one", "one", "two"]  # in order, retried
    assert info["pending_update_count"] == 0 and info["url"].endswith("/hook")
    assert info["last_error_message"].startswith("Wrong response from the webhook: 500")
    assert polled == [] and [e["error"] is None for e in tg.webhook_log()] == [False, True, True]


def test_bad_secret_token_is_refused(tg):
    status, body = raw(tg, "setWebhook", query={"url": "http://127.0.0.1:9/h", "secret_token": "no spaces"})
    assert status == 400 and "secret token" in body["description"]


def test_markdown_v2_rejection_then_html_fallback(tg):
    tg.inject_message("hi", chat_id=42)
    reply = "**Done.** Run `make test` (takes 1-2 min)!"

    async def scenario(api):
        with pytest.raises(FormattingError, match="can't parse entities: Character"):
            await api.send_message(42, reply, parse_mode="MarkdownV2")
        with pytest.raises(FormattingError, match="Unsupported start tag"):
            await api.send_message(42, "a <br> b", parse_mode="HTML")
        return await api.send_message(42, markdown_to_telegram_html(reply), parse_mode="HTML")

    message_id = with_api(tg, scenario)
    (sent,) = tg.messages(42)
    assert sent["message_id"] == message_id and sent["text"] == "Done. Run make test (takes 1-2 min)!"
    assert [e["type"] for e in sent["entities"]] == ["bold", "code"]


def test_text_limit_counts_utf16_units_after_entity_parsing(tg):
    tg.inject_message("hi", chat_id=42)

    async def scenario(api):
        await api.send_message(42, "a" * 4096)
        await api.send_message(42, "😀" * 2048)  # 4096 units
        await api.send_message(42, "*" + "b" * 4096 + "*", parse_mode="MarkdownV2")  # markup is not counted
        with pytest.raises(TooLongError):
            await api.send_message(42, "😀" * 2048 + "a")
        short = await api.send_message(42, "short")
        with pytest.raises(TooLongError):  # editMessageText words it MESSAGE_TOO_LONG
            await api.edit_message_text(42, short, "a" * 4097)

    with_api(tg, scenario)
    assert len(tg.final_texts(42)) == 4
    assert "Bad Request: MESSAGE_TOO_LONG" in tg.stats()["errors"]


def test_edit_and_delete_semantics(tg):
    incoming = tg.inject_message("hi", chat_id=42)["message"]["message_id"]

    async def scenario(api):
        mid = await api.send_message(42, "v1", reply_to=incoming)
        assert await api.edit_message_text(42, mid, "v2") is True
        assert await api.edit_message_text(42, mid, "v2") is False  # "message is not modified" is success
        assert await api.edit_message_text(42, mid, "*v2*", parse_mode="MarkdownV2") is True  # entities differ
        with pytest.raises(PermanentError, match="can't be edited"):
            await api.edit_message_text(42, incoming, "not mine")
        await api.delete_message(42, mid)
        with pytest.raises(MessageNotFoundError):
            await api.edit_message_text(42, mid, "v3")
        with pytest.raises(MessageNotFoundError):
            await api.delete_message(42, mid)
        return mid

    mid = with_api(tg, scenario)
    (message,) = tg.messages(42)
    assert message["message_id"] == mid > incoming and message["reply_to"] == incoming and message["deleted"]
    assert [h["text"] for h in message["history"]] == ["v1", "v2", "v2"]
    assert [o["method"] for o in tg.ops(42)][:3] == ["sendMessage", "editMessageText", "editMessageText"]


def test_forum_topics_replies_and_per_chat_message_ids(tg):
    tg.inject_message("in topic", chat_type="supergroup", chat_id=-1007, is_forum=True, thread_id=3)
    tg.inject_message("private", chat_id=42)

    async def scenario(api):
        in_topic = await api.send_message(-1007, "answer", thread_id=3)
        with pytest.raises(PermanentError, match="message thread not found"):
            await api.send_message(-1007, "lost", thread_id=99)
        in_private = await api.send_message(42, "answer")
        orphan = await api.send_message(42, "reply to a deleted message", reply_to=999)
        return in_topic, in_private, orphan

    in_topic, in_private, orphan = with_api(tg, scenario)
    assert (in_topic, in_private, orphan) == (2, 2, 3)  # each chat numbers its own messages
    assert tg.messages(-1007)[0]["thread_id"] == 3 and tg.messages(42)[1]["reply_to"] is None


def test_blocked_user_and_unknown_chat_are_permanent(tg):
    tg.inject_message("hi", chat_id=42)
    tg.block(42)

    async def scenario(api):
        with pytest.raises(PermanentError, match="Forbidden: bot was blocked by the user") as blocked:
            await api.send_message(42, "hello?")
        with pytest.raises(PermanentError, match="chat not found"):
            await api.send_message(777, "anyone?")
        return blocked.value.status

    assert with_api(tg, scenario) == 403


def test_flood_control_per_chat_with_whole_second_retry_after_and_violations():
    with FakeTelegram(time_scale=0.05, per_chat_burst=2) as fake:
        fake.inject_message("hi", chat_id=42)

        async def scenario(api):
            await api.send_message(42, "1")
            await api.send_message(42, "2")
            with pytest.raises(FloodError) as flood:
                await api.send_message(42, "3")
            with pytest.raises(FloodError):
                await api.send_message(42, "3")  # came back before retry_after: refused, counted
            return flood.value

        flood = with_api(fake, scenario)
        assert flood.retry_after == 1 and flood.description == "Too Many Requests: retry after 1"
        assert fake.stats()["floods_served"] == 2 and fake.stats()["retry_after_violations"] == 1


def test_flood_control_per_group_per_minute():
    with FakeTelegram(time_scale=0.05, per_chat_burst=50, group_per_minute=3) as fake:
        fake.inject_message("hi", chat_type="group", chat_id=-5)
        fake.inject_message("hi", chat_id=42)

        async def scenario(api):
            for i in range(3):
                await api.send_message(-5, str(i))
            with pytest.raises(FloodError):
                await api.send_message(-5, "over the group budget")
            await api.send_message(42, "private chats have no group budget")

        with_api(fake, scenario)


def test_scripted_storms_errors_and_drops(tg):
    tg.inject_message("hi", chat_id=42)
    tg.set_faults(next=["error", "drop", "drop_after"], methods=["sendMessage"])

    async def scenario(api):
        for _ in range(3):
            with pytest.raises(RetryableError):
                await api.send_message(42, "hello")
        await api.get_me()  # not a scripted method

    with_api(tg, scenario)
    assert tg.final_texts(42) == ["hello"]  # drop_after: delivered, but the bot never heard
    assert [o["status"] for o in tg.ops(42)] == [500, 599, 200]

    def storm():
        tg.reset()
        tg.inject_message("hi", chat_id=42)
        tg.set_faults(p_flood=0.5, seed=3, methods=["sendChatAction"])
        return [raw(tg, "sendChatAction", query={"chat_id": 42, "action": "typing"})[0] for _ in range(10)]

    first = storm()
    assert first == storm() and set(first) == {200, 429}
    assert tg.stats()["floods_served"] == first.count(429)


def test_control_api_over_http(tg):
    control = ControlClient(tg.base_url)
    updates = control.post("/_control/inject", [{"text": "a", "chat_id": 42},
                                                {"text": "b", "chat_type": "supergroup", "chat_id": -1009,
                                                 "is_forum": True, "thread_id": 5}])["updates"]
    assert [u["message"]["text"] for u in updates] == ["a", "b"]
    control.post("/_control/topics", {"chat_id": -1009, "thread_id": 6})
    control.post("/_control/config", {"text_limit": 5})
    control.post("/_control/block", {"chat_id": 42})
    assert raw(tg, "sendMessage", query={"chat_id": -1009, "text": "123456", "message_thread_id": 6})[0] == 400
    assert raw(tg, "sendMessage", query={"chat_id": -1009, "text": "12345", "message_thread_id": 6})[0] == 200
    assert raw(tg, "sendMessage", query={"chat_id": 42, "text": "x"})[0] == 403
    chat = control.get("/_control/chats/-1009")
    assert chat["topics"] == [5, 6] and [m["text"] for m in chat["messages"]] == ["b", "12345"]
    assert control.get("/_control/updates")["confirmed_offset"] == 0
    assert control.get("/_control/stats")["requests"]["sendMessage"] == 3
    control.post("/_control/reset")
    assert control.get("/_control/chats") == {"chats": []}


def test_standalone_process_keeps_history_and_confirmations_across_kill(tmp_path):
    with StandaloneFake("tests.fakes.telegram", tmp_path / "tg.json",
                        args=("--config", json.dumps({"time_scale": 0.05}))) as fake:
        fake.control.post("/_control/inject", {"text": "before", "chat_id": 42})

        async def poll_and_reply(offset):
            async with TelegramAPI(DEFAULT_TOKEN, base_url=fake.base_url) as api:
                updates = await api.get_updates(offset=offset)
                for update in updates:
                    await api.send_message(42, "re: " + update["message"]["text"])
                return updates

        (first,) = asyncio.run(poll_and_reply(None))
        fake.kill()
        fake.start()
        fake.control.post("/_control/inject", {"text": "after", "chat_id": 42})
        (second,) = asyncio.run(poll_and_reply(first["update_id"] + 1))  # confirms "before"
        assert second["update_id"] > first["update_id"]
        chat = fake.control.get("/_control/chats/42")
        assert [m["text"] for m in chat["messages"] if m["outgoing"]] == ["re: before", "re: after"]
        assert [m["message_id"] for m in chat["messages"]] == [1, 2, 3, 4]
        assert [u["message"]["text"] for u in fake.control.get("/_control/updates")["pending"]] == ["after"]


def test_a_lost_getupdates_answer_is_delivered_again_until_confirmed(tg):
    first = tg.inject_message("a", chat_id=42)["update_id"]
    tg.inject_message("b", chat_id=42)
    tg.set_faults(next=["drop_after"], methods=["getUpdates"])

    async def scenario(api):
        with pytest.raises(RetryableError):
            await api.get_updates(offset=first + 1)  # confirms "a"; the answer carrying "b" is lost
        return await api.get_updates(offset=first + 1)

    assert [u["message"]["text"] for u in with_api(tg, scenario)] == ["b"]


def test_send_voice_takes_ogg_opus_as_a_voice_note_and_refuses_other_bytes(tg):
    """sendVoice as the Bot API documents it: multipart/form-data, the audio in the ``voice`` field; the Message
    carries a Voice (file_id, file_unique_id, duration, mime_type, file_size). The gateway's client sends it."""
    from tests.fakes.openai_server import OGG_OPUS
    tg.inject_message("hi", 1001)

    async def scenario(api):
        sent = await api.send_file(1001, "voice", OGG_OPUS, "voice.ogg", "audio/ogg")
        try:
            await api.send_file(1001, "voice", b"not audio at all", "voice.ogg", "audio/ogg")
        except Exception as exc:   # noqa: BLE001 - the refusal is what is asserted
            return sent, exc
        return sent, None

    message_id, refused = with_api(tg, scenario)
    assert "OGG Opus, MP3 or M4A" in str(refused), refused
    (voice,) = [m for m in tg.messages(1001) if m["message_id"] == message_id]
    assert voice["media"]["voice"]["mime_type"] == "audio/ogg" and voice["media"]["voice"]["file_size"] == len(OGG_OPUS)
    assert [(u["kind"], u["data"]) for u in tg.uploads] == [("voice", OGG_OPUS)]
    assert [o["status"] for o in tg.ops(1001, "sendVoice")] == [200, 400]


def test_inline_keyboard_press_and_answer_callback_query(tg):
    tg.inject_message("hi", chat_id=42)
    keyboard = {"inline_keyboard": [[{"text": "Approve", "callback_data": "ap:x:y"},
                                     {"text": "Deny", "callback_data": "ap:x:n"}]]}

    async def send(api):
        sent = await api.call("sendMessage", {"chat_id": 42, "text": "ok?", "reply_markup": keyboard})
        with pytest.raises(PermanentError, match="BUTTON_DATA_INVALID"):
            await api.call("sendMessage", {"chat_id": 42, "text": "x", "reply_markup": {
                "inline_keyboard": [[{"text": "A", "callback_data": "d" * 65}]]}})
        return sent
    sent = with_api(tg, send)
    assert sent["reply_markup"] == keyboard
    assert tg.messages(42)[-1]["reply_markup"] == keyboard
    with pytest.raises(ValueError, match="no button"):
        tg.press_button(42, sent["message_id"], "ap:x:other")
    update = tg.press_button(42, sent["message_id"], "ap:x:y", user_id=42)
    query = update["callback_query"]
    assert (query["data"], query["from"]["id"], query["message"]["chat"]["id"]) == ("ap:x:y", 42, 42)
    assert query["message"]["message_id"] == sent["message_id"] and query["id"]
    assert tg.press_button(42, sent["message_id"], "ap:x:n")["callback_query"]["id"] != query["id"]
    assert tg.callback_answer(query["id"]) is None

    async def answer(api):
        await api.call("answerCallbackQuery", {"callback_query_id": query["id"], "text": "Approved"})
        with pytest.raises(PermanentError, match="query ID is invalid"):   # at most once
            await api.call("answerCallbackQuery", {"callback_query_id": query["id"]})
        with pytest.raises(PermanentError, match="query ID is invalid"):
            await api.call("answerCallbackQuery", {"callback_query_id": "nonesuch"})
        # an edit without reply_markup takes the keyboard away, as Telegram does
        await api.call("editMessageText", {"chat_id": 42, "message_id": sent["message_id"], "text": "done"})
    with_api(tg, answer)
    assert tg.callback_answer(query["id"])["text"] == "Approved"
    assert not tg.messages(42)[-1].get("reply_markup")
