"""actors/sessions/turn.py: a turn's data and the pure functions around it, tested without actors."""
from __future__ import annotations

import time

from actors.messages import MessageEvent, Source, TextDelta, ToolCallFinished, TurnEnd
from actors.profiles.profiles import Profiles
from actors.sessions import turn as turns
from actors.sessions.session import Session
from storage import TranscriptEvent


def event(text="hello", received_at=0.0, **source) -> MessageEvent:
    return MessageEvent(Source(**{"platform": "tg", "chat_id": "42", **source}), text, "m7", received_at)


def said(role, text, turn_id, kind="message"):
    return TranscriptEvent(role, kind, {"text": text}, turn_id)


def test_model_messages_leave_out_undone_turns_and_non_messages():
    transcript = [said("user", "first", "t1"), said("assistant", "one", "t1"),
                  said("user", "oops", "t2"), said("assistant", "two", "t2"),
                  TranscriptEvent("user", "undo", {"turn_id": "t2"}, "t3"),
                  TranscriptEvent("assistant", "tool_call", {"name": "calc"}, "t4"), said("user", "again", "t4")]
    assert turns.model_messages(transcript, "be brief") == (
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "first"},
        {"role": "assistant", "content": "one"}, {"role": "user", "content": "again"})
    assert turns.model_messages(transcript)[0] == {"role": "user", "content": "first"}   # no prompt, no system
    assert turns.last_user_turn(transcript) == "t4"


def test_the_model_sees_only_the_most_recent_history():
    transcript = [said("user", str(i), f"t{i}") for i in range(turns.HISTORY_EVENTS + 10)]
    sent = turns.model_messages(transcript)
    assert len(sent) == turns.HISTORY_EVENTS and sent[-1]["content"] == str(turns.HISTORY_EVENTS + 9)


def test_a_final_answer_already_written_is_found_for_its_turn_only():
    transcript = [said("user", "q", "t1"), said("assistant", "a", "t1"), said("user", "q2", "t2")]
    assert turns.final_answer(transcript, "t1") == "a" and turns.final_answer(transcript, "t2") is None


def test_a_tool_call_and_its_result_are_recorded_together():
    call, result = turns.tool_events("t1", ToolCallFinished("c1", "calc", '{"x": 1}', "2", True))
    assert (call["kind"], result["kind"]) == ("tool_call", "tool_result")
    assert call["payload"]["call_id"] == result["payload"]["call_id"] == "c1"


def test_the_consumer_is_told_where_the_reply_goes():
    turn = turns.Turn("t1", [3], event(chat_type="group", thread_id="9"))
    args = turns.consumer_args(turn, "key", {"adapters": {"tg": {"type": "telegram"}}})
    assert args.platform == "telegram" and args.adapter == "tg" and args.inbound_ref == "tg:m7"
    assert (args.chat_id, args.thread_id, args.reply_to, args.chat_type) == ("42", "9", "m7", "group")
    assert args.profile == turn.event.source.profile, "a profile that does not stream is paced so"


def test_a_turns_reply_settings_are_those_it_started_with_for_every_consumer_it_asks_for():
    from actors.adapters.registry import reply_pacing
    from actors.sessions.reply_status import reply_reactions
    turn = turns.Turn("t1", [3], event(profile="p"))
    started = {"adapters": {"tg": {"type": "webchat"}}, "profiles": {"p": {"stream": True,
                                                                           "status_reactions": "👀 👍"}}}
    reloaded = {"adapters": {"tg": {"type": "webchat"}}, "profiles": {"p": {"stream": False,
                                                                            "status_reactions": ""}}}
    first = turns.consumer_args(turn, "key", started)
    again = turns.consumer_args(turn, "key", reloaded)   # a consumer asked for again after a reload
    assert again == first and first.stream is True and first.status_reactions == ("👀", "👍")
    assert reply_pacing(reloaded, again.adapter, again.platform, stream=again.stream).supports_edit, \
        "the turn streams as it started, whatever the reload says"
    assert reply_reactions(again) == ("👀", "👍")
    fresh = turns.consumer_args(turns.Turn("t2", [4], event(profile="p")), "key", reloaded)
    assert not reply_pacing(reloaded, fresh.adapter, fresh.platform, stream=fresh.stream).supports_edit
    assert reply_reactions(fresh) == ("", "")


def test_the_answer_text_is_the_text_deltas_in_order():
    turn = turns.Turn("t1", [1], event(), events=[TextDelta("Hel"), ToolCallFinished("c", "n", "{}", "r", True),
                                                  TextDelta("lo")])
    assert turn.answer_text() == "Hello"


