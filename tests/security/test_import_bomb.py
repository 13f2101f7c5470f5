"""`sessions import` of a decoding bomb: a file within the size limit whose msgpack builds ~64 bytes of Python
objects per byte (empty arrays) is refused, clearly, having cost a small multiple of its size in memory. The real
CLI in a process of its own, whose peak RSS the kernel reports (wait4)."""
from __future__ import annotations

import os
import subprocess

import msgpack
import pytest

from tests.gateway import PYTHON, ROOT, Gateway

pytestmark = pytest.mark.timeout(60)
BOMB_BYTES = 8 * 1024 * 1024


def bomb(path) -> None:
    """A header, then arrays of empty arrays (each empty array one byte), BOMB_BYTES in all."""
    header = msgpack.packb({"type": "header", "format": "agent-gateway/session-export", "version": 1})
    inner = b"\xdc" + (8000).to_bytes(2, "big") + b"\x90" * 8000
    count = (BOMB_BYTES - len(header) - 5) // len(inner)
    path.write_bytes(header + b"\xdd" + count.to_bytes(4, "big") + inner * count)


def test_a_decoding_bomb_is_refused_without_building_it(tmp_path):
    gw = Gateway(tmp_path)
    export = tmp_path / "bomb.export"
    bomb(export)
    with open(tmp_path / "out.txt", "w") as out:
        proc = subprocess.Popen([PYTHON, str(ROOT / "run_gateway.py"), "--config", str(gw.config), "sessions",
                                 "import", str(export)], env=gw.env, stdout=out, stderr=subprocess.STDOUT)
        _pid, status, usage = os.wait4(proc.pid, 0)    # reaped here: the kernel's word on its peak RSS
        proc.returncode = os.waitstatus_to_exitcode(status)
    said = (tmp_path / "out.txt").read_text()
    peak_mib = usage.ru_maxrss / 1024
    # Built whole, the bomb's 8 Mi empty lists take ~550 MiB; bounded, a small multiple of the file.
    assert peak_mib < 250, f"the import peaked at {peak_mib:.0f} MiB for an {BOMB_BYTES >> 20} MiB file"
    assert proc.returncode != 0 and "import refused, nothing was changed" in said, said
    assert "more arrays, maps or elements than an export of this size holds" in said, said
