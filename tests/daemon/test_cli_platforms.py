"""``run_gateway.py platforms``: every registered type with its capabilities, without a configuration or a daemon."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from actors.adapters import registry
from tests.gateway import ROOT

pytestmark = pytest.mark.timeout(60)


def test_platforms_json_lists_every_registered_type_with_its_capabilities(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "run_gateway.py"), "platforms", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=50, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    rows = {row["type"]: row for row in json.loads(done.stdout)["platforms"]}
    assert set(rows) == set(registry.REGISTRY)
    assert rows["discord"]["idempotent_send"] == "nonce" and rows["matrix"]["idempotent_send"] == "txnId"
    assert rows["telegram"]["text_limit"] == 4096 and rows["telegram"]["length_unit"] == "utf16"
    assert not rows["irc"]["edit"] and rows["telegram"]["edit"] and rows["signal"]["files_in"]
    for row in rows.values():
        assert (ROOT / row["doc"]).is_file(), f"{row['type']}: its page {row['doc']} is missing"


def test_platforms_prints_the_table_people_read(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "run_gateway.py"), "platforms"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=50, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("| type | intake | edit |") and len(lines) == 2 + len(registry.REGISTRY)


def test_platforms_type_lists_every_key_of_its_table_and_a_misspelt_type_gets_the_likeliest(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "run_gateway.py"), "platforms", "irc", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=50, env=env)
    assert done.returncode == 0, done.stderr
    keys = {k["key"]: k for k in json.loads(done.stdout)["keys"]}
    assert keys["host"]["required"] and not keys["port"]["required"] and keys["port"]["default"] == 6667
    assert keys["sasl_password"]["secret"] and keys["access"]["doc"], keys["access"]
    assert set(keys) == set(registry.REGISTRY["irc"].options) | set(registry.COMMON_OPTIONS)
    wrong = subprocess.run([sys.executable, str(ROOT / "run_gateway.py"), "platforms", "telgram"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=50, env=env)
    assert wrong.returncode == 2 and "did you mean 'telegram'?" in wrong.stderr, wrong.stderr
