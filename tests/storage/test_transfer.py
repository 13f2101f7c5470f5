import asyncio
import hashlib
import io

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from storage import ImportRefused, TranscriptEvent, session_key, transfer

from .helpers import Src, dump, open_store

KEY = session_key(Src())


async def make_session(store, key=KEY, payloads=None):
    info = await store.sessions.get_or_create(key, {"platform": "telegram", "chat_id": "1001", "user_name": "Zoë"})
    await store.sessions.rename(info.session_id, "Walrus 🦭 talk")
    await store.sessions.set_display(info.session_id, {"chat_title": "Fam", "n": 3})
    payloads = payloads or [{"text": "hello"}, {"text": "hi", "tokens": 12, "ratio": 0.1},
                            {"name": "search", "arguments": {"q": "x"}, "raw": b"\x00\xff"},
                            {"text": "", "nested": [[], {}, None, True, -2**63, 2**64 - 1, 1e308]}]
    roles = ["user", "assistant", "tool", "assistant"]
    await store.sessions.append(info.session_id, [
        TranscriptEvent(roles[i % 4], "message", p, f"t{i // 2}") for i, p in enumerate(payloads)])
    await store.sessions.put_request(info.session_id, "t0", {"model": "m", "messages": [{"role": "user"}]})
    await store.sessions.put_request(info.session_id, "t1", {"model": "m", "temperature": 0.7})
    return info.session_id


def reframe(records_):
    """Re-encode records with a correct trailer (to test checks past the checksum)."""
    body = b"".join(msgpack.packb(r, use_bin_type=True) for r in records_)
    trailer = {"type": "trailer", "records": len(records_), "sha256": hashlib.sha256(body).hexdigest()}
    return body + msgpack.packb(trailer, use_bin_type=True)


def records_of(data):
    return list(msgpack.Unpacker(io.BytesIO(data), raw=False))[:-1]


async def test_export_import_round_trips_byte_for_byte(databases):
    async with open_store(databases / "a.db") as a:
        sid = await make_session(a)
        x = await a.sessions.export_session(sid)
        assert x == await a.sessions.export_session(sid)  # deterministic
    async with open_store(databases / "b.db") as b:
        info = await b.sessions.import_session(x)
        assert info.session_id == sid and info.title == "Walrus 🦭 talk"
        assert await b.sessions.export_session(sid) == x
        assert [h.seq for h in await b.sessions.search("hello")] == [1]  # the index is rebuilt on import
        assert (await b.sessions.get_or_create(KEY)).session_id == sid
        assert await b.sessions.append(sid, [TranscriptEvent("user", "message", {"text": "more"})]) == [5]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=st.lists(st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10), min_size=1, max_size=6))
def test_round_trip_property(databases, tmp_path_factory, payloads):
    async def run():
        root = tmp_path_factory.mktemp("rt")
        async with open_store(databases / f"{root.name}-a.db") as a:   # fresh stores for each example
            x = await a.sessions.export_session(await make_session(a, payloads=payloads))
        async with open_store(databases / f"{root.name}-b.db") as b:
            info = await b.sessions.import_session(x)
            assert await b.sessions.export_session(info.session_id) == x
    asyncio.run(run())


async def test_corrupted_or_truncated_files_are_refused_and_change_nothing(databases):
    async with open_store(databases / "a.db") as a:
        x = await a.sessions.export_session(await make_session(a))
    target = databases / "b.db"
    async with open_store(target) as b:
        await make_session(b, key=session_key(Src(chat_id="other")))
    before = dump(target)
    async with open_store(target) as b:
        for cut in range(len(x)):
            with pytest.raises(ImportRefused, match="nothing was changed"):
                await b.sessions.import_session(x[:cut])
        for pos in range(len(x)):
            for flip in (0x01, 0x80):
                bad = bytearray(x)
                bad[pos] ^= flip
                with pytest.raises(ImportRefused):
                    await b.sessions.import_session(bytes(bad))
        with pytest.raises(ImportRefused, match="truncated|undecodable"):
            await b.sessions.import_session(x + b"\x00")
    assert dump(target) == before


async def test_structural_checks_past_the_checksum(databases):
    async with open_store(databases / "a.db") as a:
        x = await a.sessions.export_session(await make_session(a))
    recs = records_of(x)
    assert reframe(recs) == x
    newer = [dict(recs[0], version=3), *recs[1:]]
    swapped = [recs[0], recs[1], recs[2], recs[4], recs[3], *recs[5:]]
    bad_role = [*recs[:3], dict(recs[3], role="robot"), *recs[4:]]
    int_time = [recs[0], dict(recs[1], created_at=1), *recs[2:]]
    async with open_store(databases / "b.db") as b:
        for records_, why in [(newer, "version 3"), (swapped, "seqs must increase"), (bad_role, "role"),
                              (int_time, "timestamps"), (recs[1:], "header")]:
            with pytest.raises(ImportRefused, match=why):
                await b.sessions.import_session(reframe(records_))
        # the same values, but seq 1 encoded as a uint32 instead of a fixint, with a correct checksum
        body = x[:x.rindex(b"\x83\xa4type\xa7trailer")].replace(b"\xa3seq\x01", b"\xa3seq\xce\x00\x00\x00\x01", 1)
        loose = body + msgpack.packb({"type": "trailer", "records": len(recs),
                                      "sha256": hashlib.sha256(body).hexdigest()})
        assert records_of(loose) == recs
        with pytest.raises(ImportRefused, match="canonical"):
            await b.sessions.import_session(loose)
        assert await b.sessions.list() == []


async def test_conflicts_and_mid_transaction_failures_roll_back(databases, monkeypatch):
    async with open_store(databases / "a.db") as a:
        sid = await make_session(a)
        x = await a.sessions.export_session(sid)
        before = dump(databases / "a.db")
        with pytest.raises(ImportRefused, match="already exists"):
            await a.sessions.import_session(x)
    assert dump(databases / "a.db") == before
    target = databases / "b.db"
    async with open_store(target) as b:
        await b.sessions.get_or_create(KEY)
    before = dump(target)
    async with open_store(target) as b:
        with pytest.raises(ImportRefused, match="already has a current session"):
            await b.sessions.import_session(x)
        calls = []

        pack = transfer.records.pack

        def pack_then_fail(value):   # the import packs each event's payload as it inserts it
            calls.append(value)
            if len(calls) == 3:
                raise ImportRefused("simulated failure half-way")
            return pack(value)
        monkeypatch.setattr(transfer.records, "pack", pack_then_fail)
        await b.sessions.close((await b.sessions.current(KEY)).session_id)
        before_close = dump(target)
        with pytest.raises(ImportRefused):
            await b.sessions.import_session(x)
        assert len(calls) == 3 and dump(target) == before_close
