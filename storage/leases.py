"""Leases with fencing tokens: which host holds a platform connection's intake or a partition of the sessions, when
hosts share one PostgreSQL (docs/distribution.md, docs/design.md §6.2): ``Store.leases``.

One row per lease (``leases``): its holder (the host's name, shown to operators), the holder's ``life`` (a random id
of the one process that holds it: a restarted process of the same host is another life and takes nothing before the
old life's lease expires), the fencing ``token`` and when it expires. Times are the database's clock, never a
host's: hosts' clocks may disagree, the database has one.

- ``take`` gives the lease to a life when it is free (no row, released, or expired): the token goes up by one. The
  holder taking it again renews it with the same token.
- ``renew`` pushes the expiry of the leases a life still holds with the tokens it knows, in one transaction; a lease
  another life took (so its token moved) is not renewed and is reported lost.
- ``release`` ends a lease at once (a drain, a rebalance), so another host takes it without waiting for the expiry.
- ``check`` is the fence: called inside another transaction of this store (an inbox commit, a shard's group
  commit), it raises ``LeaseLost`` unless every lease named is still held by the life with the token it knows. It
  reads ``lease_fences``, which only a take-over or a release writes (a renewal writes ``leases`` alone): on
  PostgreSQL the transactions are SERIALIZABLE, and a renewal touching what every write reads would make the two
  conflict several times a second. So a write that passed the check is ordered before any take-over of that lease:
  the new holder, which reads after its take, sees it (the writes of a holder that lost its lease, paused or cut
  off, are refused instead). A check does not look at the expiry: only another take-over moves the token, and until
  one happens the holder's writes are still its own.

Every call is a write ``apart`` (db.py ``write_apart``): on PostgreSQL it does not queue behind the writers' lock
the other writes take, so a renewal or a take-over is never late for a burst of traffic. That is safe because no
other write reads these tables but through ``check``, and a take-over writing ``lease_fences`` under SERIALIZABLE
isolation is ordered after every fenced write that read the old token.

What survives kill -9: every call that returned (one transaction each). A killed holder's leases stay in the table
until they expire; nothing else depends on the process.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from .db import Database, fetch_all, fetch_one
from .errors import StorageError

# The database's clock, in seconds since the epoch, as each engine says it.
_NOW = {"sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
        "postgresql": "extract(epoch from clock_timestamp())::double precision"}


class LeaseLost(StorageError):
    """A write fenced by a lease found it held by another life (or released): nothing of the transaction is kept."""


@dataclass(frozen=True)
class Fence:
    """What a holder knows of one lease it holds: checked by ``check`` in the transactions it fences."""
    name: str
    life: str
    token: int


@dataclass(frozen=True)
class Lease:
    name: str
    holder: str          # the host's name; "" once released
    life: str
    token: int
    expires_in_s: float  # by the database's clock when read; negative: expired
    taken_at: float      # the database's clock, seconds since the epoch

    @property
    def live(self) -> bool:
        return bool(self.holder) and self.expires_in_s > 0

    def fence(self) -> Fence:
        return Fence(self.name, self.life, self.token)


def _now(conn) -> str:
    return _NOW[getattr(conn, "dialect", "sqlite")]


async def check(conn, fences: Iterable[Fence]) -> None:
    """The fence, inside the caller's transaction: raises ``LeaseLost`` naming the first lease no longer held."""
    for fence in fences:
        row = await fetch_one(conn, "SELECT 1 FROM lease_fences WHERE name = ? AND life = ? AND token = ?",
                              (fence.name, fence.life, fence.token))
        if row is None:
            raise LeaseLost(f"the lease {fence.name!r} (token {fence.token}) is held by another host now")


async def _set_fence(conn, name: str, life: str, token: int) -> None:
    await conn.execute("INSERT INTO lease_fences (name, life, token) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE "
                       "SET life = excluded.life, token = excluded.token", (name, life, token))


class LeaseStore:
    """Reached as ``Store.leases``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def take(self, name: str, holder: str, life: str, ttl_s: float) -> Optional[Lease]:
        """The lease for ``life`` (renewed if it holds it already, taken with the next token if it is free or
        expired); None while another life holds it."""
        async def do(conn):
            now = (await fetch_one(conn, f"SELECT {_now(conn)}"))[0]
            row = await fetch_one(conn, "SELECT holder, life, token, expires_at FROM leases WHERE name = ?", (name,))
            if row is None:
                await conn.execute("INSERT INTO leases (name, holder, life, token, expires_at, taken_at) "
                                   "VALUES (?, ?, ?, 1, ?, ?)", (name, holder, life, now + ttl_s, now))
                await _set_fence(conn, name, life, 1)
                return Lease(name, holder, life, 1, ttl_s, now)
            _holder, held_by, token, expires_at = row
            if held_by == life and _holder:
                await conn.execute("UPDATE leases SET expires_at = ? WHERE name = ?", (now + ttl_s, name))
                return Lease(name, holder, life, token, ttl_s, now)
            if _holder and expires_at > now:
                return None
            await conn.execute("UPDATE leases SET holder = ?, life = ?, token = ?, expires_at = ?, taken_at = ? "
                               "WHERE name = ?", (holder, life, token + 1, now + ttl_s, now, name))
            await _set_fence(conn, name, life, token + 1)
            return Lease(name, holder, life, token + 1, ttl_s, now)
        return await self._db.write_apart(do)

    async def renew(self, fences: Iterable[Fence], ttl_s: float) -> set[str]:
        """Push the expiry of each lease still held with its fence's token; the names renewed. A lease whose
        expiry passed but which nobody took is renewed too (its token did not move: no other host wrote under it)."""
        fences = list(fences)

        async def do(conn):
            now = (await fetch_one(conn, f"SELECT {_now(conn)}"))[0]
            kept = set()
            for fence in fences:
                cur = await conn.execute("UPDATE leases SET expires_at = ? WHERE name = ? AND life = ? AND token = ? "
                                         "AND holder <> ''", (now + ttl_s, fence.name, fence.life, fence.token))
                if cur.rowcount == 1:
                    kept.add(fence.name)
            return kept
        return await self._db.write_apart(do) if fences else set()

    async def release(self, fences: Iterable[Fence]) -> None:
        """End these leases now (if still held with these tokens): the next ``take`` by anyone gets them."""
        fences = list(fences)

        async def do(conn):
            now = (await fetch_one(conn, f"SELECT {_now(conn)}"))[0]
            for fence in fences:
                cur = await conn.execute("UPDATE leases SET holder = '', expires_at = ? WHERE name = ? AND life = ? "
                                         "AND token = ?", (now, fence.name, fence.life, fence.token))
                if cur.rowcount == 1:
                    await _set_fence(conn, fence.name, "", fence.token)
        if fences:
            await self._db.write_apart(do)

    async def all(self, prefix: str = "") -> list[Lease]:
        """Every lease (whose name starts with ``prefix``), by name, its expiry counted from the database's now."""
        async def fetch(conn):
            rows = await fetch_all(conn, f"SELECT name, holder, life, token, expires_at - {_now(conn)}, taken_at "
                                         f"FROM leases WHERE substr(name, 1, ?) = ? ORDER BY name",
                                   (len(prefix), prefix))
            return [Lease(r[0], r[1], r[2], int(r[3]), float(r[4]), float(r[5])) for r in rows]
        return await self._db.read(fetch)

    async def check(self, fences: Iterable[Fence]) -> None:
        """``check`` as a transaction of its own (a holder asking before it polls)."""
        fences = list(fences)

        async def fetch(conn):
            await check(conn, fences)
        await self._db.read(fetch)
