"""The gateway's state belongs to its user alone.

Transcripts, web chat visitor credentials, the delivery ledger and the run files (which name the admin port) live
under the state directory. Every gateway command sets ``PRIVATE_UMASK`` as its first act (``run_gateway.main``),
so whatever it creates is 0600 (files) and 0700 (directories) whatever umask the shell or the service manager gave
it; the state directory itself is made 0700 by ``make_private_dir`` even when an earlier version left it open.

Files written whole (exports, run files) go through ``write_private``: a random name opened with
``O_CREAT | O_EXCL | O_NOFOLLOW`` in the destination's directory, so a planted file or symlink is never written
through, then renamed over the destination. A kill -9 between the write and the rename leaves the destination as it
was and a stray ``.*.part`` file, never a torn destination.
"""
from __future__ import annotations

import os
import pwd
import secrets
from pathlib import Path
from typing import Optional, Union

PRIVATE_UMASK = 0o077
EX_NOPERM = 77                    # sysexits.h: permission denied


def make_private_dir(path: Union[str, Path]) -> Path:
    """Create ``path`` (and missing parents) as 0700, or tighten it to 0700 if it exists and is ours."""
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid == os.geteuid() and info.st_mode & 0o077:
        path.chmod(0o700)
    return path


def write_private(path: Union[str, Path], data: bytes, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` as a new 0600 file, atomically, never through a symlink or a planted file."""
    path = Path(path)
    part = path.with_name(f".{path.name}.{secrets.token_hex(8)}.part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            if fsync:
                out.flush()
                os.fsync(out.fileno())
        os.replace(part, path)
    except BaseException:
        try:
            part.unlink()
        except FileNotFoundError:
            pass
        raise


def _owner_name(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def foreign_owner(state_dir: Union[str, Path]) -> Optional[str]:
    """Why the calling user may not use the gateway of ``state_dir``, or None if it may (it owns the state, or is
    root). The state directory may be out of sight (a parent we cannot enter): the nearest directory we can see on
    the way up says whose it is."""
    me = os.geteuid()
    if me == 0:
        return None
    path = Path(state_dir)
    seen: Optional[os.stat_result] = None
    for candidate in (path, *path.parents):
        try:
            seen = candidate.stat()
        except FileNotFoundError:
            continue
        except PermissionError:
            continue
        if candidate != path and os.access(candidate, os.X_OK):
            return None           # the state directory does not exist yet, under a folder open to us
        break
    if seen is None or seen.st_uid == me:
        return None
    return (f"the gateway's state directory {path} belongs to another user, {_owner_name(seen.st_uid)}: only that "
            f"user (or root) may run gateway commands on it; you are {_owner_name(me)}")


def root_refusal(state_dir: Union[str, Path]) -> Optional[str]:
    """Why root will not act on ``state_dir``, or None. Root never acts on a file another user can write: a
    service user who owns the state directory could name a fake admin in ``run/runtime.json`` (root would connect
    to it and read what it sends) or another process in ``run/gateway.pid`` (root's ``stop`` would signal it). So
    when the state directory or its ``run/`` belongs to another user, or is writable by others, root refuses and
    says as whom to run the command."""
    if os.geteuid() != 0:
        return None
    path = Path(state_dir)
    for candidate in (path, path / "run"):
        try:
            seen = candidate.stat()
        except OSError:
            continue
        if seen.st_uid != 0:
            name = _owner_name(seen.st_uid)
            try:
                as_whom = pwd.getpwuid(seen.st_uid).pw_name
            except KeyError:
                as_whom = f"#{seen.st_uid}"
            return (f"the gateway's state directory {path} belongs to {name}: root does not act on files another "
                    f"user can write (its run files could name any process or port); run the command as that "
                    f"user, e.g. sudo -u {as_whom} ...")
        if seen.st_mode & 0o022:
            return (f"{candidate} is writable by other users ({oct(seen.st_mode & 0o777)}): root does not act on "
                    "files another user can write; chmod 700 it")
    return None

