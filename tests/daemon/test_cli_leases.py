"""What `status` and `tree` say of hosts sharing one database (daemon/cli_leases.py), from the leases alone."""
from __future__ import annotations

import pytest

from daemon.cli_leases import host_rows, lines, unheld_partitions
from storage import Lease

pytestmark = pytest.mark.timeout(10)


def lease(name: str, holder: str, token: int = 1, left: float = 8.0) -> Lease:
    return Lease(name, holder, f"life-{holder}", token, left, 0.0)


LEASES = [lease("member:g1/shard:0", "g1"), lease("member:g1/shard:1", "g1"), lease("member:g2/shard:0", "g2"),
          lease("member:g3/shard:0", "g3", left=-4.0),
          lease("partition:0", "g1"), lease("partition:1", "g2"), lease("partition:2", "g3", left=-4.0),
          lease("intake:telegram", "g2", token=3), lease("intake:discord", "", token=2, left=-30.0)]


def test_each_host_with_its_shards_partitions_and_intakes_and_a_host_whose_leases_expired_is_gone():
    rows = {h["name"]: h for h in host_rows(LEASES, 4)}
    assert {n: (h["state"], h["shards"], h["partitions"], h["intakes"]) for n, h in rows.items()} == {
        "g1": ("running", 2, 1, []), "g2": ("running", 1, 1, ["telegram"]), "g3": ("gone", 0, 0, [])}
    assert unheld_partitions(LEASES, 4) == 2


def test_the_screen_names_every_host_and_every_intake_lease_with_its_holder():
    text = "\n".join(lines(LEASES, 4))
    assert "2 sharing the database; 2 of 4 partitions held by none (being taken over)" in text
    assert "g2         [running] 1 shard(s), 1 of 4 partitions, polls telegram" in text
    assert "g3         [gone] 0 shard(s), 0 of 4 partitions" in text
    assert "intake:telegram        held by g2 (token 3, 8.0s left)" in text
    assert "intake:discord         free (token 2; last held by none)" in text


def test_the_reference_deployments_configuration_checks(monkeypatch, tmp_path):
    """deploy/shared/gateway.toml (docs/distribution.md) is a configuration the gateway takes as it is."""
    from pathlib import Path

    from actors.adapters import registry
    from common.config import load
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(tmp_path))
    config = load(str(Path(__file__).resolve().parents[2] / "deploy" / "shared" / "gateway.toml"))
    assert config["cluster"]["shared"] and config["storage"]["backend"] == "postgresql"
    assert "telegram" in registry.validate_all(config)
