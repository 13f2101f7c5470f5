"""Telegram's two markup parsers, as strict as the real ones where a bot can trip: MarkdownV2 refuses any
reserved character that is not escaped or part of an entity, HTML refuses unknown or unbalanced tags. Both
return the text a user sees and its entities (offsets and lengths in UTF-16 code units, as the Bot API counts).

Not modelled: MarkdownV2 expandable blockquotes (``**>`` ... ``||``), and the legacy ``Markdown`` mode, which
the fake accepts without parsing. Error texts follow the Bot API's ("Character 'x' is reserved ...").
"""
from __future__ import annotations

import html
import re

MARKDOWN_V2_RESERVED = "_*[]()~`>#+-=|{}.!"


class EntityParseError(ValueError):
    """The markup is invalid; str() is what follows "Bad Request: can't parse entities: "."""


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class _TextBuilder:
    """Collects visible text and entities; tracks the UTF-16 length as it grows (entity offsets need it)."""

    def __init__(self):
        self.parts: list[str] = []
        self.length16 = 0
        self.entities: list[dict] = []

    def emit(self, chunk: str) -> None:
        self.parts.append(chunk)
        self.length16 += utf16_len(chunk)

    def add_entity(self, kind: str, start16: int, **extra) -> None:
        if self.length16 > start16:  # Telegram drops empty entities
            self.entities.append({"type": kind, "offset": start16, "length": self.length16 - start16, **extra})

    def result(self) -> tuple[str, list[dict]]:
        return "".join(self.parts), sorted(self.entities, key=lambda e: (e["offset"], -e["length"]))


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


# ----------------------------------------------------------------------------------------------- MarkdownV2

_TOGGLES = (("||", "spoiler"), ("__", "underline"), ("*", "bold"), ("_", "italic"), ("~", "strikethrough"))


def parse_markdown_v2(text: str) -> tuple[str, list[dict]]:
    out = _TextBuilder()
    stack: list[list] = []  # [kind, start16, start index in text, extra]
    quote_start = None
    i, n = 0, len(text)

    def close(extra=None) -> None:
        kind, start16, _, own_extra = stack.pop()
        out.add_entity(kind, start16, **{**own_extra, **(extra or {})})

    while i < n:
        c = text[i]
        top = stack[-1][0] if stack else None
        if c == "\\" and i + 1 < n and 0 < ord(text[i + 1]) < 127:  # any ASCII character may be escaped
            out.emit(text[i + 1])
            i += 2
            continue
        if top in ("code", "pre"):  # inside code only the closing backticks mean anything
            closing = "```" if top == "pre" else "`"
            if text.startswith(closing, i):
                close()
                i += len(closing)
            else:
                out.emit(c)
                i += 1
            continue
        at_line_start = i == 0 or text[i - 1] == "\n"
        if at_line_start and not stack:
            if c == ">":
                quote_start = out.length16 if quote_start is None else quote_start
                i += 1
                continue
            if quote_start is not None:
                out.add_entity("blockquote", quote_start)
                quote_start = None
        toggle = next(((mark, kind) for mark, kind in _TOGGLES if text.startswith(mark, i)), None)
        if toggle and toggle[1] == "underline" and top == "italic":
            toggle = ("_", "italic")  # "_a__" closes italic first, as Telegram reads it
        if toggle:
            mark, kind = toggle
            if top == kind:
                close()
            else:
                stack.append([kind, out.length16, i, {}])
            i += len(mark)
        elif c == "[" or text.startswith("![", i):
            kind = "text_link" if c == "[" else "custom_emoji"
            stack.append([kind, out.length16, i, {}])
            i += 1 if c == "[" else 2
        elif c == "]" and top in ("text_link", "custom_emoji"):
            i = _close_link(text, i + 1, stack, out, close)
        elif c == "`":
            i = _open_code(text, i, stack, out)
        elif c in MARKDOWN_V2_RESERVED:
            raise EntityParseError(f"Character '{c}' is reserved and must be escaped with the preceding '\\'")
        else:
            out.emit(c)
            i += 1
    if stack:
        raise EntityParseError(f"Can't find end of the entity starting at byte offset "
                               f"{_byte_offset(text, stack[-1][2])}")
    if quote_start is not None:
        out.add_entity("blockquote", quote_start)
    return out.result()


def _close_link(text: str, i: int, stack: list, out: _TextBuilder, close) -> int:
    """After ``]``: read ``(url)`` (where only ``)`` and ``\\`` need escaping) and close the link entity."""
    kind = stack[-1][0]
    if i >= len(text) or text[i] != "(":
        if kind == "custom_emoji":
            raise EntityParseError("Custom emoji entity must contain a tg://emoji URL")
        stack.pop()  # "[text]" without a URL stays plain text
        return i
    url, j = [], i + 1
    while j < len(text) and text[j] != ")":
        if text[j] == "\\" and j + 1 < len(text):
            j += 1
        url.append(text[j])
        j += 1
    if j >= len(text):
        raise EntityParseError(f"Can't find end of a URL at byte offset {_byte_offset(text, i)}")
    url_text = "".join(url)
    if kind == "custom_emoji":
        if not url_text.startswith("tg://emoji?id="):
            raise EntityParseError("Custom emoji entity must contain a tg://emoji URL")
        close({"custom_emoji_id": url_text.split("=", 1)[1]})
    else:
        close({"url": url_text})
    return j + 1


