"""Voice replies' pure parts (actors/media/speech.py) and where a voice note goes in a reply (reply_files.py,
turn.py): when an answer is spoken, what is read aloud, what bytes become a voice note, and that a platform without
voice notes gets the text alone."""
from __future__ import annotations

import logging

import pytest

from actors.adapters.registry import pacing_for
from actors.media.speech import (SpeechFailed, Speaker, spoken_text, voice_event, voice_file, voice_reply,
                                 wants_voice_reply)
from actors.messages import OutgoingFile
from actors.sessions import turn as turns
from actors.sessions.reply_files import file_of, final_parts, is_file
from storage import MediaCache
from storage.sessions import TranscriptEvent
from tests.fakes.openai_server import OGG_OPUS

pytestmark = pytest.mark.timeout(30)
VOICE = {"kind": "voice", "cache_key": "k", "state": "cached"}


def test_an_answer_is_spoken_only_for_a_voice_note_on_a_profile_and_platform_that_want_it():
    assert wants_voice_reply(True, [VOICE], True)
    assert not wants_voice_reply(False, [VOICE], True)
    assert not wants_voice_reply(True, [VOICE], False)
    assert not wants_voice_reply(True, [dict(VOICE, kind="audio"), {"kind": "photo"}], True)
    assert not wants_voice_reply(True, [], True)


def test_what_is_read_aloud_is_bounded_and_cut_at_a_word():
    assert spoken_text("  short  ", 100) == "short"
    long = "word " * 100
    cut = spoken_text(long, 42)
    assert len(cut) <= 43 and cut.endswith("word…"), cut


def test_only_audio_bytes_become_a_voice_note(tmp_path):
    cache = MediaCache(tmp_path)
    note = voice_file(cache, OGG_OPUS, "opus")
    assert (note.kind, note.mime, note.name, note.size) == ("voice", "audio/ogg", "voice.ogg", len(OGG_OPUS))
    assert cache.read(note.cache_key) == OGG_OPUS
    with pytest.raises(SpeechFailed, match="not audio"):
        voice_file(cache, b'{"error": "quota"}', "opus")


def test_an_unreachable_speech_service_gives_no_note_and_says_why(tmp_path, caplog):
    import asyncio
    speaker = Speaker("http://127.0.0.1:9/v1", "tts-1", "alloy", "opus", None, 2.0, 4096)
    with caplog.at_level(logging.WARNING):
        assert asyncio.run(voice_reply(speaker, "hello", MediaCache(tmp_path), logging.getLogger("t"))) is None
    assert "no voice note for this answer: the speech service could not be reached" in caplog.text


def test_a_voice_note_follows_the_text_where_the_platform_takes_one_and_is_left_out_elsewhere():
    note = OutgoingFile("k", "audio/ogg", kind="voice", name="voice.ogg", size=47)
    parts = final_parts("The answer.", [note], pacing_for("telegram"), len, 4000)
    assert parts[0] == "The answer." and is_file(parts[1]) and file_of(parts[1]).kind == "voice"
    assert final_parts("The answer.", [note], pacing_for("fake"), len, 4000) == ["The answer."]   # no "not sent" line


def test_a_platform_with_voice_notes_but_no_files_takes_the_voice_note_and_names_other_files():
    note = OutgoingFile("k", "audio/ogg", kind="voice", name="voice.ogg", size=47)
    card = OutgoingFile("c", "image/png", kind="photo", name="card.png", size=47)
    for platform in ("signal", "matrix"):
        pacing = pacing_for(platform)
        assert pacing.sends_voice and not pacing.sends_files, platform
        text, voice = final_parts("The answer.", [card, note], pacing, len, 4000)
        assert text.startswith("The answer.") and "card.png" in text and file_of(voice).kind == "voice", platform


def test_a_reply_recovered_after_a_crash_carries_the_turns_last_voice_note():
    first, second = (OutgoingFile(k, "audio/ogg", kind="voice", name="voice.ogg") for k in ("a", "b"))
    events = [TranscriptEvent(e["role"], e["kind"], e["payload"], e["turn_id"])
              for e in (voice_event("t1", first), voice_event("t1", second), voice_event("t2", first))]
    assert turns.turn_files(events, "t1") == (second,)
