"""The Feishu long connection's pure parts and its client call, without a daemon: the protobuf ``Frame`` written and
read by hand (checked against bytes the SDK's protobuf classes wrote), its answers and pings, fragments put together
within their bounds, the platform's ClientConfig, the endpoint call against the fake (a refused app is "refused",
with the platform's words), the table's ``inbound`` and the doctor's probe in long-connection mode. The daemon's
side (answered after the commit, reconnects, a kill -9) is in test_feishu.py.
"""
from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, strategies as st

from actors.adapters.errors import PermanentError, RetryableError
from actors.adapters.feishu import frames
from actors.adapters.feishu.client import FeishuAPI
from actors.adapters.feishu.long_connection import service_id_of
from tests.fakes.feishu import DEFAULT_APP_ID, DEFAULT_APP_SECRET, FakeFeishu

pytestmark = pytest.mark.timeout(60)

# Written by the SDK's own protobuf classes (lark-oapi 1.7.5, pbbp2_pb2.Frame): SeqID 3, LogID 4, service 1, method 1,
# headers type=event, message_id=m, sum=1, seq=0, payload b"{}".
SDK_DATA_FRAME = bytes.fromhex("08031004180120012a0d0a047479706512056576656e742a0f0a0a6d6573736167655f696412016d2a08"
                               "0a0373756d1201312a080a0373657112013042027b7d")


def test_a_frame_reads_and_writes_as_the_sdks_protobuf_does():
    frame = frames.decode(SDK_DATA_FRAME)
    assert (frame.seq_id, frame.log_id, frame.service, frame.method) == (3, 4, 1, frames.DATA)
    assert frame.headers == (("type", "event"), ("message_id", "m"), ("sum", "1"), ("seq", "0"))
    assert frame.payload == b"{}" and frame.header("message_id") == "m" and frame.header("trace_id") == ""
    assert frames.encode(frame) == SDK_DATA_FRAME
    big = frames.Frame(seq_id=2**64 - 1, log_id=2**63, service=-2, method=0, log_id_new="n",
                       payload_type="t", payload_encoding="e", payload=bytes(range(256)))
    assert frames.decode(frames.encode(big)) == big


def test_an_answer_is_the_frame_with_biz_rt_and_code_200_and_a_ping_carries_the_service():
    frame = frames.decode(SDK_DATA_FRAME)
    answer = frames.decode(frames.encode(frames.answer(frame, 17)))
    assert answer.headers == frame.headers + (("biz_rt", "17"),)
    assert json.loads(answer.payload) == {"code": 200} and answer.seq_id == 3 and answer.method == frames.DATA
    ping = frames.decode(frames.encode(frames.ping(33554678)))
    assert (ping.method, ping.service, ping.headers) == (frames.CONTROL, 33554678, (("type", "ping"),))
    assert service_id_of("wss://x/ws?device_id=d&service_id=33554678&ticket=t") == 33554678
    assert service_id_of("wss://x/ws?device_id=d") == 0


@given(st.binary(max_size=300))
def test_any_bytes_are_a_frame_or_bad_frame_never_a_crash(data):
    try:
        frames.decode(data)
    except frames.BadFrame:
        pass


def test_broken_frames_are_refused():
    not_utf8_key = b"\x2a\x04\x0a\x02\xff\xfe"
    for broken in (SDK_DATA_FRAME[:-1], b"\x08\xff", b"\x2a\x05\x0a", b"\x0b", not_utf8_key):
        with pytest.raises(frames.BadFrame):
            frames.decode(broken)


def test_fragments_are_put_together_in_seq_order_whatever_order_they_come_in():
    parts = frames.Fragments()
    assert parts.add("m1", 3, 2, b"c", now=0) is None
    assert parts.add("m1", 3, 0, b"a", now=1) is None
    assert parts.add("m2", 1, 0, b"whole", now=1) == b"whole"
    assert parts.add("m1", 3, 1, b"b", now=2) == b"abc"
    assert len(parts) == 0


