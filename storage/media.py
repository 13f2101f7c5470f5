"""The media cache: attachment bytes under the state directory, named by their content (docs/media.md).

    cache = MediaCache(state_dir / "media")
    key = cache.put(data)            # the SHA-256 hex of ``data``; the same bytes twice are one file
    data = cache.read(key)           # None once swept

Layout: ``media/<first two hex>/<sha256 hex>``, with no extension. A file's name is its hash and nothing else: a
sender's file name never becomes a path (it is only a display name, actors/media/names.py), and nothing derives a
content type from a name here, so no file in the cache can be taken for HTML or a script by what it is called. The
directories are 0700 and the files 0600 (the state belongs to its user alone, common/privacy.py).

What survives kill -9: ``put`` writes a random ``.<key>.<hex>.part`` beside its destination with O_EXCL|O_NOFOLLOW,
fsyncs it and renames it over the destination (``write_private``). A kill before the rename leaves a stray
``.part`` file and no entry: the caller had not stored any reference to the key yet (the inbox row is committed
after ``put`` returns), and ``sweep`` removes the stray file once it is older than its grace period. A kill after the
rename leaves a whole file, referenced or not; an unreferenced one goes with the next sweep. A reader therefore never
sees a torn file under a hash name, and a file's bytes always hash to its name (``read`` checks, and treats a file
that does not as missing).

A file that arrives in pieces (a web chat upload, streamed to disk as it comes: ``incoming()``) is written to
``incoming/.<hex>.part`` (0600, O_EXCL|O_NOFOLLOW) while its hash is computed, and renamed to its key once whole and
fsynced (``Incoming.commit``); a kill before that leaves a stray ``.part`` there, swept as above.

A byte quota (``max_bytes``, ``[media] cache_max_bytes``) bounds the whole cache: after each file is added, the
oldest files (by modification time: ``put`` of cached bytes refreshes it) are evicted until the cache is back
within the quota; the file just added is never evicted, so the cache exceeds its quota by at most that one file,
which its platform's cap bounds. An evicted file a conversation still names reads as gone (``read`` returns None):
the page shows it as no longer here, and the agent is told a file was sent but is not available any more.

Retention follows the transcript's: ``sweep(referenced)`` deletes every file no inbox row or transcript event names
(``Store.media.referenced``), once it is older than the grace period that covers an ingest between its ``put`` and
the commit of its row (``put`` of bytes already cached refreshes the file's time, for the same reason).
"""
from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional, Union

from common.config import setting
from common.privacy import make_private_dir, write_private

KEY = re.compile(r"[0-9a-f]{64}")
SWEEP_GRACE_S = 3600.0     # an unreferenced file younger than this may belong to an ingest not committed yet
INCOMING = "incoming"      # files arriving in pieces, until whole


@dataclass(frozen=True)
class CacheStats:
    files: int
    bytes: int


def content_key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def valid_key(key: object) -> bool:
    return isinstance(key, str) and KEY.fullmatch(key) is not None


class MediaCache:
    def __init__(self, root: Union[str, Path], max_bytes: int = 0) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes    # 0: no quota (a reader's or the sweeper's view)

    def path(self, key: str) -> Path:
        """Where the file of ``key`` lives; ValueError for anything that is not a SHA-256 hex digest (so no key
        can name a path outside the cache)."""
        if not valid_key(key):
            raise ValueError(f"not a media cache key: {key!r}")
        return self.root / key[:2] / key

    def put(self, data: bytes) -> str:
        key = content_key(data)
        path = self.path(key)
        if path.exists() and path.stat().st_size == len(data):
            os.utime(path)   # a fresh reference is coming: keep the sweep's grace period from running out under it
            return key
        make_private_dir(self.root)
        make_private_dir(path.parent)
        write_private(path, data)
        self.evict(keep=key)
        return key

    def incoming(self) -> "Incoming":
        """A file to be written in pieces (``write``), then ``commit``-ted under its key or ``discard``-ed."""
        return Incoming(self)

    def evict(self, keep: str = "") -> int:
        """Delete the oldest files until the cache is within ``max_bytes`` (never ``keep``); how many went."""
        if self.max_bytes <= 0:
            return 0
        files = []
        for entry in self._entries():
            if valid_key(entry.name):
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                files.append((info.st_mtime, entry.name, info.st_size, entry.path))
        total, removed = sum(f[2] for f in files), 0
        for _mtime, name, size, path in sorted(files):
            if total <= self.max_bytes:
                break
            if name == keep:
                continue
            try:
                os.unlink(path)
                removed += 1
            except FileNotFoundError:
                pass            # another process evicted or swept it first: it is gone either way
            total -= size
        return removed

    def read(self, key: str) -> Optional[bytes]:
        try:
            data = self.path(key).read_bytes()
        except (FileNotFoundError, ValueError):
            return None
        return data if content_key(data) == key else None

    def has(self, key: str) -> bool:
        try:
            return self.path(key).is_file()
        except ValueError:
            return False

    def _entries(self) -> Iterator[os.DirEntry]:
        try:
            shards = list(os.scandir(self.root))
        except FileNotFoundError:
            return
        for shard in shards:
            if shard.is_dir(follow_symlinks=False) and (len(shard.name) == 2 or shard.name == INCOMING):
                yield from os.scandir(shard.path)

    def stats(self) -> CacheStats:
        files = size = 0
        for entry in self._entries():
            if valid_key(entry.name) and entry.is_file(follow_symlinks=False):
                files += 1
                size += entry.stat(follow_symlinks=False).st_size
        return CacheStats(files, size)

    def sweep(self, referenced: Iterable[str], grace_s: float = SWEEP_GRACE_S, now: Optional[float] = None) -> int:
        """Delete what nothing references: files no key in ``referenced`` names and stray ``.part`` files (a
        write a kill cut short), each once older than ``grace_s``. Returns how many files went."""
        keep, cutoff, removed = set(referenced), (time.time() if now is None else now) - grace_s, 0
        for entry in list(self._entries()):
            if entry.name in keep:
                continue
            try:
                if entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                    continue
                os.unlink(entry.path)
                removed += 1
            except FileNotFoundError:
                continue
        return removed


class Incoming:
    """One file arriving in pieces: written as it comes (so a slow or stalled sender costs disk, bounded by its
    caller, not memory), hashed on the way, and put under its key by ``commit``."""

    def __init__(self, cache: MediaCache):
        self.cache = cache
        folder = cache.root / INCOMING
        make_private_dir(cache.root)
        make_private_dir(folder)
        self.part = folder / f".{secrets.token_hex(16)}.part"
        fd = os.open(self.part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._file = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        self._file.write(chunk)
        self._file.flush()      # on disk (the page cache) now, not in this process's memory
        self._hash.update(chunk)
        self.size += len(chunk)

    def commit(self) -> str:
        """Blocking (fsync, rename): the file under its key, which is returned."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        key = self._hash.hexdigest()
        path = self.cache.path(key)
        make_private_dir(path.parent)
        if path.exists() and path.stat().st_size == self.size:
            os.utime(path)
            self.part.unlink()
        else:
            os.replace(self.part, path)
        self.cache.evict(keep=key)
        return key

    def discard(self) -> None:
        if not self._file.closed:
            self._file.close()
        try:
            self.part.unlink()
        except FileNotFoundError:
            pass


def media_cache(config: dict) -> MediaCache:
    """The cache of the configured state directory, with its quota: what every writer uses."""
    return MediaCache(Path(config["gateway"]["state_dir"]) / "media", setting(config, "media", "cache_max_bytes"))
