"""The Signal adapter in the real daemon against the fake signal-cli (tests/fakes/signal): a 10,000-character answer
arrives as one message the way official clients show it (the body inline, the whole text as the long-text
attachment), with a typing indicator meanwhile and no previews; the event stream dropped mid-answer (cut under the
daemon, then the daemon itself stopped) is opened again, the answer completes once, what came meanwhile arrives
once, and an envelope Signal delivers a second time makes no second turn; a group answers a mention; a photo comes
through the media intake.

One fake and one daemon for the module (the fake is restarted on its port by one test: a holder keeps it).
"""
from __future__ import annotations

import asyncio

import pytest

from actors.adapters.pacing import DEFAULT_RESENT_MARKER as RESENT_MARKER
from storage import Store, StorageError, session_key
from tests.actor_system import wait_for
from tests.actors.media.fixtures import png
from tests.fakes.signal import ACCOUNT, ACCOUNT_UUID, LONG_TEXT, FakeSignalCli, uuid_for
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)
ANSWER_MARK = "api_key_env"   # the offline agent's answer ends with its configuration help
KEEPALIVE_S = 0.2


class Rig:
    def __init__(self, workdir):
        self.state_file = str(workdir / "signal.json")
        self.sc = FakeSignalCli(state_file=self.state_file, keepalive_interval=KEEPALIVE_S).start()
        self.port = self.sc.port
        self.gw = Gateway(workdir, extra_toml=f"""
[adapters.signal]
type = "signal"
access = "open"
account = "{ACCOUNT}"
account_uuid = "{ACCOUNT_UUID}"
base_url = "{self.sc.base_url}"
idle_timeout_s = 5.0
[agent]
chunk_delay_s = 0.0
""")

    def restart_daemon(self, while_down) -> None:
        """signal-cli stopped and started again on its port; ``while_down()`` runs while nothing listens."""
        self.sc.stop()
        while_down(self.sc)
        self.sc = FakeSignalCli(port=self.port, state_file=self.state_file, keepalive_interval=KEEPALIVE_S).start()

    def answers(self, chat_id: str, count: int = 1, timeout: float = 60) -> list[dict]:
        """The bot's messages to the chat once ``count`` of them hold a whole answer of the offline agent."""
        def done():
            shown = [m for m in self.sc.messages(chat_id) if not m["deleted"]]
            return len(shown) >= count and all(ANSWER_MARK in m["text"] or "Long answer" in m["text"]
                                                for m in shown) and shown
        try:
            return wait_for(done, timeout, 0.05, f"{count} answer(s) in {chat_id}")
        except AssertionError as exc:
            tail = [line for line in self.gw.log().splitlines() if " INFO root" not in line][-30:]
            raise AssertionError(f"{exc}\nsent: {[m['text'][:60] for m in self.sc.messages(chat_id)]}\n"
                                 + "\n".join(tail)) from None

    def committed_delivery(self) -> int:
        """The newest serverDeliveredTimestamp the adapter has committed (its offset; 0 while none)."""
        async def read():
            async with await Store.open(self.gw.state / "gateway.db") as store:
                return await store.inbox.get_offset("signal")
        try:
            offset = asyncio.run(read())
        except StorageError:
            return 0
        return offset.get("delivered", 0) if isinstance(offset, dict) else 0

    def rows(self, chat_id: str, chat_type: str = "dm") -> list:
        from actors.messages import Source
        key = session_key(Source(platform="signal", chat_id=chat_id, chat_type=chat_type))

        async def read():
            async with await Store.open(self.gw.state / "gateway.db") as store:
                return await store.inbox.rows_in_state(key, ("received", "taken", "done", "dropped"))
        try:
            return asyncio.run(read())
        except StorageError:
            return None


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    rig = Rig(tmp_path_factory.mktemp("signal-e2e"))
    try:
        rig.gw.start()
        rig.gw.wait_ready()
        wait_for(lambda: rig.sc.open_streams() == 1, 30, 0.05, "the adapter's event stream")
        yield rig
    finally:
        rig.gw.cli("stop")
        rig.gw.kill_everything()
        rig.sc.stop()


