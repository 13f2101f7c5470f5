"""Who may see the console and who may act through it: pure decisions, no server and no actor.

The rules are the web chat's (actors/adapters/webchat/server.py), for a page that shows every chat and may act on
the gateway:

* **Login.** With a ``login_token`` the link ``/?token=THE_TOKEN`` (any page's path) sets a login cookie, an HMAC of
  the token (never the token), ``HttpOnly; SameSite=Strict``, ``Secure`` when the request came over TLS; every page
  and API route answers 401 without it. Only the static files (no data in them) are public. The configuration
  refuses a console off loopback without a token (common/config.py), so "off loopback" always means "with login".
* **Without a login** (loopback only): the Host header must be an IP literal or ``localhost``, so a page of
  another site that resolves its own name to 127.0.0.1 (DNS rebinding) is refused (421).
* **Writes.** Every action is a POST carrying the CSRF token in ``X-Console-CSRF``: an HMAC, under a secret of this
  server's life, of the browser's login (its cookie, or "loopback"). The page reads it from ``/api/session``, which
  another site's page cannot read (no CORS), and a cross-site form cannot set a header. A POST whose Origin names
  another site is refused as well. With ``allow_actions = false`` every action is refused (403) before anything
  else of it is read.
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Optional

LOGIN_COOKIE = "gw_console"
CSRF_HEADER = "X-Console-CSRF"


def login_proof(token: str) -> str:
    """What the login cookie holds: an HMAC of the token, so a new token logs everyone out."""
    return hmac.new(token.encode("utf-8"), b"agent-gateway console login", hashlib.sha256).hexdigest()


def csrf_token(secret: bytes, login: str) -> str:
    """The token a write must carry: bound to this server's life and to the browser's login."""
    return hmac.new(secret, b"console csrf\0" + login.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class Verdict:
    """``status`` 0: go on; else the answer (``status``, ``reason``)."""
    status: int = 0
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 0


ALLOWED = Verdict()


def read_verdict(login_token: str, cookie: str, host_allowed: bool) -> Verdict:
    """May this request read (a page, an API read, the live stream)? ``cookie``: the login cookie it carries."""
    if login_token:
        if cookie and same(cookie, login_proof(login_token)):
            return ALLOWED
        return Verdict(401, "this console needs its login link (/?token=...): ask its operator")
    if not host_allowed:
        return Verdict(421, "misdirected request: use the gateway's address (an IP address or localhost)")
    return ALLOWED


def peer_verdict(peer_uid: Optional[int], gateway_uids: frozenset) -> Verdict:
    """May this connection's peer use a console without login (loopback)? Only the gateway's own user and root: the
    console shows every chat's transcript, and loopback is shared by every local user (common/peer_credentials.py:
    the kernel's word on who owns the other end). A peer the kernel cannot name is refused."""
    if peer_uid is not None and peer_uid in gateway_uids:
        return ALLOWED
    return Verdict(403, "this console answers only its gateway's own user (on loopback without a login_token)")


def write_verdict(allow_actions: bool, secret: bytes, login: str, csrf_given: str, origin: Optional[str],
                  host_header: str) -> Verdict:
    """May this (already logged-in) request act? Refused when actions are off, from another site, or without the
    CSRF token of this browser's login."""
    if not allow_actions:
        return Verdict(403, "this console is read-only ([console] allow_actions = false)")
    if origin is not None and not origin_matches(origin, host_header):
        return Verdict(403, "a write from another site's page is refused")
    if not csrf_given or not same(csrf_given, csrf_token(secret, login)):
        return Verdict(403, f"a write needs this page's CSRF token ({CSRF_HEADER}); reload the page")
    return ALLOWED


def origin_matches(origin: str, host_header: str) -> bool:
    scheme, _, rest = origin.partition("://")
    return scheme in ("http", "https") and rest.lower() == host_header.lower()


def login_of(login_token: str, cookie: str) -> str:
    """What the CSRF token is bound to: the login cookie, or "loopback" on a console without login."""
    return cookie if login_token else "loopback"


def who(client: str, login_token: str) -> str:
    """Who did it, for the log and the stored records: the console, how the browser logged in, and its address."""
    return f"console ({'login' if login_token else 'loopback'} from {client or '?'})"
