"""The long connection's frames: the platform's protobuf ``Frame`` (package ``pbbp2``, proto2) written and read by
hand, and the reassembly of an event the platform splits into fragments. Pure: no I/O, no clock but the one passed.

    message Header { required string key = 1; required string value = 2; }
    message Frame {
        required uint64 SeqID = 1;   required uint64 LogID = 2;
        required int32 service = 3;  required int32 method = 4;      // method 0: control, 1: data
        repeated Header headers = 5;
        optional string payload_encoding = 6;  optional string payload_type = 7;
        optional bytes payload = 8;            optional string LogIDNew = 9;
    }

A control frame's header ``type`` is ``ping`` (the client's, every PingInterval seconds) or ``pong`` (the
platform's answer; its payload, when there is one, a new ``ClientConfig`` as JSON). A data frame's headers carry
``type`` (``event`` or ``card``), ``message_id``, ``sum`` and ``seq`` (an event split into ``sum`` fragments, ``seq``
counting from 0) and ``trace_id``; its payload is the event's JSON. The client answers a data frame with the same
frame, a ``biz_rt`` header added (milliseconds it took) and the payload ``{"code": 200}``.

Only the wire types protobuf uses are read (varint, 64-bit, length-delimited, 32-bit); an unknown field is
skipped, a truncated or otherwise broken frame raises ``BadFrame``.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Optional

CONTROL, DATA = 0, 1
MAX_FRAGMENTS = 64                  # fragments of one event (an event is a few KB; the platform splits big ones)
MAX_EVENT_BYTES = 4 * 2**20         # the bytes of one reassembled event
MAX_PENDING_EVENTS = 32             # events partly received at once
FRAGMENT_TTL_S = 30.0               # a fragment whose siblings do not come within this is dropped (redelivered)


class BadFrame(ValueError):
    """Bytes that are no Frame, or a frame that breaks the protocol (a fragment out of range)."""


@dataclasses.dataclass(frozen=True)
class Frame:
    seq_id: int = 0
    log_id: int = 0
    service: int = 0
    method: int = CONTROL
    headers: tuple = ()              # ((key, value), ...) in the order they came
    payload_encoding: str = ""
    payload_type: str = ""
    payload: bytes = b""
    log_id_new: str = ""

    def header(self, key: str, default: str = "") -> str:
        return next((value for k, value in self.headers if k == key), default)


# ---------------------------------------------------------------------------------------------------- writing

def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1          # a negative int32 is written as its 64-bit two's complement (protobuf's rule)
    out = bytearray()
    while True:
        bits, value = value & 0x7F, value >> 7
        out.append(bits | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def encode(frame: Frame) -> bytes:
    """The frame's protobuf bytes: the required fields always, the optional ones when set."""
    out = [_field(1, frame.seq_id), _field(2, frame.log_id), _field(3, frame.service), _field(4, frame.method)]
    out += [_field(5, _field(1, key) + _field(2, value)) for key, value in frame.headers]
    for number, value in ((6, frame.payload_encoding), (7, frame.payload_type), (8, frame.payload),
                          (9, frame.log_id_new)):
        if value:
            out.append(_field(number, value))
    return b"".join(out)


# ---------------------------------------------------------------------------------------------------- reading

def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise BadFrame("a varint runs past the frame")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes):
    """(number, value) of each field: an int for a varint, bytes for a length-delimited field; others skipped."""
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _read_varint(data, at)
        elif wire == 2:
            size, at = _read_varint(data, at)
            if at + size > len(data):
                raise BadFrame("a field runs past the frame")
            value, at = data[at:at + size], at + size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
            if at > len(data):
                raise BadFrame("a fixed field runs past the frame")
            continue
        else:
            raise BadFrame(f"wire type {wire} is not protobuf's")
        yield number, value


def _text(value, what: str) -> str:
    if not isinstance(value, bytes):
        raise BadFrame(f"{what} is no string")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise BadFrame(f"{what} is no UTF-8") from None


def _int32(value: int) -> int:
    value &= (1 << 32) - 1
    return value - (1 << 32) if value & (1 << 31) else value


