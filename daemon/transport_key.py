"""The key every actor frame of a run is signed with (runtime/frame_mac.py), and where the admin CLI finds it.

A single gateway uses a fresh per-run key the launcher makes (``run_key``: 32 random bytes in
``<state>/run/transport.key``, mode 0600 inside the private run directory; the admin CLI reads it there). The hosts
of a convention share a key derived from the configured cluster secret (``cluster_key``), the same on the leader,
on every worker and in the admin CLI. Actor processes inherit the key with the patched transport from the process
that installed it; no actor reads the file.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from runtime.frame_mac import KEY_BYTES

KEY_FILE = "transport.key"
_CLUSTER_LABEL = b"agent-gateway actor transport v1"


class KeyUnreadable(RuntimeError):
    """The transport key of a running gateway cannot be read (another user's, or missing)."""


def run_key(run_dir: Path) -> bytes:
    """A fresh key for this run, written to ``run_dir/transport.key`` (0600) for the admin CLI. A key left by a
    killed run is replaced: only the running launcher's key opens its ports."""
    # only where a key is written: the admin CLI reads keys and never writes one
    from common.privacy import write_private
    key = secrets.token_bytes(KEY_BYTES)
    write_private(run_dir / KEY_FILE, key.hex().encode() + b"\n", fsync=False)
    return key


def write_key(run_dir: Path, key: bytes) -> None:
    """Record a key this run did not make (a convention's) where the admin CLI reads it."""
    # only where a key is written: the admin CLI reads keys and never writes one
    from common.privacy import write_private
    write_private(run_dir / KEY_FILE, key.hex().encode() + b"\n", fsync=False)


def read_key(run_dir: Path) -> bytes:
    path = run_dir / KEY_FILE
    try:
        text = path.read_text().strip()
    except PermissionError:
        raise KeyUnreadable(f"{path} is not readable by uid {os.geteuid()}: admin commands run as the gateway's "
                            "user") from None
    except FileNotFoundError:
        raise KeyUnreadable(f"{path} is missing: the running gateway predates authenticated transport; restart "
                            "it") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise KeyUnreadable(f"{path} does not hold a transport key")
    return key


def cluster_key(secret: str) -> bytes:
    """The key every host of a convention derives from the shared cluster secret."""
    return hmac.new(secret.encode(), _CLUSTER_LABEL, hashlib.sha256).digest()