def test_a_finished_turn_is_counted_by_its_last_end_and_failed_when_undelivered():
    arrived = event(received_at=time.time() - 2.0)
    done = turns.turn_finished(arrived, [TextDelta("x"), TurnEnd("complete")], delivered=True)
    assert (done.outcome, done.platform, done.profile) == ("done", "tg", "default") and 1.5 < done.seconds < 60
    assert turns.turn_finished(arrived, [TurnEnd("stopped")], delivered=True).outcome == "cancelled"
    assert turns.turn_finished(arrived, [TurnEnd("complete")], delivered=False).outcome == "failed"
    assert turns.turn_finished(event(), [], delivered=True).seconds == 0.0      # no arrival time known


def test_the_sidecar_record_rebuilds_the_request_from_the_transcript():
    history = [TranscriptEvent("user" if i % 2 else "assistant", "message", {"text": f"m{i}"}, f"t{i // 2}", None,
                               seq=i) for i in range(1, 200)]
    window = history[-turns.HISTORY_EVENTS:]
    record = turns.request_record(window, "be brief", "default")
    first, last = record["transcript_seqs"]
    rebuilt = turns.model_messages([e for e in history if first <= e.seq <= last], record["system_prompt"])
    assert rebuilt == turns.model_messages(window, "be brief") and record["events"] == turns.HISTORY_EVENTS
    assert len(str(record)) < 200, "a few numbers, whatever the history holds"


def test_with_appended_is_what_loading_the_transcript_again_returns():
    recent = [said("user", f"u{i}", f"t{i}") for i in range(turns.HISTORY_EVENTS)]
    appended = [turns.user_event("t-new", event("new"), 99)]
    after = turns.with_appended(recent, appended, [1234])
    assert len(after) == turns.HISTORY_EVENTS and after[:-1] == recent[1:]
    assert (after[-1].seq, after[-1].role, after[-1].payload["text"]) == (1234, "user", "new")


def test_a_scheduled_runs_prompt_never_joins_a_users_turn():
    """Internal events (a [cron.NAME] run) are not the user's words: the collect window leaves them out, the busy
    mode queues them (a run never interrupts or steers a user's turn), and the reply is no reply to a message."""
    user = MessageEvent(Source("fake", "c"), "hello", "7", 1.0)
    run = MessageEvent(Source("fake", "c"), "daily summary", "job:schedule:60", 1.0, internal=True)
    assert turns.collectable(user) and not turns.collectable(run)
    assert not turns.collectable(MessageEvent(Source("fake", "c"), "/status", "8", 1.0))
    session = Session()
    session.config = {"sessions": {"busy_mode": "interrupt"}}
    session.profiles = Profiles(session.config)
    assert (session.busy_mode(user), session.busy_mode(run)) == ("interrupt", "queue")
    args = {e.platform_message_id: turns.consumer_args(turns.Turn("t", [1], e), "key", {}).reply_to
            for e in (user, run)}
    assert args == {"7": "7", "job:schedule:60": None}


def test_a_rows_user_event_is_known_by_its_platform_message_id_not_by_a_hosts_inbox_seq():
    """A session moved from another host carries user events with that host's inbox seqs; this host's inbox hands
    the same numbers out again, so a new message with seq 1 here is still new."""
    moved_in = [TranscriptEvent("user", "message", {"text": "first", "inbound_seq": 1, "platform_message_id": "m1"},
                                "t1"), said("assistant", "one", "t1")]
    new_row = MessageEvent(Source("tg", "42"), "third", "m3", 0.0)
    fresh = turns.unrecorded_user_events(moved_in, "t3", [(1, new_row)])
    assert [e["payload"]["platform_message_id"] for e in fresh] == ["m3"]
    assert fresh[0]["payload"]["inbound_seq"] == 1 and fresh[0]["turn_id"] == "t3"
    requeued = MessageEvent(Source("tg", "42"), "first", "m1", 0.0)   # a crash after its event was appended
    assert turns.unrecorded_user_events(moved_in, "t4", [(7, requeued)]) == []


def test_a_note_after_an_answer_cut_inside_a_code_block_comes_after_the_block():
    cut = "Here it is:\n\n```python\nfor i in range(3):\n    print(i)\n"
    assert turns.with_note(cut, "(stopped)") == \
        "Here it is:\n\n```python\nfor i in range(3):\n    print(i)\n```\n\n(stopped)"
    assert turns.with_note("~~~\n````\n", "(interrupted)") == "~~~\n````\n~~~\n\n(interrupted)"
    assert turns.with_note("Plain words. ", "(stopped)") == "Plain words.\n\n(stopped)"
    assert turns.with_note("  \n", "(stopped)") == "(stopped)"
