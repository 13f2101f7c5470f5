"""The type of a file comes from its bytes; a name or a platform's claim never makes it something it is not."""
from __future__ import annotations

import pytest

from actors.media.sniff import RASTER, is_textual, short_type, sniff
from tests.actors.media.fixtures import OGG_VOICE, jpeg, pixel_bomb, png, polyglot, zip_bomb


@pytest.mark.parametrize("data, name, expected", [
    (png(), "", "image/png"),
    (jpeg(), "photo.png", "image/jpeg"),                   # the name lies: the bytes win
    (b"GIF89a" + b"\x00" * 20, "", "image/gif"),
    (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "", "image/webp"),
    (b"%PDF-1.7\n...", "notes.txt", "application/pdf"),
    (OGG_VOICE, "", "audio/ogg"),
    (b"\x00\x00\x00\x18ftypisom" + b"\x00" * 16, "", "video/mp4"),
    (b"\x00\x00\x00\x18ftypM4A " + b"\x00" * 16, "", "audio/mp4"),
    (b"ID3\x04" + b"\x00" * 30, "", "audio/mpeg"),
    (b"\x7fELF\x02\x01", "cute.jpg", "application/x-executable"),
    (b"MZ\x90\x00", "invoice.pdf", "application/x-msdownload"),
    (b"hello there\n", "", "text/plain"),
    (b"a,b\n1,2\n", "table.csv", "text/csv"),
    (b"# Title\n\ntext", "README.md", "text/markdown"),
    (b'{"a": [1, 2]}', "", "application/json"),
    (b"<!DOCTYPE html><html><script>x()</script>", "photo.png", "text/html"),
    (b"<?xml version='1.0'?><svg onload='x()'/>", "logo.png", "image/svg+xml"),
    (bytes(range(256)) * 4, "photo.png", "application/octet-stream"),
    ("Grüße, 日本".encode() * 2000, "", "text/plain"),   # a multi-byte character cut by the sample is still text
])
def test_sniff(data, name, expected):
    assert sniff(data, name) == expected


def test_hostile_files_are_what_their_bytes_say():
    assert sniff(polyglot(), "page.html") == "image/png"         # decoded as an image only, then re-encoded
    assert sniff(zip_bomb(), "bomb.png") == "application/zip"    # never an image, never unpacked
    assert sniff(pixel_bomb(), "") == "image/png"                # measured before decoding (test_images.py)


def test_svg_is_text_never_a_raster_image():
    assert "image/svg+xml" not in RASTER and is_textual("image/svg+xml")
    assert not is_textual("application/octet-stream") and is_textual("text/csv")


def test_short_type():
    assert [short_type(m) for m in ("image/png", "image/jpeg", "audio/ogg", "image/svg+xml")] == \
        ["PNG", "JPEG", "OGG", "SVG"]
