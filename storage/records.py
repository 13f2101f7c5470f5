"""Records: how structured values (payloads, requests, display metadata) are stored as bytes.

A record is one format byte followed by a msgpack body. The format byte lets a later version change the encoding
(compression, a new type) per record, without rewriting tables; an unknown format byte is refused loudly rather than
decoded as garbage.

Rules (kept strict so that what is written can always be read back, by this process or another):

* msgpack with ``use_bin_type=True`` (bytes stay bytes, str stays str) and ``raw=False`` (str decodes as str);
* map keys must be ``str`` or ``bytes`` (``strict_map_key``); ``pack`` refuses what ``unpack`` would refuse, so a bad
  value fails at write time, in the caller's stack, and never becomes an unreadable row;
* no extension types (datetimes, custom objects): encode them as plain values first;
* tuples are encoded as msgpack arrays and come back as lists.
"""
from __future__ import annotations

from typing import Any

import msgpack

from .errors import RecordError

FORMAT_V1 = 1
_HEADER_V1 = bytes([FORMAT_V1])


def refuse_ext(code: int, data: bytes) -> Any:
    raise RecordError(f"msgpack extension type {code} is not allowed in records")


def pack_body(value: Any) -> bytes:
    """Canonical msgpack of ``value`` (no format byte), checked to be readable by ``unpack_body``."""
    try:
        body = msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise RecordError(f"cannot encode {type(value).__name__} as a record: {exc}") from exc
    unpack_body(body)  # the write-time check that makes every stored record readable
    return body


def unpack_body(body: bytes) -> Any:
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True, ext_hook=refuse_ext)
    except RecordError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise RecordError(f"not a valid record body: {exc}") from exc


def pack(value: Any) -> bytes:
    """Encode ``value`` as a record: format byte + msgpack. Raises ``RecordError`` for values it cannot store."""
    return _HEADER_V1 + pack_body(value)


def unpack(data: bytes) -> Any:
    """Decode a record written by ``pack``. Raises ``RecordError`` for empty, unknown-format or corrupt bytes."""
    if not data:
        raise RecordError("empty record")
    if data[0] != FORMAT_V1:
        raise RecordError(f"unknown record format {data[0]} (this code reads format {FORMAT_V1}); "
                          f"the row was written by a newer version")
    return unpack_body(bytes(data[1:]))
