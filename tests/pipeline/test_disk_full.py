"""A full disk under the state dir, while turns stream and messages arrive: nothing is answered twice, nothing is
lost, and the daemon rides it out (no supervisor gives up, no restart of the whole gateway) once space is freed.

The state dir gets a small tmpfs of its own (mounting needs root; the test is skipped without it)."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.actor_system import wait_for
from tests.gateway import nodes
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, pipeline_gateway, settled_answers, visible

pytestmark = pytest.mark.timeout(240)
FULL_FOR_S = 6.0     # the fault's length: long enough for every kind of writer to meet it


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root: " + mounted.stderr.decode(errors="replace").strip())
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(path) -> int:
    """Write until the file system refuses: ENOSPC is the point."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    written = 0
    try:
        for size in (1 << 20, 4096, 512):
            try:
                while True:
                    written += os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return written


def test_a_full_disk_delays_replies_but_loses_and_doubles_none(small_disk):
    with FakePlatform() as platform:
        gw = pipeline_gateway(small_disk, platform)
        try:
            gw.start()
            gw.wait_ready()
            launcher = gw.launcher_pid
            for chat in ("warm1", "warm2"):
                platform.inject(chat, f"hello from {chat}")
            for chat in ("warm1", "warm2"):
                settled_answers(platform, chat, gw=gw)
            platform.inject("streaming", "a long one #slow 0.2")
            wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, "streaming")), 20, 0.02, "streaming")
            polls = platform.stats()["requests"]["poll"]
            ballast = small_disk / "ballast"
            assert fill(ballast) > 0
            sent = {"warm1": 2, "warm2": 2, "new1": 1, "new2": 1}
            for chat in sent:
                platform.inject(chat, f"while the disk is full, to {chat}")
            # The adapter fetched the new messages and failed to store them, more than once.
            wait_for(lambda: platform.stats()["requests"]["poll"] >= polls + 3, 30, 0.05, "polls while full")
            time.sleep(FULL_FOR_S)   # the fault itself: the disk stays full this long
            ballast.unlink()
            for chat, count in {**sent, "streaming": 1}.items():
                settled_answers(platform, chat, count, timeout=90, gw=gw)
            # Exactly that many: the turn cut by the full disk was finished once, nothing was answered twice.
            for chat, count in {**sent, "streaming": 1}.items():
                assert len(visible(platform, chat)) == count, (chat, platform.messages(chat))
            assert "api_key_env" in visible(platform, "streaming")[0]["text"]   # the long answer, whole
            tree = gw.wait_ready(30)
            assert gw.launcher_pid == launcher and gw.cli("status").returncode == 0
            assert not [n["name"] for n in nodes(tree) if n["state"] == "failed"]
        finally:
            gw.cli("stop")
            gw.kill_everything()
