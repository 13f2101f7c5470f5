"""Display names made harmless; size caps as data, and the reply that states them."""
from __future__ import annotations

import pytest

from actors.media.limits import MB, cap_for, human_size, too_large_notice
from actors.media.names import MAX_NAME, display_name


@pytest.mark.parametrize("raw, expected", [
    ("report.pdf", "report.pdf"),
    ("../../etc/passwd", "passwd"),
    ("C:\\Windows\\system32\\evil.exe", "evil.exe"),
    ("/abs/path/x.txt", "x.txt"),
    (".bashrc", "bashrc"),
    ("..", "document"),
    ("", "document"),
    (None, "document"),
    ("in\x00voice\n.pdf", "invoice.pdf"),
    ("photo\u202egnp.exe", "photognp.exe"),            # a right-to-left override that would show "exe.png"
    ("  many   spaces .txt ", "many spaces .txt"),
])
def test_display_name(raw, expected):
    assert display_name(raw) == expected


def test_a_made_up_name_follows_the_kind_and_type():
    assert display_name("", "photo", "image/png") == "photo.png"
    assert display_name(None, "voice", "audio/ogg") == "voice.ogg"


def test_a_long_name_is_cut_keeping_its_extension():
    name = display_name("x" * 500 + ".tar.gz")
    assert len(name) <= MAX_NAME and name.endswith(".gz")


def test_caps_per_kind_and_platform():
    assert cap_for("telegram", "document") == 20 * MB
    assert cap_for("telegram", "photo") <= 20 * MB
    assert cap_for("elsewhere", "video") == 20 * MB


def test_the_too_large_reply_says_both_sizes():
    assert too_large_notice(25 * MB, 20 * MB).startswith("That file is 25 MB; I can take files up to 20 MB")
    assert "“big.pdf” is 25 MB" in too_large_notice(25 * MB, 20 * MB, "big.pdf")
    assert [human_size(n) for n in (12, 12 * 1024, int(1.5 * MB))] == ["12 bytes", "12 KB", "1.5 MB"]