def decode(data: bytes) -> Frame:
    fields: dict = {"headers": []}
    names = {1: "seq_id", 2: "log_id", 3: "service", 4: "method"}
    for number, value in _fields(bytes(data)):
        if number in names:
            if not isinstance(value, int):
                raise BadFrame(f"field {names[number]} is no integer")
            fields[names[number]] = _int32(value) if number in (3, 4) else value
        elif number == 5:
            header = dict((n, v) for n, v in _fields(value if isinstance(value, bytes) else b""))
            fields["headers"].append((_text(header.get(1, b""), "a header's key"),
                                      _text(header.get(2, b""), "a header's value")))
        elif number in (6, 7, 9):
            fields[{6: "payload_encoding", 7: "payload_type", 9: "log_id_new"}[number]] = _text(value, "a field")
        elif number == 8:
            if not isinstance(value, bytes):
                raise BadFrame("the payload is no bytes")
            fields["payload"] = value
    fields["headers"] = tuple(fields["headers"])
    return Frame(**fields)


# ------------------------------------------------------------------------------------------------- the frames

def ping(service: int) -> Frame:
    return Frame(service=service, method=CONTROL, headers=(("type", "ping"),))


def answer(frame: Frame, took_ms: int, code: int = 200) -> Frame:
    """The answer to a data frame: the frame itself with ``biz_rt`` and the payload ``{"code": code}``."""
    return dataclasses.replace(frame, headers=frame.headers + (("biz_rt", str(max(0, int(took_ms)))),),
                               payload=json.dumps({"code": code}).encode())


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """What the platform tells the client to do (seconds; a count of -1: reconnect forever)."""
    reconnect_count: int = -1
    reconnect_interval_s: float = 120.0
    reconnect_nonce_s: float = 30.0
    ping_interval_s: float = 120.0


def client_config(raw, base: ClientConfig = ClientConfig()) -> ClientConfig:
    """``base`` with what ``raw`` (the endpoint's ``ClientConfig``, or a pong's payload) sets; fields missing or not
    numbers keep their values."""
    if isinstance(raw, (bytes, str)):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return base
    if not isinstance(raw, dict):
        return base
    changes = {}
    for key, name in (("ReconnectCount", "reconnect_count"), ("ReconnectInterval", "reconnect_interval_s"),
                      ("ReconnectNonce", "reconnect_nonce_s"), ("PingInterval", "ping_interval_s")):
        value = raw.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e7 or (
                key == "ReconnectCount" and value == -1):
            changes[name] = int(value) if key == "ReconnectCount" else float(value)
    return dataclasses.replace(base, **changes)


class Fragments:
    """Events split into fragments, kept until whole: ``add`` returns the event's bytes once its last fragment came,
    else None. Bounded: at most MAX_PENDING_EVENTS partly received (the oldest dropped), MAX_FRAGMENTS and
    MAX_EVENT_BYTES an event, FRAGMENT_TTL_S between an event's first fragment and its last. A dropped event was
    never answered, so the platform delivers it again."""

    def __init__(self, max_pending: int = MAX_PENDING_EVENTS, max_bytes: int = MAX_EVENT_BYTES,
                 ttl_s: float = FRAGMENT_TTL_S):
        self.max_pending, self.max_bytes, self.ttl_s = max_pending, max_bytes, ttl_s
        self._pending: dict = {}      # message id -> (sum, {seq: bytes}, first seen at); insertion order: oldest first
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, message_id: str, total: int, seq: int, payload: bytes, now: float) -> Optional[bytes]:
        self._expire(now)
        if not 0 < total <= MAX_FRAGMENTS or not 0 <= seq < total:
            self._pending.pop(message_id, None)
            raise BadFrame(f"fragment {seq} of {total} (at most {MAX_FRAGMENTS} fragments an event)")
        if total == 1:
            return payload
        count, parts, since = self._pending.get(message_id, (total, {}, now))
        if count != total:
            self._pending.pop(message_id, None)
            raise BadFrame(f"event {message_id[:40]!r} came as {count} fragments and then as {total}")
        parts[seq] = payload
        if sum(len(p) for p in parts.values()) > self.max_bytes:
            self._pending.pop(message_id, None)
            self.dropped += 1
            raise BadFrame(f"event {message_id[:40]!r} is over {self.max_bytes} bytes")
        if len(parts) == total:
            self._pending.pop(message_id, None)
            return b"".join(parts[i] for i in range(total))
        self._pending[message_id] = (count, parts, since)
        while len(self._pending) > self.max_pending:
            self._pending.pop(next(iter(self._pending)))
            self.dropped += 1
        return None

    def _expire(self, now: float) -> None:
        for message_id in [m for m, (_, _, since) in self._pending.items() if now - since > self.ttl_s]:
            del self._pending[message_id]
            self.dropped += 1
