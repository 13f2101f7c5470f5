"""Which session shard a session key lives on: rendezvous (highest random weight) hashing, a pure function.

Every shard scores every key; the key lives on the shard with the highest score. Adding a shard moves only the keys
the new shard wins (about 1/N of them) and removing one moves only its own, which is what lets shards be added, and
later placed on other hosts (docs/design.md §6), without reshuffling every conversation. The score is a keyed hash, so
the map is the same in every process and across restarts: a key's inbox rows, its interrupted turn and its doorbells
all find the same shard.
"""
from __future__ import annotations

import hashlib
import os
import re

SHARD_PREFIX = "shard:"
# A background task's session key is its chat's key and ``.task-N`` (actors/sessions/tasks.py): it lives where the
# chat lives, so the two share one shard and one database (the task's result is checked against the chat's
# conversation and recorded in it in one transaction), and they move together when a host joins.
_TASK_SUFFIX = re.compile(r"\.task-[0-9]+$")


def placement_key(session_key: str) -> str:
    """What a key is placed by: its own text, or its chat's key for a background task's."""
    return _TASK_SUFFIX.sub("", session_key)


def default_shard_count() -> int:
    """One shard per core: a shard's cells share one Python thread, so more shards than cores buy nothing."""
    return max(1, os.cpu_count() or 1)


def shard_name(index: int) -> str:
    return f"{SHARD_PREFIX}{index}"


def shard_of(session_key: str, count: int) -> int:
    """The index (0 .. count-1) of the shard that hosts ``session_key``."""
    if count <= 1:
        return 0
    session_key = placement_key(session_key)
    best, best_score = 0, b""
    for index in range(count):
        score = hashlib.blake2b(f"{index}\0{session_key}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
        if score > best_score:
            best, best_score = index, score
    return best
