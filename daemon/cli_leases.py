"""What `status` and `tree` show of hosts sharing one PostgreSQL ([cluster] shared, docs/distribution.md): every
host, every lease and its holder, read from the shared database itself, so any host (or an operator's machine with
the configuration) shows the same, whichever host the CLI attached to.

The hosts are the holders of live ``member:`` leases (one per running shard: actors/sessions/partitions.py); a host
whose members expired is gone (its partitions have moved or are moving). The rows and lines are pure functions of
the leases read (tested without a gateway); ``read_leases`` is the part that fetches.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Optional

from common.config import setting
from storage import Lease, Store, StorageError
from storage.location import store_location

MEMBER, PARTITION, INTAKE = "member:", "partition:", "intake:"


def read_leases(config: dict) -> Optional[list[Lease]]:
    """Every lease in the shared database; None unless this configuration shares one. Raises StorageError."""
    if not setting(config, "cluster", "shared"):
        return None

    async def read() -> list[Lease]:
        location = store_location(config.get("storage") or {}, Path(config["gateway"]["state_dir"]) / "gateway.db")
        async with await Store.open(location) as store:
            return await store.leases.all()
    return asyncio.run(read())


def lease_rows(leases: list[Lease]) -> list[dict]:
    return [{"name": lease.name, "holder": lease.holder or None, "token": lease.token, "live": lease.live,
             "expires_in_s": round(lease.expires_in_s, 1)} for lease in leases]


def host_rows(leases: list[Lease], partitions: int) -> list[dict]:
    """Per host seen in the leases: its live shards (members), the partitions and intakes it holds now."""
    hosts: dict[str, dict] = {}
    for lease in leases:
        if not lease.holder:
            continue
        host = hosts.setdefault(lease.holder, {"name": lease.holder, "shards": 0, "partitions": 0, "intakes": []})
        if not lease.live:
            continue
        if lease.name.startswith(MEMBER):
            host["shards"] += 1
        elif lease.name.startswith(PARTITION):
            host["partitions"] += 1
        elif lease.name.startswith(INTAKE):
            host["intakes"].append(lease.name[len(INTAKE):])
    for host in hosts.values():
        host["state"] = "running" if host["shards"] or host["intakes"] else "gone"
        host["of_partitions"] = partitions
    return sorted(hosts.values(), key=lambda h: h["name"])


def unheld_partitions(leases: list[Lease], partitions: int) -> int:
    held = {lease.name for lease in leases if lease.name.startswith(PARTITION) and lease.live}
    return partitions - len(held)


def lines(leases: list[Lease], partitions: int) -> list[str]:
    """The hosts and the intakes' leases, for `status` and `tree`."""
    hosts = host_rows(leases, partitions)
    free = unheld_partitions(leases, partitions)
    out = [f"  hosts        {sum(h['state'] == 'running' for h in hosts)} sharing the database"
           + (f"; {free} of {partitions} partitions held by none (being taken over)" if free else "")]
    out += [f"    {h['name']:<10} [{h['state']}] {h['shards']} shard(s), {h['partitions']} of {partitions} "
            f"partitions" + (f", polls {', '.join(h['intakes'])}" if h["intakes"] else "") for h in hosts]
    intakes = [lease for lease in leases if lease.name.startswith(INTAKE)]
    out += [f"  lease        {lease.name:<22} " + (
        f"held by {lease.holder} (token {lease.token}, {lease.expires_in_s:.1f}s left)" if lease.live else
        f"free (token {lease.token}; last held by {lease.holder or 'none'})") for lease in intakes]
    return out


def shared_view(config: dict) -> tuple[Optional[dict], list[str]]:
    """(the JSON part, the screen lines) of the shared hosts for a command, or (None, []) when not shared; a
    database that cannot be read is said in both, never an error of the command."""
    try:
        leases = read_leases(config)
    except StorageError as exc:
        return {"error": str(exc)}, [f"  hosts        the shared database cannot be read: {exc}"]
    if leases is None:
        return None, []
    partitions = int(setting(config, "cluster", "partitions"))
    return ({"hosts": host_rows(leases, partitions), "leases": lease_rows(leases),
             "partitions_unheld": unheld_partitions(leases, partitions)}, lines(leases, partitions))
