"""How a reply's text becomes Slack message text, and how Slack's text reads back: pure functions.

Slack asks apps to escape exactly three characters in message text, ``&`` ``<`` ``>`` (as ``&amp;`` ``&lt;``
``&gt;``), because angle brackets write control sequences (``<@U123>`` a mention, ``<!channel>`` a broadcast,
``<https://x|label>`` a link). A model's ``a < b && c`` must show as written, and must never become a ``<!here>``
that pings a whole channel, so every reply is escaped in full: the gateway writes no control sequences of its own.

Models write a little Markdown; the one construct whose spelling differs in Slack's mrkdwn is bold (``**x**`` in
Markdown, ``*x*`` in mrkdwn), rewritten outside code. Fences and inline code are spelt the same in both.

Inbound, Slack sends user text escaped the same way: ``unescape`` gives the model what the user typed.
"""
from __future__ import annotations

import re

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)   # unclosed: a streaming preview cut mid-block
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_BOLD = re.compile(r"\*\*(?=\S)([^\n]*?\S)\*\*")
_ENTITY = re.compile(r"&(amp|lt|gt);")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}


def escape(text: str) -> str:
    """The three characters Slack reserves, escaped (``&`` first, so no entity is escaped twice)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Slack's three entities decoded, in one pass (``&amp;lt;`` is the text ``&lt;``, not ``<``)."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


def to_mrkdwn(text: str) -> str:
    """A reply's Markdown as Slack message text: escaped everywhere, ``**bold**`` as ``*bold*`` outside code."""
    out, pos = [], 0
    for fence in _FENCE.finditer(text):
        out.append(_outside_fences(text[pos:fence.start()]))
        out.append(escape(fence.group(0)))
        pos = fence.end()
    out.append(_outside_fences(text[pos:]))
    return "".join(out)


def _outside_fences(text: str) -> str:
    out, pos = [], 0
    for code in _INLINE_CODE.finditer(text):
        out.append(_BOLD.sub(r"*\1*", escape(text[pos:code.start()])))
        out.append(escape(code.group(0)))
        pos = code.end()
    out.append(_BOLD.sub(r"*\1*", escape(text[pos:])))
    return "".join(out)
