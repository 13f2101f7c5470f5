"""The agent's Markdown as a mail: the text itself as the plain part, and an HTML alternative rendered from it
(CommonMark, no raw HTML from the text, images left out, sanitised to the tags a mail reader shows). Pure."""
from __future__ import annotations

from typing import Optional

import nh3
from markdown_it import MarkdownIt

MAX_RENDERED_CHARS = 100_000      # longer texts go as plain text only
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).disable("image")
_TAGS = {"p", "br", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "hr", "a",
         "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "b", "i"}
_CLEANER = nh3.Cleaner(tags=_TAGS, clean_content_tags={"script", "style"},
                       attributes={"a": {"href"}, "ol": {"start"}}, url_schemes={"http", "https", "mailto"},
                       url_relative="deny", link_rel=None)


def html_alternative(text: str) -> Optional[str]:
    """The text as a small HTML document, or None where it would say nothing the plain part does not."""
    if len(text) > MAX_RENDERED_CHARS:
        return None
    rendered = _CLEANER.clean(_MARKDOWN.render(text)).strip()
    if not rendered or (rendered.startswith("<p>") and rendered.endswith("</p>") and rendered.count("<") == 2):
        return None
    return f"<!DOCTYPE html><html><body>{rendered}</body></html>"
