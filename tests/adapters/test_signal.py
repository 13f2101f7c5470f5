"""The Signal adapter's parts on their own: the event-stream decoder, signal-cli's receive event -> MessageEvent and
the rule of what is input, the JSON-RPC error classes, the RPC client against the fake signal-cli
(tests/fakes/signal), the configuration and doctor's probe, without a daemon. The adapter in the daemon:
tests/adapters/test_conformance.py (``-k signal``) and tests/pipeline/test_signal_e2e.py."""
from __future__ import annotations

import asyncio
import base64
import time

import pytest

from actors.adapters import registry
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.errors import FloodError, PermanentError, RetryableError
from actors.adapters.signal.inbound import (BotIdentity, event_from_receive, is_input, recipient_params,
                                              split_ref, strip_bot_mentions)
from actors.adapters.signal.client import AttachmentTooBig, SignalRPC, classify_error
from actors.adapters.signal.sse import EventStreamDecoder, ServerEvent
from common.config import ConfigError
from storage import session_key
from tests.fakes.signal import ACCOUNT, ACCOUNT_UUID, DEFAULT_USER_UUID, LONG_TEXT, FakeSignalCli

pytestmark = pytest.mark.timeout(30)
BOT = BotIdentity(ACCOUNT, ACCOUNT_UUID)
ALICE = "7a1c2f00-0000-4000-8000-0000000a11ce"


# ------------------------------------------------------------------------------------------- the event stream

STREAM = (b"event:receive\ndata:{\"a\":1}\n\n:\n"
          b"event: receive\r\ndata: first\r\ndata:second\r\n\r\n"
          b"data:{\"no\":\"event name\"}\r\r")


def test_the_decoder_reads_events_however_the_bytes_are_cut():
    whole = EventStreamDecoder()
    expected = [ServerEvent("receive", '{"a":1}'), ServerEvent("receive", "first\nsecond"),
                ServerEvent("message", '{"no":"event name"}')]
    assert whole.feed(STREAM) == expected and whole.keepalives == 1
    bytewise = EventStreamDecoder()
    assert [e for i in range(len(STREAM)) for e in bytewise.feed(STREAM[i:i + 1])] == expected


def test_an_over_long_line_is_dropped_with_its_event_and_the_next_event_is_read():
    decoder = EventStreamDecoder(max_line=64)
    events = decoder.feed(b"event:receive\ndata:" + b"x" * 100 + b"\n\nevent:receive\ndata:ok\n\n")
    assert events == [ServerEvent("receive", "ok")] and decoder.dropped == 1


# ------------------------------------------------------------------------------------ receive event -> event

def receive(message="hello", group=None, source=ALICE, number="+15550000100", **data) -> dict:
    body = {"timestamp": 1700000000123, "message": message, "expiresInSeconds": 0, "viewOnce": False, **data}
    if group is not None:
        body["groupInfo"] = {"groupId": group, "groupName": "team", "revision": 2, "type": "DELIVER"}
    return {"account": ACCOUNT, "envelope": {
        "source": number or source, "sourceNumber": number, "sourceUuid": source, "sourceName": "Alice",
        "sourceDevice": 1, "timestamp": 1700000000123, "serverReceivedTimestamp": 1700000000456,
        "serverDeliveredTimestamp": 1700000000789, "dataMessage": body}}


def test_a_direct_message_and_a_group_message_map_to_their_chats_and_dedup_on_sender_and_timestamp():
    dm = event_from_receive(receive(), "signal", "work", BOT)
    assert (dm.source.chat_id, dm.source.chat_type, dm.source.user_id) == (ALICE, "dm", ALICE)
    assert dm.platform_message_id == f"{ALICE}:1700000000123" and dm.source.user_name == "Alice"
    assert dm.sent_at == 1700000000.456, "Signal's server clock, not the sender's"
    group = event_from_receive(receive(group="R3JvdXA="), "signal", "work", BOT)
    assert (group.source.chat_id, group.source.chat_type) == ("group:R3JvdXA=", "group")
    assert session_key(dm.source) != session_key(group.source)
    hidden = event_from_receive(receive(number=None), "signal", "work", BOT)
    assert hidden.source.user_name == "Alice" and hidden.platform_message_id == dm.platform_message_id
    assert recipient_params(dm.source.chat_id) == {"recipient": [ALICE]}
    assert recipient_params(group.source.chat_id) == {"groupId": "R3JvdXA="}


