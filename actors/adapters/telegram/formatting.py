"""How a reply's Markdown becomes Telegram markup, per ``parse_mode``: pure functions.

Models write a little Markdown (```fences```, `code`, **bold**) and much text full of characters Telegram's markup
reserves (``<``, ``&``, ``_``, ``.``, ``!``...). Both renderers turn the three constructs into entities and escape
everything else, so what the model wrote is what the user reads, and the markup always parses. Should Telegram
refuse it anyway, the adapter resends the raw text without a parse mode (see TelegramAdapter.send_message).
"""
from __future__ import annotations

import re
from typing import Optional

# A fence runs to the end of the text when unclosed: a streaming preview is cut mid-block.
_FENCE = re.compile(r"```(?:([\w+#.-]+)?[ \t]*\n)?(.*?)(?:```|\Z)", re.S)
_INLINE = re.compile(r"`([^`\n]+)`|\*\*(?=\S)([^\n]*?\S)\*\*")
_CODE_SPECIAL = re.compile(r"([`\\])")
_MARKDOWN_V2_SPECIAL = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")


def render(text: str, parse_mode: str) -> tuple[str, Optional[str]]:
    """(text to send, parse_mode for the Bot API): None means plain text."""
    if parse_mode == "HTML":
        return markdown_to_telegram_html(text), "HTML"
    if parse_mode == "MarkdownV2":
        return markdown_to_markdown_v2(text), "MarkdownV2"
    return text, None


def markdown_to_markdown_v2(text: str) -> str:
    """The MarkdownV2 twin of ``markdown_to_telegram_html``: fences, inline code and bold become entities, every
    other reserved character is escaped. Inside code only ` and \\ need escaping (Telegram's rule)."""
    out, pos = [], 0
    for fence in _FENCE.finditer(text):
        out.append(_inline(text[pos:fence.start()]))
        language, body = fence.group(1) or "", fence.group(2)
        body = body[:-1] if body.endswith("\n") else body
        # Always a newline after the opening: without it Telegram would read the body's first word as a language.
        out.append(f"```{language}\n{_escape_code(body)}```")
        pos = fence.end()
    out.append(_inline(text[pos:]))
    return "".join(out)


def _inline(text: str) -> str:
    out, pos = [], 0
    for match in _INLINE.finditer(text):
        out.append(escape_markdown_v2(text[pos:match.start()]))
        if match.group(1) is not None:
            out.append(f"`{_escape_code(match.group(1))}`")
        else:
            out.append(f"*{escape_markdown_v2(match.group(2))}*")
        pos = match.end()
    out.append(escape_markdown_v2(text[pos:]))
    return "".join(out)


def _escape_code(text: str) -> str:
    return _CODE_SPECIAL.sub(r"\\\1", text)


def escape_markdown_v2(text: str) -> str:
    """Escape every character MarkdownV2 reserves (and the backslash), so ``text`` shows literally."""
    return _MARKDOWN_V2_SPECIAL.sub(r"\\\1", text)


def escape_html(text: str) -> str:
    """Escape the three characters Telegram's HTML mode requires escaped (quotes are only special in tags)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markdown_to_telegram_html(text: str) -> str:
    """Convert the little Markdown an LLM reliably writes -- ```fences```, `code`, **bold** -- into Telegram HTML.

    Everything else is escaped, so the result always parses: tags are only ever emitted in balanced pairs.
    An unclosed fence (a reply still streaming) runs to the end of the text and is closed.
    """
    out, pos = [], 0
    for fence in _FENCE.finditer(text):
        out.append(_inline_to_html(text[pos:fence.start()]))
        language, body = fence.group(1), fence.group(2)
        body = body[:-1] if body.endswith("\n") else body
        if language:
            out.append(f'<pre><code class="language-{escape_html(language)}">{escape_html(body)}</code></pre>')
        else:
            out.append(f"<pre>{escape_html(body)}</pre>")
        pos = fence.end()
    out.append(_inline_to_html(text[pos:]))
    return "".join(out)


def _inline_to_html(text: str) -> str:
    out, pos = [], 0
    for match in _INLINE.finditer(text):
        out.append(escape_html(text[pos:match.start()]))
        if match.group(1) is not None:
            out.append(f"<code>{escape_html(match.group(1))}</code>")
        else:
            out.append(f"<b>{escape_html(match.group(2))}</b>")
        pos = match.end()
    out.append(escape_html(text[pos:]))
    return "".join(out)
