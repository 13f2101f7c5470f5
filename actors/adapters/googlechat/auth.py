"""Google's tokens, both ways: the bearer token on every event Google Chat posts (verified here before the body is
read as anything), and the OAuth access token the app's Chat API calls carry (obtained with the service account's
key). Pure functions, and two small caches that fetch through an ``HttpSession`` they are handed.

Events. Google Chat signs each request's ``Authorization: Bearer`` JWT with RS256. With the app's authentication
audience set to the project number, the token's issuer is ``chat@system.gserviceaccount.com``, its audience the
project number, and its keys the x509 certificates published at ``PROJECT_NUMBER_CERTS`` (a JSON object of key id
to PEM certificate). With the audience set to the endpoint URL it is a Google ID token: issuer
``https://accounts.google.com``, audience the URL, ``email`` ``chat@system.gserviceaccount.com``, keys the JWKS at
``ID_TOKEN_CERTS``. ``claims_of`` checks the signature against the key the token's ``kid`` names, then issuer,
audience, expiry (and the email of an ID token); any failure is ``TokenRefused`` (401). ``SigningKeys`` keeps the
published keys, fetched again when they expire (the answer's ``max-age``, at most a day) or when a token names a
``kid`` it does not hold: Google rotates its keys, so an unknown kid may be a new key, but a hostile sender can make
up kids, so such a refresh happens at most once per ``UNKNOWN_KID_REFRESH_S``; after a failed fetch none is tried for
``FAILED_FETCH_HOLD_S`` (the requests meanwhile are answered 500, not a fetch each).

Calls. A service account's JSON key (``client_email``, ``private_key``, ``private_key_id``, ``token_uri``) signs a
JWT assertion (RS256; issuer the account, scope ``chat.bot``, audience the token endpoint, valid an hour), which
the token endpoint exchanges for an access token (grant type ``jwt-bearer``). ``AccessTokens`` keeps it and asks
for a new one ``REFRESH_MARGIN_S`` before it expires.
"""
from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Optional

import jwt
from cryptography import x509

from actors.adapters.errors import FloodError, PermanentError, RetryableError
from actors.adapters.googlechat.platform import CHAT_ISSUER, ID_TOKEN_CERTS, PROJECT_NUMBER_CERTS
from actors.adapters.http_session import HttpSession

CHAT_SCOPE = "https://www.googleapis.com/auth/chat.bot"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_TOKEN_ISSUERS = ("https://accounts.google.com", "accounts.google.com")
LEEWAY_S = 30                  # clock skew allowed on exp / iat / nbf
MAX_TOKEN_CHARS = 8192         # a Google JWT is about 1 KB
MAX_KEYS = 32                  # Google publishes two or three at a time
DEFAULT_KEYS_TTL_S = 3600.0
MAX_KEYS_TTL_S = 86400.0
UNKNOWN_KID_REFRESH_S = 60.0
FAILED_FETCH_HOLD_S = 5.0
ASSERTION_LIFETIME_S = 3600
REFRESH_MARGIN_S = 300.0
_MAX_AGE = re.compile(r"max-age=(\d+)")


class TokenRefused(Exception):
    """The request's bearer token is not Google Chat's for this app: 401, nothing parsed or stored."""


def is_url_audience(audience: str) -> bool:
    return audience.startswith(("https://", "http://"))


def default_certs_url(audience: str) -> str:
    return ID_TOKEN_CERTS if is_url_audience(audience) else PROJECT_NUMBER_CERTS


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