def test_what_is_input_and_what_is_not():
    mention = {"number": ACCOUNT, "uuid": ACCOUNT_UUID, "start": 0, "length": 1}
    assert is_input(receive(), BOT)
    assert not is_input(receive(group="Zw=="), BOT), "a group message not addressed to the bot"
    assert is_input(receive(group="Zw=="), BOT, require_mention=False)
    assert is_input(receive("\ufffc hi", group="Zw==", mentions=[mention]), BOT)
    assert is_input(receive(group="Zw==", quote={"id": 5, "authorUuid": ACCOUNT_UUID, "authorNumber": None}), BOT)
    assert is_input(receive(message=None, attachments=[{"contentType": "image/png", "id": "a.png"}]), BOT)
    not_input = [receive(message=None), receive("  "), receive(reaction={"emoji": "👍"}),
                 receive(remoteDelete={"timestamp": 1}), receive(isExpirationUpdate=True),
                 receive(source=ACCOUNT_UUID, number=ACCOUNT), dict(receive(), account="+15559999999"),
                 {"account": ACCOUNT, "envelope": {"sourceUuid": ALICE, "timestamp": 1, "receiptMessage": {}}},
                 {"account": ACCOUNT, "envelope": {"sourceUuid": ALICE, "timestamp": 1,
                                                   "syncMessage": {"sentMessage": {"message": "mine"}}}},
                 {"account": ACCOUNT, "exception": {"message": "decryption failed", "type": "ProtocolException"}}]
    update = receive(group="Zw==", mentions=[mention])
    update["envelope"]["dataMessage"]["groupInfo"]["type"] = "UPDATE"
    assert [is_input(e, BOT) for e in not_input + [update]] == [False] * (len(not_input) + 1)


def test_the_bots_mention_is_taken_out_of_the_text_and_others_stay():
    text = "\ufffc ask \ufffc about 😀 this"
    mentions = [{"uuid": ACCOUNT_UUID, "start": 0, "length": 1}, {"uuid": ALICE, "start": 6, "length": 1}]
    assert strip_bot_mentions(text, mentions, BOT) == "ask \ufffc about 😀 this"
    assert strip_bot_mentions(text, [{"uuid": ACCOUNT_UUID, "start": 99, "length": 1}], BOT) == text


def test_files_become_pending_attachments_and_the_long_text_is_the_body():
    event = event_from_receive(receive("x" * 3000, attachments=[
        {"contentType": LONG_TEXT, "id": "long.txt", "size": 3000},
        {"contentType": "image/jpeg", "id": "p.jpg", "size": 2048, "width": 64, "height": 48, "filename": "p.jpg"},
        {"contentType": "application/pdf", "filename": "no-id.pdf"}]), "signal", "default", BOT)
    assert event.text == "x" * 3000
    photo, broken = event.attachments
    assert (photo.kind, photo.state, photo.size, photo.width, photo.ref) == ("photo", "pending", 2048, 64,
                                                                             f"{ALICE}|p.jpg")
    assert split_ref(photo.ref) == (ALICE, "p.jpg")
    assert (broken.kind, broken.state) == ("document", "unavailable"), "nothing to fetch it by: said, not lost"


def test_an_unnamed_audio_attachment_is_a_voice_note_and_a_named_one_an_audio_file():
    """signal-cli does not pass on Signal's voice-message flag: a recording comes unnamed, a shared file named."""
    event = event_from_receive(receive(None, attachments=[
        {"contentType": "audio/aac", "id": "rec.aac", "size": 900},
        {"contentType": "audio/mpeg", "id": "song.mp3", "size": 900, "filename": "song.mp3"}]), "signal", "d", BOT)
    assert [a.kind for a in event.attachments] == ["voice", "audio"]


@pytest.mark.parametrize("event, reason", [
    ("not json", "not an object"),
    ({"account": ACCOUNT}, "no envelope"),
    ({"envelope": {"sourceUuid": ALICE, "timestamp": 1, "dataMessage": []}}, "dataMessage must be an object"),
    ({"envelope": {"timestamp": 1, "dataMessage": {"message": "x"}}}, "names no sender"),
    ({"envelope": {"sourceUuid": ALICE, "timestamp": "1", "dataMessage": {"message": "x"}}}, "positive integer"),
    ({"envelope": {"sourceUuid": ALICE, "timestamp": 1, "dataMessage": {"message": 42}}}, "must be a string"),
    ({"envelope": {"sourceUuid": ALICE, "timestamp": 1, "dataMessage": {"message": "x", "groupInfo": {}}}},
     "groupId"),
], ids=["text", "no-envelope", "data-list", "no-sender", "timestamp-string", "message-number", "group-without-id"])
def test_malformed_events_are_refused_with_the_reason(event, reason):
    assert is_input(event, BOT), "handed on to be refused loudly, not skipped"
    with pytest.raises(MalformedPayload, match=reason):
        event_from_receive(event, "signal", "default", BOT)


# ------------------------------------------------------------------------------------------ JSON-RPC errors

