"""What one client address may ask of the web chat, across all the visitors it holds: pure bookkeeping.

Anyone may load the page and be issued a new visitor, so a limit per visitor alone is no limit: a script that
makes a visitor per message gets a full bucket each time. These bound the address instead (``now`` from the
caller), each a token bucket (sender_limits.py: a full bucket to start with, refilled at its rate, the addresses
tracked bounded, least recently seen forgotten first):

* new visitors: ``new_visitors_per_hour`` (and as many at once): past it the page answers 429 without a cookie;
* messages: ``messages_per_minute_per_address`` across its visitors, a third of it at once: past it the frame is
  answered with an error (each visitor still has its own, smaller, limits: ``limits``);
* uploads: ``uploads_per_hour_per_address`` across its visitors, and ``uploads_in_flight_per_address`` at the same
  time (each one holds a connection and a file on disk until it is whole or cut).

0 turns a limit off. Behind a reverse proxy every request comes from the proxy: with ``behind_proxy = true`` the
address is the one the proxy names (``client_address``: the last X-Forwarded-For hop, believed only from a loopback
peer). Off by default: a local client could otherwise name a new address in every request and escape every limit.
"""
from __future__ import annotations

import collections
import ipaddress
from dataclasses import dataclass
from typing import Mapping, Optional

from actors.adapters.sender_limits import LimitPolicy, SenderLimits

NEW_VISITORS_PER_HOUR = 20
MESSAGES_PER_MINUTE = 60
UPLOADS_PER_HOUR = 60
UPLOADS_IN_FLIGHT = 2


@dataclass(frozen=True)
class AddressPolicy:
    new_visitors_per_hour: int = NEW_VISITORS_PER_HOUR
    messages_per_minute: int = MESSAGES_PER_MINUTE
    uploads_per_hour: int = UPLOADS_PER_HOUR
    uploads_in_flight: int = UPLOADS_IN_FLIGHT


def address_policy(settings: Mapping) -> AddressPolicy:
    """The web chat adapter table's per-address limits (its platform.py options)."""
    return AddressPolicy(max(0, int(settings.get("new_visitors_per_hour", NEW_VISITORS_PER_HOUR))),
                         max(0, int(settings.get("messages_per_minute_per_address", MESSAGES_PER_MINUTE))),
                         max(0, int(settings.get("uploads_per_hour_per_address", UPLOADS_PER_HOUR))),
                         max(0, int(settings.get("uploads_in_flight_per_address", UPLOADS_IN_FLIGHT))))


def _bucket(per_minute: float, burst: int) -> SenderLimits:
    return SenderLimits(LimitPolicy(per_minute=per_minute, burst=max(1, burst), max_queued_turns=0))


class AddressLimits:
    def __init__(self, policy: AddressPolicy = AddressPolicy()):
        self.policy = policy
        self._visitors = _bucket(policy.new_visitors_per_hour / 60, policy.new_visitors_per_hour)
        self._messages = _bucket(policy.messages_per_minute, policy.messages_per_minute // 3)
        self._uploads = _bucket(policy.uploads_per_hour / 60, policy.uploads_per_hour)
        self._in_flight: collections.Counter = collections.Counter()

    def new_visitor(self, address: str, now: float) -> bool:
        return not self.policy.new_visitors_per_hour or self._visitors.take(address, now)

    def message(self, address: str, now: float) -> bool:
        return not self.policy.messages_per_minute or self._messages.take(address, now)

    def upload_starts(self, address: str, now: float) -> Optional[str]:
        """None if the address may start one more upload now (then ``upload_ends`` must follow), else why not."""
        if self.policy.uploads_in_flight and self._in_flight[address] >= self.policy.uploads_in_flight:
            return f"at most {self.policy.uploads_in_flight} uploads at a time from one address"
        if self.policy.uploads_per_hour and not self._uploads.take(address, now):
            return f"at most {self.policy.uploads_per_hour} uploads an hour from one address"
        self._in_flight[address] += 1
        return None

    def upload_ends(self, address: str) -> None:
        self._in_flight[address] -= 1
        if self._in_flight[address] <= 0:
            del self._in_flight[address]


def client_address(peer: Optional[str], forwarded_for: Optional[str], behind_proxy: bool) -> str:
    """Who a request comes from: the peer, or, behind a proxy and when the peer is a loopback address (the reverse
    proxy on this host), the last hop of its X-Forwarded-For (the address the proxy itself saw; earlier hops are the
    client's own words). A peer beyond loopback is never believed about another address."""
    peer = peer or ""
    if not behind_proxy or not forwarded_for or not is_loopback(peer):
        return peer
    last = forwarded_for.split(",")[-1].strip()
    try:
        return str(ipaddress.ip_address(last))
    except ValueError:
        return peer


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def came_over_tls(secure: bool, peer: Optional[str], forwarded_proto: Optional[str]) -> bool:
    """Whether the browser's request came over TLS: this server's own (``secure``), or a TLS-terminating reverse
    proxy on this host (a loopback peer) that says so in X-Forwarded-Proto (its first value: the client's hop)."""
    if secure:
        return True
    if not forwarded_proto or not is_loopback(peer or ""):
        return False
    return forwarded_proto.split(",")[0].strip().lower() == "https"
