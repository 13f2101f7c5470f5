"""The web chat's markdown: an answer rendered to sanitised HTML here, in the gateway. Pure functions, no I/O.

Why the server renders, not the page: every operation of the protocol already carries the answer's whole text (an
edit replaces it), so the adapter renders it once for all the visitor's tabs and sends the HTML beside the text.
The parser (markdown-it-py, CommonMark) and the sanitiser (nh3, the Ammonia crate) are maintained Python packages
installed like any other dependency, so the package ships no script bundle to pin, update and license-track, the
page's Content-Security-Policy stays ``script-src 'self'``, and what can reach a browser is tested in Python. Two
layers keep a model's HTML out of the page: the parser escapes raw HTML (``html`` off), so ``<script>`` arrives as
text, and its output then passes an allowlist of tags, attributes and URL schemes before it leaves.

Streaming previews: the gateway appends its cursor to a preview and, when the text ends inside a code block, closes
the fence after the cursor (actors/sessions/chunking.py), so that a platform renders the part on its own. The page
shows neither: ``split_preview`` cuts the text at the cursor, a code block the model has not closed yet then runs
to the end as CommonMark says (an open block, not literal backticks), and the tool progress line goes into a field
of its own. The page's one cursor is an element at the very end of the rendered text, inside the code block when
the text ends in one.

Code blocks of a final answer are highlighted here too, by Pygments (highlight.py): a maintained library the
gateway already installs (rich depends on it), 500+ languages, its token classes the only classes it adds and its
colours served as a style sheet of the gateway's own, so the page works offline and runs no more script. It costs
about 6 ms per 1,000 characters of code, so it is spent once per answer, not on every streaming edit (a preview's
code is plain until the final text arrives), and only on answers up to HIGHLIGHT_MAX_CHARS.
"""
from __future__ import annotations

import html
import re
from typing import Optional

import nh3
from markdown_it import MarkdownIt

from actors.adapters.webchat import highlight

# The gateway's streaming cursor, as actors/sessions/reply_text.py appends it (adapters cannot import
# sessions; tests/webchat/test_rendering.py checks the two agree).
CURSOR = " ▍"
# Progress the gateway appends to a streaming preview: a tool's (⚙), or the wait for the model's first words (⏳).
TOOL_LINE = re.compile(r"\n\n((?:⚙|⏳) [^\n]*)$")
# What the chunker may put after the cursor: the fence line that closes a code block the cut is inside of.
_ADDED_AFTER_CURSOR = re.compile(r"\s*(?:`{3,}|~{3,})?\s*")
# A last line that the cursor sentinel would change the meaning of if appended to it: a fence line (``` plus
# ``x`` is not a fence) or a thematic break / setext underline. The sentinel goes on a line of its own after them.
_LINE_OF_ITS_OWN = re.compile(r" {0,3}(?:`{3,}|~{3,}|(?:[-=*_][ \t]*){3,}$)")
_SENTINEL = "\ue000"      # a private-use character: where the cursor goes, replaced by the cursor element
CURSOR_HTML = '<span class="cursor"></span>'
MAX_RENDERED_CHARS = 40_000    # longer texts are sent as escaped plain text: rendering costs ~3 ms per 1,000 chars
HISTORY_RENDER_BUDGET = 200_000   # characters rendered per history frame, newest first; older ones plain

_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).disable("image")
_MARKDOWN_HIGHLIGHTED = MarkdownIt("commonmark", {"html": False, "highlight": highlight.code_html}).enable(
    ["table", "strikethrough"]).disable("image")
HIGHLIGHT_MAX_CHARS = 12_000   # a longer answer's code stays plain: ~75 ms of highlighting at most per answer
HISTORY_HIGHLIGHT_BUDGET = 24_000   # characters of answers highlighted per history frame, newest first
_TAGS = {"p", "br", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "hr", "a", "span",
         "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td"}
_LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+.#-]{1,40}")


def _attribute(tag: str, name: str, value: str) -> Optional[str]:
    if name != "class":
        return value
    if tag == "code" and _LANGUAGE_CLASS.fullmatch(value):
        return value
    if tag == "span" and (value == "cursor" or highlight.is_token_class(value)):
        return value
    return None


_CLEANER = nh3.Cleaner(tags=_TAGS, clean_content_tags={"script", "style"},
                       attributes={"a": {"href", "title"}, "code": {"class"}, "span": {"class"}, "ol": {"start"}},
                       attribute_filter=_attribute, url_schemes={"http", "https", "mailto"}, url_relative="deny",
                       link_rel="noopener noreferrer", set_tag_attribute_values={"a": {"target": "_blank"}})


def split_preview(text: str, final: bool) -> tuple[str, str, bool]:
    """The markdown source of what the page shows, the tool progress line apart, and whether the text ends where
    the answer is being written (a preview's last part: the page's cursor goes there).

    A preview is cut where the gateway's cursor is: what follows it is the closing fence the chunker added, never
    text the model wrote. A part without the cursor (of a long preview, before its last) is shown whole."""
    if final:
        return text, "", False
    at = text.rfind(CURSOR)
    writing = at >= 0 and _ADDED_AFTER_CURSOR.fullmatch(text, at + len(CURSOR)) is not None
    if writing:
        text = text[:at]
    tool = TOOL_LINE.search(text)
    if tool is None:
        return text, "", writing
    return text[:tool.start()], tool.group(1), writing


def render(source: str, cursor: bool = False, highlight_code: bool = False) -> str:
    """Sanitised HTML of the markdown ``source``; with ``cursor``, the cursor element ends its last text; with
    ``highlight_code``, code blocks of a language Pygments knows are highlighted."""
    source = source.replace(_SENTINEL, "")
    if len(source) > MAX_RENDERED_CHARS:
        return plain(source, cursor)
    if cursor:
        last_line = source.rsplit("\n", 1)[-1]
        source += ("\n" if _LINE_OF_ITS_OWN.match(last_line) else "") + _SENTINEL
    rendered = (_MARKDOWN_HIGHLIGHTED if highlight_code and not cursor else _MARKDOWN).render(source)
    # The sentinel is text wherever it landed; sanitising after it became an element keeps even a misplaced one
    # harmless (the allowlist keeps only class="cursor" or one highlighter token class on a span).
    return sanitise(rendered.replace(_SENTINEL, CURSOR_HTML, 1).replace(_SENTINEL, ""))


def sanitise(fragment: str) -> str:
    """The fragment with only the tags, attributes and link schemes an answer may use (no script, no handler)."""
    return _CLEANER.clean(fragment)


def plain(source: str, cursor: bool = False) -> str:
    """The text escaped, unrendered: for texts too long to render (the page keeps their line breaks)."""
    return f'<p class="plain">{html.escape(source)}{CURSOR_HTML if cursor else ""}</p>'


def view(text: str, final: bool, render_it: bool = True, highlight_it: bool = True) -> dict:
    """What an operation or a history entry carries for the page besides the text: ``html`` and ``tool``. A final
    answer's code is highlighted (``highlight_it``, the history's budget) when it is short enough."""
    source, tool, writing = split_preview(text, final)
    colour = highlight_it and final and len(source) <= HIGHLIGHT_MAX_CHARS
    shown = render(source, cursor=writing, highlight_code=colour) if render_it else plain(source, cursor=writing)
    return {"html": shown, "tool": tool}
