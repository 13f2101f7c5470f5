"""daemon/transport_key.py: the run's key, private and read back; a convention's, the same on every host."""
from __future__ import annotations

import pytest

from daemon import transport_key

pytestmark = pytest.mark.timeout(30)


def test_the_run_key_is_private_and_read_back(tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    key = transport_key.run_key(run)
    assert (run / transport_key.KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert transport_key.read_key(run) == key and len(key) == 32
    assert transport_key.run_key(run) != key, "every run makes a new key"
    (run / transport_key.KEY_FILE).write_text("not hex")
    with pytest.raises(transport_key.KeyUnreadable, match="does not hold a transport key"):
        transport_key.read_key(run)
    (run / transport_key.KEY_FILE).unlink()
    with pytest.raises(transport_key.KeyUnreadable, match="missing"):
        transport_key.read_key(run)


def test_every_host_derives_the_same_key_from_the_cluster_secret():
    same, other = transport_key.cluster_key("a" * 32), transport_key.cluster_key("b" * 32)
    assert same == transport_key.cluster_key("a" * 32) != other
