"""Attachments fetched before their row is stored: retried, given up with a note, refused over the cap; and the
Telegram updates that carry them."""
from __future__ import annotations

import asyncio

import pytest

from actors.adapters import media_intake
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge, fetch_one, resolve_media
from actors.adapters.telegram.inbound import event_from_update, is_input
from actors.media.limits import MB
from actors.messages import Attachment
from storage import InboundItem, MediaCache
from tests.actors.media.fixtures import png

CAP = 20 * MB


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(media_intake, "MEDIA_BACKOFF_S", (0.001, 0.001))


def quiet(*_args):
    pass


def flaky(failures: int, data: bytes, error=ConnectionError("reset")):
    calls = []

    async def download(att, cap):
        calls.append(att.ref)
        if len(calls) <= failures:
            raise error
        return data
    return download, calls


def test_a_download_that_fails_is_retried_and_cached(tmp_path):
    cache = MediaCache(tmp_path)
    download, calls = flaky(2, png(640, 480))
    att = asyncio.run(fetch_one(Attachment(kind="photo", ref="F1"), download, cache, CAP, quiet))
    assert len(calls) == 3 and att.state == "cached" and cache.read(att.cache_key) == png(640, 480)
    assert (att.mime, att.width, att.height, att.name) == ("image/png", 640, 480, "photo.png")


def test_after_the_last_try_the_attachment_is_unavailable(tmp_path):
    download, calls = flaky(99, b"")
    att = asyncio.run(fetch_one(Attachment(kind="voice", ref="F1"), download, MediaCache(tmp_path), CAP, quiet))
    assert len(calls) == media_intake.MEDIA_TRIES and att.state == "unavailable" and not att.cache_key


def test_a_file_the_platform_will_never_give_is_not_tried_again(tmp_path):
    download, calls = flaky(99, b"", AttachmentGone("expired"))
    att = asyncio.run(fetch_one(Attachment(kind="document", ref="F1"), download, MediaCache(tmp_path), CAP, quiet))
    assert len(calls) == 1 and att.state == "unavailable"


@pytest.mark.parametrize("declared, error", [(25 * MB, None), (0, AttachmentTooLarge(21 * MB, CAP))])
def test_over_the_cap_nothing_is_cached(tmp_path, declared, error):
    download, calls = flaky(99 if error else 0, b"x", error or ConnectionError())
    att = asyncio.run(fetch_one(Attachment(kind="document", ref="F1", size=declared), download,
                                MediaCache(tmp_path), CAP, quiet))
    assert att.state == "too_large" and len(calls) == (1 if error else 0)
    assert MediaCache(tmp_path).stats().files == 0


def test_a_row_over_the_cap_is_left_out_and_its_sender_told(tmp_path):
    told = []
    big = InboundItem("k", "tg", "1:1", {"source": {"chat_id": "7"}, "text": "",
                                         "attachments": [vars(Attachment(kind="document", ref="F", size=25 * MB))]})
    plain = InboundItem("k", "tg", "1:2", {"source": {"chat_id": "7"}, "text": "hi"})
    download, _ = flaky(0, b"")
    out = asyncio.run(resolve_media([big, plain], "telegram", download, MediaCache(tmp_path), quiet,
                                    lambda source, text: told.append((source["chat_id"], text))))
    assert out == [None, plain]
    assert told == [("7", "That file is 25 MB; I can take files up to 20 MB, so I did not open it. "
                          "Please send a smaller one.")]


def _update(**message):
    return {"update_id": 1, "message": {"message_id": 5, "chat": {"id": 7, "type": "private"}, "date": 1, **message}}


def test_telegram_media_updates_become_pending_attachments():
    sizes = [{"file_id": f"P{n}", "file_size": n * 1000, "width": n * 10, "height": n * 10} for n in (1, 3, 2)]
    photo = _update(photo=sizes, caption="my cat")
    assert is_input(photo) and not is_input(_update(sticker={"file_id": "S"}))
    event = event_from_update(photo, "tg", "default")
    (att,) = event.attachments
    assert event.text == "my cat" and (att.kind, att.ref, att.state, att.width) == ("photo", "P3", "pending", 30)
    doc = event_from_update(_update(document={"file_id": "D", "file_name": "../x.pdf", "file_size": 9,
                                              "mime_type": "image/png"}), "tg", "default")
    assert doc.text == "" and doc.attachments[0].name == "../x.pdf"   # cleaned once the bytes are in
    assert doc.attachments[0].mime == ""                              # the platform's claim is not kept
    voice = event_from_update(_update(voice={"file_id": "V", "duration": 12}), "tg", "default")
    assert (voice.attachments[0].kind, voice.attachments[0].duration_s) == ("voice", 12)


def test_the_largest_photo_size_within_the_cap_is_taken():
    sizes = [{"file_id": "small", "file_size": 1000}, {"file_id": "huge", "file_size": 30 * MB}]
    assert event_from_update(_update(photo=sizes), "tg", "default").attachments[0].ref == "small"
