"""The actor system's side of a convention of gateway hosts (docs/distribution.md): the capabilities a leader or a
worker offers, and the failure-detection settings applied before Thespian reads them.

Thespian reads ``CONVENTION_REREGISTRATION_PERIOD``, ``CONVENTION_RESTART_PERIOD`` and
``CONVENTION_REGISTRATION_MISS_MAX`` from the environment
when its convention module is first imported, in whichever process that is (the admin is forked from the launcher,
so the launcher's environment is what counts). ``apply_detection`` sets them and, should the module be loaded
already, its constants too (runtime/convention_timing.py), so the settings hold whatever imported Thespian first.
"""
from __future__ import annotations

import os

from common.cluster import (HOST_CAPABILITY, ROLE_CAPABILITY, SHARDS_CAPABILITY, Leader, detection_env, host_name,
                            is_private_network)
from common.cluster_secret import cluster_secret
from common.config import setting
from common.peer_credentials import is_loopback
from daemon.transport_key import cluster_key, run_key, write_key
from runtime import convention_timing


def apply_detection(period_s: int, misses: int) -> None:
    os.environ.update(detection_env(period_s, misses))
    convention_timing.apply(period_s, misses)


def leader_capabilities(config: dict, admin_port: int) -> dict:
    """The leader's system: it runs the whole tree (shards included) and is the convention's address."""
    capabilities = {"Admin Port": admin_port}
    if setting(config, "cluster", "enabled"):
        apply_detection(setting(config, "cluster", "member_check_s"), setting(config, "cluster", "member_misses"))
        capabilities.update({HOST_CAPABILITY: host_name(config), ROLE_CAPABILITY: "leader", SHARDS_CAPABILITY: True})
    return capabilities


def worker_capabilities(leader: Leader, admin_port: int, name: str) -> dict:
    return {"Admin Port": admin_port, "Convention Address.IPv4": (leader.host, leader.port),
            HOST_CAPABILITY: name, ROLE_CAPABILITY: "worker", SHARDS_CAPABILITY: True}


def transport_key(config: dict, run_dir) -> bytes:
    """The key every actor frame of this run is signed with (runtime/frame_mac.py), recorded in ``run_dir`` for the
    admin CLI: in a convention, the one derived from the shared cluster secret (raises NoClusterSecret without
    one); otherwise a fresh one for this run."""
    if setting(config, "cluster", "enabled"):
        key = cluster_key(cluster_secret(config))
        write_key(run_dir, key)
        return key
    return run_key(run_dir)


def remote_peers(config: dict):
    """What the leader's peer check admits from other hosts (common/peer_credentials.py): nothing on loopback;
    in a convention, private addresses only unless ``[cluster] network_is_private``; otherwise (a non-loopback
    bind_host without a convention, docs/security.md) any."""
    if is_loopback(config["gateway"]["bind_host"]):
        return False
    if setting(config, "cluster", "enabled") and not setting(config, "cluster", "network_is_private"):
        return is_private_network
    return True
