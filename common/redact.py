"""Remove secrets from any text that a user or an operator will see (guarantee G6).

Pure functions. Two layers: every exact configured secret (``extra_secrets``), then well-known token shapes and
``name=value`` assignments whose name says "secret". Redaction is idempotent: ``redact(redact(t)) == redact(t)``.
"""
from __future__ import annotations

import base64
import functools
import json
import os
import re
from typing import Iterable
from urllib.parse import quote, quote_plus, urlsplit

REDACTED = "[redacted]"
# An [adapters.NAME] key whose name holds one of these words holds a secret (every secret option of the adapter
# registry is named so: token, webhook_secret, hmac_secret, api_tokens).
SECRET_WORDS = ("token", "secret", "key", "password")

# Shorter configured "secrets" would shred ordinary words; no real credential is this short.
MIN_EXTRA_SECRET_LEN = 4
# A run of this many characters of a configured secret is taken for a leak of it (a key echoed minus its first
# character, cut by a truncation): for a random token that run is unique, for prose it never occurs by chance.
FRAGMENT_CHARS = 12

_BOUNDARY = r"(?<![A-Za-z0-9])"          # a token shape must not start in the middle of a word ("task-…")
_TAIL = r"(?![A-Za-z0-9_-])"

_TOKEN_SHAPES = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S),
    re.compile(_BOUNDARY + r"sk-[A-Za-z0-9_-]{16,}"),                            # OpenAI, Anthropic, OpenRouter
    re.compile(_BOUNDARY + r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"),      # Stripe
    # Telegram (also in …/bot<token>/); the lookahead first turns away non-digits before the lookbehind runs: this
    # scan runs on every text with a ":" in it, and takes 9 us instead of 21 on a screenful.
    re.compile(r"(?=\d)(?<!\d)\d{5,}:[A-Za-z0-9_-]{35}" + _TAIL),
    re.compile(_BOUNDARY + r"xox[abposre]-[A-Za-z0-9-]{10,}"),                   # Slack bot/user/app tokens
    re.compile(_BOUNDARY + r"xapp-\d-[A-Za-z0-9-]{10,}"),
    re.compile(_BOUNDARY + r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    re.compile(_BOUNDARY + r"(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}" + _TAIL),  # AWS access key id
    re.compile(_BOUNDARY + r"AIza[0-9A-Za-z_-]{35}"),                             # Google API key
    re.compile(_BOUNDARY + r"hf_[A-Za-z0-9]{30,}"),                               # Hugging Face
    re.compile(_BOUNDARY + r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),  # JWT
]

# Keep the scheme/name so the reader still understands the text; only the credential goes.
_AUTH_HEADER = re.compile(r"\b((?i:bearer)\s+)[A-Za-z0-9._~+/=-]{8,}"
                          r"|\b(Basic\s+)(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@:]+(?::[^/\s@]*)?@")

_SECRET_NAME_EQ = (r"api[_-]?key|apikey|access[_-]?key|access[_-]?token|refresh[_-]?token|id[_-]?token|"
                   r"auth[_-]?token|bot[_-]?token|token|secret|client[_-]?secret|secret[_-]?key|private[_-]?key|"
                   r"password|passwd|pwd|passphrase|credentials?|signature|sig|key|auth")
_SECRET_NAME_COLON = (r"api[_-]?key|apikey|x-api-key|access[_-]?token|refresh[_-]?token|auth[_-]?token|"
                      r"bot[_-]?token|client[_-]?secret|secret[_-]?key|private[_-]?key|password|passwd|passphrase")
_VALUE = r"""[^\s"'&#,;<>]{6,}"""


def _starts_with_a_first_letter(names: str) -> str:
    """A lookahead for the letters the names begin with (every one begins with a letter): put first, it turns
    away most positions of a text before the lookbehind and the alternation are tried there, which halves a scan
    (66 -> 29 us on the offline agent's answer). Under (?i) a letter of the class matches exactly what that letter
    matches as the first of a name (the Kelvin sign for k, the long s for s): tests/common/test_redact_forms.py."""
    return "(?=[" + "".join(sorted({name[0] for name in names.split("|")})) + "])"


# name=value: URLs' query strings, env files, configs. Unquoted or quoted, any value of a plausible length.
_ASSIGN_EQ = re.compile(r"(?i)" + _starts_with_a_first_letter(_SECRET_NAME_EQ) + r"(?<![A-Za-z0-9])((?:"
                        + _SECRET_NAME_EQ + r")[\"']?\s*=\s*[\"']?)" + _VALUE)
# name: value only for unmistakable names: "key: …" and "token: …" occur in ordinary prose.
_ASSIGN_COLON = re.compile(r"(?i)" + _starts_with_a_first_letter(_SECRET_NAME_COLON) + r"(?<![A-Za-z0-9])((?:"
                           + _SECRET_NAME_COLON + r")[\"']?\s*:\s*[\"']?)" + _VALUE)
# Any name = a long opaque run (hex or base64 with digits and letters): a credential more often than not.
_ASSIGN_OPAQUE = re.compile(
    r"(?<![A-Za-z0-9])([A-Za-z_][A-Za-z0-9_.-]*[\"']?\s*=\s*[\"']?)"
    r"(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[A-Za-z])[A-Za-z0-9+/_-]{32,}={0,2}")
# What every match of _ASSIGN_OPAQUE holds: a text without it skips that scan (1 us for this search against 30 for
# the scan on a screenful of prose, 4 against 190 on code: the search starts at each "=", the scan at every word).
_OPAQUE_NEEDS = re.compile(r"""=\s*["']?[A-Za-z0-9+/_-]{32}""")


# What each shape needs somewhere in the text before it can match: a pattern whose mark is absent is not run (most
# text holds none of them, and a pattern scan costs ~6-40 us on a screenful; every answer to a chat goes through).
_SHAPE_MARKS = tuple(tuple(marks.split("|")) for marks in (
    "PRIVATE KEY", "sk-", "_live_|_test_", ":", "xox", "xapp-", "gh|github_pat_", "AKIA|ASIA|AGPA|AIDA|AROA",
    "AIza", "hf_", "eyJ"))


# Every name of _SECRET_NAME_EQ and _SECRET_NAME_COLON holds one of these words: a text that holds none of them,
# compared case-folded as the patterns' (?i) compares ("ı" is the one letter (?i) takes for an "i" that folding
# keeps apart), cannot match either pattern and skips their scans (~100 us on a screenful of prose).
_NAME_WORDS = ("key", "token", "secret", "pass", "pwd", "credential", "sig", "auth")


def _may_name_a_secret(text: str) -> bool:
    folded = text.casefold().replace("ı", "i")
    return any(word in folded for word in _NAME_WORDS)


def _has_mark(text: str, marks: tuple) -> bool:
    for mark in marks:
        if mark in text:
            return True
    return False


def redact(text: str, extra_secrets: Iterable[str] = (), shapes: bool = True) -> str:
    """Return ``text`` with configured secrets and known credential shapes replaced by ``[redacted]``.
    ``shapes=False``: the configured secrets only (in every form), for what a chat user wrote: their own text
    keeps its ``password = ...`` examples, never the operator's keys."""
    if not text:
        return text
    configured = tuple(sorted({s for s in extra_secrets if s and len(s.strip()) >= MIN_EXTRA_SECRET_LEN}))
    if configured:
        text = _configured_pattern(configured).sub(REDACTED, text)
        for secret in configured:
            text = _without_fragments(text, secret)
    if not shapes:
        return text
    for shape, marks in zip(_TOKEN_SHAPES, _SHAPE_MARKS):
        if _has_mark(text, marks):
            text = shape.sub(REDACTED, text)
    if "@" in text and "://" in text:
        text = _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    lowered = text.lower()
    if "bearer" in lowered or "basic" in lowered:
        text = _AUTH_HEADER.sub(lambda m: (m.group(1) or m.group(2)) + REDACTED, text)
    named = ("=" in text or ":" in text) and _may_name_a_secret(text)
    if named and "=" in text:
        text = _ASSIGN_EQ.sub(lambda m: m.group(1) + REDACTED, text)
    if named and ":" in text:
        text = _ASSIGN_COLON.sub(lambda m: m.group(1) + REDACTED, text)
    if "=" in text and _OPAQUE_NEEDS.search(text):
        text = _ASSIGN_OPAQUE.sub(lambda m: m.group(1) + REDACTED, text)
    return text


@functools.lru_cache(maxsize=64)
def _configured_pattern(configured: tuple) -> re.Pattern:
    """Every form of every configured secret, longest first, as one pattern (the same few secrets every call)."""
    forms = sorted({form for s in configured for form in _forms(s)}, key=len, reverse=True)
    return re.compile("|".join(re.escape(f) for f in forms))


_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\n``, ``\\x1b``...): text a stranger wrote
    cannot forge a log line, move the cursor or retitle the operator's terminal."""
    return _CONTROLS.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                              else f"\\u{ord(m.group()):04x}"), text)


