"""The chaos checks themselves: each one flags what it exists to catch (a check that cannot fail proves nothing)."""
from __future__ import annotations

from types import SimpleNamespace

from storage import TranscriptEvent
from tests.chaos import checks
from tests.chaos.world import Message


def world_with(*sent: Message):
    return SimpleNamespace(sent=list(sent))


def bot(text: str, message_id: int = 1) -> dict:
    return {"text": text, "message_id": message_id}


Q = Message("telegram", "7000001", 0, "c7000001 q0 hello there", 0.0)
W = Message("web", "visitor0", 0, "cvisitor0 q0 hello there", 0.0)
F = Message("telegram", "7000002", 0, "c7000002 q0 please fail #fail", 0.0, failing=True)


def test_replies_flags_a_lost_reply_a_duplicate_a_stale_preview_and_a_missing_error():
    world = world_with(Q, W, F)
    answer = bot('You said "c7000001 q0 hello there"')
    web = {"visitor0": [{"role": "user", "text": W.text, "id": "m0"},
                        {"role": "assistant", "text": 'You said "cvisitor0 q0 hello there"'}]}
    good = {"7000001": [answer], "7000002": [bot("⚠ the agent failed")]}
    assert checks.replies(world, good, web) == (3, [], 0)
    lost = checks.replies(world, {"7000001": [], "7000002": good["7000002"]}, web)[1]
    assert lost and "no reply" in lost[0]
    doubled = checks.replies(world, {"7000001": [answer, bot(answer["text"], 2)], "7000002": good["7000002"]}, web)[1]
    assert doubled and "duplicate" in doubled[0]
    stale = checks.replies(world, {"7000001": [answer, bot("You said ▍", 2)], "7000002": good["7000002"]}, web)[1]
    assert any("cursor" in v for v in stale)
    unanswered_failure = checks.replies(world, {"7000001": [answer], "7000002": []}, web)[1]
    assert any("error replies" in v for v in unanswered_failure)
    web_lost = checks.replies(world, good, {"visitor0": web["visitor0"][:1]})[1]
    assert web_lost and "web visitor0" in web_lost[0]
    # A reply re-sent with the visible marker next to an earlier copy is the documented ambiguous send, not a
    # violation; the same two copies without the marker are.
    resent = bot(f"{checks.RESENT_MARKER}\n{answer['text']}", 3)
    for earlier in (answer, bot(answer["text"][:12] + " ▍", 2)):
        assert checks.replies(world, {"7000001": [earlier, resent], "7000002": good["7000002"]}, web)[1:] == ([], 1)
    # Two marked copies (the first marked send's own answer was lost too) beside one unmarked: still documented.
    twice = bot(resent["text"], 4)
    assert checks.replies(world, {"7000001": [answer, resent, twice], "7000002": good["7000002"]}, web)[1:] == ([], 1)
    error_resent = bot(f"{checks.RESENT_MARKER}\n⚠ the agent failed", 5)
    assert checks.replies(world, {"7000001": [answer], "7000002": [bot("⚠ the agent failed"), error_resent,
                                                                   error_resent]}, web)[1] == []
    assert checks.replies(world, {"7000001": [answer], "7000002": [bot("⚠ the agent failed")] * 2}, web)[1]


def test_web_questions_flags_a_message_shown_twice_or_still_queued():
    world = world_with(W)
    once = {"visitor0": [{"role": "user", "text": W.text, "id": "m0"}]}
    assert checks.web_questions(world, once)[1] == []
    assert checks.web_questions(world, {"visitor0": once["visitor0"] * 2})[1]
    assert checks.web_questions(world, {"visitor0": [dict(once["visitor0"][0], queued=True)]})[1]


def event(seq, role, kind, turn, payload=None):
    return TranscriptEvent(role, kind, payload or {}, turn, float(seq), seq)


