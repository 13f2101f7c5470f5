"""`sessions` and `deliveries` on a convention's leader: the same read on every worker host's database too.

The leader's CLI opens its own SQLite file; a worker's is on the worker's disk. So the CLI attaches to the running
gateway, asks one running session shard of each worker host for the same read (``StoreRead``,
actors/sessions/store_reads.py), and merges the answers with its own: each row says which host it came from. A host
whose shards do not run (lost, or still joining) is named in ``unavailable`` instead of being left out silently.
Nothing here writes: retry, abandon, export, import and forget stay with the host that holds the records.

The merge functions are pure (tested without a gateway); ``worker_reads`` is the part that fetches.
"""
from __future__ import annotations

import time

from actors.messages import StoreRead, StoreReadResult
from common.config import setting
from common.shard_map import SHARD_PREFIX
from daemon.asking import ask_for
from supervision import tree as tree_mod
from daemon.admin import AdminClient, AdminError, NoGateway

ASK_TIMEOUT_S = 15.0
# A walk that shows a host's running shards without addresses (a loaded machine's slow supervisor) is repeated for
# up to this long before the host is said to be unavailable.
ADDRESS_WAIT_S, ADDRESS_POLL_S = 15.0, 0.5


def worker_reads(config: dict, action: str, kwargs: dict) -> tuple[list[tuple[str, StoreReadResult]], list[str]]:
    """(host, answer) for each worker host whose shards run, and a line for each host that could not be asked.
    Nothing (and nothing to say) for a gateway that is no convention's leader."""
    if not setting(config, "cluster", "enabled"):
        return [], []
    try:
        client = AdminClient(config)
        deadline = time.monotonic() + ADDRESS_WAIT_S
        while _unaddressed(shards := _shards_by_host(client.tree())) and time.monotonic() < deadline:
            time.sleep(ADDRESS_POLL_S)
    except (NoGateway, AdminError) as exc:
        return [], [f"worker hosts not asked: {exc}"]
    answers, unavailable = [], []
    for host, nodes in sorted(shards.items()):
        running = [n for n in nodes if n.state == "running" and n.ref is not None]
        if not running:
            unavailable.append(f"host {host}: its shards are not running ({nodes[0].state}): its records not shown")
            continue
        reply = ask_for(client.asys, running[0].ref, StoreRead(action, tuple(kwargs.items())), StoreReadResult,
                        ASK_TIMEOUT_S)
        if reply is None:
            unavailable.append(f"host {host}: no answer within {ASK_TIMEOUT_S:g}s: its records not shown")
        else:
            answers.append((host, reply))
    return answers, unavailable


def _shards_by_host(tree) -> dict[str, list]:
    shards: dict[str, list] = {}
    for node, _parent, _depth in tree_mod.walk(tree):
        if node.kind == "SessionShard" and "/" in node.name:
            host = node.name[len(SHARD_PREFIX):].rpartition("/")[0]
            shards.setdefault(host, []).append(node)
    return shards


def _unaddressed(shards: dict[str, list]) -> bool:
    """A host whose shards run but none of which has an address in this walk: a supervisor slow to answer showed
    them as they last answered, without addresses (supervision/describing.py). Another walk soon will have them."""
    return any(all(n.ref is None for n in nodes) and any(n.state == "running" for n in nodes)
               for nodes in shards.values())


def _tagged(rows: list, host: str) -> list:
    return [{**row, "host": host} for row in rows]


def merged_list(local: dict, answers: list, unavailable: list, limit: int) -> dict:
    rows = _tagged(local["sessions"], "leader") + [row for host, a in answers if a.result
                                                   for row in _tagged(a.result["sessions"], host)]
    rows.sort(key=lambda s: s["updated_at"], reverse=True)
    return {"count": min(len(rows), limit), "sessions": rows[:limit], "unavailable": unavailable
            + [f"host {host}: {a.error}" for host, a in answers if a.error]}


def merged_search(local: dict, answers: list, unavailable: list, limit: int) -> dict:
    hits = _tagged(local["hits"], "leader") + [hit for host, a in answers if a.result
                                               for hit in _tagged(a.result["hits"], host)]
    return {"query": local["query"], "count": min(len(hits), limit), "hits": hits[:limit],
            "unavailable": unavailable + [f"host {host}: {a.error}" for host, a in answers if a.error]}


def merged_deliveries(local: dict, answers: list, unavailable: list, limit: int) -> dict:
    counts, ambiguous = dict(local["counts"]), local.get("ambiguous", 0)
    rows = _tagged(local["deliveries"], "leader")
    for host, a in answers:
        if a.result:
            for state, n in a.result["counts"].items():
                counts[state] = counts.get(state, 0) + n
            ambiguous += a.result.get("ambiguous", 0)
            rows += _tagged(a.result["deliveries"], host)
    rows.sort(key=lambda d: d.get("created_at") or 0, reverse=True)   # as each ledger lists them: newest first
    return {"counts": counts, "ambiguous": ambiguous, "count": min(len(rows), limit), "deliveries": rows[:limit],
            "unavailable": unavailable + [f"host {host}: {a.error}" for host, a in answers if a.error]}


class NotAsked(Exception):
    """A session the leader does not hold, and a worker host that might could not be asked: the CLI says which,
    rather than that no such session exists."""


def found_elsewhere(answers: list, unavailable: list) -> dict | None:
    """`sessions show` of a session the leader does not hold: the first host that has it; None when every host
    answered without it. Raises NotAsked when none has it and some host could not be asked."""
    for host, a in answers:
        if a.result:
            return {**a.result, "host": host, "unavailable": unavailable}
    if unavailable:   # an answer's error is that host's own "not found" (or ambiguous): it was asked
        raise NotAsked("; ".join(unavailable))
    return None
