"""The open platform's callback security (事件订阅 "加密策略"), as pure functions over ``cryptography``.

An app's Encryption Strategy page shows two values:

* the **Encrypt Key**: set, every callback body is ``{"encrypt": base64}``, the base64 of a 16-byte IV followed by
  the AES-256-CBC ciphertext (PKCS#7 padding, 16-byte blocks) of the JSON event, keyed with the SHA-256 of the
  Encrypt Key; and every event callback is signed: ``X-Lark-Signature`` is the hex SHA-256 of
  ``X-Lark-Request-Timestamp + X-Lark-Request-Nonce + encrypt_key`` (UTF-8) followed by the raw body bytes;
* the **Verification Token**: carried inside every event (``header.token``, or ``token`` in the URL check), which
  is all a plain-text callback has to prove where it came from.

Decryption is strict: a body that is no base64, too short, or padded wrongly is a refusal (``CallbackRefused``),
never a guess; a wrong key almost always shows as bad padding.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

BLOCK = 16


class CallbackRefused(Exception):
    """A callback that is not the platform's (bad signature, wrong token, undecryptable) or no callback at all:
    refused with ``status``, nothing stored."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.reason, self.status = reason, status


def _key(encrypt_key: str) -> bytes:
    return hashlib.sha256(encrypt_key.encode()).digest()


def signature(encrypt_key: str, timestamp: str, nonce: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def signature_ok(encrypt_key: str, timestamp: str, nonce: str, body: bytes, header: str) -> bool:
    """The signature over the raw body, compared in constant time."""
    return bool(header) and hmac.compare_digest(signature(encrypt_key, timestamp, nonce, body), header.strip())


def encrypt(encrypt_key: str, plain: bytes, iv: bytes = b"") -> str:
    """What the platform sends (used by the fake and the tests): base64(iv | AES-256-CBC(pkcs7(plain)))."""
    iv = iv or os.urandom(BLOCK)
    pad = BLOCK - len(plain) % BLOCK
    encryptor = Cipher(algorithms.AES(_key(encrypt_key)), modes.CBC(iv)).encryptor()
    return base64.b64encode(iv + encryptor.update(plain + bytes([pad]) * pad) + encryptor.finalize()).decode()


def decrypt(encrypt_key: str, encrypted: str) -> bytes:
    try:
        raw = base64.b64decode(encrypted, validate=True)
    except (binascii.Error, ValueError):
        raise CallbackRefused("the encrypted body is no base64") from None
    if len(raw) < 2 * BLOCK or len(raw) % BLOCK:
        raise CallbackRefused(f"the encrypted body is {len(raw)} bytes, not an IV and whole AES blocks")
    decryptor = Cipher(algorithms.AES(_key(encrypt_key)), modes.CBC(raw[:BLOCK])).decryptor()
    padded = decryptor.update(raw[BLOCK:]) + decryptor.finalize()
    pad = padded[-1]
    if not 1 <= pad <= BLOCK or padded[-pad:] != bytes([pad]) * pad:
        raise CallbackRefused("the body does not decrypt with the Encrypt Key (bad padding)", status=401)
    return padded[:-pad]