def test_serial_violations_flags_interleaved_turns_and_unpaired_tool_calls():
    serial = [event(1, "user", "message", "t1"), event(2, "assistant", "tool_call", "t1", {"call_id": "a"}),
              event(3, "tool", "tool_result", "t1", {"call_id": "a"}), event(4, "user", "message", "t2")]
    assert checks.serial_violations(serial) == []
    interleaved = serial[:1] + serial[3:] + [event(5, "assistant", "message", "t1")]
    assert any("interleaved" in v for v in checks.serial_violations(interleaved))
    assert any("without a result" in v for v in checks.serial_violations(serial[:2] + serial[3:]))


def test_secrets_hidden_flags_a_secret_in_a_chat_or_in_admin_output():
    world = world_with()
    assert checks.secrets_hidden(world, {"1": [bot("fine")]}, ["status ok"])[1] == []
    assert checks.secrets_hidden(world, {"1": [bot(f"key {checks.SECRETS[0]}")]}, [])[1]
    assert checks.secrets_hidden(world, {}, [f"token {checks.SECRETS[1]}"])[1]


def test_liveness_flags_an_answer_later_than_the_bound_plus_the_time_spent_in_faults():
    slow = Message("telegram", "7000003", 0, "c7000003 q0 hello #slow 0.05", 0.0)
    world = SimpleNamespace(sent=[Q, W, slow, F], sent_at={Q: 1000.0, W: 1000.0, slow: 1000.0, F: 1000.0},
                            fault_s=20.0)
    on_time = {"7000001": [dict(bot('You said "c7000001 q0 hello there"'), date=1030, edit_date=1079)],
               "7000003": [dict(bot('You said "c7000003 q0 hello #slow 0.05"'), date=1082)]}
    web = {"visitor0": [{"role": "assistant", "text": 'You said "cvisitor0 q0 hello there"', "at": 1075.0}]}
    checked, violations, slowest = checks.liveness(world, on_time, web)
    assert (checked, violations) == (3, []), "within 60 s + 20 s of faults (+ the model's own time for #slow)"
    assert 78 <= slowest <= 81
    late = {"7000001": [dict(on_time["7000001"][0], edit_date=1200)], "7000003": on_time["7000003"]}
    [violation] = checks.liveness(world, late, web)[1]
    assert "7000001" in violation and "199.0s" in violation
    world.fault_s = 0.0
    assert len(checks.liveness(world, on_time, web)[1]) == 3, "without faults the bound is 60 s (+ #slow's time)"


def test_final_texts_flags_a_reply_whose_last_edit_never_replaced_a_preview():
    """A preview whose final edit was dropped (taken for a retry of an earlier life's edit) may show no cursor
    when the platform shows the text without it; it is still not the answer."""
    world = world_with(Q, W, F)
    answer = 'You said: "c7000001 q0 hello there"\n\nI am the offline agent.'
    answers = {Q.text: answer, W.text: 'You said: "cvisitor0 q0 hello there"'}
    sent = {"7000001": [bot(answer)], "7000002": [bot("⚠ the agent failed")]}
    web = {"visitor0": [{"role": "assistant", "text": answers[W.text]}]}
    assert checks.final_texts(world, sent, web, answers) == (2, [])
    html = {"7000001": [dict(bot(answer), history=[{"raw_text": "preview"},
                                                         {"raw_text": checks.render(answer, "HTML")[0]}])],
            "7000002": sent["7000002"]}
    assert checks.final_texts(world, html, web, answers) == (2, []), "compared as the bot sent it, rendered"
    cut = {"7000001": [bot(answer[:30])], "7000002": sent["7000002"]}
    (checked, [violation]) = checks.final_texts(world, cut, web, answers)
    assert checked == 2 and "c7000001" in violation and "30 characters" in violation
    marked = {"7000001": [bot(f"{checks.RESENT_MARKER}\n{answer}")], "7000002": sent["7000002"]}
    assert checks.final_texts(world, marked, web, answers)[1] == []
    web_cut = {"visitor0": [{"role": "assistant", "text": answers[W.text][:32]}]}
    assert checks.final_texts(world, sent, web_cut, answers)[1]
