"""Every Thespian frame carries an HMAC-SHA256 under the gateway's transport key, checked before it is unpickled.

Thespian's TCP transport (``thespian/system/transport/TCPTransport.py``) writes each message, and each
acknowledgement, as ``<length>>`` followed by a pickle, and reads them back with ``pickle.loads``: whoever can put
bytes on an actor's connection runs code as the gateway's user. The kernel's uid check (peer_check.py) keeps
other local users off the ports the gateway *accepts* on; this module is the wall that holds for every connection,
including the ones the gateway *opens* (to its admin, to a worker, the admin CLI to the daemon), where the other end
could be a listener somebody else put there.

The frame becomes ``<length>>`` + 32-byte tag + pickle, the tag being HMAC-SHA256(key, pickle). A frame whose tag
does not match is dropped before any of its bytes reach ``pickle.loads``: as a message, Thespian's own "cannot
deserialise" path answers with its error acknowledgement and closes the connection; as an acknowledgement, the send
is retried as if the ack had been corrupted and, to a peer that never proves itself, fails in the end. Refusals are
written to Thespian's log (``<state>/thespian.log``), at most once per ``LOG_EVERY_S`` per process, with a count.

The key (daemon/transport_key.py): a single gateway uses a fresh per-run key the launcher makes, kept in
``<state>/run/transport.key`` for the admin CLI; the hosts of a convention share a key derived from the configured
cluster secret. Actor processes are forked from the process that called ``install`` and inherit the patched module
with the key; no actor reads the file.

A frame is held whole before its tag can be checked, so its announced length is bounded first (``MAX_FRAME``, as
for direct links): a longer one is dropped unread and refused.

What the tag does not do: it authenticates, it does not hide (on a network between hosts the frames are readable;
docs/distribution.md puts convention traffic in a WireGuard tunnel), and a frame captured on such a network could be
replayed to the same run. docs/security.md lists both.

How the patch is applied: the transport module's globals ``serializer`` (its ``dumps``), ``ReceiveBuffer`` and the
two pre-built acknowledgements ``ackMsg`` / ``ackDataErrMsg`` are replaced; every read of a frame in that module goes
through ``ReceiveBuffer(serializer.loads)`` and every write through ``serializer.dumps`` or those two constants.
``install`` checks first that this is still so (``check_thespian``: the version this was read against and the
shape of the module's source) and raises ``ThespianMismatch`` otherwise: the gateway refuses to start rather than
run a transport it cannot vouch for. The start-up self-test (runtime/selftest.py) makes the same check first.

Thespian internals relied on (checked against Thespian 4.0.1 only, refused on any other: runtime/versions.py): the
globals ``serializer``, ``ReceiveBuffer``, ``ackMsg``, ``ackDataErrMsg`` and ``ackPacket`` of
``thespian.system.transport.TCPTransport`` and the uses of them in its source (``_EXPECTED_USES``); in
``thespian.system.transport.streamBuffer``, ``ackDataErrPacket`` and ``ReceiveBuffer``'s ``_buf``, ``_blen``,
``_size`` and ``_extra`` (the subclass reads and resets them).
"""
from __future__ import annotations

import hashlib
import hmac
import pickle
import re
from typing import Optional

from runtime import versions
from runtime.thespian_log import RateLimitedWarning

TAG_BYTES = 32
KEY_BYTES = 32
LOG_EVERY_S = 10.0
MAX_FRAME = 64 * 1024 * 1024        # the bound on a frame held before its tag is checked (as supervision/direct_link's)

# What TCPTransport.py must contain, exactly this many times, for the patch to cover every frame (and nothing else
# in it may unpickle): the four receive buffers, the one serializer, the two acknowledgements sent.
_EXPECTED_USES = {
    r"ReceiveBuffer\(serializer\.loads\)": 4,
    r"ReceiveBuffer\(": 4,
    r"serializer\.dumps": 1,
    r"\.loads\b": 4,
    r"\bpickle\.load": 0,
    r"send\(ackMsg\)": 1,
    r"send\(ackDataErrMsg\)": 1,
}

_refusals = RateLimitedWarning(LOG_EVERY_S)


class ThespianMismatch(versions.RuntimeIncompatible):
    """The installed Thespian is not the one the frame MAC was checked against."""


# ----------------------------------------------------------------------------------------------- the frames
_pads: dict = {}      # key -> SHA-256 states after the inner and the outer padded key (at most a few keys a process)


def tag(key: bytes, body) -> bytes:
    """HMAC-SHA256(key, body) (RFC 2104), from SHA-256 states that already hold the padded key: the same bytes as
    ``hmac.digest``, without its per-call setup, which costs more than hashing a typical frame."""
    pads = _pads.get(key)
    if pads is None:
        block = (hashlib.sha256(key).digest() if len(key) > 64 else key).ljust(64, b"\0")
        if len(_pads) >= 8:
            _pads.clear()
        pads = _pads[key] = (hashlib.sha256(bytes(b ^ 0x36 for b in block)),
                             hashlib.sha256(bytes(b ^ 0x5C for b in block)))
    inner, outer = pads[0].copy(), pads[1].copy()
    inner.update(body)
    outer.update(inner.digest())
    return outer.digest()


def seal(key: bytes, body: bytes) -> bytes:
    return tag(key, body) + body


