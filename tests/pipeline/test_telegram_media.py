"""Telegram media in the real daemon, against the fake Bot API serving real file bytes (docs/media.md): a photo with a
caption, a document and a voice note each reach the model as the right part; hostile files (a polyglot, a zip named
.png, a lying MIME type, a path in the name) are stored under their hash and shown for what their bytes are; a 25 MB
document gets a clear reply and nothing is fetched or cached; a kill -9 while a photo downloads still gets the message
answered once."""
from __future__ import annotations

import base64
import os
import signal
import sqlite3
import stat

import pytest

from actors.media.limits import MB
from storage import MediaCache
from storage.media import valid_key
from tests.actor_system import wait_for
from tests.fakes.openai_server import FakeOpenAIServer, text_reply
from tests.fakes.telegram import FakeTelegram
from tests.actors.media.fixtures import OGG_VOICE, png, polyglot, zip_bomb
from tests.pipeline.harness import telegram_gateway
from tests.pipeline.test_telegram_e2e import settled_in, start_after_kill

pytestmark = pytest.mark.timeout(180)


def stop(gw) -> None:
    gw.cli("stop")
    gw.kill_everything()


def user_content(request) -> list:
    return [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]


def answer_in(tg: FakeTelegram, chat_id: int, gw) -> list[str]:
    try:
        return wait_for(lambda: settled_in(tg, chat_id), 60, 0.05, f"an answer in chat {chat_id}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n" + "\n".join(gw.log().splitlines()[-30:])) from None


def test_media_reaches_the_model_as_parts_hostile_files_stay_harmless_and_25_mb_is_refused(tmp_path):
    with FakeTelegram() as tg, FakeOpenAIServer() as model:
        model.script(text_reply("A red rectangle."), text_reply("Twelve bolts."), text_reply("I cannot listen."),
                     text_reply("A picture."), text_reply("An archive."))
        gw = telegram_gateway(tmp_path, tg.base_url, extra=f"""kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"
""")
        try:
            gw.start()
            gw.wait_ready()
            photo = tg.add_file(png(640, 480), width=640, height=480)
            thumb = tg.add_file(png(64, 48), width=64, height=48)
            tg.inject_media("photo", [thumb, photo], caption="what is this?", chat_id=51)
            assert answer_in(tg, 51, gw) == ["A red rectangle."]
            text, line, image = user_content(model.requests[-1])
            assert text == {"type": "text", "text": "what is this?"}
            assert line["text"].startswith("[attachment: photo (PNG, 640×480,")
            assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/png;base64,")

            # The platform says image/png; the bytes are CSV text, and that is what the model is given.
            doc = tg.add_file(b"item,qty\nbolts,12\n", file_name="../../stock.csv", mime_type="image/png")
            tg.inject_media("document", doc, chat_id=52)
            assert answer_in(tg, 52, gw) == ["Twelve bolts."]
            line, body = user_content(model.requests[-1])
            assert "text/csv" in line["text"] and "“stock.csv”" in line["text"]
            assert body["text"] == "item,qty\nbolts,12\n"

            voice = tg.add_file(OGG_VOICE, duration=12, mime_type="audio/ogg")
            tg.inject_media("voice", voice, chat_id=53)
            assert answer_in(tg, 53, gw) == ["I cannot listen."]
            (line,) = user_content(model.requests[-1])
            assert line["text"].startswith("[attachment: voice note (12 s, audio/ogg,")
            assert "no transcription configured" in line["text"]

            # Hostile files: a PNG that is also an HTML page, and a zip named like an image.
            tg.inject_media("photo", [tg.add_file(polyglot(), width=64, height=48)], chat_id=55)
            assert answer_in(tg, 55, gw) == ["A picture."]
            line, image = user_content(model.requests[-1])
            shown = base64.b64decode(image["image_url"]["url"].split(",", 1)[1])
            assert shown.startswith(b"\x89PNG") and b"<script" not in shown   # re-encoded from its pixels
            tg.inject_media("document", tg.add_file(zip_bomb(), file_name="bomb.png", mime_type="image/png"),
                            chat_id=56)
            assert answer_in(tg, 56, gw) == ["An archive."]
            (line,) = user_content(model.requests[-1])
            assert "application/zip" in line["text"] and "“bomb.png”" in line["text"]

            cache = MediaCache(gw.state / "media")
            files_before, requests_before = cache.stats().files, len(model.requests)
            assert files_before == 5    # the photo taken (not its thumbnail), the document, the voice, the hostile two
            assert all(valid_key(p.name) for p in (gw.state / "media").rglob("*") if p.is_file())   # hashes only
            big = tg.add_file(b"\0" * (25 * MB), file_name="big.pdf")
            tg.inject_media("document", big, chat_id=54)
            assert answer_in(tg, 54, gw) == ["“big.pdf” is 25 MB; I can take files up to 20 MB, so I did not open "
                                             "it. Please send a smaller one."]
            assert not [d for d in tg.downloads if d["path"] == tg.files[big["file_id"]]["path"]]
            assert cache.stats().files == files_before and len(model.requests) == requests_before
            for path in (gw.state / "media").rglob("*"):
                assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
        finally:
            stop(gw)


