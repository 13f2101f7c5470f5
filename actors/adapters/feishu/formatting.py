"""Status reactions as the open platform's emoji types (表情文案说明): pure.

A reaction names an ``emoji_type`` from the platform's own list (``THUMBSUP``, ``DONE``, ...), not a Unicode emoji.
The status reactions a profile configures are Unicode ("👀 👍"), so the common ones are looked up here; a profile
may also write the platform's name itself (``"OnIt"``), which goes as written."""
from __future__ import annotations

import re

EMOJI_TYPES = {"👍": "THUMBSUP", "👎": "ThumbsDown", "👌": "OK", "✅": "DONE", "🔥": "Fire", "👀": "GLANCE",
               "❤️": "HEART", "😊": "SMILE", "🎉": "PARTY", "👏": "APPLAUSE", "💪": "MUSCLE", "🙏": "THANKS",
               "🤔": "THINKING", "❌": "CrossMark", "⏳": "OneSecond", "😂": "LAUGH"}
_BY_BASE = {emoji.replace("\ufe0f", ""): name for emoji, name in EMOJI_TYPES.items()}   # with or without VS16
EMOJI_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")


def emoji_type(reaction: str) -> str:
    """A status reaction as the platform's ``emoji_type``; ValueError for one it has no name for."""
    text = reaction.strip()
    if text.replace("\ufe0f", "") in _BY_BASE:
        return _BY_BASE[text.replace("\ufe0f", "")]
    if EMOJI_TYPE.fullmatch(text.strip(":")):
        return text.strip(":")
    raise ValueError(f"no Feishu emoji type for {reaction!r} (write its name from the platform's list, e.g. "
                     "\"THUMBSUP\")")
