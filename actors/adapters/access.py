"""Who may cause a turn through an adapter (G5): the policy as data, and the decision for one inbound batch.

    [adapters.support_bot]
    type = "telegram"
    access = "pairing"            # open | allowlist | pairing (telegram's default; local and signed intakes: open)
    allow = ["12345678"]          # platform user ids always admitted, whatever the mode
    pairing = { ttl_s = 3600, max_codes = 3, lockout_s = 86400, max_pending = 100 }

Where the platform's user ids are mail addresses (``Platform.addresses``: email), an ``allow`` entry is matched as an
address, in any case, and may name a whole domain: ``"@example.org"`` admits every address at example.org itself,
``"@.example.org"`` every address at a subdomain of it (``a.example.org``, ``b.a.example.org``), not example.org
(write both for both). Elsewhere an entry is an exact user id (Matrix ids begin with "@": nothing of this applies).

* open: everyone (the terminal, the loopback web chat, the bearer- or HMAC-authenticated HTTP intakes).
* allowlist: ``allow`` plus users granted from the admin CLI; anyone else is ignored (acknowledged to the platform,
  logged, never stored in an inbox, so no session ever sees them).
* pairing: as allowlist, but an unknown sender is answered with a pairing code to give the operator, who approves
  it with ``run_gateway.py pair approve CODE``. Codes expire; a sender who keeps asking is locked out for a while.

The adapter (base.py) calls ``decide`` once per inbound batch, before the inbox write, with the grants storage
holds for the batch's senders; messages it turns away never reach the inbox, so nothing downstream needs to know.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Optional

from actors.adapters.idempotency import life_token, op_id
from actors.messages import PlatformOp

MODES = ("open", "allowlist", "pairing")
PAIRING_DEFAULTS = {"ttl_s": 3600.0, "max_codes": 3, "lockout_s": 86400.0, "max_pending": 100}
REPLY_EVERY_S = 60.0               # a pending sender who keeps writing is reminded of the code at most this often


@dataclass(frozen=True)
class AccessPolicy:
    mode: str = "open"
    allow: frozenset = frozenset()
    ttl_s: float = PAIRING_DEFAULTS["ttl_s"]
    max_codes: int = PAIRING_DEFAULTS["max_codes"]
    lockout_s: float = PAIRING_DEFAULTS["lockout_s"]
    max_pending: int = PAIRING_DEFAULTS["max_pending"]   # live codes per adapter waiting for the operator
    addresses: bool = False    # user ids are mail addresses: entries match in any case and may name domains

    def admits_without_lookup(self, user_id: Optional[str]) -> bool:
        if self.mode == "open":
            return True
        if user_id is None:
            return False
        if self.addresses:     # a domain entry is no user id: "@example.org" itself is not admitted
            return address_admitted(self.allow, str(user_id))
        return str(user_id) in self.allow


def address_admitted(allow: frozenset, address: str) -> bool:
    """Whether ``allow`` (entries in lower case) admits the mail address: the address itself, ``"@<its domain>"``,
    or ``"@.<a parent domain>"``. At most one look-up per label of the domain (an address is bounded by its
    header: the intake's parser), however long the list."""
    address = address.strip().lower()
    local, at, domain = address.rpartition("@")
    if not at or not local or not domain:
        return False
    if address in allow or f"@{domain}" in allow:
        return True
    labels = domain.split(".")
    return any(f"@.{'.'.join(labels[i:])}" in allow for i in range(1, len(labels)))


def address_entry_problem(entry) -> Optional[str]:
    """Why ``entry`` is no ``allow`` entry of a platform whose user ids are addresses (None: it is one): an
    address (``alice@example.org``), a domain (``@example.org``) or its subdomains (``@.example.org``)."""
    text = str(entry).strip().lower() if isinstance(entry, str) else ""
    local, at, domain = text.rpartition("@")
    domain = domain[1:] if domain.startswith(".") and not local else domain
    if (not at or not domain or any(c in text for c in " \t\r\n<>,;\"()[]") or "@" in local
            or not all(domain.split("."))):
        return (f"{entry!r} is no address (alice@example.org), domain (@example.org) or subdomains of one "
                f"(@.example.org)")
    return None


def policy_of(settings: Mapping, default_mode: str, addresses: bool = False) -> AccessPolicy:
    """The validated adapter table's access keys (registry.py checks their types and values); ``addresses``: the
    platform's user ids are mail addresses (address_admitted)."""
    pairing = dict(PAIRING_DEFAULTS, **(settings.get("pairing") or {}))
    entries = (str(u).strip().lower() if addresses else str(u) for u in settings.get("allow") or ())
    return AccessPolicy(mode=settings.get("access") or default_mode, allow=frozenset(entries), addresses=addresses,
                        ttl_s=float(pairing["ttl_s"]), max_codes=int(pairing["max_codes"]),
                        lockout_s=float(pairing["lockout_s"]), max_pending=int(pairing["max_pending"]))


def pairing_problems(value) -> list[str]:
    """Why a ``pairing = {...}`` table is wrong, for the configuration error (empty: it is fine)."""
    if not isinstance(value, Mapping):
        return ["must be a table, e.g. { ttl_s = 3600, max_codes = 3, lockout_s = 86400 }"]
    problems = [f"unknown key {k!r} (known: {', '.join(PAIRING_DEFAULTS)})" for k in value if k not in PAIRING_DEFAULTS]
    for key in PAIRING_DEFAULTS:
        if key in value and (isinstance(value[key], bool) or not isinstance(value[key], (int, float))
                             or value[key] <= 0):
            problems.append(f"{key} must be a positive number")
    return problems


@dataclass
class Decision:
    """One batch, sorted: items to store, senders who may be offered a pairing code, items turned away."""
    admitted: list = field(default_factory=list)
    to_pair: list = field(default_factory=list)       # inbox items of senders who may ask for a code
    refused: list = field(default_factory=list)       # (inbox item, reason)


def sender_of(item) -> Optional[str]:
    """The platform user id of an inbox item (its payload is a MessageEvent as a dict)."""
    user = (item.payload.get("source") or {}).get("user_id")
    return None if user is None else str(user)


def decide(policy: AccessPolicy, items: Iterable, granted: set[str]) -> Decision:
    """``items``: the batch's inbox items; ``granted``: the senders storage holds a grant for."""
    out = Decision()
    for item in items:
        user = sender_of(item)
        if item.payload.get("internal") or policy.admits_without_lookup(user) or user in granted:
            out.admitted.append(item)
        elif user is None:
            out.refused.append((item, "the platform named no sender"))
        elif policy.mode == "pairing":
            out.to_pair.append(item)
        else:
            out.refused.append((item, "not on the allowlist"))
    return out


class Reminders:
    """When each pending sender was last shown their code, so a chatty stranger gets one reminder a minute."""

    def __init__(self, every_s: float = REPLY_EVERY_S):
        self.every_s, self.last = every_s, {}

    def due(self, user_id: str, new_code: bool, now: Optional[float] = None) -> bool:
        now = time.monotonic() if now is None else now
        if new_code or now - self.last.get(user_id, float("-inf")) >= self.every_s:
            self.last[user_id] = now
            return True
        return False


def pairing_text(code: str, adapter: str, expires_in_s: float) -> str:
    minutes = max(1, round(expires_in_s / 60))
    return (f"Hello! This assistant only talks to people its operator has approved.\n"
            f"Your pairing code is {code[:4]}-{code[4:]} (valid for {minutes} min). Send it to the operator, who "
            f"approves it with:\n  agent-gateway pair approve {code}\n"
            f"Then write to me again.")


class Gatekeeper:
    """The adapter's side of G5, on its loop thread: sorts each inbound batch before the inbox write.

    ``admit`` returns the items to store. Refused senders are logged; pairing senders get their code through
    ``reply`` (the adapter's outbound lanes, so the chat's pacing budget applies) at most once a minute. A storage
    error propagates: the adapter then neither stores nor acknowledges the batch, and the platform delivers it again.
    """

    def __init__(self, adapter: str, policy: AccessPolicy):
        self.adapter, self.policy = adapter, policy
        self.reminders = Reminders()
        self.replies = 0
        self.life = life_token()   # a reminder of a later life is another operation, never a retry of this one's

    async def admit(self, store, items: list, reply: Callable[[PlatformOp], None], say) -> list:
        if self.policy.mode == "open" or not items:
            return items
        users = {sender_of(item) for item in items} - {None}
        granted = await store.access.granted_among(self.adapter, users) if users else set()
        decision = decide(self.policy, items, granted)
        for item, reason in decision.refused:
            say(logging.INFO, "%s: message from user %s ignored: %s", self.adapter, sender_of(item), reason)
        for item in decision.to_pair:
            await self._offer_code(store, item, reply, say)
        return decision.admitted

    async def _offer_code(self, store, item, reply, say) -> None:
        source, user = item.payload["source"], sender_of(item)
        answer = await store.access.request_code(self.adapter, user, str(source["chat_id"]), source.get("user_name"),
                                                 ttl_s=self.policy.ttl_s, max_codes=self.policy.max_codes,
                                                 lockout_s=self.policy.lockout_s, max_pending=self.policy.max_pending)
        if answer.full:
            if self.reminders.due("\0full", False):   # once a minute, not once per stranger
                say(logging.WARNING, "%s: %d pairing codes are waiting for the operator; new senders are ignored "
                    "until some are approved or denied (run_gateway.py pair list)", self.adapter,
                    self.policy.max_pending)
            return
        if answer.code is None:
            say(logging.INFO, "%s: message from user %s ignored: locked out of pairing for %.0f more minutes",
                self.adapter, user, (answer.locked_until - time.time()) / 60)
            return
        if answer.new:   # the code itself stays out of the log: `pair list` shows it to the operator
            say(logging.WARNING, "%s: user %s (%s) asked to talk to the agent; a pairing code is pending "
                "(see: run_gateway.py pair list)", self.adapter, user, source.get("user_name") or "no name")
        if self.reminders.due(user, answer.new):
            self.replies += 1
            code = answer.code
            reply(PlatformOp(op_id=op_id(f"pairing-{code.code}", self.life, self.replies), action="send",
                             chat_id=str(source["chat_id"]),
                             text=pairing_text(code.code, self.adapter, code.expires_at - time.time()),
                             thread_id=source.get("thread_id"), chat_type=source.get("chat_type") or "dm"))
