"""Google's tokens, both ways: the bearer token on every event Google Chat posts (verified here before the body is
read as anything), and the OAuth access token the app's Chat API calls carry (obtained with the service account's
key). Pure functions, and the kit's two caches (actors/adapters/bearer_tokens.py: how the keys and the access token
are kept and fetched again) with Google's checks and grant.

Events. Google Chat signs each request's ``Authorization: Bearer`` JWT with RS256. With the app's authentication
audience set to the project number, the token's issuer is ``chat@system.gserviceaccount.com``, its audience the
project number, and its keys the x509 certificates published at ``PROJECT_NUMBER_CERTS`` (a JSON object of key id
to PEM certificate). With the audience set to the endpoint URL it is a Google ID token: issuer
``https://accounts.google.com``, audience the URL, ``email`` ``chat@system.gserviceaccount.com``, keys the JWKS at
``ID_TOKEN_CERTS``. ``claims_of`` checks the signature against the key the token's ``kid`` names, then issuer,
audience, expiry (and the email of an ID token); any failure is ``TokenRefused`` (401). ``ChatKeys`` keeps the
published keys by the kit's rules: fetched again when they expire (the answer's ``max-age``, at most a day) or when
a token names a ``kid`` it does not hold: Google rotates its keys, so an unknown kid may be a new key, but a hostile
sender can make up kids, so such a refresh happens at most once per ``UNKNOWN_KID_REFRESH_S``; after a failed fetch
none is tried for ``FAILED_FETCH_HOLD_S`` (the requests meanwhile are answered 500, not a fetch each).

Calls. A service account's JSON key (``client_email``, ``private_key``, ``private_key_id``, ``token_uri``) signs a
JWT assertion (RS256; issuer the account, scope ``chat.bot``, audience the token endpoint, valid an hour), which
the token endpoint exchanges for an access token (grant type ``jwt-bearer``). ``ServiceAccountTokens`` keeps it and
asks for a new one ``REFRESH_MARGIN_S`` before it expires.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Optional

import jwt

from actors.adapters.bearer_tokens import AccessTokens, SigningKeys, TokenRefused, unverified_kid
from actors.adapters.errors import PermanentError
from actors.adapters.googlechat.platform import CHAT_ISSUER, ID_TOKEN_CERTS, PROJECT_NUMBER_CERTS
from actors.adapters.http_session import HttpSession

CHAT_SCOPE = "https://www.googleapis.com/auth/chat.bot"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_TOKEN_ISSUERS = ("https://accounts.google.com", "accounts.google.com")
LEEWAY_S = 30                  # clock skew allowed on exp / iat / nbf
ASSERTION_LIFETIME_S = 3600


def is_url_audience(audience: str) -> bool:
    return audience.startswith(("https://", "http://"))


def default_certs_url(audience: str) -> str:
    return ID_TOKEN_CERTS if is_url_audience(audience) else PROJECT_NUMBER_CERTS


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


class ChatKeys(SigningKeys):
    """The published keys of Google Chat's tokens (the refresh rules: the module docstring)."""

    async def verify(self, header: Optional[str], audience: str) -> dict:
        return claims_of(await self.bearer_token(header), self.keys, audience, now=time.time())


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


class ServiceAccountTokens(AccessTokens):
    """The app's OAuth access token (the service account's signed assertion), kept until near its expiry."""

    credential = "the service account"   # what a refusal names

    def __init__(self, http: HttpSession, account: ServiceAccount, token_url: str = ""):
        super().__init__(http, token_url or account.token_uri)
        self.account = account

    def grant_form(self) -> dict:
        """The token request's form: here the jwt-bearer grant of the service account's signed assertion."""
        return {"grant_type": JWT_BEARER, "assertion": assertion(self.account, self.token_url, time.time())}
