"""Slack's text rules that the fake checks: mrkdwn escaping, control sequences, and Block Kit limits.

Slack asks apps to escape exactly three characters in message text (``&`` as ``&amp;``, ``<`` as ``&lt;``, ``>``
as ``&gt;``) because angle brackets write control sequences: ``<@U123>`` (a user mention), ``<#C123|name>`` (a
channel), ``<!here>`` (a special mention), ``<https://example.com|label>`` (a link). The fake stores the text as
sent, and beside it what a person would see (``displayed``) and any escaping mistakes (``markup_problems``), so a
test can tell that an adapter escaped a model's ``a < b`` instead of sending a broken control sequence.
"""
from __future__ import annotations

import re
from typing import Optional

from tests.fakes.slack.errors import ApiError, json_param
from tests.fakes.slack.interactive import check_actions

CONTROL = re.compile(r"<([^<>]*)>")
USER_MENTION = re.compile(r"^@([UW][A-Z0-9]+)(?:\|([^>]*))?$")
CHANNEL_LINK = re.compile(r"^#(C[A-Z0-9]+)(?:\|([^>]*))?$")
SPECIAL = re.compile(r"^!([a-z]+)(?:\^[^|]*)?(?:\|(.*))?$")
LINK = re.compile(r"^((?:https?://|mailto:)[^|\s]+)(?:\|(.*))?$", re.DOTALL)
ENTITY = re.compile(r"&(amp|lt|gt);")
ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}

MAX_BLOCKS = 50
SECTION_TEXT_LIMIT = 3000
HEADER_TEXT_LIMIT = 150
MARKDOWN_BLOCK_LIMIT = 12000


def _unescape(text: str) -> str:
    return ENTITY.sub(lambda m: ENTITIES[m.group(1)], text)


def _render_control(inner: str) -> Optional[str]:
    """What a person sees for one ``<...>`` sequence, or None when it is not a valid one."""
    for pattern, prefix in ((USER_MENTION, "@"), (CHANNEL_LINK, "#"), (SPECIAL, "@")):
        match = pattern.match(inner)
        if match:
            return prefix + (match.group(2) or match.group(1))
    match = LINK.match(inner)
    if match:
        return _unescape(match.group(2) if match.group(2) else match.group(1))
    return None


def render(text: str) -> tuple[str, list[str]]:
    """(the text as displayed, the escaping problems found). A stray ``<`` or ``>``, an invalid control sequence
    or a bare ``&`` is a problem: Slack would show something other than what the sender meant."""
    problems: list[str] = []
    shown: list[str] = []

    def plain(piece: str) -> None:
        if "<" in piece or ">" in piece:
            problems.append("unescaped < or >")
        if re.search(r"&(?!(?:amp|lt|gt);)", piece):
            problems.append("unescaped &")
        shown.append(_unescape(piece))

    pos = 0
    for match in CONTROL.finditer(text):
        plain(text[pos:match.start()])
        rendered = _render_control(match.group(1))
        if rendered is None:
            problems.append(f"invalid control sequence {match.group(0)[:40]!r}")
            rendered = match.group(0)
        shown.append(rendered)
        pos = match.end()
    plain(text[pos:])
    return "".join(shown), sorted(set(problems))


def mentioned_users(text: str) -> list[str]:
    """User ids mentioned with ``<@U…>`` (the form Slack delivers mentions in)."""
    return [m.group(1) for m in (USER_MENTION.match(c.group(1)) for c in CONTROL.finditer(text)) if m]


def check_blocks(params: dict) -> Optional[list]:
    """The ``blocks`` argument, validated for the limits Slack documents: at most 50 blocks, a section's text
    at most 3,000 characters, a header's at most 150, a markdown block's at most 12,000."""
    blocks = json_param(params, "blocks", "invalid_blocks_format")
    if blocks is None:
        return None
    if not isinstance(blocks, list) or not all(isinstance(b, dict) and b.get("type") for b in blocks):
        raise ApiError("invalid_blocks_format")
    if len(blocks) > MAX_BLOCKS:
        raise ApiError("invalid_blocks", errors=[f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]"])
    for index, block in enumerate(blocks):
        text = block.get("text")
        text = text.get("text", "") if isinstance(text, dict) else (text or "")
        limit = {"section": SECTION_TEXT_LIMIT, "header": HEADER_TEXT_LIMIT,
                 "markdown": MARKDOWN_BLOCK_LIMIT}.get(block["type"])
        if limit is not None and len(text) > limit:
            raise ApiError("invalid_blocks", errors=[
                f"must be less than {limit + 1} characters [json-pointer:/blocks/{index}/text]"])
    check_actions(blocks)
    return blocks


def blocks_text(blocks: Optional[list]) -> str:
    """The text of the blocks that carry text, joined: what the fake shows for a message sent as blocks only."""
    parts = []
    for block in blocks or []:
        text = block.get("text")
        parts.append(text.get("text", "") if isinstance(text, dict) else (text or ""))
    return "\n".join(p for p in parts if p)
