"""The fake Bot Connector's keys: the RSA keys its activity tokens are signed with (published as a JWKS with
``endorsements``, as the Connector publishes its own). The RSA keys themselves are the Google Chat fake's per-name
keys (made once per process, so a fake restarted on the same port keeps them, as Microsoft's stay)."""
from __future__ import annotations

import time

import jwt

from tests.fakes.googlechat.keys import jwk as rsa_jwk
from tests.fakes.googlechat.keys import private_pem, rsa_key

CHANNEL_ISSUER = "https://api.botframework.com"
SIGNING_KID = "fake-connector-key-1"
ROTATED_KID = "fake-connector-key-2"
KEY_NAMES = {SIGNING_KID: "teams-1", ROTATED_KID: "teams-2"}


def jwk(kid: str = SIGNING_KID, endorsements: tuple = ("msteams",)) -> dict:
    return dict(rsa_jwk(KEY_NAMES[kid], kid), endorsements=list(endorsements))


def activity_token(app_id: str, service_url: str, *, lifetime: float = 3600.0, issued_at: float | None = None,
                   kid: str = SIGNING_KID, key: str | None = None, issuer: str = CHANNEL_ISSUER) -> str:
    """A bearer token as the Bot Connector signs one for an activity it POSTs to the bot (``key``: sign with another
    process key than the kid's, as a forger would)."""
    now = time.time() if issued_at is None else issued_at
    claims = {"iss": issuer, "aud": app_id, "serviceurl": service_url, "nbf": int(now), "iat": int(now),
              "exp": int(now + lifetime)}
    return jwt.encode(claims, private_pem(rsa_key(key or KEY_NAMES[kid])), algorithm="RS256", headers={"kid": kid})