def test_fragments_are_bounded_in_count_size_number_and_time():
    parts = frames.Fragments(max_pending=2, max_bytes=10, ttl_s=5)
    for total, seq in ((0, 0), (2, 2), (frames.MAX_FRAGMENTS + 1, 0), (2, -1)):
        with pytest.raises(frames.BadFrame):
            parts.add("m", total, seq, b"x", now=0)
    parts.add("big", 3, 0, b"123456", now=0)
    with pytest.raises(frames.BadFrame, match="over 10 bytes"):
        parts.add("big", 3, 1, b"789012", now=0)
    parts.add("shifty", 3, 0, b"a", now=0)
    with pytest.raises(frames.BadFrame, match="came as 3 fragments and then as 4"):
        parts.add("shifty", 4, 1, b"b", now=0)
    for i in range(3):   # the oldest partly received event is dropped past max_pending
        parts.add(f"e{i}", 2, 0, b"x", now=i)
    assert len(parts) == 2 and parts.add("e0", 2, 1, b"y", now=3) is None, "e0 was dropped: starts again"
    assert parts.add("e2", 2, 1, b"y", now=3) == b"xy"
    assert parts.add("late", 2, 0, b"x", now=10) is None
    assert parts.add("late", 2, 1, b"y", now=16) is None, "its first fragment expired after 5 s"
    assert len(parts) <= 2


def test_the_platforms_client_config_is_taken_field_by_field():
    config = frames.client_config({"ReconnectCount": -1, "ReconnectInterval": 120, "ReconnectNonce": 30,
                                   "PingInterval": 90})
    assert config == frames.ClientConfig(-1, 120.0, 30.0, 90.0)
    assert frames.client_config(b'{"PingInterval": 5}', config).ping_interval_s == 5.0
    assert frames.client_config(b"not json", config) == config
    assert frames.client_config({"PingInterval": "soon", "ReconnectNonce": -4, "ReconnectCount": True},
                                config) == config


@pytest.fixture(scope="module")
def fake():
    with FakeFeishu() as server:
        yield server


def test_the_endpoint_names_the_socket_and_a_wrong_secret_is_refused_with_the_platforms_words(fake):
    async def ask(secret: str):
        async with FeishuAPI(fake.base_url, DEFAULT_APP_ID, secret) as api:
            return await api.ws_endpoint()
    url, config = asyncio.run(ask(DEFAULT_APP_SECRET))
    assert url.startswith("ws://127.0.0.1:") and service_id_of(url) and config["PingInterval"] == 120
    with pytest.raises(PermanentError, match="endpoint refused the app: app secret invalid") as refused:
        asyncio.run(ask("not-the-secret"))
    assert "not-the-secret" not in str(refused.value)
    fake.endpoint_down = True
    try:
        with pytest.raises(RetryableError, match="busy"):
            asyncio.run(ask(DEFAULT_APP_SECRET))
    finally:
        fake.endpoint_down = False


def test_a_long_connection_table_needs_no_callback_secrets_and_the_doctor_asks_the_endpoint(fake):
    from actors.adapters import registry
    from common.config import ConfigError
    from daemon.doctor import planned_ports
    from daemon.doctor_probes import probe_feishu
    table = registry.validate_adapter("fs", {"type": "feishu", "app_id": DEFAULT_APP_ID,
                                             "app_secret": DEFAULT_APP_SECRET, "inbound": "long_connection",
                                             "base_url": fake.base_url})
    with pytest.raises(ConfigError, match="inbound"):
        registry.validate_adapter("fs", dict(table, inbound="websocket"))
    with pytest.raises(ConfigError, match="max_ping_interval_s"):
        registry.validate_adapter("fs", dict(table, max_ping_interval_s=0.5))
    assert planned_ports({"gateway": {"bind_host": "127.0.0.1", "admin_port": 1}}, {"fs": table}) == [
        ("admin", "127.0.0.1", 1)], "no callback port to plan"
    calls = fake.stats()["endpoint_calls"]
    good = asyncio.run(probe_feishu("fs", table))
    assert good.status == "ok" and "endpoint answers" in good.detail
    assert fake.stats()["endpoint_calls"] == calls + 1
