"""Files a reply carries, through the real daemon to the fake Bot API (docs/media.md, "Outbound"): a tool's image
goes out once with sendPhoto after the reply's text, the model reads that it was sent, and a kill -9 between the
upload and its message id being recorded leaves at most one re-sent copy, marked."""
from __future__ import annotations

import os
import signal

import pytest

from actors.adapters.pacing import DEFAULT_RESENT_MARKER
from actors.media.outgoing import PHOTO_TYPES
from actors.media.sniff import sniff
from tests.actor_system import wait_for
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply
from tests.fakes.telegram import FakeTelegram
from tests.pipeline.harness import telegram_gateway
from tests.pipeline.test_telegram_e2e import ledger_busy, start_after_kill

pytestmark = pytest.mark.timeout(240)


def shown(tg: FakeTelegram, chat_id: int) -> list[dict]:
    return [m for m in tg.messages(chat_id) if not m["deleted"]]


def uploads_in(tg: FakeTelegram, chat_id: int) -> list[dict]:
    return [u for u in tg.uploads if u["chat_id"] == chat_id]


def wait_settled(tg: FakeTelegram, chat_id: int, photos: int, gw, what: str) -> list[dict]:
    def done():
        messages = shown(tg, chat_id)
        return (len(uploads_in(tg, chat_id)) >= photos and messages and ledger_busy(gw) == 0
                and all("▍" not in m["text"] for m in messages) and messages)
    try:
        return wait_for(done, 90, 0.1, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nchat: {[(m['message_id'], m['text'][:40]) for m in tg.messages(chat_id)]}\n"
                             f"uploads: {len(uploads_in(tg, chat_id))}\n" + "\n".join(gw.log().splitlines()[-30:]))


def test_a_tools_image_is_sent_once_after_the_text_and_the_model_reads_that_it_went(tmp_path):
    with FakeTelegram() as tg, FakeOpenAIServer() as model:
        model.script(tool_call_reply([("text_image", '{"text": "Open 9 to 5", "caption": "our hours"}')]),
                     text_reply("Here is the sign."))
        gw = telegram_gateway(tmp_path, tg.base_url, extra=f"""kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"
""")
        try:
            gw.start()
            gw.wait_ready()
            tg.inject_message("make us a sign with the opening hours", 71)
            messages = wait_settled(tg, 71, 1, gw, "the answer and its photo")
            (upload,) = uploads_in(tg, 71)
            assert upload["kind"] == "photo" and sniff(upload["data"]) in PHOTO_TYPES
            assert upload["caption"] == "our hours" and upload["filename"] == "card.png"
            assert [m["text"] for m in messages] == ["Here is the sign.", "our hours"]   # text first, then the photo
            assert "photo" in messages[1]["media"] and not messages[0].get("media")
            tool_message = [m for m in model.requests[-1].body["messages"] if m["role"] == "tool"][-1]
            assert tool_message["content"].startswith("drew the card\n[file sent to the chat: card.png (PNG, 800×")
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_a_kill_9_between_the_upload_and_its_id_leaves_at_most_one_marked_copy(tmp_path):
    with FakeTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url)   # the offline agent draws when asked for a picture
        try:
            gw.start()
            gw.wait_ready()
            tg.hold_answers("sendPhoto")
            tg.inject_message("draw a card saying see you soon", 72)
            wait_for(lambda: uploads_in(tg, 72), 60, 0.05, "the photo's upload to reach the platform")
            os.kill(gw.launcher_pid, signal.SIGKILL)
            gw.assert_no_process_left()
            tg.release_answers()
            start_after_kill(gw)
            wait_settled(tg, 72, 1, gw, "the reply finished after the restart")
            uploads = uploads_in(tg, 72)
            assert 1 <= len(uploads) <= 2, f"the photo went {len(uploads)} times"
            if len(uploads) == 2:   # the copy whose answer was lost may be in the chat: the reply says so
                texts = [m["text"] for m in shown(tg, 72)]
                assert any(t.startswith(DEFAULT_RESENT_MARKER) for t in texts), texts
            texts = [m["text"] for m in shown(tg, 72) if not m.get("media")]
            assert len(texts) == 1 and "see you soon" in texts[0], texts   # the text part once
        finally:
            tg.release_answers()
            gw.cli("stop")
            gw.kill_everything()


def test_status_reactions_show_the_turn_working_then_answered_and_a_failed_turn_takes_its_reaction_away(tmp_path):
    with FakeTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url, extra='[sessions]\nstatus_reactions = "👀 👍"\n')
        try:
            gw.start()
            gw.wait_ready()
            for chat_id, text in ((73, "hello there"), (74, "please fail #fail")):
                tg.inject_message(text, chat_id)

            def reactions(chat_id):
                mine = next((m for m in tg.messages(chat_id, incoming=True) if not m["outgoing"]), None)
                return [r["emoji"] for r in (mine or {}).get("reactions", [])]
            wait_for(lambda: len(reactions(73)) == 2 and len(reactions(74)) == 2, 60, 0.05,
                     f"two reactions on each message (saw {reactions(73)}, {reactions(74)})")
            assert reactions(73) == [["👀"], ["👍"]]
            assert reactions(74) == [["👀"], []]        # the agent failed: the reply says so, the 👀 goes
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_a_users_reaction_on_an_answer_is_kept_with_that_reply_and_a_later_one_replaces_it(tmp_path):
    import asyncio
    from storage import Store
    with FakeTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url)
        try:
            gw.start()
            gw.wait_ready()
            tg.inject_message("how are you?", 75)
            wait_for(lambda: tg.final_texts(75) and "▍" not in tg.final_texts(75)[-1], 60, 0.05, "the answer")
            answer = tg.messages(75)[0]["message_id"]
            question = next(m for m in tg.messages(75, incoming=True) if not m["outgoing"])["message_id"]

            async def rows():
                async with await Store.open(gw.state / "gateway.db") as store:
                    key = (await store.ledger.list())[0].session_key
                    return await store.feedback.of_session(key), await store.feedback.counts()
            tg.inject_reaction(75, answer, ["👍"])
            wait_for(lambda: asyncio.run(rows())[0], 30, 0.1, "the reaction in storage")
            tg.inject_reaction(75, answer, ["👎"], old=["👍"])
            tg.inject_reaction(75, question, ["🔥"])          # on the user's own message: kept, tied to no reply
            wait_for(lambda: asyncio.run(rows())[1] == {"👎": 1, "🔥": 1}, 30, 0.1, "the later reactions")
            (row,) = asyncio.run(rows())[0]
            assert row.emoji == ["👎"] and row.message_id == str(answer) and row.obligation_id
            assert "message_reaction" in tg.read(lambda s: s["allowed_updates"])
        finally:
            gw.cli("stop")
            gw.kill_everything()
