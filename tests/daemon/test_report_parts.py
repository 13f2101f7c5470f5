"""The pure parts of ``report`` (daemon/report_parts.py): a session's timeline in time order, with its tool calls and
without any text unless asked; crashes found in the log with their tracebacks, whatever wrote them."""
from __future__ import annotations

from daemon import report_parts

RECORDS = {
    "inbox": [{"seq": 7, "session_key": "k", "adapter": "fake", "platform_message_id": "m7", "state": "done",
               "received_at": 10.0, "updated_at": 14.0, "reason": None, "text": "what is 2+2, Ann here",
               "attachments": 0}],
    "transcript": [
        {"session_id": "s", "seq": 1, "turn_id": "t", "role": "user", "kind": "message", "created_at": 10.5,
         "payload": {"text": "what is 2+2, Ann here", "inbound_seq": 7}},
        {"session_id": "s", "seq": 2, "turn_id": "t", "role": "assistant", "kind": "tool_call", "created_at": 11.0,
         "payload": {"call_id": "c", "name": "calculator", "arguments": '{"expression": "2+2"}'}},
        {"session_id": "s", "seq": 3, "turn_id": "t", "role": "tool", "kind": "tool_result", "created_at": 11.2,
         "payload": {"call_id": "c", "name": "calculator", "result": "4", "ok": True}},
        {"session_id": "s", "seq": 4, "turn_id": "t", "role": "assistant", "kind": "message", "created_at": 12.0,
         "payload": {"text": "It is 4, Ann.", "reason": "complete"}}],
    "runtime": [{"session_id": "s", "turn_token": "t2", "resume_pending": 1, "resume_inbox_seq": 8,
                 "resume_started_at": 15.0, "resume_attempts": 1, "updated_at": 15.0}],
    "obligations": [{"obligation_id": "o" * 64, "session_key": "k", "adapter": "fake", "chat_id": "c1",
                     "state": "failed", "attempts": 2, "last_error": "400 too_long", "created_at": 12.1,
                     "updated_at": 13.0, "text": "It is 4, Ann.", "chunks": 1}],
    "parts": [{"obligation_id": "o" * 64, "part_index": 0, "platform_message_id": "p1", "recorded_at": 12.5}],
}


def test_a_timeline_is_in_time_order_names_its_tools_and_holds_no_text_unless_asked():
    entries = report_parts.timeline(RECORDS, include_text=False)
    assert [e["what"] for e in entries] == [
        "inbox received", "turn input: user message", "tool call", "tool result", "turn answer",
        "obligation recorded", "part recorded", "obligation failed", "inbox done", "turn begun, not ended"]
    assert entries[2]["name"] == "calculator" and entries[2]["arguments_chars"] == 21
    assert entries[7]["last_error"] == "400 too_long" and entries[0]["time"] == "1970-01-01T00:00:10.000Z"
    flat = repr(entries)
    assert "Ann" not in flat and "2+2" not in flat and "It is 4" not in flat
    with_text = repr(report_parts.timeline(RECORDS, include_text=True))
    assert "what is 2+2, Ann here" in with_text and "It is 4, Ann." in with_text


def test_crashes_are_found_with_their_tracebacks_in_either_layout(tmp_path):
    log = tmp_path / "gateway.log"
    log.write_text(
        "2026-12-01 10:00:00,000 INFO gateway.Root: started\n"
        "2026-12-01 10:00:01,000 ERROR gateway.Session: session:x crashed on Fault: boom\\nTraceback (most recent "
        "call last):\\n  File \"a.py\", line 1\\nRuntimeError: boom\n"
        "2026-12-01 10:00:01,500 WARNING gateway.SessionShard: shard: restarting session:x: boom\n"
        "2026-12-01 10:00:02,000 ERROR gateway.Sweeper: Sweeper crashed on OpResult: bad\n"
        "Traceback (most recent call last):\n  File \"b.py\", line 2\nValueError: bad\n"
        "2026-12-01 10:00:03,000 INFO gateway.Root: fine again\n")
    config = {"gateway": {"state_dir": str(tmp_path), "log_file": ""}}
    parts = report_parts.log_parts(config)
    assert [c["has_traceback"] for c in parts["crashes"]] == [True, True]
    assert "RuntimeError: boom" in parts["crashes"][0]["record"].splitlines()
    assert parts["crashes"][1]["record"].endswith("ValueError: bad")
    assert parts["restarts"] == ["2026-12-01 10:00:01,500 WARNING gateway.SessionShard: shard: restarting "
                                 "session:x: boom"]
    assert parts["tail"][-1].endswith("fine again")
    assert report_parts.log_parts({"gateway": {"state_dir": str(tmp_path / "none"), "log_file": ""}})["why"]
