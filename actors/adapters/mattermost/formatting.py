"""How a reply's text becomes a Mattermost post: pure functions.

Mattermost renders Markdown itself (CommonMark with tables, fenced code, strike-through), so the agent's Markdown
goes as written. What must not go as written is a broadcast: ``@channel``, ``@all`` and ``@here`` notify every
member of a channel, and a model quoting one (or told to by a user) would page a whole company. Outside code they
are sent with a zero-width joiner after the ``@``, which shows the same and notifies no one. Inside code spans and
fences nothing is rewritten (code is not parsed for mentions).

Reactions are named, not written: the bot's status reactions (an emoji character each, ``[sessions]
status_reactions``) become Mattermost's emoji names (``emoji_name``); a name may also be written as it is
(``eyes``, ``:eyes:``) for an emoji this table does not know, or a custom emoji of the server.

Length: a post holds ``MaxPostSize`` runes (16,383 on a default server), counted as code points: ``len`` here.
"""
from __future__ import annotations

import re

BROADCAST = re.compile(r"(?<![\w@])@(channel|all|here)\b", re.I)
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)      # unclosed: a streaming preview cut mid-block
_INLINE_CODE = re.compile(r"`[^`\n]+`")
QUIET = "@\u200d"


def quiet_broadcasts(text: str) -> str:
    """``@channel`` -> ``@\u200dchannel`` (and ``@all``, ``@here``) outside code."""
    return _outside(text, _FENCE, lambda part: _outside(part, _INLINE_CODE,
                                                        lambda plain: BROADCAST.sub(QUIET + r"\1", plain)))


def _outside(text: str, code: re.Pattern, change) -> str:
    out, pos = [], 0
    for match in code.finditer(text):
        out.append(change(text[pos:match.start()]))
        out.append(match.group(0))
        pos = match.end()
    out.append(change(text[pos:]))
    return "".join(out)


def to_post(text: str) -> str:
    """A reply's Markdown as a post's ``message``."""
    return quiet_broadcasts(text)


# The emoji a status reaction is likely to be, by Mattermost's (gemoji) names.
EMOJI_NAMES = {"👀": "eyes", "👍": "+1", "👎": "-1", "✅": "white_check_mark", "✔️": "heavy_check_mark",
               "❌": "x", "⏳": "hourglass_flowing_sand", "⌛": "hourglass", "🤔": "thinking_face", "💬": "speech_balloon",
               "🔄": "arrows_counterclockwise", "⚠️": "warning", "❗": "exclamation", "🎉": "tada", "👌": "ok_hand",
               "🙏": "pray", "🚀": "rocket", "🔥": "fire", "⭐": "star", "❤️": "heart", "😊": "blush", "🛠️": "hammer_and_wrench",
               "📝": "memo", "🆗": "ok", "⏱️": "stopwatch", "🟢": "large_green_circle", "🔴": "red_circle"}
EMOJI_NAME = re.compile(r"[a-z0-9_+-]{1,64}")
_BY_BASE = {emoji.replace("\ufe0f", ""): name for emoji, name in EMOJI_NAMES.items()}   # with or without VS16


def emoji_name(reaction: str) -> str:
    """A status reaction as Mattermost's ``emoji_name``; ValueError for one it has no name for."""
    text = reaction.strip()
    if text.replace("\ufe0f", "") in _BY_BASE:
        return _BY_BASE[text.replace("\ufe0f", "")]
    name = text.strip(":").lower()
    if EMOJI_NAME.fullmatch(name):
        return name
    raise ValueError(f"no Mattermost emoji name for {reaction!r} (write its name, e.g. \"eyes\")")
