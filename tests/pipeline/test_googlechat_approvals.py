"""Tool approvals answered with Google Chat's buttons (a cardsV2 card), through the real daemon, the fake Google Chat
(tests/fakes/googlechat: signed CARD_CLICKED events posted to the app's endpoint, cards and private messages kept)
and the fake model (docs/approvals.md): the question carries Approve / Deny; a press is stored before Google is
answered and answers as the typed answer would, once; the question is then patched to say who answered, its card
gone; a press by someone who may not answer is told so in a private message; a press past the deadline shows the
question expired. One daemon for the module: no test here restarts it."""
from __future__ import annotations

import pytest

from actors.messages import Source
from tests.actor_system import wait_for
from tests.adapters.harnesses.googlechat import GoogleChatHarness
from tests.adapters.test_conformance import session_rows
from tests.fakes.googlechat import FakeGoogleChat
from tests.fakes.googlechat.server import buttons_of
from tests.fakes.openai_server import FakeOpenAIServer, text_reply, tool_call_reply
from tests.gateway import Gateway
from tests.pipeline.approval_helpers import (CALL, PRESSABLE, QUESTION_START, agent_and_profiles, approval_row,
                                             edited_question, settled_messages, tool_results)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("gchat-approvals")
    harness = GoogleChatHarness(workdir)
    harness.start()
    chat = harness.server
    group, late = chat.space("approvals-group"), chat.dm("late-asker")
    with FakeOpenAIServer() as model:
        gw = Gateway(workdir, extra_toml=harness.adapter_toml() + agent_and_profiles(model) + f"""
[[routes]]
adapter = "googlechat"
chat = "{group}"
per_user_in_groups = true

[[routes]]
adapter = "googlechat"
chat = "{late}"
profile = "hurried"
""")
        try:
            gw.start()
            gw.wait_ready()
            harness.webhook_ready()
            yield gw, chat, model, group, late
        finally:
            model.release()
            gw.cli("stop")
            gw.kill_everything()
            harness.stop()


def settled(chat: FakeGoogleChat, space: str, count: int, timeout: float = 60) -> list[dict]:
    return settled_messages(lambda: chat.messages(space), "text", count, space, timeout)


def buttons(message: dict) -> dict:
    """The message's buttons, label -> the data its action carries."""
    return {label: action["parameters"][0]["value"] for label, action in buttons_of(message).items()}


def ask(rig, user: str, then: str, space=None) -> tuple[dict, str, int]:
    """A user asks (in their DM, or in ``space``); the model calls the calculator: the question (with its card),
    its space, and the model's requests before it."""
    gw, chat, model = rig[:3]
    before = len(model.requests)
    model.script(tool_call_reply([CALL], text="Let me compute."), text_reply(then))
    space = space or chat.dm(user)
    chat.inject_text(space, "what is 2+3*4?", user)
    [question] = settled(chat, space, 1)
    assert question["text"].startswith(QUESTION_START), question
    assert PRESSABLE in question["text"], question["text"]
    assert set(buttons(question)) == {"Approve", "Deny"}, question["cards"]
    assert len(model.requests) == before + 1, "the model is not asked again before the answer"
    return question, space, before


def acknowledged(chat: FakeGoogleChat, delivery: str, timeout: float = 30) -> None:
    """The press's POST answered 200 on its first attempt."""
    wait_for(lambda: chat.delivery(delivery)["state"] == "acked", timeout, 0.05,
             f"the press answered: {chat.delivery(delivery)['attempts']}")
    assert [a["status"] for a in chat.delivery(delivery)["attempts"]] == [200], chat.delivery(delivery)


def patched_to(chat: FakeGoogleChat, space: str, question: dict, ending: str) -> dict:
    return edited_question(lambda: next(m for m in chat.messages(space) if m["name"] == question["name"]), "text",
                           ending, buttons)


def test_pressing_approve_is_stored_before_the_answer_runs_the_tool_once_and_the_question_says_who(rig):
    gw, chat, model = rig[:3]
    user = "approver"
    question, space, before = ask(rig, user, "It is 14.")
    acknowledged(chat, chat.press_button(space, question["name"], "Approve", user))
    source = Source(platform="googlechat", chat_id=space, chat_type="dm", user_id=chat.user(user))
    rows = wait_for(lambda: session_rows(gw, source), 30, 0.2, "the inbox readable")   # None only while busy
    assert any(r.payload["text"].startswith("approve ") for r in rows), "the press's row was committed first"
    assert [m["text"] for m in settled(chat, space, 2)][1] == "It is 14."
    assert tool_results(model, before) == ["14"]
    wait_for(lambda: approval_row(gw, space) == ("done", "approve", f"googlechat:{chat.user(user)}", "ok"), 20, 0.05,
             f"the approved call done ({approval_row(gw, space)})")
    patched_to(chat, space, question, f"Approved by <{chat.user(user)}>.")
    with pytest.raises(ValueError, match="no button"):   # the card is gone: no second press can be made
        chat.press_button(space, question["name"], "Deny", user)


