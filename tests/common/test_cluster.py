"""common/cluster.py: the join address check, the leader's address, the failure-detection environment."""
import pytest

from common.cluster import (BadLeader, Leader, check_host_name, detection_bound_s, detection_env, is_private_network,
                            join_refusal, leader_refusal, parse_leader)
from common.cluster_secret import NoClusterSecret, cluster_secret
from common.config import defaults


@pytest.mark.parametrize("ip", ["10.0.0.2", "172.16.5.1", "192.168.1.9", "100.64.0.7", "fd00::2", "fe80::1"])
def test_private_addresses_may_join(ip):
    assert is_private_network(ip)
    assert join_refusal(ip, network_is_private=False) is None


@pytest.mark.parametrize("ip", ["8.8.8.8", "1.2.3.4", "2001:4860::8888", "100.128.0.1"])
def test_a_public_looking_address_is_refused_unless_the_flag_says_private(ip):
    reason = join_refusal(ip, network_is_private=False)
    assert reason is not None and "not a private network address" in reason and "--network-is-private" in reason
    assert join_refusal(ip, network_is_private=True) is None


@pytest.mark.parametrize("ip", ["8.8.8.8", "2001:4860::8888", "127.0.0.1"])
def test_a_public_or_loopback_leader_is_refused(ip):
    reason = leader_refusal(ip, network_is_private=False)
    assert reason is not None and reason.startswith(f"the leader's address {ip}"), reason
    assert leader_refusal("10.77.0.1", network_is_private=False) is None


def test_the_cluster_secret_comes_from_the_environment_or_a_private_file(tmp_path, monkeypatch):
    config = defaults()
    monkeypatch.delenv("GATEWAY_CLUSTER_SECRET", raising=False)
    with pytest.raises(NoClusterSecret, match="GATEWAY_CLUSTER_SECRET"):
        cluster_secret(config)
    monkeypatch.setenv("GATEWAY_CLUSTER_SECRET", "short")
    with pytest.raises(NoClusterSecret, match="at least 16"):
        cluster_secret(config)
    monkeypatch.setenv("GATEWAY_CLUSTER_SECRET", "s" * 20)
    assert cluster_secret(config) == "s" * 20
    secret_file = tmp_path / "secret"
    secret_file.write_text("f" * 32 + "\n")
    secret_file.chmod(0o644)
    config["cluster"]["secret_file"] = str(secret_file)
    with pytest.raises(NoClusterSecret, match="readable by other users"):
        cluster_secret(config)
    secret_file.chmod(0o600)
    assert cluster_secret(config) == "f" * 32


@pytest.mark.parametrize("ip,why", [("0.0.0.0", "every interface"), ("::", "every interface"),
                                    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("my-host", "not an IP")])
def test_no_flag_admits_loopback_wildcards_or_names(ip, why):
    assert why in join_refusal(ip, network_is_private=False)
    assert why in join_refusal(ip, network_is_private=True)


@pytest.mark.parametrize("text,leader", [("10.0.0.1:17811", Leader("10.0.0.1", 17811)),
                                         (" [fd00::1]:1900 ", Leader("fd00::1", 1900))])
def test_leader_addresses_are_read(text, leader):
    assert parse_leader(text) == leader
    assert parse_leader(str(leader)) == leader


@pytest.mark.parametrize("text", ["10.0.0.1", "10.0.0.1:", "10.0.0.1:0", "10.0.0.1:70000", "leader:17811",
                                  "fd00::1:17811", "[fd00::1", ":17811"])
def test_bad_leader_addresses_say_what_is_expected(text):
    with pytest.raises(BadLeader):
        parse_leader(text)


def test_host_names():
    assert check_host_name("worker-1.eu") is None
    assert "characters" in check_host_name("")
    assert "characters" in check_host_name("x" * 65)
    assert "letters" in check_host_name("a/b")


def test_detection_env_is_thespians_format():
    assert detection_env(5, 3) == {"CONVENTION_REREGISTRATION_PERIOD": "0:05", "CONVENTION_RESTART_PERIOD": "0:05",
                                   "CONVENTION_REGISTRATION_MISS_MAX": "3"}
    assert detection_env(442, 3)["CONVENTION_REREGISTRATION_PERIOD"] == "7:22"   # Thespian's default period
    assert detection_bound_s(5, 3) == 20.0
    for period, misses in ((0, 3), (5, 1)):
        with pytest.raises(ValueError):
            detection_env(period, misses)


def test_thespian_reads_the_rendered_period_back():
    from datetime import timedelta

    from thespian.system.utilis import str_to_timedelta
    assert str_to_timedelta(detection_env(75, 3)["CONVENTION_REREGISTRATION_PERIOD"]) == timedelta(seconds=75)


@pytest.mark.parametrize("gateway,why", [({}, "workers cannot reach a leader on 127.0.0.1"),
                                         ({"bind_host": "10.0.0.1", "allow_non_loopback": True, "admin_port": 0},
                                          "must be a fixed port")])
def test_a_leader_must_be_reachable_at_a_fixed_address(gateway, why):
    from common.config import ConfigError, validate
    with pytest.raises(ConfigError, match=why):
        validate({"gateway": gateway, "cluster": {"enabled": True}}, "gateway.toml")
    validate({"gateway": {"bind_host": "10.0.0.1", "allow_non_loopback": True}, "cluster": {"enabled": True}}, "x")


def test_a_leader_on_a_public_looking_address_needs_the_network_said_private():
    from common.config import ConfigError, validate
    gateway = {"bind_host": "1.2.3.4", "allow_non_loopback": True}
    with pytest.raises(ConfigError, match="set \\[cluster\\] network_is_private = true"):
        validate({"gateway": gateway, "cluster": {"enabled": True}}, "gateway.toml")
    validate({"gateway": gateway, "cluster": {"enabled": True, "network_is_private": True}}, "gateway.toml")


def test_the_leaders_peer_check_follows_its_network():
    from common.cluster import is_private_network
    from daemon.convention import remote_peers

    def config(host, **cluster):
        return {"gateway": {"bind_host": host}, "cluster": {"enabled": True, **cluster}}
    assert remote_peers({"gateway": {"bind_host": "127.0.0.1"}}) is False
    assert remote_peers({"gateway": {"bind_host": "10.0.0.1"}}) is True      # no convention: as before
    assert remote_peers(config("10.0.0.1")) is is_private_network
    assert remote_peers(config("1.2.3.4", network_is_private=True)) is True
