"""`sessions import` of a decoding bomb: a file within the size limit whose msgpack builds ~64 bytes of Python
objects per byte (empty arrays) is refused, clearly, having cost a small multiple of its size in memory. The real
CLI in a process of its own, whose peak RSS the kernel reports (wait4).

The CLI is started by a small launcher process, not by the pytest worker: Linux carries a process's high-water RSS
across exec (the parent's, at fork time, counts as the child's), so a child forked straight from a worker that has
grown to 250 MiB over the suite would report 250 MiB whatever the import did."""
from __future__ import annotations

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


# Runs argv[2:] with its output to the file argv[1], reaps it (the kernel's word on its peak RSS), prints
# "<exit code> <peak KiB>". Its own RSS at fork is a bare interpreter's, so the figure is the CLI's.
LAUNCHER = """
import os, subprocess, sys
with open(sys.argv[1], "w") as out:
    child = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT)
    _pid, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def test_a_decoding_bomb_is_refused_without_building_it(tmp_path):
    gw = Gateway(tmp_path)
    export = tmp_path / "bomb.export"
    bomb(export)
    launched = subprocess.run([PYTHON, "-c", LAUNCHER, str(tmp_path / "out.txt"), PYTHON, str(ROOT / "run_gateway.py"),
                               "--config", str(gw.config), "sessions", "import", str(export)],
                              env=gw.env, capture_output=True, text=True, check=True, timeout=50)
    returncode, peak_kib = (int(word) for word in launched.stdout.split())
    said = (tmp_path / "out.txt").read_text()
    peak_mib = peak_kib / 1024
    # Built whole, the bomb's 8 Mi empty lists take ~550 MiB; bounded, a small multiple of the file.
    assert peak_mib < 250, f"the import peaked at {peak_mib:.0f} MiB for an {BOMB_BYTES >> 20} MiB file"
    assert returncode != 0 and "import refused, nothing was changed" in said, said
    assert "more arrays, maps or elements than an export of this size holds" in said, said
