"""Another local user, for the tests that need one, and bytes that prove whether the gateway unpickled them.

The other user is real: created with ``useradd`` when the suite runs as root (``other_user`` skips with the reason
otherwise). ``as_user`` runs a function in a forked child that has dropped every privilege to that uid, so the kernel
sees the same peer it would see from a shell of that user; ``DROP_SNIPPET`` does the same at the top of a script run
in another network namespace (``ip netns exec`` needs root, so the script drops after entering it).

``file_writing_pickle(marker)`` is a pickle whose loading writes ``marker``: put the marker where only root can
write, and its existence afterwards says the gateway's user unpickled what a stranger sent.
"""
from __future__ import annotations

import json
import os
import pickle
import pwd
import subprocess
import time
from pathlib import Path

import pytest

OTHER_USER = "gw-stranger"

DROP_SNIPPET = """
import os, socket, sys, time   # before the drop: the interpreter's library may be out of the other user's reach
_uid = int(sys.argv[1])
os.setgroups([]); os.setgid(_uid); os.setuid(_uid)
"""


def other_user() -> int:
    """The uid of a second local user, created if missing; skips the test where that cannot be done."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second local user (useradd) and to drop to it")
    try:
        return pwd.getpwnam(OTHER_USER).pw_uid
    except KeyError:
        pass
    made = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"useradd failed: {made.stderr.strip()}")
    return pwd.getpwnam(OTHER_USER).pw_uid


def as_user(uid: int, work, timeout: float = 60.0):
    """Run ``work()`` in a forked child that has become ``uid``; return what it returned (JSON-able), or raise with
    what it printed."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the child: drop every privilege, then act
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            result = {"ok": work()}
        except BaseException as exc:              # noqa: BLE001 - reported to the parent whatever it is
            import traceback
            result = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks) or b'{"error": "the child said nothing"}')
    if "error" in result:
        raise AssertionError(f"as uid {uid}: {result['error']}")
    return result["ok"]


class _WritesMarker:
    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('unpickled by uid %d' % __import__('os').getuid())",)


def file_writing_pickle(marker: Path) -> bytes:
    return pickle.dumps(_WritesMarker(marker))


def thespian_frame(body: bytes) -> bytes:
    """Bytes as Thespian's TCP transport frames them: the length, '>', then the body."""
    return f"{len(body)}>".encode() + body
