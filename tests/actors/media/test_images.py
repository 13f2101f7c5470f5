"""Images for the model: measured without decoding, bombs refused, everything re-encoded and bounded."""
from __future__ import annotations

import io
import time

import pytest
from PIL import Image

from actors.media.images import ImageRefused, for_model, image_size
from tests.actors.media.fixtures import jpeg, pixel_bomb, png, polyglot, zip_bomb


def test_a_small_image_is_re_encoded_at_its_size():
    mime, data = for_model(png(640, 480))
    assert mime == "image/png" and Image.open(io.BytesIO(data)).size == (640, 480)


def test_a_large_image_is_downscaled_to_the_long_side():
    mime, data = for_model(jpeg(4000, 1000), long_side=1568)
    assert mime == "image/jpeg" and Image.open(io.BytesIO(data)).size == (1568, 392)


def test_a_polyglot_comes_out_as_a_plain_image_without_its_html_tail():
    mime, data = for_model(polyglot())
    assert mime == "image/png" and b"<script" not in data and b"<html" not in data


def test_an_image_just_over_the_pixel_budget_is_refused_before_decoding():
    bomb = pixel_bomb(8000, 7000)                # 56 MP: over MAX_PIXELS, under Pillow's hard stop at twice that
    assert image_size(bomb) == (8000, 7000)
    with pytest.raises(ImageRefused, match="pixels"):
        for_model(bomb)


def test_a_pixel_bomb_is_refused_before_decoding():
    bomb = pixel_bomb()
    assert len(bomb) < 2000
    assert image_size(bomb) is None              # Pillow's own bound refuses it at the header already
    started = time.monotonic()
    with pytest.raises(ImageRefused, match="pixels"):
        for_model(bomb)
    assert time.monotonic() - started < 1.0   # nothing was decoded


@pytest.mark.parametrize("data", [zip_bomb(), b"\x89PNG\r\n\x1a\n truncated", b"not an image"],
                         ids=["zip bomb", "truncated png", "text"])
def test_what_is_no_readable_image_is_refused(data):
    with pytest.raises(ImageRefused):
        for_model(data)
