"""Images for the model, with Pillow: measured without decoding, decoded only within a pixel budget, and always
re-encoded before they leave.

Why always re-encode: the bytes a sender chose never reach the model service or anything else as they came. A
polyglot (a PNG whose tail is also an HTML page or a zip) comes out as a plain PNG of its pixels; metadata (EXIF,
with a phone's GPS position) is dropped; a huge photo is downscaled to ``IMAGE_LONG_SIDE`` on its long side.

Decompression bombs: ``Image.open`` reads only the header, so the claimed size is checked against ``MAX_PIXELS``
before a single pixel is decoded (a 1 KB PNG may claim 100,000 x 100,000 pixels, 40 GB once decoded); Pillow's own
``MAX_IMAGE_PIXELS`` is set to the same bound as a second line.
"""
from __future__ import annotations

import io
import warnings
from typing import Optional

from PIL import Image

from actors.media.limits import IMAGE_LONG_SIDE, IMAGE_MAX_BYTES, MAX_PIXELS

Image.MAX_IMAGE_PIXELS = MAX_PIXELS


class ImageRefused(ValueError):
    """The bytes are no image Pillow can read within the bounds; the reason is safe to show."""


def image_size(data: bytes) -> Optional[tuple[int, int]]:
    """(width, height) from the header, without decoding; None if the bytes are no image Pillow knows."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(data)) as image:
                return image.size
    except Exception:  # noqa: BLE001 - any reader error means "not an image we can measure"
        return None


def for_model(data: bytes, long_side: int = IMAGE_LONG_SIDE, max_bytes: int = IMAGE_MAX_BYTES) -> tuple[str, bytes]:
    """The image re-encoded for a model: (MIME type, bytes), PNG for a lossless source (PNG, GIF, BMP) or one with
    transparency unless that comes out too large, else JPEG,
    at most ``long_side`` px on its long side and about ``max_bytes``. Raises ImageRefused."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                if width * height > MAX_PIXELS:
                    raise ImageRefused(f"{width}×{height} pixels is more than the {MAX_PIXELS:,} I decode")
                image.seek(0)               # the first frame of an animation
                image.load()
                return _encode(image, long_side, max_bytes, lossless=image.format in ("PNG", "GIF", "BMP"))
    except ImageRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageRefused(f"the image claims too many pixels ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - a truncated or malformed file: refused, never half-decoded
        raise ImageRefused(f"the image could not be read ({type(exc).__name__})") from None


def _encode(image: Image.Image, long_side: int, max_bytes: int, lossless: bool) -> tuple[str, bytes]:
    if max(image.size) > long_side:
        image = image.copy()
        image.thumbnail((long_side, long_side), Image.LANCZOS)
    keeps_alpha = image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info)
    if keeps_alpha or lossless:
        png = io.BytesIO()
        image.convert("RGBA" if keeps_alpha else "RGB").save(png, "PNG", optimize=True)
        if png.tell() <= max_bytes:
            return "image/png", png.getvalue()
    rgb = image.convert("RGB")
    for quality in (85, 70, 50):
        out = io.BytesIO()
        rgb.save(out, "JPEG", quality=quality)
        if out.tell() <= max_bytes:
            break
    return "image/jpeg", out.getvalue()
