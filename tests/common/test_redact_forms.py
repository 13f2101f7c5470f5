"""A configured secret is redacted in every form text carries it in: as itself, URL-encoded, JSON-escaped, base64,
and as any long piece of it (a key echoed minus its first character, or cut by a truncation)."""
from __future__ import annotations

import base64
import json
from urllib.parse import quote, quote_plus

import pytest

from common.redact import FRAGMENT_CHARS, REDACTED, redact

# Realistic configured secrets: shapes the pattern layer knows and shapes it does not (a password, a hex key).
CORPUS = {
    "openai": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_-Q",
    "telegram": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw8",
    "slack": "xoxb-2222222222-3333333333-abcdefghijklmnop",
    "github": "ghp_1234567890abcdefghijABCDEFGHIJ123456",
    "hmac hex": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "password": "correct horse/battery+staple=42&more",
    "webhook": 'w3bh00k"secret\\with\tescapes',
}


def forms(secret: str) -> dict[str, str]:
    raw = secret.encode()
    return {"as is": secret, "url-encoded": quote(secret, safe=""), "url-encoded (plus)": quote_plus(secret),
            "json-escaped": json.dumps(secret)[1:-1], "base64": base64.b64encode(raw).decode(),
            "base64 unpadded": base64.b64encode(raw).decode().rstrip("="),
            "base64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
            "minus its first character": secret[1:], "minus its last character": secret[:-1],
            "a long piece": secret[5:5 + max(FRAGMENT_CHARS, len(secret) // 2)]}


def leaks(text: str, secret: str) -> list[str]:
    """Every piece of ``secret`` of FRAGMENT_CHARS characters that ``text`` still holds."""
    return [secret[i:i + FRAGMENT_CHARS] for i in range(len(secret) - FRAGMENT_CHARS + 1)
            if secret[i:i + FRAGMENT_CHARS] in text]


@pytest.mark.parametrize("name", sorted(CORPUS))
@pytest.mark.parametrize("form", sorted(forms("x" * 40)))
def test_no_form_of_a_configured_secret_survives(name, form):
    secret = CORPUS[name]
    shown = forms(secret)[form]
    text = f"request failed: GET https://api.example/v1?key={shown} -> 401 ({shown!r} was refused)"
    out = redact(text, [secret])
    assert shown not in out and not leaks(out, secret), out
    assert REDACTED in out and out.startswith("request failed: GET https://api.example/v1?key=")


def test_ordinary_text_sharing_short_pieces_with_a_secret_is_left_alone():
    secret = "correct horse/battery+staple=42&more"
    text = "the correct way: a horse, a battery, a staple"   # pieces shorter than FRAGMENT_CHARS
    assert redact(text, [secret]) == text


def test_redaction_stays_idempotent_with_forms():
    secret = CORPUS["hmac hex"]
    once = redact(f"sig={secret[3:]} b64={base64.b64encode(secret.encode()).decode()}", [secret])
    assert redact(once, [secret]) == once


def test_control_characters_are_shown_escaped_and_the_rest_untouched():
    from common.redact import escape_controls
    assert escape_controls("a\nb\r\tc\x00\x1b[1m\x7f\x9b\u2028 é 😀") == "a\\nb\\r\\tc\\x00\\x1b[1m\\x7f\\x9b\\u2028 é 😀"


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_a_run_of_fragment_chars_from_any_offset_of_the_secret_is_redacted(name):
    # The search only looks further when the text holds one of the secret's pieces of FRAGMENT_CHARS // 2 that
    # start at a multiple of that: a run from any offset must still be found.
    secret = CORPUS[name]
    for start in range(len(secret) - FRAGMENT_CHARS + 1):
        run = secret[start:start + FRAGMENT_CHARS]
        out = redact(f"echoed back: {run} (cut)", [secret], shapes=False)
        assert run not in out and REDACTED in out, (start, out)


def _spellings(alternatives: str) -> list[str]:
    """Every concrete name the alternation spells: ``[_-]?`` as nothing, "_" or "-", ``s?`` as nothing or "s"."""
    names = []
    for alternative in alternatives.split("|"):
        variants = [alternative]
        for optional, choices in (("[_-]?", ("", "_", "-")), ("s?", ("", "s"))):
            variants = [v.replace(optional, c, 1) for v in variants for c in choices] if optional in alternative \
                else variants
        names += variants
    return names


def test_every_secret_name_holds_a_word_the_quick_look_knows():
    # redact skips the name = value scans when the text holds none of _NAME_WORDS: a name without one would leak.
    from common.redact import _NAME_WORDS, _SECRET_NAME_COLON, _SECRET_NAME_EQ
    for name in _spellings(_SECRET_NAME_EQ) + _spellings(_SECRET_NAME_COLON):
        assert any(word in name.casefold() for word in _NAME_WORDS), name


@pytest.mark.parametrize("text", [
    "PASSWORD = hunter2hunter2", "Api-Key: abcdefgh1234", "paſſword=abcdefgh12", "\u212aey = abcdefgh1234",
    "SıG=abcdefgh1234", "auth_token: 'abcdefgh1234'", "x-api-key: abcdefgh1234", "nothing to see here: 12345678",
    "credentials = abcdefgh1234 and more", "the key=value pairs: key = abcdefgh1234"])
def test_the_quick_look_changes_no_redaction(text, monkeypatch):
    import common.redact as redaction
    quick = redact(text)
    monkeypatch.setattr(redaction, "_may_name_a_secret", lambda _text: True)
    assert quick == redact(text), text


def test_the_first_letter_lookahead_changes_no_match():
    """The name = value patterns begin with a lookahead for their names' first letters (a faster scan): it turns
    away exactly the positions where no name can begin, whatever the text, case folding included."""
    import random
    import re
    import common.redact as redaction
    pairs = []
    for names, pattern in ((redaction._SECRET_NAME_EQ, redaction._ASSIGN_EQ),
                           (redaction._SECRET_NAME_COLON, redaction._ASSIGN_COLON)):
        lookahead = redaction._starts_with_a_first_letter(names)
        assert all(name[0].isalpha() for name in names.split("|")), "a name that begins with syntax, not a letter"
        letters = lookahead[len("(?=["):-len("])")]
        admitted = re.compile("(?i)[" + letters + "]")
        for cp in range(0x3000):   # Latin, Greek, Cyrillic, letterlike symbols (the Kelvin sign), and more
            c = chr(cp)
            as_first_letter = any(re.match("(?i)" + letter, c) for letter in letters)
            assert bool(admitted.match(c)) == as_first_letter, (names, hex(cp))
        pairs.append((pattern, re.compile(pattern.pattern.replace(lookahead, "", 1))))
    pieces = ["api", "_", "-", "key", "KEY", "Tok", "en", "secret", "paſſ", "word", "\u212aey", "ı", "İ", "x-",
              "sig", "auth", "=", ":", " ", "\n", "'", '"', "abcdefgh1234", "Zq", "9", "é", "=="]
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 24)))
        for fast, plain in pairs:
            assert fast.sub("<>", text) == plain.sub("<>", text), text


