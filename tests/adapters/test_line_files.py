"""LINE's files out, pure: what each file becomes (an image, video or audio message, or a refusal that says why), an
m4a's length read from its movie header, the served files' tokens, names, expiry and bounds, and ``public_url`` as
the table's switch for files. In the daemon, against the fake LINE fetching them back: tests/adapters/test_line.py
and the conformance suite's file case."""
from __future__ import annotations

import io
import os
import struct

import pytest
from PIL import Image

from actors.adapters.errors import PermanentError
from actors.adapters.line.adapter import LineAdapter
from actors.adapters.line.media import (IMAGE_LIMIT, PREVIEW_LIMIT, ServedMedia, media_key, media_token, media_url,
                                        message_for, mp4_duration_ms)
from actors.media.sniff import sniff
from tests.actors.media.fixtures import png
from tests.fakes.line import DEFAULT_ACCESS_TOKEN, DEFAULT_CHANNEL_SECRET

pytestmark = pytest.mark.timeout(60)


def box(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(body), kind) + body


def mp4(brand: bytes, duration: int = 2500, timescale: int = 1000, version: int = 0) -> bytes:
    """An MP4 file's boxes as a tool would hand them over: ``ftyp`` (``M4A ``: audio), ``moov``/``mvhd`` stating
    the length, and a little ``mdat``."""
    if version == 1:
        header = struct.pack(">B3xQQIQ", 1, 0, 0, timescale, duration)
    else:
        header = struct.pack(">B3xIIII", 0, 0, 0, timescale, duration)
    return (box(b"ftyp", brand + b"\x00\x00\x02\x00" + brand) + box(b"moov", box(b"mvhd", header + bytes(80)))
            + box(b"mdat", b"\x00" * 64))


def test_a_file_becomes_the_line_message_of_its_kind_or_is_refused_saying_why():
    small = png(48, 32)
    image = message_for("photo", "image/png", "dot.png", small)
    assert (image.type, image.original, image.preview) == ("image", (small, "image/png"), None)
    noisy = Image.frombytes("RGB", (900, 900), os.urandom(900 * 900 * 3))
    big = io.BytesIO()
    noisy.save(big, "PNG")
    assert PREVIEW_LIMIT < big.tell() <= IMAGE_LIMIT
    preview = message_for("photo", "image/png", "noise.png", big.getvalue()).preview
    assert preview[1] in ("image/png", "image/jpeg") and len(preview[0]) <= PREVIEW_LIMIT
    assert max(Image.open(io.BytesIO(preview[0])).size) <= 240
    audio = message_for("document", sniff(mp4(b"M4A ")), "hello.m4a", mp4(b"M4A "))
    assert (audio.type, audio.duration_ms, audio.preview) == ("audio", 2500, None)
    video = message_for("document", sniff(mp4(b"isom")), "clip.mp4", mp4(b"isom"))
    assert video.type == "video" and video.preview[1] == "image/png"
    assert Image.open(io.BytesIO(video.preview[0])).size == (240, 240)
    for kind, mime, data, reason in [
            ("document", "application/pdf", b"%PDF-1.7", "no message a bot can send a application/pdf file"),
            ("photo", "image/gif", b"GIF89a", "JPEG and PNG images only"),
            ("photo", "image/png", b"x" * (IMAGE_LIMIT + 1), "LINE shows images up to 10 MB"),
            ("document", "audio/mp4", box(b"ftyp", b"M4A ") + box(b"mdat", b""), "states no length")]:
        with pytest.raises(PermanentError, match=reason):
            message_for(kind, mime, "f", data)


def test_the_length_of_an_m4a_is_read_from_its_movie_header_and_nothing_past_its_bytes():
    assert mp4_duration_ms(mp4(b"M4A ", duration=44100 * 3, timescale=44100)) == 3000
    assert mp4_duration_ms(mp4(b"M4A ", duration=2 ** 33, timescale=1000, version=1)) == 2 ** 33
    whole = mp4(b"M4A ")
    for cut in (whole[:30], whole[:60], b"", box(b"moov", b"") , struct.pack(">I4s", 4000, b"moov") + bytes(40)):
        assert mp4_duration_ms(cut) is None
    assert mp4_duration_ms(mp4(b"M4A ", timescale=0)) is None


def test_served_files_answer_only_their_token_and_name_until_they_expire_within_their_bounds():
    media = ServedMedia(ttl_s=60.0, max_files=3, max_bytes=100)
    media.put("a", b"A" * 40, "image/png", "a.png", now=0.0)
    assert media.get("a", "a.png", now=59.0).data == b"A" * 40
    assert media.get("a", "b.png", now=1.0) is None and media.get("b", "a.png", now=1.0) is None
    assert media.get("a", "a.png", now=60.0) is None and len(media) == 0 and media.bytes == 0, "expired"
    for name in "bcd":
        media.put(name, b"x" * 10, "image/png", name, now=100.0)
    media.put("e", b"x" * 10, "image/png", "e", now=101.0)
    assert [n for n in "bcde" if media.get(n, n, now=102.0)] == ["c", "d", "e"], "past 3 files the oldest goes"
    media.put("f", b"y" * 90, "image/png", "f", now=103.0)
    assert [n for n in "cdef" if media.get(n, n, now=104.0)] == ["e", "f"] and media.bytes == 100
    media.put("e", b"z" * 5, "image/png", "e", now=105.0)
    assert media.bytes == 95, "the same token again replaces its file"


def test_a_files_url_is_https_under_the_public_url_with_a_token_only_the_channel_secret_makes():
    key = media_key(DEFAULT_CHANNEL_SECRET)
    token = media_token(key, "retry-1", "original")
    assert token == media_token(media_key(DEFAULT_CHANNEL_SECRET), "retry-1", "original"), "the same in every life"
    assert len({token, media_token(key, "retry-2", "original"), media_token(key, "retry-1", "preview"),
                media_token(media_key("another secret"), "retry-1", "original")}) == 4
    assert len(token) == 43 and token.replace("-", "").replace("_", "").isalnum()
    assert media_url("https://bot.example/", "/line/media", token, "a b.png") == \
        f"https://bot.example/line/media/{token}/a%20b.png"


def line_table(**options) -> dict:
    from actors.adapters import registry
    return registry.validate_adapter("ln", {"type": "line", "channel_secret": DEFAULT_CHANNEL_SECRET,
                                            "channel_access_token": DEFAULT_ACCESS_TOKEN, **options})


def test_files_go_out_only_where_the_table_names_an_https_public_url():
    from actors.adapters import registry
    from common.config import ConfigError
    assert registry.pacing_of(line_table()).sends_files is False
    assert registry.pacing_of(line_table(public_url="https://bot.example")).sends_files is True
    assert registry.pacing_of(line_table(public_url="https://bot.example",
                                         pacing={"sends_files": False})).sends_files is False
    for url in ("http://bot.example", "bot.example", "https://", "https://bot.example/?a=1", "https://u@bot.example"):
        with pytest.raises(ConfigError, match="public_url"):
            line_table(public_url=url)
    for path in ("line/media", "/line/webhook", "/line"):
        with pytest.raises(ConfigError, match="media_path"):
            line_table(public_url="https://bot.example", media_path=path)
    with pytest.raises(ConfigError, match="media_ttl_s"):
        line_table(media_ttl_s=10.0)
    adapter = LineAdapter()
    adapter.settings = line_table()
    assert "no public_url" in adapter.status_note(), "status says why the files are named in text"
    adapter.settings = line_table(public_url="https://bot.example")
    assert adapter.status_note() == ""