def _forms(secret: str) -> set[str]:
    """The secret as text may carry it: itself, URL-encoded, JSON-escaped, base64 (padded or not, url-safe)."""
    raw = secret.encode("utf-8", "surrogatepass")
    b64, b64url = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    found = {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1],
             json.dumps(secret, ensure_ascii=False)[1:-1], b64, b64.rstrip("="), b64url, b64url.rstrip("=")}
    return {form for form in found if len(form) >= MIN_EXTRA_SECRET_LEN}


def _without_fragments(text: str, secret: str) -> str:
    """``text`` with every run of FRAGMENT_CHARS or more characters of ``secret`` (in the secret's own order)
    replaced, each run taken whole: found by its pieces, extended as far as text and secret agree."""
    if len(secret) < FRAGMENT_CHARS + 4 or len(text) < FRAGMENT_CHARS:
        return text
    # Every run of FRAGMENT_CHARS characters of the secret holds a whole piece of it of half that length starting at
    # a multiple of that half: when the text holds none of those few pieces, it holds no run (the common case, for
    # every answer to a chat, without the search from every position below).
    half = FRAGMENT_CHARS // 2
    if not any(secret[at:at + half] in text for at in range(0, len(secret) - half + 1, half)):
        return text
    spans = []
    for start in range(len(secret) - FRAGMENT_CHARS + 1):
        piece = secret[start:start + FRAGMENT_CHARS]
        at = text.find(piece)
        while at != -1:
            left, s_left, right, s_right = at, start, at + FRAGMENT_CHARS, start + FRAGMENT_CHARS
            while left > 0 and s_left > 0 and text[left - 1] == secret[s_left - 1]:
                left, s_left = left - 1, s_left - 1
            while right < len(text) and s_right < len(secret) and text[right] == secret[s_right]:
                right, s_right = right + 1, s_right + 1
            spans.append((left, right))
            at = text.find(piece, at + 1)
    if not spans:
        return text
    out, cursor = [], 0
    for left, right in sorted(spans):
        if right <= cursor:
            continue
        out.append(text[cursor:max(cursor, left)])
        if left >= cursor:
            out.append(REDACTED)
        cursor = right
    out.append(text[cursor:])
    return "".join(out)