def test_the_opaque_value_precheck_and_the_telegram_lookahead_change_no_redaction(monkeypatch):
    """_OPAQUE_NEEDS only skips the name = opaque-value scan where it cannot match, and the Telegram shape's
    leading lookahead only turns away positions its first digit cannot be at: random texts redact the same with
    the check always passing and the shape written without the lookahead."""
    import random
    import re
    import common.redact as redaction
    pieces = ["=", " = ", "='", '"', "key", "_", "x.y", "a1b2c3d4e5f6a7b8", "A9z8Y7x6W5v4U3t2", "+/", "==", " ", "\n",
              "123456", ":", "-", "7" * 9, "٣", "bot", "token", "é", "abc"]
    rng = random.Random(11)
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 30))) for _ in range(3000)]
    quick = [redact(t) for t in texts]
    telegram = redaction._TOKEN_SHAPES[3]
    assert telegram.pattern.startswith(r"(?=\d)")
    shapes = list(redaction._TOKEN_SHAPES)
    shapes[3] = re.compile(telegram.pattern[len(r"(?=\d)"):])
    monkeypatch.setattr(redaction, "_TOKEN_SHAPES", shapes)
    monkeypatch.setattr(redaction, "_OPAQUE_NEEDS", re.compile(""))
    assert sum(q != t for q, t in zip(quick, texts)) > 100, "the texts were meant to hold values to redact"
    for text, fast in zip(texts, quick):
        assert fast == redact(text), text
