"""The web chat's pure parts: frame parsing, the history a page is shown, the outbox, the request guards."""
from __future__ import annotations

import json

import pytest

from actors.adapters.webchat.protocol import (HARD_FRAME_BYTES, MAX_FRAME_BYTES, FrameError, Outbox, client_id,
                                              conversation, parse_frame)
from actors.adapters.webchat.server import origin_allowed
from supervision.http_serving import host_allowed
from storage import InboxRow, TranscriptEvent


@pytest.mark.parametrize("data, reason", [
    (b"{}", "binary frames are not accepted"),
    ("{not json", "not JSON"),
    ("[1, 2]", "must be a JSON object, not list"),
    ('{"type": "shout"}', "unknown frame type 'shout'"),
    ('{"text": "no type"}', "unknown frame type None"),
    (json.dumps({"type": "history", "pad": "x" * MAX_FRAME_BYTES}), f"frame over {MAX_FRAME_BYTES} bytes"),
    (json.dumps({"type": "ping", "pad": "é" * (MAX_FRAME_BYTES // 2)}, ensure_ascii=False), "frame over"),
    (json.dumps({"type": "message", "text": "x" * HARD_FRAME_BYTES}), f"frame over {HARD_FRAME_BYTES} bytes"),
])
def test_bad_frames_are_refused_with_a_reason(data, reason):
    with pytest.raises(FrameError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_frame(data)


def test_good_frames_parse():
    assert parse_frame('{"type": "message", "id": "a1", "text": "hi"}')["text"] == "hi"
    assert parse_frame('{"type": "history"}') == {"type": "history"}


def test_a_message_frame_over_the_frame_size_is_parsed_so_its_text_is_measured_against_the_text_limit():
    """Its sender is then told the text limit, with the message's own id (the intake's TextTooLong), instead of a
    frame size without an id the page could not tie to the message."""
    frame = parse_frame(json.dumps({"type": "message", "id": "long-1", "text": "語" * 60_000}, ensure_ascii=False))
    assert frame["id"] == "long-1" and len(frame["text"]) == 60_000


def _event(seq, role, kind, payload, turn_id=None):
    return TranscriptEvent(role, kind, payload, turn_id, 1000.0 + seq, seq)


def _row(seq, message_id, text, state="received"):
    return InboxRow(seq, "k", "web", message_id, state, {"text": text}, 2000.0 + seq, 2000.0, None)


def test_conversation_shows_user_and_assistant_messages_without_undone_turns_or_tools():
    events = [
        _event(1, "user", "message", {"text": "first", "platform_message_id": "v:m1"}, "t1"),
        _event(2, "assistant", "tool_call", {"name": "calculator"}, "t1"),
        _event(3, "tool", "tool_result", {"result": "4"}, "t1"),
        _event(4, "assistant", "message", {"text": "answer one"}, "t1"),
        _event(5, "user", "message", {"text": "undone", "platform_message_id": "v:m2"}, "t2"),
        _event(6, "assistant", "message", {"text": "undone answer"}, "t2"),
        _event(7, "system", "undo", {"turn_id": "t2"}),
    ]
    waiting = [_row(9, "v:m1", "first", "taken"), _row(10, "v:m3", "still queued")]
    shown = conversation(events, waiting)
    assert [(m["role"], m["text"]) for m in shown] == [
        ("user", "first"), ("assistant", "answer one"), ("user", "still queued")]
    assert shown[0]["id"] == "m1" and shown[2]["id"] == "m3" and shown[2]["queued"] is True
    assert "queued" not in shown[0]


def test_client_id_is_the_part_after_the_visitor():
    assert client_id("visitor-1:abc") == "abc" and client_id("no-colon") is None and client_id(None) is None


def test_outbox_records_edits_deletes_and_streaming_messages_and_stays_bounded():
    box = Outbox(max_chats=2, per_chat=3)
    box.record("a", "m1", "draft", final=False)
    box.record("a", "m1", "done", final=True)
    box.record("a", "m2", "streaming ▍", final=False, reply_to="q2")
    box.record("a", "m2", "streaming on ▍", final=False)        # an edit keeps what the send answered
    box.mark_deleted("a", "m3")
    assert box.live("a") == [{"message_id": "m2", "text": "streaming on ▍", "final": False, "deleted": False,
                              "reply_to": "q2", "html": '<p>streaming on<span class="cursor"></span></p>\n',
                              "tool": ""}]
    assert box.get("a", "m3")["deleted"] and box.get("a", "m1")["text"] == "done"
    box.record("a", "m4", "fourth", final=True)
    assert [m["message_id"] for m in box.of("a")] == ["m2", "m3", "m4"]
    box.record("b", "x", "b", final=True)
    box.record("a", "m5", "touch a", final=True)   # a is now the most recently used chat
    box.record("c", "y", "c", final=True)
    assert box.of("b") == [] and box.of("a") and box.of("c")


@pytest.mark.parametrize("host, allowed", [
    ("127.0.0.1:8765", True), ("localhost:8765", True), ("[::1]:8765", True), ("192.168.1.5", True),
    ("evil.example:8765", False), ("127.0.0.1.nip.io:8765", False), ("", False)])
def test_only_ip_literals_and_localhost_are_served(host, allowed):
    assert host_allowed(host) is allowed


@pytest.mark.parametrize("origin, allowed", [
    (None, True), ("http://127.0.0.1:8765", True), ("http://evil.example", False),
    ("http://127.0.0.1:9999", False), ("null", False), ("file://", False)])
def test_a_websocket_origin_must_be_the_page_itself(origin, allowed):
    assert origin_allowed(origin, "127.0.0.1:8765") is allowed
