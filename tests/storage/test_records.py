import msgpack
import pytest
from hypothesis import given, strategies as st

from storage import records
from storage.errors import RecordError

json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@given(json_like)
def test_pack_unpack_round_trips(value):
    data = records.pack(value)
    assert data[0] == records.FORMAT_V1
    assert records.unpack(data) == value
    assert records.pack(records.unpack(data)) == data  # canonical: re-encoding gives the same bytes


def test_bytes_and_str_stay_distinct():
    assert records.unpack(records.pack({"a": b"\x00\xff", "b": "text"})) == {"a": b"\x00\xff", "b": "text"}


@pytest.mark.parametrize("value", [object(), {1: "int key"}, {(1, 2): "tuple key"}, msgpack.ExtType(5, b"x"),
                                   "\ud800 lone surrogate", 2**64])
def test_pack_refuses_what_could_not_be_read_back(value):
    with pytest.raises(RecordError):
        records.pack(value)


@pytest.mark.parametrize("data,why", [
    (b"", "empty"), (b"\x02" + msgpack.packb(1), "unknown record format"), (b"\x01\xc1", "not a valid record"),
    (b"\x01" + msgpack.packb([1, 2])[:-1], "not a valid record"),
    (b"\x01" + msgpack.packb(1) + b"\x00", "not a valid record")])
def test_unpack_refuses_garbage(data, why):
    with pytest.raises(RecordError, match=why):
        records.unpack(data)