def test_a_double_press_is_one_answer_and_the_question_shows_the_first(rig):
    gw, chat, model = rig[:3]
    user = "double-presser"
    question, space, before = ask(rig, user, "It is 14, once.")
    first = chat.press_button(space, question["name"], "Approve", user)
    second = chat.press_button(space, question["name"], "Deny", user)
    acknowledged(chat, first)
    acknowledged(chat, second)
    again = chat.redeliver(first)   # the same POST once more: the same press id, no second row
    acknowledged(chat, again)
    wait_for(lambda: any(m["text"] == "It is 14, once." for m in settled(chat, space, 2)), 60, 0.05, "the answer")
    assert tool_results(model, before) == ["14"]
    assert len(model.requests) == before + 2, "one answer, one turn that goes on"
    wait_for(lambda: approval_row(gw, space) == ("done", "approve", f"googlechat:{chat.user(user)}", "ok"), 20, 0.05,
             f"the approved call done ({approval_row(gw, space)})")
    patched_to(chat, space, question, f"Approved by <{chat.user(user)}>.")
    source = Source(platform="googlechat", chat_id=space, chat_type="dm", user_id=chat.user(user))
    # The Deny is a row only if it was judged before the session settled the question; the repeated POST of the
    # Approve is never a second one.
    approvals = [r.payload for r in session_rows(gw, source) or [] if r.payload["text"].startswith("approve ")]
    assert len(approvals) == 1, f"the same POST twice, one row: {approvals}"
    assert chat.private_messages(space) == []


def test_a_press_by_someone_who_may_not_answer_is_told_so_privately(rig):
    """In the group space each user has their own conversation (per_user_in_groups): another member's press would
    be their own conversation's answer, where the code names nothing, so it is refused, to them alone."""
    gw, chat, model, group = rig[:4]
    asker, stranger = "group-asker", "group-stranger"
    question, space, before = ask(rig, asker, "Fine, not computed.", space=group)
    acknowledged(chat, chat.press_button(space, question["name"], "Approve", stranger))
    told = wait_for(lambda: chat.private_messages(group), 30, 0.05, "a private message")
    assert [(m["private_viewer"], m["text"], m["thread"]) for m in told] == [
        (chat.user(stranger), "This question is not yours to answer.", question["thread"])]
    assert approval_row(gw, space)[:2] == ("pending", None) and len(model.requests) == before + 1
    [still] = [m for m in chat.messages(space) if m["name"] == question["name"]]
    assert set(buttons(still)) == {"Approve", "Deny"}, "the question waits, its card still there"
    assert len(settled(chat, space, 1)) == 1, "nothing said in the space for everyone"
    acknowledged(chat, chat.press_button(space, question["name"], "Deny", asker))
    assert [m["text"] for m in settled(chat, space, 2)][1] == "Fine, not computed."
    assert tool_results(model, before) == ["Approval was denied for this call of calculator; it was not run."]
    patched_to(chat, space, question, f"Denied by <{chat.user(asker)}>.")


def test_a_press_after_the_deadline_shows_the_question_expired(rig):
    gw, chat, model, _, late = rig
    asker = "late-asker"
    question, space, before = ask(rig, asker, "Nobody answered, so I did not compute it.", space=late)
    answers = [m["text"] for m in settled(chat, space, 2, timeout=90)]   # the 10 s deadline, then the turn
    assert answers[1] == "Nobody answered, so I did not compute it."
    asked = len(model.requests)
    acknowledged(chat, chat.press_button(space, question["name"], "Approve", asker))
    patched_to(chat, space, question, "Expired: no one answered, calculator was not run.")
    assert approval_row(gw, space) == ("done", None, None, "expired") and chat.private_messages(space) == []
    assert len(model.requests) == asked and tool_results(model, before) == [
        "No one answered the request to run calculator within 10 seconds; it was not run."]


def test_model_is_answered_with_a_button_per_model_and_a_press_switches(rig):
    gw, chat, model = rig[:3]
    user = "model-switcher"
    space = chat.dm(user)
    chat.inject_text(space, "/model", user)
    [listing] = settled(chat, space, 1)
    assert listing["text"].endswith("Send /model NAME to switch."), listing["text"]
    assert buttons(listing) == {"large-model": "md:large-model"}, "a button per model but the current one"
    acknowledged(chat, chat.press_button(space, listing["name"], "large-model", user))
    assert [m["text"] for m in settled(chat, space, 2)][1] == "Switched to large-model: the next answer uses it."
    before = len(model.requests)
    model.script(text_reply("Answered by the large model."))
    chat.inject_text(space, "hello", user)
    assert [m["text"] for m in settled(chat, space, 3)][2] == "Answered by the large model."
    assert model.requests[before].body["model"] == "large-model"