def test_a_10000_character_answer_arrives_as_one_message_with_its_long_text_and_no_previews(rig):
    user = uuid_for("long-answer")
    rig.sc.inject_message("tell me everything #long 10000 #slow 0.05", sender=user, number=None)
    [message] = rig.answers(user)
    text = message["text"]
    assert len(text) == 10000 and text.startswith("Long answer (10000 characters)")
    assert text.encode().startswith(message["body"].encode()) and len(message["body"].encode()) <= 2000
    [attachment] = message["attachments"]
    assert attachment["contentType"] == LONG_TEXT and attachment["text"] == text, "the whole text, as clients show it"
    sends = rig.sc.ops(user, "send")
    assert [o["status"] for o in sends] == ["ok"], "one send: no previews, no second part"
    assert rig.sc.ops(user, "sendTyping"), "the typing indicator showed while the answer was written"
    assert {o["method"] for o in rig.sc.ops(user)} == {"send", "sendTyping"}


def test_a_stream_dropped_mid_answer_is_reopened_and_nothing_is_lost_or_doubled(rig):
    first, second, third = uuid_for("drop-1"), uuid_for("drop-2"), uuid_for("drop-3")
    connections = rig.sc.stats()["connections"]
    question = rig.sc.inject_message("echo answer me through a drop #slow 0.1", sender=first, number=None)
    wait_for(lambda: rig.sc.ops(first, "sendTyping"), 30, 0.02, "the answer under way (typing shown)")
    assert rig.sc.cut_streams() == 1 and not rig.sc.messages(first), "cut while the answer was being written"
    wait_for(lambda: rig.sc.stats()["connections"] > connections, 30, 0.02, "the stream opened again")
    during = rig.sc.inject_message("echo sent just after the drop", sender=second, number=None)
    rig.sc.redeliver(question["handle"])      # Signal delivers the question again (its ack was lost)
    [answer] = rig.answers(first)
    assert RESENT_MARKER not in answer["text"] and "answer me through a drop" in answer["text"]
    [reply] = rig.answers(second)
    assert "sent just after the drop" in reply["text"]
    assert rig.sc.inbound(during["handle"])["state"] == "delivered"
    again = wait_for(lambda: (d := rig.sc.inbound(question["handle"])["deliveries"]) and len(d) == 2 and d[1],
                     30, 0.02, "the second delivery")
    wait_for(lambda: rig.committed_delivery() >= again, 30, 0.02, "the second delivery committed")
    assert len(rig.rows(first)) == 1, "the second delivery of the question made no second row"

    # Now the daemon itself goes away mid-answer: what arrives meanwhile waits on Signal's servers (on-connection).
    typing = len(rig.sc.ops(first, "sendTyping"))
    rig.sc.inject_message("echo and across a daemon restart #slow 0.2", sender=first, number=None)
    wait_for(lambda: len(rig.sc.ops(first, "sendTyping")) > typing, 30, 0.02, "the second answer under way")
    assert len(rig.sc.messages(first)) == 1, "stopped before the second answer was sent"
    rig.restart_daemon(lambda sc: sc.inject_message("echo while signal-cli was down", sender=third, number=None))
    [waited] = rig.answers(third)
    assert "while signal-cli was down" in waited["text"]
    answers = rig.answers(first, count=2)
    assert [("drop" in a["text"], "daemon restart" in a["text"]) for a in answers] == [(True, False), (False, True)]
    assert all(RESENT_MARKER not in a["text"] for a in answers)
    assert len(rig.rows(first)) == 2 and len(rig.rows(third)) == 1


def test_in_a_group_a_mention_is_answered_there_and_other_talk_is_not(rig):
    group = rig.sc.add_group("team", members=("+15550000100", "+15550000200"))
    rig.sc.inject_message("just chatting among ourselves", group_id=group)
    rig.sc.inject_message("\ufffc what do you say?", group_id=group,
                          mentions=({"number": ACCOUNT, "uuid": ACCOUNT_UUID, "start": 0, "length": 1},))
    [answer] = rig.answers(f"group:{group}")
    assert 'You said: "what do you say?"' in answer["text"]
    assert rig.sc.messages(f"group:{group}")[0]["recipients"] == ["+15550000100", "+15550000200"]
    assert len(rig.rows(f"group:{group}", "group")) == 1, "the message without a mention made no turn"


def test_a_photo_comes_through_the_media_intake(rig):
    user = uuid_for("photo")
    rig.sc.inject_message("what is this?", sender=user, number=None,
                          attachments=(("image/png", png(32, 24), "red.png"),))
    [answer] = rig.answers(user)
    assert "You sent a photo (PNG, 32×24" in answer["text"], answer["text"][:200]