def results(kind, **extra):
    return {"response": {"timestamp": 1, "results": [{"recipientAddress": {}, "type": kind, **extra}]}}


def test_json_rpc_errors_map_to_what_the_caller_should_do():
    flood = classify_error("send", {"code": -5, "message": "rate limited", "data": results(
        "RATE_LIMIT_FAILURE", retryAfterSeconds=7)})
    assert isinstance(flood, FloodError) and flood.retry_after == 7.0
    network = classify_error("send", {"code": -1, "message": "Failed to send message",
                                      "data": results("NETWORK_FAILURE")})
    assert isinstance(network, RetryableError) and not network.maybe_done
    unregistered = classify_error("send", {"code": -1, "message": "Failed to send message",
                                           "data": results("UNREGISTERED_FAILURE")})
    assert isinstance(unregistered, PermanentError) and "UNREGISTERED_FAILURE" in str(unregistered)
    assert isinstance(classify_error("send", {"code": -32603, "message": "x"}), RetryableError)
    assert isinstance(classify_error("send", {"code": -3, "message": "x"}), RetryableError)
    for code in (-4, -32601, -32602, None):
        assert type(classify_error("send", {"code": code, "message": "x"})) is PermanentError


# ---------------------------------------------------------------------------- the RPC client against the fake

def test_the_client_sends_types_deletes_and_fetches_files_through_the_fake():
    async def run(sc: FakeSignalCli):
        async with SignalRPC(sc.base_url) as api:
            await api.check()
            stamp = await api.send({"recipient": [DEFAULT_USER_UUID]}, "hello")
            await api.send_typing({"recipient": [DEFAULT_USER_UUID]})
            await api.remote_delete({"recipient": [DEFAULT_USER_UUID]}, stamp)
            record = sc.inject_message("file", attachments=(("image/png", b"\x89PNG" + b"x" * 96, "p.png"),))
            file_id = record["event"]["envelope"]["dataMessage"]["attachments"][0]["id"]
            data = await api.get_attachment(file_id, {"recipient": [DEFAULT_USER_UUID]}, 1000)
            with pytest.raises(AttachmentTooBig):
                await api.get_attachment(file_id, {"recipient": [DEFAULT_USER_UUID]}, 10)
            with pytest.raises(PermanentError, match="Group not found"):
                await api.send({"groupId": "bm9uZQ=="}, "x")
            sc.set_faults(next=["flood"], flood_retry_after=2)
            with pytest.raises(FloodError) as flood:
                await api.send({"recipient": [DEFAULT_USER_UUID]}, "x")
            return stamp, data, flood.value.retry_after
    with FakeSignalCli() as sc:
        stamp, data, retry_after = asyncio.run(run(sc))
        assert [(m["timestamp"], m["deleted"]) for m in sc.messages(DEFAULT_USER_UUID)] == [(stamp, True)]
        assert len(sc.typing(DEFAULT_USER_UUID)) == 1
    assert data == b"\x89PNG" + b"x" * 96 and retry_after == 2.0


def test_a_voice_note_goes_as_a_data_uri_attachment_with_the_voice_note_flag():
    async def run(sc: FakeSignalCli):
        async with SignalRPC(sc.base_url) as api:
            return await api.send_voice_note({"recipient": [DEFAULT_USER_UUID]}, b"OggS-audio", "audio/ogg",
                                             "voice.ogg")
    with FakeSignalCli() as sc:
        stamp = asyncio.run(run(sc))
        (message,) = sc.messages(DEFAULT_USER_UUID)
    (audio,) = message["attachments"]
    assert message["timestamp"] == stamp and message["voice_note"] and message["text"] == ""
    assert (audio["contentType"], audio["filename"], audio["size"]) == ("audio/ogg", "voice.ogg", 10)
    assert base64.b64decode(audio["base64"]) == b"OggS-audio"


def test_an_edit_to_a_final_text_is_done_without_a_call_and_any_other_edit_is_refused():
    from actors.adapters.signal.adapter import SignalAdapter
    from actors.messages import PlatformOp
    adapter = SignalAdapter()     # no settings, no client: a call to signal-cli would fail loudly
    part = dict(op_id="e", action="edit", chat_id=ALICE, text="the answer", message_id="1700000000123")
    assert asyncio.run(adapter.edit_message(PlatformOp(**part, final=True))) is None
    with pytest.raises(PermanentError, match="cannot edit a sent message"):
        asyncio.run(adapter.edit_message(PlatformOp(**part)))


# -------------------------------------------------------------------------------- the intake, in process

class Posts:
    """Stands in for the bridge: what the loop side hands to the actor thread."""

    def __init__(self):
        self.items = []

    def post(self, item):
        self.items.append(item)

    def lines(self) -> list[str]:
        from actors.adapters import base
        return [i.text for i in self.items if isinstance(i, base.LogLine)]