def test_a_kill_9_mid_download_still_answers_the_photo_once(tmp_path):
    with FakeTelegram() as tg:
        gw = telegram_gateway(tmp_path, tg.base_url)
        try:
            gw.start()
            gw.wait_ready()
            tg.hold_downloads()
            photo = tg.add_file(png(640, 480), width=640, height=480)
            tg.inject_media("photo", [photo], chat_id=61)
            wait_for(lambda: tg.downloads, 30, 0.05, "the gateway to start downloading the photo")
            os.kill(gw.launcher_pid, signal.SIGKILL)
            gw.assert_no_process_left()
            with sqlite3.connect(gw.state / "gateway.db") as db:   # nothing stored, nothing acknowledged
                assert db.execute("SELECT count(*) FROM inbox").fetchone()[0] == 0
            assert tg.pending_updates(), "the update was acknowledged before its file was fetched"
            tg.release_downloads()
            start_after_kill(gw)
            (answer,) = answer_in(tg, 61, gw)
            assert answer.startswith("You sent a photo (PNG, 640×480, ")
            assert len(tg.downloads) >= 2   # fetched again by the next life

            def inbox() -> tuple:
                with sqlite3.connect(gw.state / "gateway.db") as db:
                    return db.execute("SELECT count(*), min(state) FROM inbox").fetchone()
            wait_for(lambda: inbox() == (1, "done"), 30, 0.05, f"one inbox row, done (saw {inbox()})")
        finally:
            tg.release_downloads()
            stop(gw)


def test_a_voice_note_reaches_the_model_as_its_transcript_and_a_failed_transcription_says_why(tmp_path,
                                                                                             monkeypatch):
    monkeypatch.setenv("TRANSCRIBE_KEY", "sk-transcribe-0123456789abcdef")
    with FakeTelegram() as tg, FakeOpenAIServer() as model:
        model.script(text_reply("Heard you."), text_reply("Could not hear."))
        model.transcripts.append("please book a table for two")
        gw = telegram_gateway(tmp_path, tg.base_url, extra=f"""kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"
[media]
transcription_url = "{model.base_url}"
transcription_api_key_env = "TRANSCRIBE_KEY"
""")
        try:
            gw.start()
            gw.wait_ready()
            tg.inject_media("voice", tg.add_file(OGG_VOICE, duration=3, mime_type="audio/ogg"), chat_id=57)
            assert answer_in(tg, 57, gw) == ["Heard you."]
            (line,) = user_content(model.requests[-1])
            assert line["text"].startswith("[attachment: voice note (3 s, audio/ogg,")
            assert "transcript: “please book a table for two”" in line["text"]
            (sent,) = model.transcriptions
            assert sent["data"] == OGG_VOICE and sent["model"] == "whisper-1" and sent["content_type"] == "audio/ogg"
            assert sent["authorization"] == "Bearer sk-transcribe-0123456789abcdef"

            model.transcription_status = 500
            tg.inject_media("voice", tg.add_file(OGG_VOICE + b"\0", duration=4, mime_type="audio/ogg"), chat_id=58)
            assert answer_in(tg, 58, gw) == ["Could not hear."]
            (line,) = user_content(model.requests[-1])
            assert "not transcribed: the transcription service answered 500" in line["text"]
        finally:
            stop(gw)
