"""What the model is shown of attachments (actors/media/parts.py through turn.model_messages), and the offline
agent's answer about them."""
from __future__ import annotations

import asyncio
import base64
import io

from PIL import Image

from actors.adapters.media_intake import cached
from actors.agents.base import AgentRequest
from actors.agents.offline import OfflineAgent
from actors.messages import Attachment, MessageEvent, Source, TurnEnd
from actors.sessions import turn as turns
from storage import MediaCache, TranscriptEvent
from tests.actors.media.fixtures import OGG_VOICE, pixel_bomb, png, polyglot


def transcript_of(cache: MediaCache, *files: tuple, text: str = "look", turn_id: str = "t1") -> list:
    """One user message carrying ``files`` ((kind, bytes, name) each), as the session writes it."""
    attachments = tuple(cached(Attachment(kind=kind, name=name), data, cache.put(data)) for kind, data, name in files)
    event = MessageEvent(Source("telegram", "1"), text, "1:1", 0.0, attachments=attachments)
    e = turns.user_event(turn_id, event, 1)
    return [TranscriptEvent(e["role"], e["kind"], e["payload"], turn_id, None, 1)]


def test_a_photo_becomes_a_line_and_a_bounded_image_part(tmp_path):
    cache = MediaCache(tmp_path)
    (message,) = turns.model_messages(transcript_of(cache, ("photo", png(3000, 2000), "")), "", cache, "t1")
    text, line, image = message["content"]
    assert text == {"type": "text", "text": "look"}
    assert line["text"].startswith("[attachment: photo (PNG, 3000×2000,")
    url = image["image_url"]["url"]
    assert image["type"] == "image_url" and url.startswith("data:image/png;base64,")
    shown = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert max(shown.size) == 1568


def test_a_text_document_is_given_as_text_and_other_kinds_are_described(tmp_path):
    cache = MediaCache(tmp_path)
    files = (("document", b"name,qty\nbolts,12\n", "stock.csv"), ("voice", OGG_VOICE, ""))
    (message,) = turns.model_messages(transcript_of(cache, *files), "", cache, "t1")
    texts = [p["text"] for p in message["content"]]
    assert texts[1].startswith("[attachment: document (text/csv,") and "“stock.csv”" in texts[1]
    assert texts[2] == "name,qty\nbolts,12\n"
    assert texts[3].startswith("[attachment: voice note (audio/ogg,") and "no transcription configured" in texts[3]


def test_older_turns_keep_only_their_lines(tmp_path):
    cache = MediaCache(tmp_path)
    (message,) = turns.model_messages(transcript_of(cache, ("photo", png(), "")), "", cache, "a-later-turn")
    assert [p["type"] for p in message["content"]] == ["text", "text"]


def test_hostile_images_are_described_not_shown(tmp_path):
    cache = MediaCache(tmp_path)
    (message,) = turns.model_messages(transcript_of(cache, ("photo", pixel_bomb(), "x.png"),
                                                    ("photo", polyglot(), "y.png")), "", cache, "t1")
    kinds = [p["type"] for p in message["content"]]
    assert kinds == ["text", "text", "text", "image_url"]     # the bomb: a line only; the polyglot: re-encoded
    assert "not shown" in message["content"][1]["text"]
    shown = base64.b64decode(message["content"][3]["image_url"]["url"].split(",", 1)[1])
    assert b"<script" not in shown


def test_an_attachment_that_could_not_be_fetched_is_a_note(tmp_path):
    event = MessageEvent(Source("telegram", "1"), "", "1:1", 0.0,
                         attachments=(Attachment(kind="voice", state="unavailable"),))
    e = turns.user_event("t1", event, 1)
    (message,) = turns.model_messages([TranscriptEvent("user", "message", e["payload"], "t1", None, 1)], "",
                                      MediaCache(tmp_path), "t1")
    assert "could not be fetched" in message["content"][0]["text"]


def test_the_offline_agent_answers_about_a_photo(tmp_path):
    cache = MediaCache(tmp_path)
    messages = turns.model_messages(transcript_of(cache, ("photo", png(640, 480), ""), text="what is it?"), "",
                                    cache, "t1")

    async def answer():
        events = [e async for e in OfflineAgent(chunk_delay_s=0).run(AgentRequest(messages))]
        return next(e for e in events if isinstance(e, TurnEnd)).final_text
    text = asyncio.run(answer())
    assert text.startswith("You sent a photo (PNG, 640×480, ") and 'With it you said: "what is it?"' in text


def test_a_file_sent_while_a_turn_steers_reaches_it_as_its_line():
    plain = MessageEvent(Source("telegram", "1"), "also this", "1:2", 0.0)
    assert turns.steer_item(plain) == "also this"
    photo = Attachment(kind="photo", state="cached", mime="image/png", size=2048, width=10, height=10)
    item = turns.steer_item(MessageEvent(Source("telegram", "1"), "", "1:3", 0.0, attachments=(photo,)))
    assert item["role"] == "user" and item["content"][0]["text"].startswith("[attachment: photo (PNG, 10×10, 2 KB)")
