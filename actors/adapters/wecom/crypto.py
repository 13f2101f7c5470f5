"""WeCom's callback encryption (企业微信 "加解密方案"), as pure functions over ``cryptography``.

Every callback WeCom sends an application is signed and encrypted with the three values its admin console shows
under "接收消息" (receive messages) and the corp id:

* the signature: ``msg_signature`` = hex SHA-1 of the concatenation of ``[token, timestamp, nonce, encrypted]``
  sorted as strings (``encrypted``: the ``Encrypt`` element of a POSTed body, or the ``echostr`` of the GET that
  verifies the URL);
* the key: the 43-character ``EncodingAESKey`` plus ``"="`` is the base64 of 32 bytes, the AES-256 key; the IV is
  the key's first 16 bytes;
* the ciphertext: base64 of AES-256-CBC over ``random(16) | len(msg) as 4 bytes big-endian | msg | ReceiveId``,
  padded with PKCS#7 to a multiple of **32** bytes (1 to 32 bytes, each holding the pad length), not AES's 16;
* the ReceiveId: the corp id, for the callbacks of an application built by the corp itself.

Decryption is strict where WeCom's samples are lenient: a pad whose bytes disagree, a length field that runs past
the end, or a ReceiveId that is not the corp id is a refusal (``CallbackRefused``), never a guess. A wrong key
almost always shows as bad padding.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

PAD_BLOCK = 32
RANDOM_BYTES = 16


class CallbackRefused(ValueError):
    """A callback that is not WeCom's, or not for this application: refused, nothing of it is used.
    ``status`` is the HTTP answer (401: not signed by WeCom; 400: signed, but not a payload we can take)."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.reason, self.status = reason, status


def aes_key(encoding_aes_key: str) -> bytes:
    """The AES-256 key of an EncodingAESKey; ValueError unless it is 43 base64 characters."""
    if len(encoding_aes_key) != 43:
        raise ValueError(f"an EncodingAESKey has 43 characters, this one {len(encoding_aes_key)}")
    try:
        key = base64.b64decode(encoding_aes_key + "=", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("an EncodingAESKey is base64 (letters, digits, + and /)") from None
    if len(key) != 32:   # unreachable for 43 valid characters; kept so the invariant is stated where it is used
        raise ValueError("an EncodingAESKey decodes to 32 bytes")
    return key


def signature(token: str, timestamp: str, nonce: str, encrypted: str) -> str:
    return hashlib.sha1("".join(sorted([token, timestamp, nonce, encrypted])).encode()).hexdigest()


def check_signature(token: str, timestamp: str, nonce: str, encrypted: str, given: str) -> None:
    """CallbackRefused (401) unless ``given`` is the signature of the other four (compared in constant time)."""
    wanted = signature(token, timestamp, nonce, encrypted).encode()
    # Query values arrive decoded with surrogateescape: a non-ASCII signature is a wrong one, not a crash.
    if not hmac.compare_digest(given.encode("utf-8", "surrogateescape").lower(), wanted):
        raise CallbackRefused("msg_signature does not match", status=401)


def decrypt(key: bytes, encrypted: str, receive_id: str) -> bytes:
    """The message inside ``encrypted`` (the XML of a callback, or a URL check's plain echostr)."""
    try:
        data = base64.b64decode(encrypted, validate=True)
    except (binascii.Error, ValueError):
        raise CallbackRefused("the ciphertext is not base64") from None
    if not data or len(data) % 16:
        raise CallbackRefused(f"the ciphertext is {len(data)} bytes, not whole AES blocks")
    decryptor = Cipher(algorithms.AES(key), modes.CBC(key[:16])).decryptor()
    plain = decryptor.update(data) + decryptor.finalize()
    pad = plain[-1]
    if not 1 <= pad <= PAD_BLOCK or pad > len(plain) or plain[-pad:] != bytes([pad]) * pad:
        raise CallbackRefused("bad padding (a wrong EncodingAESKey, or not WeCom's ciphertext)")
    body = plain[RANDOM_BYTES:-pad]
    if len(body) < 4:
        raise CallbackRefused("the plaintext is too short to hold a length")
    length = int.from_bytes(body[:4], "big")
    if 4 + length > len(body):
        raise CallbackRefused(f"the length field ({length}) runs past the plaintext ({len(body) - 4} bytes)")
    message, found = body[4:4 + length], body[4 + length:]
    if not hmac.compare_digest(found, receive_id.encode()):
        shown = found[:40].decode("utf-8", "replace")
        raise CallbackRefused(f"ReceiveId {shown!r} is not this corp's id")
    return message
