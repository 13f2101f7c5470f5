"""The media cache: content-addressed, private, crash-safe, swept when nothing references a file."""
from __future__ import annotations

import os
import stat
import time

import pytest

from storage import MediaCache, Store
from storage.media import content_key


def test_a_file_is_named_by_its_hash_and_private(tmp_path):
    cache = MediaCache(tmp_path / "media")
    key = cache.put(b"hello")
    assert key == content_key(b"hello") and len(key) == 64
    path = cache.path(key)
    assert path == tmp_path / "media" / key[:2] / key and path.read_bytes() == b"hello"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for directory in (tmp_path / "media", path.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert cache.put(b"hello") == key and cache.stats().files == 1   # the same bytes are one file
    assert cache.read(key) == b"hello"


@pytest.mark.parametrize("key", ["../../etc/passwd", "a" * 63, "A" * 64, "", None, "g" * 64])
def test_no_key_names_a_path_outside_the_cache(tmp_path, key):
    cache = MediaCache(tmp_path / "media")
    with pytest.raises(ValueError):
        cache.path(key)
    assert cache.read(key) is None and not cache.has(key)


def test_a_file_whose_bytes_do_not_match_its_name_reads_as_missing(tmp_path):
    cache = MediaCache(tmp_path / "media")
    key = cache.put(b"original")
    cache.path(key).write_bytes(b"tampered")
    assert cache.read(key) is None


def test_stats_count_files_and_bytes(tmp_path):
    cache = MediaCache(tmp_path / "media")
    assert (cache.stats().files, cache.stats().bytes) == (0, 0)
    cache.put(b"a" * 10)
    cache.put(b"b" * 30)
    assert (cache.stats().files, cache.stats().bytes) == (2, 40)


def test_sweep_removes_unreferenced_old_files_and_stray_parts_only(tmp_path):
    cache = MediaCache(tmp_path / "media")
    kept, dropped, young = cache.put(b"kept"), cache.put(b"dropped"), cache.put(b"young")
    stray = cache.path(kept).parent / f".{kept}.0123456789abcdef.part"   # what a kill -9 mid-write leaves
    stray.write_bytes(b"half")
    old = time.time() - 7200
    for path in (cache.path(kept), cache.path(dropped), stray):
        os.utime(path, (old, old))
    assert cache.sweep({kept}, grace_s=3600) == 2
    assert cache.has(kept) and cache.has(young) and not cache.has(dropped) and not stray.exists()


def test_putting_cached_bytes_again_renews_their_grace(tmp_path):
    cache = MediaCache(tmp_path / "media")
    key = cache.put(b"again")
    old = time.time() - 7200
    os.utime(cache.path(key), (old, old))
    cache.put(b"again")                      # a new message brings the same file: not swept before its commit
    assert cache.sweep(set(), grace_s=3600) == 0 and cache.has(key)


async def test_referenced_keys_come_from_the_inbox_and_the_transcript(db_path):
    a, b = "a" * 64, "b" * 64
    async with await Store.open(db_path) as store:
        await store.inbox.put("k", "telegram", "1:1", {"text": "", "attachments": [{"cache_key": a}]})
        await store.inbox.put("k", "telegram", "1:2", {"text": "no files"})
        info = await store.sessions.get_or_create("k", {})
        await store.sessions.append(info.session_id, [{"role": "user", "kind": "message",
                                                       "payload": {"text": "", "attachments": [{"cache_key": b}]}}])
        assert await store.media.referenced() == {a, b}


def test_over_its_byte_quota_the_cache_evicts_its_oldest_files_never_the_one_just_added(tmp_path):
    cache = MediaCache(tmp_path / "media", max_bytes=1000)
    keys = []
    for n in range(4):
        keys.append(cache.put(bytes([n]) * 400))
        os.utime(cache.path(keys[-1]), (1000 + n, 1000 + n))   # distinct ages, oldest first
    assert [cache.has(k) for k in keys] == [False, False, True, True] and cache.stats().bytes == 800
    big = cache.put(b"x" * 5000)                 # alone over the quota: kept, everything older goes
    assert cache.has(big) and cache.stats().files == 1
    assert MediaCache(tmp_path / "media").max_bytes == 0   # a reader's view: no quota, evicts nothing


def test_a_file_streamed_in_pieces_lands_under_its_hash_and_a_discarded_one_leaves_nothing(tmp_path):
    cache = MediaCache(tmp_path / "media")
    incoming = cache.incoming()
    for piece in (b"hel", b"lo"):
        incoming.write(piece)
    assert incoming.part.read_bytes() == b"hello"     # on disk as it arrives, not held in memory
    assert incoming.commit() == content_key(b"hello") and cache.read(content_key(b"hello")) == b"hello"
    dropped = cache.incoming()
    dropped.write(b"half a file")
    dropped.discard()
    assert not list((tmp_path / "media" / "incoming").iterdir())
    stray = cache.incoming()                          # a kill -9 mid-upload: the part file stays...
    stray.write(b"cut short")
    assert cache.sweep([content_key(b"hello")], grace_s=0, now=time.time() + 1) == 1   # ...until swept
    assert not stray.part.exists()
