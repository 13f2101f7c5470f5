"""The web chat's per-address bookkeeping and what it believes of a proxy's headers (pure functions)."""
from __future__ import annotations

import pytest

from actors.adapters.webchat.address_limits import (AddressLimits, AddressPolicy, came_over_tls, client_address)

pytestmark = pytest.mark.timeout(10)


def test_the_address_is_the_peer_unless_behind_a_proxy_on_loopback():
    assert client_address("127.0.0.1", "203.0.113.9", behind_proxy=False) == "127.0.0.1"
    assert client_address("127.0.0.1", "10.0.0.1, 203.0.113.9", behind_proxy=True) == "203.0.113.9"
    assert client_address("198.51.100.7", "203.0.113.9", behind_proxy=True) == "198.51.100.7"   # not a proxy of ours
    assert client_address("127.0.0.1", "not-an-address", behind_proxy=True) == "127.0.0.1"


def test_tls_is_the_servers_own_or_a_loopback_proxys_word():
    assert came_over_tls(True, "203.0.113.9", None)
    assert came_over_tls(False, "127.0.0.1", "https")
    assert came_over_tls(False, "::1", "HTTPS, http")
    assert not came_over_tls(False, "203.0.113.9", "https")   # a remote client's own header proves nothing
    assert not came_over_tls(False, "127.0.0.1", "http")


def test_uploads_in_flight_and_per_hour_are_per_address_and_zero_is_off():
    limits = AddressLimits(AddressPolicy(uploads_in_flight=2, uploads_per_hour=3))
    assert limits.upload_starts("a", 0) is None and limits.upload_starts("a", 0) is None
    assert "at a time" in limits.upload_starts("a", 0)
    assert limits.upload_starts("b", 0) is None
    limits.upload_ends("a")
    assert limits.upload_starts("a", 0) is None
    limits.upload_ends("a")
    assert "an hour" in limits.upload_starts("a", 1)
    off = AddressLimits(AddressPolicy(0, 0, 0, 0))
    assert all(off.new_visitor("a", 0) and off.message("a", 0) and off.upload_starts("a", 0) is None
               for _ in range(1000))
