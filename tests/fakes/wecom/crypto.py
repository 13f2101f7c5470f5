"""WeCom's callback cryptography as the platform side does it, written from the "加解密方案说明" page on its own
(not shared with the adapter, so a misreading on one side shows up as a refusal on the other).

    msg_signature = sha1(sorted([token, timestamp, nonce, msg_encrypt]) joined).hexdigest()
    AESKey        = Base64_Decode(EncodingAESKey + "=")           32 bytes; IV = AESKey[:16]
    msg_encrypt   = Base64_Encode(AES_CBC(PKCS7_32(random(16B) + msg_len(4B, network order) + msg + ReceiveId)))

The pieces are separate functions so a test can build what WeCom never would: a pad that lies, another
ReceiveId, a wrong key.
"""
from __future__ import annotations

import base64
import hashlib
import os
import secrets
import string
from typing import Optional

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

BLOCK = 32


def new_encoding_aes_key() -> str:
    """43 characters, as the admin console's "随机获取" (generate) button gives."""
    return base64.b64encode(os.urandom(32)).decode().rstrip("=")


def key_of(encoding_aes_key: str) -> bytes:
    return base64.b64decode(encoding_aes_key + "=")


def msg_signature(token: str, timestamp: str, nonce: str, msg_encrypt: str) -> str:
    return hashlib.sha1("".join(sorted([token, timestamp, nonce, msg_encrypt])).encode()).hexdigest()


def frame(message: bytes, receive_id: str, random16: Optional[bytes] = None) -> bytes:
    """random(16) | length (4 bytes, big-endian) | message | ReceiveId."""
    random16 = os.urandom(16) if random16 is None else random16
    return random16 + len(message).to_bytes(4, "big") + message + receive_id.encode()


def pkcs7(data: bytes, block: int = BLOCK) -> bytes:
    amount = block - len(data) % block      # 1..32: a whole block of 32 when already aligned
    return data + bytes([amount]) * amount


def aes_cbc(key: bytes, plain: bytes) -> str:
    """Base64 of AES-256-CBC (IV = key[:16]) over ``plain``, which must already be whole blocks."""
    encryptor = Cipher(algorithms.AES(key), modes.CBC(key[:16])).encryptor()
    return base64.b64encode(encryptor.update(plain) + encryptor.finalize()).decode()


def encrypt(encoding_aes_key: str, message: bytes, receive_id: str) -> str:
    return aes_cbc(key_of(encoding_aes_key), pkcs7(frame(message, receive_id)))


def decrypt(encoding_aes_key: str, msg_encrypt: str) -> tuple[bytes, str]:
    """(message, ReceiveId) of a ciphertext; ValueError if it is not well formed."""
    key = key_of(encoding_aes_key)
    decryptor = Cipher(algorithms.AES(key), modes.CBC(key[:16])).decryptor()
    plain = decryptor.update(base64.b64decode(msg_encrypt)) + decryptor.finalize()
    amount = plain[-1]
    if not 1 <= amount <= BLOCK or plain[-amount:] != bytes([amount]) * amount:
        raise ValueError("bad padding")
    body = plain[16:-amount]
    length = int.from_bytes(body[:4], "big")
    return body[4:4 + length], body[4 + length:].decode()


def nonce() -> str:
    return "".join(secrets.choice(string.digits + string.ascii_letters) for _ in range(10))
