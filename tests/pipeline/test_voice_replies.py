"""Voice replies through the real daemon: a profile with ``voice_replies = true`` answers a Telegram voice note with
its text, then a voice note (the fake Bot API's ``sendVoice``) the fake OpenAI-compatible server's ``/audio/speech``
spoke; a speech service that answers 500 costs the voice note only, and a typed message is not spoken. The same
daemon answers a Signal voice note (the fake signal-cli's ``send`` with the audio attached and ``voiceNote``) and a
web chat visitor's recording (a send op naming the audio, served for the page's player) the same way."""
from __future__ import annotations

import asyncio
import base64
import os
import signal

import aiohttp
import pytest

from actors.adapters.pacing import DEFAULT_RESENT_MARKER

from tests.actor_system import wait_for
from tests.fakes.openai_server import OGG_OPUS, FakeOpenAIServer, text_reply
from tests.fakes.signal import ACCOUNT, ACCOUNT_UUID, DEFAULT_USER_UUID, FakeSignalCli
from tests.fakes.telegram import FakeTelegram
from tests.pipeline.harness import telegram_gateway
from tests.pipeline.test_telegram_e2e import ledger_busy, start_after_kill
from tests.webchat.client import WebChatClient, issued_cookie
from tests.webchat.helpers import served_port

pytestmark = pytest.mark.timeout(240)
VOICE_NOTE = OGG_OPUS + b"\x00" * 64   # what the user recorded (the fake transcribes any bytes)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with FakeTelegram() as tg, FakeOpenAIServer() as model, FakeSignalCli(keepalive_interval=0.2) as sc:
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

[adapters.signal]
type = "signal"
access = "open"
account = "{ACCOUNT}"
account_uuid = "{ACCOUNT_UUID}"
base_url = "{sc.base_url}"

[adapters.web]
type = "webchat"
port = 0
""")
        gw.start()
        gw.wait_ready()
        try:
            yield gw, tg, model, sc
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
    gw, tg, model, _ = rig
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
    gw, tg, model, _ = rig
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
    gw, tg, model, _ = rig
    asked = len(model.speeches)
    model.script(text_reply("Typed answer."))
    tg.inject_message("what time is it", 83)
    calls = settled(tg, 83, gw, "the typed answer")
    assert "sendVoice" not in [c["method"] for c in calls] and len(model.speeches) == asked


def test_a_signal_voice_note_is_answered_with_the_text_then_a_voice_note(rig):
    """Signal: the recording (an unnamed audio attachment) is transcribed; the answer goes as text, then as one
    ``send`` carrying the spoken audio as a data URI with the ``voiceNote`` flag."""
    gw, _, model, sc = rig
    model.script(text_reply("The pool opens at ten."))
    asked = len(model.speeches)
    sc.inject_message(attachments=(("audio/aac", VOICE_NOTE, None),))

    def both():
        shown = [m for m in sc.messages(DEFAULT_USER_UUID) if not m["deleted"]]
        return len(shown) >= 2 and ledger_busy(gw) == 0 and shown
    try:
        text, voice = wait_for(both, 90, 0.1, "the Signal text and voice note")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nsent: {sc.messages(DEFAULT_USER_UUID)}\n"
                             + "\n".join(gw.log().splitlines()[-30:])) from None
    assert text["text"] == "The pool opens at ten." and not text["voice_note"] and not text["attachments"], text
    (audio,) = voice["attachments"]
    assert voice["voice_note"] and voice["text"] == "", voice
    assert (audio["contentType"], audio["filename"]) == ("audio/ogg", "voice.ogg"), audio
    assert base64.b64decode(audio["base64"]) == OGG_OPUS
    assert len(model.speeches) == asked + 1 and model.speeches[-1]["input"] == "The pool opens at ten."
    assert len(sc.messages(DEFAULT_USER_UUID)) == 2, "one text, one voice note"


def test_a_web_chat_recording_is_answered_with_the_text_then_a_player_of_the_voice_note(rig):
    """The web chat: an uploaded recording is a voice note; the answer's text, then a send op whose file is a
    voice note the page plays from /media/KEY (served to this visitor only, as audio); the history shows it too."""
    gw, _, model, _ = rig
    base = f"http://127.0.0.1:{served_port(gw)}"
    client = WebChatClient(base)
    try:
        visitor = "voice-visitor"
        client.id_of(visitor)

        async def upload():
            async with aiohttp.ClientSession() as session:
                form = aiohttp.FormData()
                form.add_field("file", VOICE_NOTE, filename="recording.ogg", content_type="audio/ogg")
                async with session.post(f"{base}/upload", data=form,
                                        headers=await issued_cookie(session, base, visitor)) as response:
                    return response.status, await response.json()

        async def fetch(url, name):
            async with aiohttp.ClientSession() as session:
                headers = await issued_cookie(session, base, name)
                async with session.get(f"{base}/{url}", headers=headers) as response:
                    return response.status, response.headers.get("Content-Type"), await response.read()

        def run(coro):
            return asyncio.run(coro)
        status, uploaded = run(upload())
        assert status == 200 and uploaded["kind"] == "voice", uploaded
        model.script(text_reply("The library closes at six."))
        client.say(visitor, "spoken-1", "", files=[uploaded["file"]])
        frames = client.visitor(visitor).frames

        def voice_op():
            sends = [f for f in frames if f.get("type") == "op" and f.get("action") == "send"]
            return [f for f in sends if f.get("file")] and sends
        try:
            sends = wait_for(voice_op, 90, 0.1, "the web chat's voice note op")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nframes: {frames[-10:]}\n"
                                 + "\n".join(gw.log().splitlines()[-30:])) from None
        (voice,) = [f for f in sends if f.get("file")]
        assert sends.index(voice) > 0 and voice["file"]["kind"] == "voice", sends
        assert voice["file"]["mime"] == "audio/ogg", voice
        status, mime, body = run(fetch(voice["file"]["url"], visitor))
        assert (status, mime, body) == (200, "audio/ogg", OGG_OPUS)
        assert run(fetch(voice["file"]["url"], "someone-else"))[0] == 404   # another visitor's chat: not served

        def in_history():
            history = client.request(visitor, {"type": "history"})
            return not history["live"] and [m for m in history["messages"] if m.get("file")]
        shown = wait_for(in_history, 60, 0.2, "the voice note in the history")
        assert [m["file"]["kind"] for m in shown] == ["voice"] and shown[0]["file"]["url"] == voice["file"]["url"]
    finally:
        client.close()


def test_a_kill_9_while_the_voice_note_is_sent_leaves_one_text_and_at_most_one_marked_copy(rig):
    """The voice note is a part of the reply in the ledger: after a kill -9 between its upload and its message id
    being recorded, the restarted daemon finishes the same reply from the stored audio, without speaking again."""
    gw, tg, model, _ = rig
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
