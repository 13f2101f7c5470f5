"""Voice replies through the real daemon: a profile with ``voice_replies = true`` answers a Telegram voice note with
its text, then a voice note (the fake Bot API's ``sendVoice``) the fake OpenAI-compatible server's ``/audio/speech``
spoke; a speech service that answers 500 costs the voice note only, and a typed message is not spoken."""
from __future__ import annotations

import os
import signal

import pytest

from actors.adapters.pacing import DEFAULT_RESENT_MARKER

from tests.actor_system import wait_for
from tests.fakes.openai_server import OGG_OPUS, FakeOpenAIServer, text_reply
from tests.fakes.telegram import FakeTelegram
from tests.pipeline.harness import telegram_gateway
from tests.pipeline.test_telegram_e2e import ledger_busy, start_after_kill

pytestmark = pytest.mark.timeout(240)
VOICE_NOTE = OGG_OPUS + b"\x00" * 64   # what the user recorded (the fake transcribes any bytes)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with FakeTelegram() as tg, FakeOpenAIServer() as model:
        gw = telegram_gateway(tmp_path_factory.mktemp("gw"), tg.base_url, extra=f"""kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"

[media]
transcription_url = "{model.base_url}"
speech_url = "{model.base_url}"
speech_voice = "nova"

[profiles.default]
voice_replies = true
""")
        gw.start()
        gw.wait_ready()
        try:
            yield gw, tg, model
        finally:
            tg.release_answers()
            gw.cli("stop")
            gw.kill_everything()


def settled(tg: FakeTelegram, chat_id: int, gw, what: str) -> list[dict]:
    """The chat's write calls once its reply is delivered (no obligation open, no cursor left)."""
    def done():
        shown = [m for m in tg.messages(chat_id) if not m["deleted"]]
        return shown and ledger_busy(gw) == 0 and all("▍" not in m["text"] for m in shown) and shown
    try:
        wait_for(done, 90, 0.1, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nops: {[o['method'] for o in tg.ops(chat_id)]}\n"
                             + "\n".join(gw.log().splitlines()[-30:])) from None
    return [o for o in tg.ops(chat_id) if o["method"] in ("sendMessage", "editMessageText", "sendVoice")]


def send_voice_note(tg: FakeTelegram, chat_id: int) -> None:
    tg.inject_media("voice", tg.add_file(VOICE_NOTE, mime_type="audio/ogg", duration=2), chat_id=chat_id)


def test_a_voice_note_is_answered_with_the_text_then_a_voice_note(rig):
    gw, tg, model = rig
    model.script(text_reply("The shop opens at nine."))
    send_voice_note(tg, 81)
    calls = settled(tg, 81, gw, "the text and the voice note")
    methods = [c["method"] for c in calls]
    assert methods[0] == "sendMessage" and methods[-1] == "sendVoice" and methods.count("sendVoice") == 1, methods
    assert all(c["status"] == 200 for c in calls), calls
    (speech,) = model.speeches
    assert speech["input"] == "The shop opens at nine." and speech["voice"] == "nova", speech
    assert (speech["model"], speech["response_format"]) == ("tts-1", "opus"), speech
    (upload,) = [u for u in tg.uploads if u["chat_id"] == 81]
    assert (upload["kind"], upload["data"], upload["filename"]) == ("voice", OGG_OPUS, "voice.ogg"), upload
    text, voice = [m for m in tg.messages(81) if not m["deleted"]]
    assert text["text"] == "The shop opens at nine." and not text.get("media")
    assert voice["media"]["voice"]["mime_type"] == "audio/ogg", voice


def test_a_failing_speech_service_still_delivers_the_text_and_no_voice(rig):
    gw, tg, model = rig
    model.speech_status = 500
    try:
        model.script(text_reply("Closed on Sundays."))
        send_voice_note(tg, 82)
        calls = settled(tg, 82, gw, "the text without a voice note")
        assert "sendVoice" not in [c["method"] for c in calls], calls
        assert tg.final_texts(82) == ["Closed on Sundays."]
        assert model.speeches[-1]["input"] == "Closed on Sundays."   # it was asked, and failed
        gw.wait_log("no voice note for this answer: the speech service answered 500")
    finally:
        model.speech_status = 200


def test_a_typed_message_is_not_spoken(rig):
    gw, tg, model = rig
    asked = len(model.speeches)
    model.script(text_reply("Typed answer."))
    tg.inject_message("what time is it", 83)
    calls = settled(tg, 83, gw, "the typed answer")
    assert "sendVoice" not in [c["method"] for c in calls] and len(model.speeches) == asked


def test_a_kill_9_while_the_voice_note_is_sent_leaves_one_text_and_at_most_one_marked_copy(rig):
    """The voice note is a part of the reply in the ledger: after a kill -9 between its upload and its message id
    being recorded, the restarted daemon finishes the same reply from the stored audio, without speaking again."""
    gw, tg, model = rig
    model.script(text_reply("See you at nine."))
    asked = len(model.speeches)
    tg.hold_answers("sendVoice")
    send_voice_note(tg, 84)
    wait_for(lambda: [u for u in tg.uploads if u["chat_id"] == 84], 60, 0.05, "the voice note's upload")
    os.kill(gw.launcher_pid, signal.SIGKILL)   # kill -9: the launcher takes its whole tree with it
    gw.assert_no_process_left(timeout=30)
    tg.release_answers()
    start_after_kill(gw)
    gw.wait_ready()
    settled(tg, 84, gw, "the reply finished after the restart")
    voices = [u for u in tg.uploads if u["chat_id"] == 84]
    assert 1 <= len(voices) <= 2 and all(u["kind"] == "voice" and u["data"] == OGG_OPUS for u in voices), voices
    texts = [m["text"] for m in tg.messages(84) if not m["deleted"] and not m.get("media")]
    assert len(texts) == 1 and texts[0].endswith("See you at nine."), texts   # the text part once
    if len(voices) == 2:   # the copy whose answer was lost may be in the chat: the reply says so on top
        assert texts[0].startswith(DEFAULT_RESENT_MARKER), texts
    assert len(model.speeches) == asked + 1, "the stored audio is sent again, not spoken again"
