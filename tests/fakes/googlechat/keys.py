"""The fake's keys: the RSA key Google Chat's event tokens are signed with (published as an x509 certificate and as
a JWKS, as Google publishes its own), and the service account's key (its JSON key file, whose assertions the token
endpoint checks). Made once per process, so a fake restarted on the same port keeps them, as Google's stay."""
from __future__ import annotations

import base64
import datetime
import functools
import json
import time

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

CHAT_ISSUER = "chat@system.gserviceaccount.com"
SIGNING_KID = "fakechatkey0001"
ACCOUNT_EMAIL = "gateway-bot@fake-project.iam.gserviceaccount.com"
ACCOUNT_KID = "fakeaccountkey0001"


@functools.lru_cache(maxsize=None)
def rsa_key(name: str) -> rsa.RSAPrivateKey:
    """One RSA key per name and process (``other`` keys sign what Google never would)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def private_pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


@functools.lru_cache(maxsize=None)
def certificate_pem(name: str = "chat") -> str:
    """A self-signed certificate of the key, as Google's x509 document carries one per kid."""
    key = rsa_key(name)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CHAT_ISSUER)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def jwk(name: str = "chat", kid: str = SIGNING_KID) -> dict:
    numbers = rsa_key(name).public_key().public_numbers()
    return {"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid, "n": _b64(numbers.n), "e": _b64(numbers.e)}


def event_token(audience: str, *, lifetime: float = 3600.0, issued_at: float | None = None, key: str = "chat",
                kid: str = SIGNING_KID, issuer: str | None = None) -> str:
    """A bearer token as Google Chat signs one: for a project-number audience issued by the Chat service account;
    for an endpoint-URL audience a Google ID token carrying the account's email."""
    now = time.time() if issued_at is None else issued_at
    claims = {"aud": audience, "iat": int(now), "exp": int(now + lifetime)}
    if audience.startswith(("http://", "https://")):
        claims.update(iss=issuer or "https://accounts.google.com", email=CHAT_ISSUER, email_verified=True,
                      sub="113421432167112871234")
    else:
        claims["iss"] = issuer or CHAT_ISSUER
    return jwt.encode(claims, private_pem(rsa_key(key)), algorithm="RS256", headers={"kid": kid})


def service_account_file(token_uri: str) -> str:
    """The JSON key file of the fake project's service account, naming the fake's token endpoint."""
    return json.dumps({"type": "service_account", "project_id": "fake-project", "private_key_id": ACCOUNT_KID,
                       "private_key": private_pem(rsa_key("account")), "client_email": ACCOUNT_EMAIL,
                       "client_id": "100000000000000000001", "token_uri": token_uri})
