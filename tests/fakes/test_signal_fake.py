"""The fake signal-cli HTTP daemon on its own (tests/fakes/signal): the three endpoints and their refusals, the
JSON-RPC shapes of send, sendTyping, remoteDelete, getAttachment and their errors, the long-text attachment, the
event stream with its receive modes, and what a stream whose client vanished loses. Plain HTTP clients only."""
from __future__ import annotations

import base64
import http.client
import json
import urllib.error
import urllib.request

import pytest

from tests.fakes.signal import (ACCOUNT, DEFAULT_USER_UUID, LONG_TEXT, FakeSignalCli, group_id_for, uuid_for)

pytestmark = pytest.mark.timeout(30)


def rpc(sc: FakeSignalCli, method: str, params=None, rid=1, *, body=None, headers=None):
    data = json.dumps(body if body is not None else {"jsonrpc": "2.0", "method": method, "params": params or {},
                                                     **({"id": rid} if rid is not None else {})}).encode()
    request = urllib.request.Request(sc.base_url + "/api/v1/rpc", data=data, method="POST",
                                     headers=headers or {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        raw = response.read()
        return response.status, json.loads(raw) if raw else None


class Stream:
    """An event-stream client: reads lines as signal-cli writes them; ``die()`` closes its socket at once."""

    def __init__(self, sc: FakeSignalCli, path: str = "/api/v1/events"):
        self.conn = http.client.HTTPConnection("127.0.0.1", sc.port, timeout=10)
        self.conn.request("GET", path)
        self.response = self.conn.getresponse()

    def next_event(self) -> dict:
        lines = []
        while True:
            line = self.response.readline().decode()
            if line == "\n" and lines:
                break
            if line.startswith(":") or line == "\n":
                continue
            assert line, "the stream ended"
            lines.append(line.rstrip("\n"))
        assert lines[0] == "event:receive" and lines[1].startswith("data:"), lines
        return json.loads(lines[1][5:])

    def die(self) -> None:
        self.response.close()
        self.conn.close()


@pytest.fixture
def sc():
    with FakeSignalCli(keepalive_interval=0.05) as fake:
        yield fake


def test_check_answers_200_and_the_rpc_endpoint_refuses_what_signal_cli_refuses(sc):
    assert urllib.request.urlopen(sc.base_url + "/api/v1/check", timeout=5).status == 200
    for headers, status in (({"Content-Type": "text/plain"}, 415),
                            ({"Content-Type": "application/json", "Host": "evil.example:80"}, 421)):
        with pytest.raises(urllib.error.HTTPError) as refused:
            rpc(sc, "version", headers=headers)
        assert refused.value.code == status
    with pytest.raises(urllib.error.HTTPError) as wrong_method:
        urllib.request.urlopen(sc.base_url + "/api/v1/rpc", timeout=5)
    assert wrong_method.value.code == 405
    assert rpc(sc, "version") == (200, {"jsonrpc": "2.0", "result": {"version": "0.13.22"}, "id": 1})
    assert rpc(sc, "nope")[1]["error"]["code"] == -32601
    assert rpc(sc, "", body={"jsonrpc": "2.0", "id": 3})[1]["error"]["code"] == -32600
    assert rpc(sc, "version", rid=None) == (201, None), "a notification has no answer"
    status, batch = rpc(sc, "", body=[{"jsonrpc": "2.0", "method": "version", "id": "a"},
                                      {"jsonrpc": "2.0", "method": "nope", "id": "b"}])
    assert [a["id"] for a in batch] == ["a", "b"] and "result" in batch[0] and batch[1]["error"]["code"] == -32601


def test_send_answers_its_timestamp_and_a_long_text_travels_as_signal_cli_sends_it(sc):
    _, answer = rpc(sc, "send", {"recipient": [DEFAULT_USER_UUID], "message": "hello"})
    stamp = answer["result"]["timestamp"]
    assert answer["result"]["results"] == [{"recipientAddress": {"uuid": DEFAULT_USER_UUID, "number": None},
                                            "type": "SUCCESS"}]
    text = "€" * 700                      # 2,100 bytes of UTF-8: over the inline 2,000
    _, later = rpc(sc, "send", {"recipient": DEFAULT_USER_UUID, "message": text})
    assert later["result"]["timestamp"] > stamp, "timestamps name messages: strictly increasing"
    short, long = sc.messages(DEFAULT_USER_UUID)
    assert (short["body"], short["attachments"]) == ("hello", [])
    assert long["body"] == "€" * 666 and len(long["body"].encode()) == 1998, "cut at a character, within 2,000 bytes"
    assert long["attachments"] == [{"contentType": LONG_TEXT, "size": 2100, "text": text}]
    assert sc.shown_texts(DEFAULT_USER_UUID) == ["hello", text]


def test_groups_typing_remote_delete_and_the_user_errors(sc):
    group = sc.add_group("team", members=("+15550000100", "+15550000200"))
    _, sent = rpc(sc, "send", {"groupId": group, "message": "hi all"})
    assert [r["recipientAddress"]["number"] for r in sent["result"]["results"]] == ["+15550000100", "+15550000200"]
    assert rpc(sc, "sendTyping", {"groupId": group})[1]["result"]["timestamp"]
    assert sc.typing(f"group:{group}")[0]["action"] == "START"
    rpc(sc, "remoteDelete", {"groupId": group, "targetTimestamp": sent["result"]["timestamp"]})
    assert sc.messages(f"group:{group}")[0]["deleted"] and sc.shown_texts(f"group:{group}") == []
    errors = {name: rpc(sc, "send", params)[1]["error"] for name, params in {
        "no recipient": {"message": "x"}, "unknown group": {"groupId": group_id_for("nobody"), "message": "x"},
        "bad number": {"recipient": ["12345"], "message": "x"}, "empty": {"recipient": [DEFAULT_USER_UUID]}}.items()}
    assert {e["code"] for e in errors.values()} == {-1}
    assert "Group not found" in errors["unknown group"]["message"] and "empty" in errors["empty"]["message"]
    sc.configure(unregistered=["+15550000300"])
    gone = rpc(sc, "send", {"recipient": ["+15550000300"], "message": "x"})[1]["error"]
    assert gone["message"] == "Failed to send message"
    assert gone["data"]["response"]["results"][0]["type"] == "UNREGISTERED_FAILURE"


def test_a_flood_names_whole_seconds_and_a_call_inside_the_ban_is_a_violation(sc):
    sc.set_faults(next=["flood"], flood_retry_after=0.3)
    error = rpc(sc, "send", {"recipient": [DEFAULT_USER_UUID], "message": "x"})[1]["error"]
    assert error["code"] == -5 and error["data"]["response"]["results"][0]["retryAfterSeconds"] == 1
    assert rpc(sc, "send", {"recipient": [DEFAULT_USER_UUID], "message": "x"})[1]["error"]["code"] == -5
    assert sc.stats()["retry_after_violations"] == 1
    assert [o["status"] for o in sc.ops(DEFAULT_USER_UUID)] == ["rate_limited", "rate_limited"]


def test_multi_account_mode_wants_the_account_and_get_attachment_gives_stored_bytes(sc):
    sc.configure(multi_account=True)
    assert rpc(sc, "version")[1]["error"]["code"] == -32602
    assert "result" in rpc(sc, "version", {"account": ACCOUNT})[1]
    sc.configure(multi_account=False)
    record = sc.inject_message("see", attachments=(("image/png", b"\x89PNG-bytes", "a.png"),))
    [attachment] = record["event"]["envelope"]["dataMessage"]["attachments"]
    assert attachment["contentType"] == "image/png" and attachment["size"] == 10 and attachment["filename"] == "a.png"
    got = rpc(sc, "getAttachment", {"id": attachment["id"], "recipient": DEFAULT_USER_UUID})[1]["result"]
    assert base64.b64decode(got["data"]) == b"\x89PNG-bytes"
    assert rpc(sc, "getAttachment", {"id": "nope", "recipient": DEFAULT_USER_UUID})[1]["error"]["code"] == -1


def test_the_stream_carries_envelopes_and_keepalives_and_each_delivery_is_stamped(sc):
    stream = Stream(sc)
    try:
        assert stream.response.status == 200 and stream.response.getheader("Content-Type") == "text/event-stream"
        sc.wait_for(lambda: sc.open_streams() == 1)
        record = sc.inject_message("hello", sender=uuid_for("bo"), number="+15550000111", name="Bo")
        event = stream.next_event()
        envelope = event["envelope"]
        assert event["account"] == ACCOUNT and envelope["sourceUuid"] == uuid_for("bo")
        assert (envelope["sourceNumber"], envelope["sourceName"], envelope["dataMessage"]["message"]) == \
            ("+15550000111", "Bo", "hello")
        assert envelope["timestamp"] == envelope["dataMessage"]["timestamp"]
        sc.redeliver(record["handle"])
        again = stream.next_event()["envelope"]
        assert again["timestamp"] == envelope["timestamp"]
        assert again["serverDeliveredTimestamp"] > envelope["serverDeliveredTimestamp"]
        sc.wait_for(lambda: sc.keepalives >= 2)
        long = sc.inject_message("x" * 3000)
        data = stream.next_event()["envelope"]["dataMessage"]
        assert data["message"] == "x" * 3000 and data["attachments"][0]["contentType"] == LONG_TEXT
        sc.wait_for(lambda: sc.inbound(long["handle"])["state"] == "delivered")
    finally:
        stream.die()


def test_on_connection_keeps_messages_for_the_next_stream_and_on_start_loses_them(sc, tmp_path):
    first = sc.inject_message("one")
    second = sc.inject_message("two")
    assert sc.inbound(first["handle"])["state"] == "queued"
    stream = Stream(sc)
    try:
        assert [stream.next_event()["envelope"]["dataMessage"]["message"] for _ in range(2)] == ["one", "two"]
        sc.wait_for(lambda: sc.inbound(second["handle"])["state"] == "delivered")
        assert sc.drop_streams() == 1
        assert stream.response.readline() in (b"", b":\n") and sc.open_streams() == 0
        assert sc.inject_message("after the drop")["state"] == "queued", "closed by signal-cli: known at once"
    finally:
        stream.die()
    with FakeSignalCli(receive_mode="on-start") as default_mode:
        assert default_mode.inject_message("nobody listens")["state"] == "lost"
        assert default_mode.stats()["lost_no_client"] == 1


def test_a_stream_whose_client_died_loses_what_is_written_to_it_until_a_write_fails(sc):
    """TCP takes the first write after the peer is gone; signal-cli learns only from the next, failed one."""
    sc.configure(keepalive_interval=30.0)       # nothing but our envelopes is written to the streams
    stream = Stream(sc)
    sc.wait_for(lambda: sc.open_streams() == 1)
    stream.die()
    sc.wait_for(lambda: sc.zombie_streams() == 1)
    lost = [sc.inject_message(f"into the dead stream {i}") for i in range(2)]
    sc.wait_for(lambda: sc.open_streams() == 0, 5)
    assert [sc.inbound(r["handle"])["state"] for r in lost] == ["lost", "lost"]
    assert sc.inject_message("now it waits")["state"] == "queued"
    live = Stream(sc)
    try:
        assert live.next_event()["envelope"]["dataMessage"]["message"] == "now it waits"
        zombie = Stream(sc)
        sc.wait_for(lambda: sc.open_streams() == 2)
        zombie.die()
        sc.wait_for(lambda: sc.zombie_streams() == 1)
        both = sc.inject_message("to a live and a dead stream")
        assert live.next_event()["envelope"]["dataMessage"]["message"] == "to a live and a dead stream"
        sc.wait_for(lambda: sc.inbound(both["handle"])["pending"] == 0)
        assert sc.inbound(both["handle"])["state"] == "delivered", "one live stream is enough"
    finally:
        live.die()


def test_a_restart_on_the_same_port_keeps_the_queue_messages_and_files(tmp_path):
    state = str(tmp_path / "signal.json")
    with FakeSignalCli(state_file=state) as first:
        port = first.port
        rpc(first, "send", {"recipient": [DEFAULT_USER_UUID], "message": "kept"})
        first.inject_message("waiting on the server")
    with FakeSignalCli(port=port, state_file=state) as second:
        assert second.shown_texts(DEFAULT_USER_UUID) == ["kept"]
        stream = Stream(second)
        try:
            assert stream.next_event()["envelope"]["dataMessage"]["message"] == "waiting on the server"
        finally:
            stream.die()
