"""How a reply's text becomes a Mattermost post: pure functions.

Mattermost renders Markdown itself (CommonMark with tables, fenced code, strike-through), so the agent's Markdown
goes as written. What must not go as written is a broadcast: ``@channel``, ``@all`` and ``@here`` notify every
member of a channel, and a model quoting one (or told to by a user) would page a whole company. Outside code they
are sent with a zero-width joiner after the ``@``, which shows the same and notifies no one. Inside code spans and
fences nothing is rewritten (code is not parsed for mentions).

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