def claims_of(token: str, keys: dict, audience: str, now: Optional[float] = None) -> dict:
    """The verified claims of an event's token (see the module docstring); TokenRefused with the reason."""
    kid = unverified_kid(token)
    if kid not in keys:
        raise TokenRefused(f"signed with an unknown key {kid[:40]!r}")
    url_audience = is_url_audience(audience)
    issuers = list(ID_TOKEN_ISSUERS) if url_audience else [CHAT_ISSUER]
    options = {"require": ["exp", "iat", "iss", "aud"]}
    try:
        claims = jwt.decode(token, keys[kid], algorithms=["RS256"], audience=audience, issuer=issuers,
                            leeway=LEEWAY_S, options=options)
    except jwt.ExpiredSignatureError:
        raise TokenRefused("the token has expired") from None
    except jwt.InvalidAudienceError:
        raise TokenRefused("the token is for another audience") from None
    except jwt.InvalidIssuerError:
        raise TokenRefused("the token is not issued by Google Chat") from None
    except jwt.InvalidSignatureError:
        raise TokenRefused("the signature does not verify") from None
    except jwt.PyJWTError as exc:
        raise TokenRefused(f"the token is invalid ({type(exc).__name__})") from None
    if url_audience and (claims.get("email") != CHAT_ISSUER or claims.get("email_verified") is False):
        raise TokenRefused("the ID token is not Google Chat's")
    if now is not None and claims["iat"] > now + LEEWAY_S:
        raise TokenRefused("the token is issued in the future")
    return claims


def keys_ttl(cache_control: Optional[str]) -> float:
    found = _MAX_AGE.search(cache_control or "")
    return min(float(found.group(1)), MAX_KEYS_TTL_S) if found else DEFAULT_KEYS_TTL_S


class SigningKeys:
    """The published keys of Google Chat's tokens, kept until they expire; fetched again for a kid not held (at most
    once per UNKNOWN_KID_REFRESH_S)."""

    def __init__(self, http: HttpSession, url: str):
        self.http, self.url = http, url
        self.keys: dict = {}
        self.expires_at = 0.0
        self.fetched_at = -UNKNOWN_KID_REFRESH_S
        self.fetches = 0
        self.failed_at: Optional[float] = None
        self._lock = asyncio.Lock()

    async def verify(self, header: Optional[str], audience: str) -> dict:
        token = bearer_of(header)
        await self.hold_keys_for(unverified_kid(token))
        return claims_of(token, self.keys, audience, now=time.time())

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


@dataclass(frozen=True)
class ServiceAccount:
    client_email: str
    private_key: str
    private_key_id: str
    token_uri: str

    def __repr__(self) -> str:   # never the key
        return f"ServiceAccount({self.client_email!r})"


def service_account_from(text: str) -> ServiceAccount:
    """The account of a JSON key file; PermanentError saying what is missing (the operator's file is wrong)."""
    try:
        data = json.loads(text)
    except ValueError:
        raise PermanentError("the service account key file is no JSON") from None
    if not isinstance(data, dict) or data.get("type") != "service_account":
        raise PermanentError("the key file is no service account key (its type is not service_account)")
    missing = [k for k in ("client_email", "private_key", "private_key_id") if not isinstance(data.get(k), str)]
    if missing:
        raise PermanentError(f"the service account key file lacks {', '.join(missing)}")
    return ServiceAccount(data["client_email"], data["private_key"], data["private_key_id"],
                          str(data.get("token_uri") or "https://oauth2.googleapis.com/token"))


def assertion(account: ServiceAccount, token_url: str, now: float, scope: str = CHAT_SCOPE) -> str:
    """The signed JWT the token endpoint exchanges for an access token."""
    claims = {"iss": account.client_email, "scope": scope, "aud": token_url, "iat": int(now),
              "exp": int(now) + ASSERTION_LIFETIME_S}
    try:
        return jwt.encode(claims, account.private_key, algorithm="RS256", headers={"kid": account.private_key_id})
    except (ValueError, TypeError, jwt.PyJWTError) as exc:
        raise PermanentError(f"the service account's private key cannot sign ({type(exc).__name__})") from None


class AccessTokens:
    """The app's OAuth access token, kept until REFRESH_MARGIN_S before it expires."""

    credential = "the service account"   # what a refusal names

    def __init__(self, http: HttpSession, account: ServiceAccount, token_url: str = ""):
        self.http, self.account = http, account
        self.token_url = token_url or account.token_uri
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
        """The token request's form: here the jwt-bearer grant of the service account's signed assertion."""
        return {"grant_type": JWT_BEARER, "assertion": assertion(self.account, self.token_url, time.time())}

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
