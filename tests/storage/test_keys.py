import os
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from storage.keys import (CHAT_TYPES, UnsafePathError, hash_id, is_valid_key, safe_path, session_key)

from .helpers import Src

KEY_CHARS = re.compile(r"[a-z0-9._-]+")
hostile_text = st.one_of(
    st.text(max_size=300),
    st.sampled_from(["..", ".", "/", "\\", "../../etc/passwd", "C:\\Windows", "c:", "\x00", "a/../..", "~", "",
                     " ", "..\\..", "/etc", "con", "\u202e", "\ud800", "a" * 300, "é" * 200]),
    st.lists(st.sampled_from(["..", "/", "\\", "\x00", "a", ".", ":", "C:"]), max_size=12).map("".join))


def test_key_shape_and_stability():
    src = Src(platform="telegram", chat_id="-100123", chat_type="group", thread_id="7", user_id="42")
    key = session_key(src)
    assert key == session_key(Src(platform="telegram", chat_id="-100123", chat_type="group", thread_id="7",
                                  user_id="99"))  # per chat (+thread) by default
    assert key.startswith("default.telegram.group.chat-")
    assert "100123" not in key and "42" not in key
    # pinned: a change of the hash construction would orphan every stored session
    assert key == "default.telegram.group.chat-7e61efdc23faa245.thread-7817f2f6aa25126d"


def test_hash_id_is_documented_construction():
    import hashlib
    expected = hashlib.sha256("agent-gateway/id/v1\0user\0telegram\x0042".encode()).hexdigest()[:16]
    assert hash_id("user", "telegram\x0042") == expected
    assert hash_id("user", "1") != hash_id("chat", "1")  # domain separation by kind


def test_grouping_rules():
    dm = session_key(Src(chat_type="dm", chat_id="5", thread_id="t1", user_id="u1"))
    assert dm == session_key(Src(chat_type="dm", chat_id="5", thread_id="t2", user_id="u2"))
    assert dm == session_key(Src(chat_type="dm", chat_id="5"), per_user_in_groups=True)
    group = Src(chat_type="group", chat_id="9", user_id="u1")
    assert session_key(group) != session_key(Src(chat_type="group", chat_id="9", thread_id="t"))
    assert session_key(group, per_user_in_groups=True) != session_key(
        Src(chat_type="group", chat_id="9", user_id="u2"), per_user_in_groups=True)
    assert ".user-" in session_key(group, per_user_in_groups=True)
    assert session_key(Src(chat_type="group", chat_id="9")) == session_key(
        Src(chat_type="group", chat_id="9"), per_user_in_groups=True)  # anonymous posts stay per chat
    assert session_key(Src(profile="work")) != session_key(Src(profile="Work"))
    assert session_key(Src(platform="slack")) != session_key(Src(platform="discord"))


@pytest.mark.parametrize("bad", [Src(chat_type="private"), Src(chat_id=""), Src(platform=""), Src(chat_id=None)])
def test_incomplete_sources_are_refused(bad):
    with pytest.raises(ValueError):
        session_key(bad)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(platform=hostile_text, chat_id=hostile_text, thread_id=st.none() | hostile_text,
       user_id=st.none() | hostile_text, profile=hostile_text, chat_type=st.sampled_from(CHAT_TYPES),
       per_user=st.booleans())
def test_no_hostile_source_makes_a_key_that_escapes_root(tmp_path, platform, chat_id, thread_id, user_id, profile,
                                                         chat_type, per_user):
    src = Src(platform=platform, chat_id=chat_id, chat_type=chat_type, thread_id=thread_id, user_id=user_id,
              profile=profile)
    try:
        key = session_key(src, per_user_in_groups=per_user)
    except ValueError:
        return  # refusing is fine; escaping is not
    assert KEY_CHARS.fullmatch(key) and is_valid_key(key)
    for raw in (chat_id, thread_id, user_id):
        if raw and len(raw) >= 6 and raw not in (platform, profile):
            assert raw not in key
    path = safe_path(tmp_path, key, "transcript.db")
    assert tmp_path.resolve() in path.resolve().parents


@settings(max_examples=500, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(hostile_text, min_size=1, max_size=4))
def test_safe_path_never_leaves_root(tmp_path, parts):
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    try:
        path = safe_path(root, *parts)
    except UnsafePathError:
        return
    real = path.resolve()
    assert root.resolve() in real.parents
    assert os.path.commonpath([str(root.resolve()), str(real)]) == str(root.resolve())


@pytest.mark.parametrize("part,reason", [("..", "'..'"), ("a/b", "separator"), ("a\\b", "separator"),
                                         ("C:evil", "drive letter"), ("a\0b", "NUL"), ("", "empty"),
                                         ("x" * 256, "255"), ("é" * 128, "255"), (".", "'.'"), ("\ud800", "surrogate"),
                                         ("...", "'..'")])
def test_safe_path_refusals_say_why(tmp_path, part, reason):
    with pytest.raises(UnsafePathError, match=reason):
        safe_path(tmp_path, part)
    assert issubclass(UnsafePathError, ValueError)


def test_safe_path_refuses_symlink_out_of_root(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside"):
        safe_path(root, "link", "file")
    assert safe_path(root, "x" * 255) == root.resolve() / ("x" * 255)
    with pytest.raises(UnsafePathError):
        safe_path(root)