def _open_code(text: str, i: int, stack: list, out: _TextBuilder) -> int:
    if not text.startswith("```", i):
        stack.append(["code", out.length16, i, {}])
        return i + 1
    start, i = i, i + 3
    extra = {}
    newline = text.find("\n", i)
    if newline != -1:
        first_line = text[i:newline]
        if first_line == "" or re.fullmatch(r"[^\s`\\]+", first_line):  # "```lang\n": the line names a language
            if first_line:
                extra["language"] = first_line
            i = newline + 1
    stack.append(["pre", out.length16, start, extra])
    return i


# ----------------------------------------------------------------------------------------------------- HTML

_HTML_TAGS = {"b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline",
              "ins": "underline", "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough",
              "span": "spoiler", "tg-spoiler": "spoiler", "a": "text_link", "code": "code", "pre": "pre",
              "blockquote": "blockquote", "tg-emoji": "custom_emoji"}
_HTML_ENTITY = re.compile(r"&(#[0-9]{1,7}|#x[0-9a-fA-F]{1,6}|lt|gt|amp|quot);")
_START_TAG = re.compile(r"<([a-zA-Z0-9-]*)")
_END_TAG = re.compile(r"</([a-zA-Z0-9-]*)\s*>")
_ATTRIBUTE = re.compile(r"\s*([a-zA-Z-]+)(?:\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>\"']+))?")


def parse_html(text: str) -> tuple[str, list[dict]]:
    out = _TextBuilder()
    stack: list[tuple[str, str | None, int, dict]] = []  # (tag, entity kind or None, start16, extra)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "&":
            entity = _HTML_ENTITY.match(text, i)
            decoded = html.unescape(entity.group(0)) if entity else "&"  # a bare "&" is tolerated, as by Telegram
            out.emit(decoded)
            i = entity.end() if entity else i + 1
        elif c != "<":
            out.emit(c)
            i += 1
        elif text.startswith("</", i):
            i = _close_tag(text, i, stack, out)
        else:
            i = _open_tag(text, i, stack, out)
    if stack:
        raise EntityParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1][0]}"')
    return out.result()


def _open_tag(text: str, i: int, stack: list, out: _TextBuilder) -> int:
    name = _START_TAG.match(text, i).group(1).lower()
    if name not in _HTML_TAGS:
        raise EntityParseError(f'Unsupported start tag "{name}" at byte offset {_byte_offset(text, i)}')
    attributes, j = {}, i + 1 + len(name)
    while True:
        while j < len(text) and text[j].isspace():
            j += 1
        if j >= len(text):
            raise EntityParseError(f"Unclosed start tag at byte offset {_byte_offset(text, i)}")
        if text[j] == ">":
            break
        attribute = _ATTRIBUTE.match(text, j)
        if not attribute:
            raise EntityParseError(f'Empty attribute name in the tag "{name}" at byte offset '
                                   f"{_byte_offset(text, j)}")
        value = attribute.group(2) or ""
        attributes[attribute.group(1).lower()] = html.unescape(value.strip("\"'"))
        j = attribute.end()
    kind, extra = _HTML_TAGS[name], {}
    if name == "span" and attributes.get("class") != "tg-spoiler":
        raise EntityParseError(f'Tag "span" must have class "tg-spoiler" at byte offset {_byte_offset(text, i)}')
    if name == "a":
        extra["url"] = attributes.get("href", "")
    if name == "tg-emoji":
        extra["custom_emoji_id"] = attributes.get("emoji-id", "")
    if name == "code" and stack and stack[-1][0] == "pre":
        # <pre><code class="language-x">: one pre entity carrying the language, as Telegram reports it
        language = attributes.get("class", "")
        if language.startswith("language-"):
            stack[-1][3]["language"] = language[len("language-"):]
        kind = None
    if name == "blockquote" and "expandable" in attributes:
        kind = "expandable_blockquote"
    stack.append((name, kind, out.length16, extra))
    return j + 1


def _close_tag(text: str, i: int, stack: list, out: _TextBuilder) -> int:
    end = _END_TAG.match(text, i)
    if not end:
        raise EntityParseError(f"Unclosed end tag at byte offset {_byte_offset(text, i)}")
    name = end.group(1).lower()
    if not stack:
        raise EntityParseError(f"Unexpected end tag at byte offset {_byte_offset(text, i)}")
    if name != stack[-1][0]:
        raise EntityParseError(f'Unmatched end tag at byte offset {_byte_offset(text, i)}, expected '
                               f'"</{stack[-1][0]}>", found "</{name}>"')
    _, kind, start16, extra = stack.pop()
    if kind:
        out.add_entity(kind, start16, **extra)
    return end.end()
