"""runtime/frame_mac.py: the tag, the refusal before unpickling, the check of Thespian's internals at start."""
from __future__ import annotations

import os
import pickle
import types

import pytest

from runtime import frame_mac, versions

pytestmark = pytest.mark.timeout(30)

KEY = bytes(range(32))


def test_the_tag_is_hmac_sha256():
    import hmac
    for key in (KEY, os.urandom(32), os.urandom(80)):
        for body in (b"", b"x", os.urandom(5000)):
            assert frame_mac.tag(key, body) == hmac.digest(key, body, "sha256")


def test_a_sealed_frame_opens_with_its_key_only():
    body = pickle.dumps({"a": 1})
    frame = frame_mac.seal(KEY, body)
    assert frame_mac.opened(KEY, frame) == body
    assert frame_mac.opened(os.urandom(32), frame) is None
    assert frame_mac.opened(KEY, frame[:-1]) is None
    assert frame_mac.opened(KEY, frame[:5]) is None
    assert frame_mac.opened(KEY, b"") is None


@pytest.fixture
def patched_transport(monkeypatch):
    """frame_mac installed in this process, with a spy on the pickle.loads it calls; Thespian's module put back
    afterwards (other tests of this process run plain actor systems)."""
    from thespian.system.transport import TCPTransport as module
    for name in ("serializer", "ReceiveBuffer", "ackMsg", "ackDataErrMsg"):
        monkeypatch.setattr(module, name, getattr(module, name))
    loaded = []
    spy = types.SimpleNamespace(dumps=pickle.dumps, loads=lambda data: loaded.append(bytes(data)) or pickle.loads(data))
    # (bytes(data): the transport hands pickle a view of the frame)
    monkeypatch.setattr(frame_mac, "pickle", spy)
    frame_mac.install(KEY)
    return module, loaded


def _read(module, wire: bytes):
    buffer = module.ReceiveBuffer(module.serializer.loads)
    buffer.addMore(wire)
    assert buffer.isDone()
    return buffer.completed()


def test_a_frame_with_a_wrong_mac_never_reaches_pickle_loads(patched_transport):
    module, loaded = patched_transport
    payload = pickle.dumps(("sender", "message"))
    sealed = frame_mac.seal(KEY, payload)
    for wire in (frame_mac._framed(payload),                                        # no tag at all
                 frame_mac._framed(frame_mac.seal(os.urandom(32), payload)),        # another key's tag
                 frame_mac._framed(bytes([sealed[0] ^ 1]) + sealed[1:])):                # one bit of the tag
        assert _read(module, wire) is None, wire
    assert loaded == [], "bytes of a refused frame reached pickle.loads"
    # What the patched transport writes is read back: the same path, with the right tag.
    written = module.toSendBuffer(("sender", "message"), module.serializer.dumps)
    assert _read(module, written) == (("sender", "message"), b"")
    assert loaded == [payload]


def test_a_frame_announcing_more_than_the_bound_is_refused_without_being_held(patched_transport):
    module, loaded = patched_transport
    buffer = module.ReceiveBuffer(module.serializer.loads)
    buffer.addMore(f"{frame_mac.MAX_FRAME + 1}>".encode() + b"x" * 4096)
    assert buffer.isDone() and buffer.completed() is None and loaded == []
    assert len(buffer._buf) == 0, "the bytes of an oversized frame were kept"


def test_the_acknowledgements_are_signed_too(patched_transport):
    module, _ = patched_transport
    assert _read(module, module.ackMsg) == ("ACK", b"")
    assert _read(module, module.ackDataErrMsg) == ("ACK+DATAERR", b"")


def test_another_thespian_is_refused_at_start(monkeypatch):
    monkeypatch.setattr(versions, "CHECKED_THESPIAN", ("0.0.1",))
    with pytest.raises(frame_mac.ThespianMismatch, match=r"checked: 0\.0\.1"):
        frame_mac.install(KEY)


def test_a_thespian_that_deserialises_elsewhere_is_refused_at_start(monkeypatch):
    monkeypatch.setitem(frame_mac._EXPECTED_USES, r"ReceiveBuffer\(", 5)
    with pytest.raises(frame_mac.ThespianMismatch, match="appears 4 time"):
        frame_mac.check_thespian()
