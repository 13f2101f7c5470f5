"""Moving sessions between shards when hosts join (actors/sessions/moves_out.py and moves_in.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class SessionWanted:
    """A shard that now wins these keys -> a shard that may hold their records (common/host_map.earlier_homes):
    hand them over, or say you hold none. ``digest``: the shard map the asker is on (host_map.map_digest); a shard
    on another map answers once it is on the same one."""
    keys: tuple
    shard: str
    digest: str


@dataclass(frozen=True)
class SessionHandover:
    """The shard a key moves from -> the shard that wins it now: the session's records as export format version 2
    (storage/moving.py), or None: this shard holds no session of that key (any rows of it went as StoreInbound).
    ``again``: a second file of a session sent before, whose forget met input that came after the first."""
    key: str
    data: Optional[bytes]
    source: str
    again: bool = False


@dataclass(frozen=True)
class SessionTaken:
    """The destination -> the source of a SessionHandover: committed here (the source may forget its copy), or
    ``refused`` with why (the source keeps its copy and says so)."""
    key: str
    shard: str
    refused: Optional[str] = None


@dataclass(frozen=True)
class MovesDone:
    """A shard -> every worker shard: on map ``digest`` it holds no session of a key another shard wins; a key
    whose earlier home it is needs no asking any more."""
    source: str
    digest: str
