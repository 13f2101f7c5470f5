"""The ``text_image`` tool: a short text drawn on a card, sent to the chat as a PNG.

It is what shows the outbound file path working on the embedded defaults (the offline agent calls it when asked
for a picture), and a model can use it for a sign, a quote card or a label. Drawing is Pillow's, with its built-in
font (no font file to ship or find); the text and the picture are bounded, so no argument can make it costly.
"""
from __future__ import annotations

import io
import textwrap

from PIL import Image, ImageDraw, ImageFont

from actors.media.outgoing import ToolFile, ToolOutput

MAX_TEXT_CHARS = 280
WIDTH, MARGIN, FONT_PX, LINE_CHARS = 800, 48, 36, 36
BACKGROUND, FOREGROUND = (246, 243, 236), (32, 36, 48)


def draw_card(text: str) -> bytes:
    """A PNG of ``text`` wrapped on a light card."""
    lines = textwrap.wrap(" ".join(text.split()), LINE_CHARS) or [""]
    font = ImageFont.load_default(size=FONT_PX)
    line_px = int(FONT_PX * 1.35)
    height = 2 * MARGIN + line_px * len(lines)
    image = Image.new("RGB", (WIDTH, height), BACKGROUND)
    pen = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        pen.text((MARGIN, MARGIN + row * line_px), line, font=font, fill=FOREGROUND)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def text_image(arguments: dict):
    text = arguments.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("'text' (a non-empty string) is required")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"'text' is longer than {MAX_TEXT_CHARS} characters")
    caption = arguments.get("caption") if isinstance(arguments.get("caption"), str) else ""
    return ToolOutput("drew the card", (ToolFile(draw_card(text), "card.png", caption),))
