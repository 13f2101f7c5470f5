"""Tokens both ways for a platform that signs what it pushes and authorises what the bot calls with OAuth: the
JWT bearer token on each request the platform posts, checked against the key set it publishes, and the OAuth access
token the bot's own API calls carry, kept and asked for again before it expires. Pure functions, and two small
caches that fetch through an ``HttpSession`` they are handed; a platform's own module (Google Chat's and Teams'
``auth.py``) adds its claims check (issuer, audience, what else its tokens must say) and its grant.

Requests in. ``bearer_of`` takes the token of an ``Authorization: Bearer`` header (bounded: ``MAX_TOKEN_CHARS``),
``unverified_kid`` the key id its header names (RS256 only; anything else is refused before any key is looked at).
``SigningKeys`` keeps the published keys (``keys_from_document``: x509 certificates by key id, or a JWKS; at most
``MAX_KEYS``), fetched again when they expire (the answer's ``max-age``, at most a day, an hour without one:
``keys_ttl``) or when a token names a ``kid`` it does not hold: platforms rotate their keys, so an unknown kid may be
a new key, but a hostile sender can make kids up, so such a refresh happens at most once per
``UNKNOWN_KID_REFRESH_S``; after a failed fetch none is tried for ``FAILED_FETCH_HOLD_S`` (the requests meanwhile
fail with ``RetryableError``, which a webhook answers 500, not a fetch each). Any token that is not the platform's
is ``TokenRefused`` (401, nothing parsed or stored).

Calls out. ``AccessTokens`` keeps the access token a platform's grant (``grant_form``, the subclass's) obtains at
its token endpoint and asks for a new one ``REFRESH_MARGIN_S`` before it expires, or after ``forget`` (a call was
refused 401). Only the token is kept, in memory: after kill -9 the next call asks for a new one.
"""
from __future__ import annotations

import asyncio
import re
import time
from typing import Any, Optional

import jwt
from cryptography import x509

from actors.adapters.errors import FloodError, PermanentError, RetryableError
from actors.adapters.http_session import HttpSession

MAX_TOKEN_CHARS = 8192         # a platform's JWT is one or two KB
MAX_KEYS = 32                  # platforms publish two or three at a time
DEFAULT_KEYS_TTL_S = 3600.0
MAX_KEYS_TTL_S = 86400.0
UNKNOWN_KID_REFRESH_S = 60.0
FAILED_FETCH_HOLD_S = 5.0
REFRESH_MARGIN_S = 300.0
_MAX_AGE = re.compile(r"max-age=(\d+)")


class TokenRefused(Exception):
    """The request's bearer token is not the platform's for this app: 401, nothing parsed or stored."""


def bearer_of(header: Optional[str]) -> str:
    if not header or not header.startswith("Bearer "):
        raise TokenRefused("no bearer token")
    token = header[len("Bearer "):].strip()
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise TokenRefused("an empty or oversized bearer token")
    return token


def keys_from_document(document: Any) -> dict:
    """Key id -> public key, from either published form: x509 certificates by kid, or a JWKS."""
    keys = {}
    if isinstance(document, dict) and isinstance(document.get("keys"), list):
        for jwk in document["keys"][:MAX_KEYS]:
            try:
                keys[str(jwk["kid"])] = jwt.PyJWK(jwk).key
            except (KeyError, TypeError, jwt.PyJWKError, ValueError):
                continue
    elif isinstance(document, dict):
        for kid, pem in list(document.items())[:MAX_KEYS]:
            try:
                keys[str(kid)] = x509.load_pem_x509_certificate(str(pem).encode()).public_key()
            except ValueError:
                continue
    return keys


def unverified_kid(token: str) -> str:
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise TokenRefused(f"not a JWT ({type(exc).__name__})") from None
    if header.get("alg") != "RS256":
        raise TokenRefused(f"algorithm {str(header.get('alg'))[:16]!r}, not RS256")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid or len(kid) > 128:
        raise TokenRefused("no key id")
    return kid


def keys_ttl(cache_control: Optional[str]) -> float:
    found = _MAX_AGE.search(cache_control or "")
    return min(float(found.group(1)), MAX_KEYS_TTL_S) if found else DEFAULT_KEYS_TTL_S


