
import pytest
from hypothesis import given, settings, strategies as st

from common.redact import REDACTED, redact

SECRETS = {
    "openai": "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
    "openai_project": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_-Q",
    "telegram": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw8",
    "slack": "xoxb-2222222222-3333333333-abcdefghijklmnop",
    "github": "ghp_1234567890abcdefghijABCDEFGHIJ123456",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "google": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_known_token_shapes_are_redacted(kind):
    secret = SECRETS[kind]
    out = redact(f"the {kind} credential is {secret}, keep it safe")
    assert secret not in out
    assert REDACTED in out
    assert out.startswith(f"the {kind} credential is ") and out.endswith(", keep it safe")


def test_telegram_token_inside_an_api_url():
    url = f"https://api.telegram.org/bot{SECRETS['telegram']}/getUpdates"
    out = redact(url)
    assert SECRETS["telegram"] not in out and out.endswith("/getUpdates")


def test_bearer_and_basic_headers_keep_the_scheme():
    assert redact("Authorization: Bearer abc.def-ghi_jkl") == f"Authorization: Bearer {REDACTED}"
    assert redact("Authorization: Basic dXNlcjpwYXNzd29yZA==") == f"Authorization: Basic {REDACTED}"
    assert redact("a basic understanding of bearer bonds") == "a basic understanding of bearer bonds"


def test_url_userinfo_and_secret_query_parameters():
    out = redact("GET https://alice:hunter22@example.com/v1?model=x&api_key=abc123def&token=zzzzzz9&page=2")
    assert "alice" not in out and "hunter22" not in out
    assert "abc123def" not in out and "zzzzzz9" not in out
    assert "model=x" in out and "page=2" in out and "example.com/v1" in out


def test_key_value_assignments():
    out = redact('OPENAI_API_KEY=plainvalue123 password: "s3cret-pass" monkey=banana123')
    assert "plainvalue123" not in out and "s3cret-pass" not in out
    assert "monkey=banana123" in out
    assert redact("commit=3f2a9c1b7d8e4f60a1b2c3d4e5f60718293a4b5c") == f"commit={REDACTED}"
    assert redact("the key: remember it") == "the key: remember it"


def test_private_key_block():
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----"
    assert redact(f"x {block} y") == f"x {REDACTED} y"


def test_ordinary_text_is_untouched():
    text = "Ask the task-management team; 12:30 is fine. sk-short, tokens=5, max_tokens: 100. ```py\nx = 1\n```"
    assert redact(text) == text


def test_extra_secrets_exact_and_longest_first():
    out = redact("pw=correcthorse and correcthorsebattery", extra_secrets=["correcthorse", "correcthorsebattery"])
    assert "correcthorse" not in out
    assert out.count(REDACTED) == 2
    assert redact("a b c", extra_secrets=["", "b"]) == "a b c"   # too short to be a credential


def test_redaction_is_idempotent():
    text = " ".join(SECRETS.values()) + " https://u:p@h/x?key=abcdefgh"
    once = redact(text)
    assert redact(once) == once


alphabet = st.characters(codec="utf-8", exclude_categories=("Cs",))


@settings(max_examples=200, deadline=None)
@given(before=st.text(alphabet, max_size=40), after=st.text(alphabet, max_size=40),
       secret=st.text(st.sampled_from("abcdefXYZ0123456789-_.+/"), min_size=8, max_size=40))
def test_property_configured_secret_never_survives(before, after, secret):
    out = redact(before + secret + after, extra_secrets=[secret])
    assert secret not in out


