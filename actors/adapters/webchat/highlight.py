"""Syntax highlighting of the web chat's code blocks, by Pygments, and the style sheet that colours it. Pure.

``code_html`` is markdown-it's ``highlight`` hook: the code as Pygments' token spans (``<span class="k">``), or
"" for a language it does not know (markdown-it then escapes the code as usual). The text inside the spans is the
code exactly (no newline stripped or added), so the copy button copies what the model wrote. The only classes the
sanitiser lets through on a span besides the cursor are Pygments' own short token names (``is_token_class``).

``style_sheet`` is served as /static/highlight.css: a light and a dark palette from Pygments' own styles, the dark
one for ``prefers-color-scheme: dark`` unless the visitor chose light, and for a chosen dark (style.css has the same
switch for the page's colours).
"""
from __future__ import annotations

import functools
import re
from typing import Optional

from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

LIGHT_STYLE, DARK_STYLE = "default", "github-dark"
SCOPE = ".message .text pre code"
_TOKEN_CLASSES = frozenset(name for name in STANDARD_TYPES.values() if name)
_FORMATTER = HtmlFormatter(nowrap=True)
_LANGUAGE = re.compile(r"[A-Za-z0-9_+.#-]{1,40}")
_CURSOR = "\ue000"     # formatting.py's cursor sentinel: a preview is never highlighted, this is a guard


@functools.lru_cache(maxsize=64)
def lexer_for(language: str) -> Optional[Lexer]:
    """Pygments' lexer for a fence's language name (``python``, ``js``, ``toml``...), or None."""
    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False, stripall=False)
    except ClassNotFound:
        return None


def code_html(code: str, language: str, _attrs: str = "") -> str:
    language = language.strip().lower()
    if not _LANGUAGE.fullmatch(language) or _CURSOR in code:
        return ""
    lexer = lexer_for(language)
    return pygments_highlight(code, lexer, _FORMATTER) if lexer is not None else ""


def is_token_class(value: str) -> bool:
    return value in _TOKEN_CLASSES


def _palette(style: str, scope: str) -> str:
    """The token rules of one Pygments style under ``scope``: colours and weights only (the block's background and
    layout are style.css's)."""
    rules = HtmlFormatter(style=style).get_style_defs(scope).splitlines()
    return "\n".join(r for r in rules if r.startswith(scope + " .") and not r.startswith(scope + " .hll"))


@functools.lru_cache(maxsize=1)
def style_sheet() -> str:
    dark_system = f':root:not([data-theme="light"]) {SCOPE}'
    return "\n".join([
        "/* Syntax colours of the web chat's code blocks: Pygments' token classes (highlight.py). */",
        _palette(LIGHT_STYLE, SCOPE),
        "@media (prefers-color-scheme: dark) {",
        _palette(DARK_STYLE, dark_system),
        "}",
        _palette(DARK_STYLE, f':root[data-theme="dark"] {SCOPE}'),
        ""])
