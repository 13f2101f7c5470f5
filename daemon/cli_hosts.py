"""`sessions` and `deliveries` on a convention's leader: the same read on every worker host's database too.

The leader's CLI opens its own SQLite file; a worker's is on the worker's disk. So the CLI attaches to the running
gateway, asks one running session shard of each worker host for the same read (``StoreRead``,
actors/sessions/store_reads.py), and merges the answers with its own: each row says which host it came from. A host
whose shards do not run (lost, or still joining) is named in ``unavailable`` instead of being left out silently.
Nothing here writes: retry, abandon, export, import and forget stay with the host that holds the records.

The merge functions are pure (tested without a gateway); ``worker_reads`` is the part that fetches.
"""
from __future__ import annotations

from actors.messages import StoreRead, StoreReadResult
from common.config import setting
from common.shard_map import SHARD_PREFIX
from daemon.asking import ask_for
from supervision import tree as tree_mod
from daemon.admin import AdminClient, AdminError, NoGateway

ASK_TIMEOUT_S = 15.0


def worker_reads(config: dict, action: str, kwargs: dict) -> tuple[list[tuple[str, StoreReadResult]], list[str]]:
    """(host, answer) for each worker host whose shards run, and a line for each host that could not be asked.
    Nothing (and nothing to say) for a gateway that is no convention's leader."""
    if not setting(config, "cluster", "enabled"):
        return [], []
    try:
        client = AdminClient(config)
        tree = client.tree()
    except (NoGateway, AdminError) as exc:
        return [], [f"worker hosts not asked: {exc}"]
    shards: dict[str, list] = {}
    for node, _parent, _depth in tree_mod.walk(tree):
        if node.kind == "SessionShard" and "/" in node.name:
            host = node.name[len(SHARD_PREFIX):].rpartition("/")[0]
            shards.setdefault(host, []).append(node)
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


def found_elsewhere(answers: list, unavailable: list) -> dict | None:
    """`sessions show` of a session the leader does not hold: the first host that has it, or None."""
    for host, a in answers:
        if a.result:
            return {**a.result, "host": host, "unavailable": unavailable}
    return None