def configured_secrets(config: dict) -> list[str]:
    """Every secret the configuration names, the one rule for the whole gateway (the log filter, the notices a
    chat sees, the admin output): the agent's key (inline or from its environment variable) and the
    values of adapter (and plugin) keys whose name says token, secret, key or password (lists included)."""
    found: list[str] = []
    # [agent] and each [profiles.NAME] agent table: a profile may use another key (docs/profiles.md).
    profiles = config.get("profiles") or {}
    agents = [config.get("agent", {})] + [p.get("agent") for p in profiles.values() if isinstance(p, dict)]
    for agent in (a for a in agents if isinstance(a, dict)):
        if agent.get("api_key"):
            found.append(str(agent["api_key"]))
        env_value = os.environ.get(agent.get("api_key_env") or "OPENAI_API_KEY")
        if env_value:
            found.append(env_value)
    media = config.get("media") or {}
    for service in ("transcription", "speech"):
        env_name = media.get(f"{service}_api_key_env") or ""
        if media.get(f"{service}_url") and (value := os.environ.get(env_name)):
            found.append(value)
    tables = [*(config.get("adapters") or {}).values(), *(config.get("plugins") or {}).values()]
    for table in (t for t in tables if isinstance(t, dict)):
        for name, value in table.items():
            if any(word in name for word in SECRET_WORDS) and value:
                found.extend(str(v) for v in value) if isinstance(value, (list, tuple)) else found.append(str(value))
    return [value for value in found if value]


