"""``run_gateway.py join LEADER_HOST:PORT``: run this machine as a worker host of the leader's convention.

The address checks come first and refuse before anything listens (common/cluster.py): the leader must be given as
an IP address and port, the leader's address and this host's ``--bind`` address must be on a private network unless
``--network-is-private`` says the network is private already, and the host's name must be printable in `tree`.
"""
from __future__ import annotations

from pathlib import Path

from common.cluster import BadLeader, check_host_name, host_name, join_refusal, leader_refusal, parse_leader
from common.cluster_secret import NoClusterSecret, cluster_secret
from common.config import EX_CONFIG, setting
from daemon.cli_output import EX_USAGE, fail
from daemon.cli_parsing import command
from common.logging_setup import configure_launcher_logging, log_defs_for
from daemon.transport_key import cluster_key

EX_REFUSED = 77   # EX_NOPERM: the operator's network is not one a convention may run on


def add_parsers(sub) -> None:
    join = command(sub, "join", "run this host as a worker of a leader's convention (session shards)",
                   "Join the convention of the gateway at LEADER_HOST:PORT (its [gateway] bind_host and admin_port)\n"
                   "and offer to run session shards, in the foreground until SIGTERM. Convention frames are signed\n"
                   "with the shared [cluster] secret but not encrypted: the leader and --bind must be addresses on a\n"
                   "private network (WireGuard: docs/distribution.md). Failure detection follows this host's\n"
                   "[cluster] member_check_s and member_misses, which must match the leader's.",
                   "join 10.77.0.1:17811 --bind 10.77.0.2\njoin 203.0.113.7:17811 --bind 203.0.113.8 "
                   "--network-is-private")
    join.add_argument("leader", metavar="LEADER_HOST:PORT", help="the leader's convention address")
    join.add_argument("--bind", required=True, metavar="ADDRESS",
                      help="this host's address on the private network; every actor port listens there only")
    join.add_argument("--port", type=int, default=None, metavar="PORT",
                      help="this host's admin port (default: [gateway] admin_port; 0: any free port)")
    join.add_argument("--name", default=None, metavar="NAME",
                      help="this host's name in `tree` and `status` (default: [cluster] host_name, else the host name)")
    join.add_argument("--network-is-private", action="store_true",
                      help="accept a --bind address that is not in a private range: this network is private already")


def cmd_join(config: dict, args) -> int:
    from daemon.worker import Worker   # the worker host's module loads only for `join`
    try:
        leader = parse_leader(args.leader)
    except BadLeader as exc:
        return fail(args, f"join: {exc}", EX_USAGE)
    refusal = join_refusal(args.bind, args.network_is_private) or leader_refusal(leader.host,
                                                                                 args.network_is_private)
    if refusal:
        return fail(args, f"join refused: {refusal}", EX_REFUSED)
    name = args.name or host_name(config)
    bad_name = check_host_name(name)
    if bad_name:
        return fail(args, f"join: --name: {bad_name}", EX_USAGE)
    try:
        key = cluster_key(cluster_secret(config))
    except NoClusterSecret as exc:
        return fail(args, f"join: {exc}", EX_CONFIG)
    port = setting(config, "gateway", "admin_port") if args.port is None else args.port
    configure_launcher_logging(config)
    return Worker(leader, args.bind, port, name, Path(config["gateway"]["state_dir"]),
                  setting(config, "cluster", "member_check_s"), setting(config, "cluster", "member_misses"), key,
                  log_defs_for(config), network_is_private=args.network_is_private).run()
