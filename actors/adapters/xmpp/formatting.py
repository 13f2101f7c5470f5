"""The agent's Markdown as XMPP text: pure functions.

XMPP bodies are plain text; most clients show XEP-0393 message styling (``*strong*``, ``_emphasis_``, ``~strike~``,
```` ``` ```` blocks and `` `code` ``), which is close to Markdown: strong and emphasis are rewritten into it,
headings become strong lines, links show their address. Code is left as it is (the same in both).

A body is XML character data: a character XML 1.0 does not allow (most C0 controls, lone surrogates, U+FFFE and
U+FFFF) would make the server close the whole stream, so every such character is removed. The limit is counted in
characters of the final text.
"""
from __future__ import annotations

import re

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_FENCE = re.compile(r"(```.*?```)", re.DOTALL)
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_LINK = re.compile(r"\[([^\]\n]+)\]\((\S+?)\)")


def xml_safe(text: str) -> str:
    """``text`` without the characters XML 1.0 forbids."""
    return _NOT_XML.sub("", text)


def _styled(prose: str) -> str:
    prose = _HEADING.sub(lambda m: f"*{m.group(1)}*", prose)
    prose = _STRONG.sub(lambda m: f"*{m.group(1) or m.group(2)}*", prose)
    return _LINK.sub(lambda m: m.group(1) if m.group(1) == m.group(2) else f"{m.group(1)} ({m.group(2)})", prose)


def to_xmpp(markdown: str) -> str:
    """Markdown as XEP-0393 styled text, fenced code untouched, safe as XML character data."""
    parts = _FENCE.split(xml_safe(markdown))
    return "".join(part if part.startswith("```") else _styled(part) for part in parts)