_URL = re.compile(r"(?i)[a-z][a-z0-9+.-]*://\S+")


def url_origin(value: str) -> str:
    """A URL as its scheme and host (with the port): its user info, path, query and fragment go, as a webhook's
    callback path, a ``?key=`` or a proxy's password often are a credential (``[redacted]`` marks that something
    went). Not a URL: as it was."""
    if not isinstance(value, str) or not _URL.fullmatch(value.strip()):
        return value
    try:
        parts = urlsplit(value.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return REDACTED
    if not host:
        return REDACTED
    host = f"[{host}]" if ":" in host else host
    origin = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
    rest = value.strip()[len(parts.scheme) + 3:]
    return origin if rest in (host, f"{host}:{port}", f"{host}/", f"{host}:{port}/") else f"{origin}/{REDACTED}"


def redact_urls(tree):
    """``tree`` (a configuration as loaded: dicts, lists, scalars) with every URL-valued string reduced to its
    scheme and host (``url_origin``): whatever option holds it (callback_url, base_url, transcription_url...)."""
    if isinstance(tree, dict):
        return {k: redact_urls(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [redact_urls(v) for v in tree]
    return url_origin(tree) if isinstance(tree, str) else tree


def configured_urls(config) -> list[str]:
    """Every URL-valued string of the configuration, longest first (to replace in texts by ``url_origin``)."""
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and url_origin(node) != node:
            found.add(node.strip())
    walk({k: v for k, v in config.items() if not str(k).startswith("_")})
    return sorted(found, key=len, reverse=True)


def without_configured_urls(text: str, urls: Iterable[str]) -> str:
    """``text`` with every configured URL (``configured_urls``) shown as its scheme and host only."""
    for url in urls:
        text = text.replace(url, url_origin(url))
    return text


class RedactingStream:
    """A text stream that redacts each write (``redact``) before it reaches ``stream``: the admin CLI's stdout and
    stderr, so no command prints a configured secret, whatever the text came from (a transcript, a delivery, an
    error). A write is redacted on its own, so a secret split across two writes (the terminal chat drawing an answer
    a few characters at a time) is caught only by the key shapes each piece still has."""

    def __init__(self, stream, secrets: Iterable[str]):
        self._stream, self._secrets = stream, list(secrets)

    def write(self, text: str) -> int:
        self._stream.write(self.redact(text))
        return len(text)

    def redact(self, text: str) -> str:
        """``text`` as a write would pass it on: for a caller that lays text out before writing it (a table
        that may wrap a long cell across lines), so each piece is redacted whole."""
        return redact(text, self._secrets)

    def __getattr__(self, name):   # flush, isatty, fileno, encoding...: the stream's own
        return getattr(self._stream, name)