class SigningKeys:
    """A platform's published signing keys, kept until they expire; fetched again for a kid not held (at most once
    per UNKNOWN_KID_REFRESH_S). A subclass whose platform publishes them otherwise overrides ``_fetch``."""

    def __init__(self, http: HttpSession, url: str):
        self.http, self.url = http, url
        self.keys: dict = {}
        self.expires_at = 0.0
        self.fetched_at = -UNKNOWN_KID_REFRESH_S
        self.fetches = 0
        self.failed_at: Optional[float] = None
        self._lock = asyncio.Lock()

    async def bearer_token(self, header: Optional[str]) -> str:
        """The bearer token of an ``Authorization`` header, with ``self.keys`` fresh for the kid it names: the
        platform's claims check verifies it against them next."""
        token = bearer_of(header)
        await self.hold_keys_for(unverified_kid(token))
        return token

    async def hold_keys_for(self, kid: str) -> None:
        """The keys fresh, fetched again for a kid not held (at most once per UNKNOWN_KID_REFRESH_S)."""
        now = time.monotonic()
        if now >= self.expires_at or (kid not in self.keys and now - self.fetched_at >= UNKNOWN_KID_REFRESH_S):
            await self.refresh(now)

    async def refresh(self, asked_at: float) -> None:
        async with self._lock:
            if self.fetched_at >= asked_at:   # another request refreshed them meanwhile
                return
            if self.failed_at is not None and time.monotonic() - self.failed_at < FAILED_FETCH_HOLD_S:
                raise RetryableError("the signing keys could not be fetched a moment ago", method="certs")
            try:
                keys, ttl = await self._fetch()
            except RetryableError:
                self.failed_at = time.monotonic()
                raise
            self.keys, self.fetched_at, self.failed_at = keys, time.monotonic(), None
            self.expires_at = self.fetched_at + ttl
            self.fetches += 1

    async def _fetch(self) -> tuple[dict, float]:
        status, headers, body = await self.http.request_json("GET", self.url, op="certs")
        if status != 200:
            raise RetryableError(f"the signing keys answered HTTP {status}", method="certs", status=status)
        keys = keys_from_document(body)
        if not keys:
            raise RetryableError("the signing keys document holds no key", method="certs")
        return keys, keys_ttl(headers.get("Cache-Control"))


class AccessTokens:
    """The bot's OAuth access token, kept until REFRESH_MARGIN_S before it expires. A subclass gives the grant
    (``grant_form``) and names the credential a refusal names (``credential``)."""

    credential = "the credentials"   # what a refusal names

    def __init__(self, http: HttpSession, token_url: str):
        self.http, self.token_url = http, token_url
        self._token: Optional[str] = None
        self._expires_at = 0.0
        self.fetches = 0
        self._lock = asyncio.Lock()

    def secret(self) -> Optional[str]:
        return self._token

    def forget(self) -> None:
        """A call was refused 401: the token is asked for again before the next call."""
        self._token, self._expires_at = None, 0.0

    async def token(self) -> str:
        async with self._lock:
            if self._token is None or time.monotonic() >= self._expires_at - REFRESH_MARGIN_S:
                await self._fetch()
            return self._token

    def grant_form(self) -> dict:
        """The token request's form (``grant_type`` and what the grant needs)."""
        raise NotImplementedError

    async def _fetch(self) -> None:
        status, headers, body = await self.http.request_json("POST", self.token_url, op="token",
                                                             data=self.grant_form())
        if status == 429:
            raise FloodError(30.0, "the token endpoint is rate limiting", method="token")
        if status >= 500:
            raise RetryableError(f"the token endpoint answered HTTP {status}", method="token", status=status)
        token = body.get("access_token") if isinstance(body, dict) else None
        if status != 200 or not isinstance(token, str) or not token:
            reason = body.get("error_description") or body.get("error") if isinstance(body, dict) else None
            raise PermanentError(f"the token endpoint refused {self.credential} ({str(reason or status)[:200]})",
                                 method="token", status=status)
        lifetime = body.get("expires_in")
        lifetime = float(lifetime) if isinstance(lifetime, (int, float)) and lifetime > 0 else 3600.0
        self._token, self._expires_at = token, time.monotonic() + min(lifetime, 86400.0)
        self.fetches += 1