def opened(key: bytes, frame: bytes):
    """The pickle inside ``frame`` (a view of it) if its tag is right, else None (and the refusal is noted)."""
    body = memoryview(frame)[TAG_BYTES:]
    if len(frame) >= TAG_BYTES and hmac.compare_digest(tag(key, body), frame[:TAG_BYTES]):
        return body
    _note_refusal()
    return None


def _note_refusal() -> None:
    _refusals.note("refused %d frame(s) whose MAC is wrong: the peer is not this gateway (or not of its convention); "
                   "nothing of them was unpickled")


# ------------------------------------------------------------------------------------------------ the patch
def missing() -> list[str]:
    """What of Thespian's TCP transport is not as this patch covers it (empty: it is)."""
    problems: list[str] = []
    version = versions.thespian_version()
    if version not in versions.CHECKED_THESPIAN:
        problems.append(f"Thespian version {version} (checked: {', '.join(versions.CHECKED_THESPIAN)})")
    try:
        # Thespian's transport loaded where it is checked or patched: importing this module alone must not load it
        from thespian.system.transport import TCPTransport as module
        # loaded with TCPTransport, where it is patched
        from thespian.system.transport import streamBuffer
    except Exception as exc:  # noqa: BLE001 - whatever stops the import is the problem named
        return problems + [f"thespian.system.transport cannot be imported ({type(exc).__name__}: {exc})"]
    try:
        with open(module.__file__, encoding="utf-8") as f:
            source = f.read()
    except OSError as exc:
        source = ""
        problems.append(f"cannot read {module.__file__}: {exc}")
    for pattern, count in _EXPECTED_USES.items():
        seen = len(re.findall(pattern, source))
        if seen != count:
            problems.append(f"TCPTransport.py: {pattern!r} appears {seen} time(s), expected {count}")
    for name in ("serializer", "ReceiveBuffer", "ackMsg", "ackDataErrMsg", "ackPacket"):
        if not hasattr(module, name):
            problems.append(f"thespian.system.transport.TCPTransport.{name} is missing")
    if not hasattr(streamBuffer, "ackDataErrPacket"):
        problems.append("thespian.system.transport.streamBuffer.ackDataErrPacket is missing")
    receive_buffer = getattr(streamBuffer, "ReceiveBuffer", None)
    names = getattr(getattr(getattr(receive_buffer, "__init__", None), "__code__", None), "co_names", ())
    for name in ("_buf", "_blen", "_size", "_extra"):
        if name not in names:
            problems.append(f"thespian.system.transport.streamBuffer.ReceiveBuffer has no {name}")
    return problems


def check_thespian() -> None:
    """Raise ThespianMismatch unless Thespian's TCP transport is the one this patch covers."""
    problems = missing()
    if problems:
        raise ThespianMismatch("the installed Thespian is not the one the gateway's frame MAC (runtime/frame_mac.py) "
                               "was checked against, so its frames cannot be vouched for: " + "; ".join(problems))


def installed_key() -> Optional[bytes]:
    # Thespian's transport loaded where it is patched: importing this module alone must not load it
    from thespian.system.transport import TCPTransport as module
    return getattr(module.serializer, "mac_key", None)


def install(key: bytes) -> None:
    """Sign every frame this process (and every process forked from it) writes, and refuse every frame it reads
    that is not signed with ``key``. Installing again with another key replaces it (an admin CLI run per state)."""
    if len(key) != KEY_BYTES:
        raise ValueError("the transport key must be 32 bytes")
    check_thespian()
    # Thespian's transport loaded where it is patched: importing this module alone must not load it
    from thespian.system.transport import TCPTransport as module
    # loaded with TCPTransport, where it is patched
    from thespian.system.transport import streamBuffer
    plain = streamBuffer.ReceiveBuffer

    class SignedSerializer:
        mac_key = key

        @staticmethod
        def dumps(message) -> bytes:
            return seal(key, pickle.dumps(message))

        @staticmethod
        def loads(frame: bytes):   # kept for a caller that passes it; MacReceiveBuffer verifies itself
            body = opened(key, frame)
            if body is None:
                raise ValueError("frame MAC mismatch")
            return pickle.loads(body)

    class MacReceiveBuffer(plain):
        """A receive buffer whose completed frame is unpickled only if its tag is right; otherwise it reports
        nothing completed (None), which each reader of the transport treats as a corrupted frame."""

        def __init__(self, _serializer=None):
            super().__init__(pickle.loads)

        def addMore(self, buf):
            super().addMore(buf)
            if self._size is not None and self._size > MAX_FRAME:
                # Longer than any frame the gateway writes: a broken or hostile peer. Nothing more is kept; the
                # frame reads as complete and empty, so its tag fails and it is refused as every bad frame is.
                self._size = self._blen = 0
                self._buf = self._extra = b""

        def completed(self):
            if self._size is None or self._blen != self._size:
                return None
            body = opened(key, self._buf)
            return None if body is None else (pickle.loads(body), self._extra)

    module.serializer = SignedSerializer
    module.ReceiveBuffer = MacReceiveBuffer
    module.ackMsg = _framed(seal(key, pickle.dumps(module.ackPacket)))
    module.ackDataErrMsg = _framed(seal(key, pickle.dumps(streamBuffer.ackDataErrPacket)))


def _framed(payload: bytes) -> bytes:
    return f"{len(payload)}>".encode() + payload
