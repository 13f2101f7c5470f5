"""Whether the gateway can write where its state lives, said in one line before anything else tries.

A state directory on a read-only file system, under a regular file, or on a full or foreign mount made ``start``
and ``run`` end in a traceback from the first ``mkdir`` and ``sessions list`` in SQLite's "unable to open database
file". ``unusable_state_dir`` answers the question those commands need first: can a file be created there? It
tries it (a permission bit proves nothing for root, who writes through 0500), so its answer holds for every user,
and what it creates it removes (a kill -9 in between leaves one empty ``.write-check.*`` file, harmless).

``EX_CANTCREAT`` (73, sysexits.h: "cannot create output file") is the exit of every command refused this way
(docs/operations.md, Exit codes).
"""
from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path
from typing import Optional, Union

from common.privacy import make_private_dir

EX_CANTCREAT = 73
PROBE_PREFIX = ".write-check."


def unusable_state_dir(state_dir: Union[str, Path], create: bool = True) -> Optional[str]:
    """Why no file can be created in ``state_dir`` (one line naming the directory and the reason), or None.
    ``create``: make the directory (private) when it is missing, as a start would; without it (``doctor``, which
    starts nothing) a missing directory is judged by the nearest one above it that exists."""
    path = Path(state_dir)
    blocker = _file_on_the_way(path)
    if blocker is not None:
        return (f"cannot use the state directory {path}: {blocker} is a file, not a directory (set "
                "$GATEWAY_STATE_DIR or [gateway] state_dir to a directory)")
    target = path
    try:
        if create:
            make_private_dir(path)
        else:
            target = next(p for p in (path, *path.parents) if p.exists())
        _write_probe(target)
    except OSError as exc:
        return f"cannot use the state directory {path}: {_reason(exc, target, path)}"
    return None


def _file_on_the_way(path: Path) -> Optional[Path]:
    """The first existing path, from the top, that is not a directory (the state dir itself or a parent)."""
    for candidate in reversed((path, *path.parents)):
        try:
            if candidate.exists() and not candidate.is_dir():
                return candidate
        except OSError:
            return None
    return None


def _write_probe(directory: Path) -> None:
    probe = directory / f"{PROBE_PREFIX}{secrets.token_hex(6)}"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.close(fd)
    os.unlink(probe)


def _reason(exc: OSError, target: Path, state_dir: Path) -> str:
    where = Path(exc.filename) if exc.filename else target
    if where.name.startswith(PROBE_PREFIX):
        where = where.parent   # the directory is the news, not the probe's name
    where = "it" if where == state_dir else where
    inside = "in it" if where == "it" else f"in {where}"
    said = {errno.EROFS: f"{where} is on a read-only file system",
            errno.EACCES: f"no permission to write {inside} (you are uid {os.geteuid()})",
            errno.EPERM: f"writing {inside} is not permitted",
            errno.ENOSPC: f"no space left to write {inside}",
            errno.EDQUOT: f"the disk quota is exhausted: nothing can be written {inside}"}
    return said.get(exc.errno) or f"{exc.strerror or exc} ({where})"
