"""The Bot Framework's tokens, both ways: the JWT the Bot Connector signs on every activity it POSTs to the bot
(verified here before the activity is taken), and the OAuth access token the bot's Connector calls carry (its app
id and client secret). Pure functions, and the kit's two caches (actors/adapters/bearer_tokens.py: how the keys and
the access token are kept and fetched again) with the Bot Framework's checks, key set and grant.

Activities. The Connector's ``Authorization: Bearer`` JWT is RS256, signed by a key of the JWKS named by the
``jwks_uri`` of its OpenID metadata document; a key may carry ``endorsements``, the channels it may sign for. A
token is taken when (``claims_of`` then ``check_activity``): its ``kid`` names a published key, the signature
verifies, the issuer is ``https://api.botframework.com``, the audience the bot's app id, it is within its validity
(5 minutes of clock skew, as the Connector's own SDKs allow), the key's endorsements (if any) name the activity's
``channelId``, and its ``serviceUrl`` claim is the activity's ``serviceUrl``: a token lifted from one activity
cannot carry another aimed elsewhere. Any failure is ``TokenRefused`` (401, nothing stored).

Keys (``ChannelKeys``) are kept until the JWKS answer's ``max-age`` (at most a day; an hour without one) and fetched
again when a token names a ``kid`` not held, since Microsoft rotates them: but a hostile sender can make kids up, so
such a refresh happens at most once per ``UNKNOWN_KID_REFRESH_S``, and after a failed fetch none is tried for
``FAILED_FETCH_HOLD_S`` (the requests meanwhile are answered 500, not a fetch each). The metadata's ``jwks_uri``
must be on https or on the metadata's own origin.

Calls. ``BotTokens``: the client-credentials grant (``client_id`` the app id, ``client_secret``, ``scope``
``https://api.botframework.com/.default``) at the tenant's token endpoint; the token is kept until
``REFRESH_MARGIN_S`` before it expires, and forgotten on a 401.
"""
from __future__ import annotations

from typing import Any, Optional
from urllib.parse import urlsplit

import jwt

from actors.adapters.bearer_tokens import MAX_KEYS, AccessTokens, SigningKeys, TokenRefused, keys_ttl, unverified_kid
from actors.adapters.errors import RetryableError
from actors.adapters.http_session import HttpSession

CONNECTOR_SCOPE = "https://api.botframework.com/.default"
LEEWAY_S = 300           # the clock skew the Bot Framework allows


def claims_of(token: str, keys: dict, app_id: str, issuer: str) -> dict:
    """The verified claims of an activity's token (signature, issuer, audience, validity); TokenRefused with why."""
    kid = unverified_kid(token)
    if kid not in keys:
        raise TokenRefused(f"signed with an unknown key {kid[:40]!r}")
    try:
        claims = jwt.decode(token, keys[kid], algorithms=["RS256"], audience=app_id, issuer=issuer,
                            leeway=LEEWAY_S, options={"require": ["exp", "iss", "aud"]})
    except jwt.ExpiredSignatureError:
        raise TokenRefused("the token has expired") from None
    except jwt.InvalidAudienceError:
        raise TokenRefused("the token is for another app id") from None
    except jwt.InvalidIssuerError:
        raise TokenRefused("the token is not issued by the Bot Framework") from None
    except jwt.InvalidSignatureError:
        raise TokenRefused("the signature does not verify") from None
    except jwt.ImmatureSignatureError:
        raise TokenRefused("the token is not valid yet") from None
    except jwt.PyJWTError as exc:
        raise TokenRefused(f"the token is invalid ({type(exc).__name__})") from None
    claims["_kid"] = kid
    return claims


def check_activity(claims: dict, activity: dict, endorsements: dict) -> None:
    """The token speaks for this activity: its serviceUrl claim is the activity's, and its key is endorsed for the
    activity's channel (where the key names endorsements). TokenRefused otherwise."""
    service_url = activity.get("serviceUrl")
    signed = claims.get("serviceurl", claims.get("serviceUrl"))   # the Connector writes it lowercase
    if not isinstance(service_url, str) or signed != service_url:
        raise TokenRefused("the token's serviceUrl is not the activity's")
    endorsed = endorsements.get(claims.get("_kid"))
    if endorsed is not None and activity.get("channelId") not in endorsed:
        raise TokenRefused(f"the signing key is not endorsed for channel {str(activity.get('channelId'))[:24]!r}")


def keys_of_jwks(document: Any) -> tuple[dict, dict]:
    """(kid -> public key, kid -> endorsed channels) of a JWKS document; keys that do not parse are left out."""
    keys, endorsements = {}, {}
    for jwk in (document.get("keys") if isinstance(document, dict) else None) or []:
        if len(keys) >= MAX_KEYS:
            break
        try:
            kid = str(jwk["kid"])
            keys[kid] = jwt.PyJWK(jwk, algorithm="RS256").key
        except (KeyError, TypeError, jwt.PyJWKError, ValueError):
            continue
        if isinstance(jwk.get("endorsements"), list):
            endorsements[kid] = [str(e) for e in jwk["endorsements"][:64]]
    return keys, endorsements


def same_origin_or_https(url: str, origin_of: str) -> bool:
    part, base = urlsplit(url), urlsplit(origin_of)
    return part.scheme == "https" or (part.scheme, part.netloc) == (base.scheme, base.netloc)


class ChannelKeys(SigningKeys):
    """The Bot Connector's published signing keys (the refresh rules: the module docstring)."""

    def __init__(self, http: HttpSession, metadata_url: str):
        super().__init__(http, metadata_url)
        self.endorsements: dict = {}

    async def verify(self, header: Optional[str], app_id: str, issuer: str) -> dict:
        return claims_of(await self.bearer_token(header), self.keys, app_id, issuer)

    async def _fetch(self) -> tuple[dict, float]:
        status, _, metadata = await self.http.request_json("GET", self.url, op="openid")
        jwks_uri = metadata.get("jwks_uri") if status == 200 and isinstance(metadata, dict) else None
        if not isinstance(jwks_uri, str) or not same_origin_or_https(jwks_uri, self.url):
            raise RetryableError(f"the OpenID metadata answered HTTP {status} without a usable jwks_uri",
                                 method="openid", status=status)
        status, headers, body = await self.http.request_json("GET", jwks_uri, op="jwks")
        if status != 200:
            raise RetryableError(f"the signing keys answered HTTP {status}", method="jwks", status=status)
        keys, endorsements = keys_of_jwks(body)
        if not keys:
            raise RetryableError("the signing keys document holds no key", method="jwks")
        self.endorsements = endorsements
        return keys, keys_ttl(headers.get("Cache-Control"))


class BotTokens(AccessTokens):
    """The bot's Connector access token (client credentials), kept until near its expiry."""

    credential = "the app id and secret"

    def __init__(self, http: HttpSession, app_id: str, app_password: str, token_url: str):
        super().__init__(http, token_url)
        self.app_id, self.password = app_id, app_password

    def __repr__(self) -> str:   # never the secret
        return f"BotTokens({self.app_id!r})"

    def grant_form(self) -> dict:
        return {"grant_type": "client_credentials", "client_id": self.app_id, "client_secret": self.password,
                "scope": CONNECTOR_SCOPE}