def make_adapter(sc: FakeSignalCli, tmp_path, **settings):
    from actors.adapters.signal.adapter import SignalAdapter
    adapter = SignalAdapter()
    adapter.name = "sig"
    adapter.settings = registry.validate_adapter("sig", {"type": "signal", "account": ACCOUNT,
                                                         "account_uuid": ACCOUNT_UUID, "base_url": sc.base_url,
                                                         **settings})
    adapter.pacing = registry.pacing_of(adapter.settings)
    adapter.config = {"gateway": {"state_dir": str(tmp_path)}, "storage": {"durability": "normal"}}
    adapter._loop_bridge = posts = Posts()
    return adapter, posts


async def until(predicate, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{what} not met within {timeout} s"
        await asyncio.sleep(0.01)
    return value


async def stopped(adapter, intake: asyncio.Task) -> None:
    intake.cancel()
    await asyncio.gather(intake, return_exceptions=True)
    await adapter.disconnect()
    await adapter.close()
    if adapter.store is not None:
        await adapter.store.close()


def test_a_batch_waits_for_storage_with_the_stream_held_and_is_stored_once(tmp_path):
    """A full disk while an event is in hand: closing the stream would lose it (signal-cli keeps no copy), so the
    adapter retries the commit and holds the stream; the event is stored once and the stream never reopened."""
    from storage import StorageFull
    with FakeSignalCli(keepalive_interval=0.1) as sc:
        adapter, posts = make_adapter(sc, tmp_path)
        real_emit, refusals = adapter.intake.emit, []

        async def full_disk_twice(raws, offset=None, **kwargs):
            if raws and len(refusals) < 2:
                refusals.append(len(raws))
                raise StorageFull("database or disk is full")
            return await real_emit(raws, offset, **kwargs)
        adapter.intake.emit = full_disk_twice

        async def main():
            intake = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
            await until(lambda: sc.open_streams() == 1, what="the stream")
            record = sc.inject_message("kept through a full disk")
            source = adapter.normalise(sc.inbound(record["handle"])["event"]).source
            await until(lambda: refusals == [1, 1] and adapter.offset, what="the commit after two refusals")
            rows = await adapter.store.inbox.rows_in_state(session_key(source))
            await stopped(adapter, intake)
            return rows
        rows = asyncio.run(main())
        assert [r.payload["text"] for r in rows] == ["kept through a full disk"]
        assert sc.stats()["connections"] == 1, "the stream was held, not dropped"
        assert any("wait for storage" in line for line in posts.lines())


def test_a_stream_silent_past_the_idle_timeout_is_opened_again(tmp_path):
    with FakeSignalCli(keepalive_interval=30.0) as sc:      # signal-cli's keep-alives stopped coming
        adapter, posts = make_adapter(sc, tmp_path, idle_timeout_s=1.0)

        async def main():
            intake = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
            await until(lambda: sc.stats()["connections"] >= 2, what="a second stream")
            await stopped(adapter, intake)
        asyncio.run(main())
        assert any("event stream" in line and "reconnecting" in line for line in posts.lines()), posts.lines()


# --------------------------------------------------------------------------------- configuration and doctor

def test_the_table_needs_the_account_and_a_sane_idle_timeout():
    table = registry.validate_adapter("sig", {"type": "signal", "account": ACCOUNT})
    assert table["base_url"] == "http://127.0.0.1:8080" and table["require_mention"] and not table["multi_account"]
    assert registry.entry_of(table).access == "pairing"
    with pytest.raises(ConfigError, match="account"):
        registry.validate_adapter("sig", {"type": "signal"})
    with pytest.raises(ConfigError, match="idle_timeout_s"):
        registry.validate_adapter("sig", {"type": "signal", "account": ACCOUNT, "idle_timeout_s": 0.5})


def test_doctor_asks_the_check_endpoint_and_the_version():
    from daemon.doctor_probes import probe_signal
    with FakeSignalCli() as sc:
        table = registry.validate_adapter("sig", {"type": "signal", "account": ACCOUNT, "base_url": sc.base_url})
        good = asyncio.run(probe_signal("sig", table))
        assert good.status == "ok" and "0.13.22" in good.detail and "on-connection" in good.detail
        sc.configure(version="0.11.4")
        assert asyncio.run(probe_signal("sig", table)).status == "warn"
        sc.configure(multi_account=True)
        refused = asyncio.run(probe_signal("sig", table))
        assert refused.status == "fail" and "refused" in refused.detail
        assert asyncio.run(probe_signal("sig", dict(table, multi_account=True))).status == "warn"
    down = asyncio.run(probe_signal("sig", table))   # the fake has stopped: nothing listens there now
    assert down.status == "fail" and "cannot reach" in down.detail
