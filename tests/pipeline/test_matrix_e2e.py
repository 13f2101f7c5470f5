"""The Matrix adapter in the real daemon against a real Synapse (tests/servers/synapse.py) through the recording
relay (tests/adapters/matrix_proxy.py): invites joined only for allowed users, a thread answered in its thread, a
20,000-character answer split within the event limit, Synapse's own 429 waited out, doctor's whoami probe, a voice
message answered with its text and then a voice message of the spoken answer (the audio uploaded to Synapse's media
repository, an m.audio marked MSC3245), and a kill -9 between a PUT leaving and its event id being recorded leaving
one event for the reply (same txnId).

One daemon serves the module (the agent: a fake OpenAI-compatible server); the kill -9 test runs last and starts
it again after the kill.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import urllib.request
import uuid

import pytest

from actors.adapters.matrix.formatting import MAX_EVENT_BYTES, canonical_size
from actors.adapters.pacing import DEFAULT_RESENT_MARKER as RESENT_MARKER
from actors.adapters.registry import pacing_for
from tests.actor_system import wait_for
from tests.adapters.harnesses.matrix import CLIENT, MatrixRooms, room_path
from tests.adapters.matrix_proxy import MatrixRelay
from tests.fakes.openai_server import OGG_OPUS, FakeOpenAIServer, text_reply
from tests.gateway import Gateway
from tests.pipeline.harness import CURSOR
from storage import Store
from tests.servers.synapse import shared_synapse

pytestmark = pytest.mark.timeout(120)


class Rig:
    def __init__(self, synapse, relay, model, gw, bot, users, rooms):
        self.synapse, self.relay, self.model, self.gw, self.bot, self.users, self.rooms = \
            synapse, relay, model, gw, bot, users, rooms

    def final(self, chat: str, count: int = 1, timeout: float = 60) -> list[dict]:
        """The bot's messages in the chat once ``count`` of them show no streaming cursor."""
        def done():
            shown = self.rooms.bot_messages(chat)
            return len(shown) >= count and all(CURSOR not in (m["text"] or "") for m in shown) and shown
        try:
            return wait_for(done, timeout, 0.1, f"{count} final message(s) of the bot in {chat}")
        except AssertionError as exc:
            tail = [line for line in self.gw.log().splitlines() if "matrix" in line][-20:]
            raise AssertionError(f"{exc}\nshown: {[m['text'][:80] for m in self.rooms.bot_messages(chat)]}\n"
                                 + "\n".join(tail)) from None


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    synapse = shared_synapse()
    tag = uuid.uuid4().hex[:6]
    bot = synapse.register(f"e2e-bot-{tag}")
    rooms = MatrixRooms(synapse, bot)
    users = {name: rooms.user(name) for name in ("alice", "carol", "dave", "mallory")}
    relay = MatrixRelay(synapse.base_url).start()
    with FakeOpenAIServer() as model:
        allowed = json.dumps([users["alice"]["user_id"], users["carol"]["user_id"]])
        gw = Gateway(tmp_path_factory.mktemp("matrix-e2e"), extra_toml=f"""
[adapters.matrix]
type = "matrix"
access = "allowlist"
allow = {allowed}
homeserver = "{relay.base_url}"
access_token = "{bot['access_token']}"
sync_timeout_s = 5.0
pacing = {{ per_chat_ops_per_s = 20.0, per_chat_burst = 20, edit_interval_s = 0.5 }}
[agent]
kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"
[media]
transcription_url = "{model.base_url}"
speech_url = "{model.base_url}"
[profiles.default]
voice_replies = true
""")
        try:
            gw.start()
            gw.wait_ready()
            wait_for(lambda: len(relay.syncs) >= 2, 30, 0.05, "the adapter's first syncs")
            yield Rig(synapse, relay, model, gw, bot, users, rooms)
        finally:
            relay.release()
            gw.cli("stop")
            gw.kill_everything()
            relay.close()


def newest_obligation(gw: Gateway):
    """The newest reply obligation of the ledger."""
    async def read():
        async with await Store.open(gw.state / "gateway.db") as store:
            return (await store.ledger.list(limit=1))[0]
    return asyncio.run(read())


def membership(rig: Rig, room: str, token: str) -> str:
    path = room_path(room, "state", "m.room.member", rig.bot["user_id"])
    return rig.synapse.call("GET", path, token, expect=(200, 404)).get("membership", "")


def test_an_allowed_users_invite_is_joined_and_a_strangers_is_declined(rig):
    stranger = rig.users["mallory"]["access_token"]
    declined = rig.synapse.call("POST", f"{CLIENT}/createRoom", stranger, {
        "invite": [rig.bot["user_id"]], "is_direct": True, "preset": "trusted_private_chat"})["room_id"]
    rig.rooms.room("alice")            # made with the bot invited; returns once the bot joined
    wait_for(lambda: membership(rig, declined, stranger) == "leave", 30, 0.1, "the stranger's invite declined")
    rig.model.script(text_reply("Hello Alice."))
    rig.rooms.say("alice", {"msgtype": "m.text", "body": "hello"})
    [answer] = rig.final("alice")
    assert answer["text"] == "Hello Alice."
    assert rig.gw.wait_log("declined")


def test_a_message_in_a_thread_is_answered_in_that_thread_and_an_unaddressed_one_not_at_all(rig):
    carol, dave = rig.users["carol"], rig.users["dave"]
    room = rig.synapse.call("POST", f"{CLIENT}/createRoom", carol["access_token"], {
        "invite": [rig.bot["user_id"], dave["user_id"]], "preset": "private_chat"})["room_id"]
    rig.synapse.call("POST", f"{CLIENT}/join/{room}", dave["access_token"], {})
    rig.rooms.rooms["carol-room"], rig.rooms.users["carol-room"] = room, carol
    wait_for(lambda: rig.bot["user_id"] in rig.rooms.members("carol-room"), 30, 0.05, "the bot in the room")
    root = rig.rooms.say("carol-room", {"msgtype": "m.text", "body": "a topic for the team (not for the bot)"})
    rig.model.script(text_reply("Answered in the thread."))
    question = rig.rooms.say("carol-room", {
        "msgtype": "m.text", "body": f"{rig.bot['user_id']}: what about this?",
        "m.mentions": {"user_ids": [rig.bot["user_id"]]},
        "m.relates_to": {"rel_type": "m.thread", "event_id": root, "is_falling_back": True,
                         "m.in_reply_to": {"event_id": root}}})
    [answer] = rig.final("carol-room")
    assert answer["text"] == "Answered in the thread."
    relates = answer["event"]["content"]["m.relates_to"]
    assert relates["rel_type"] == "m.thread" and relates["event_id"] == root, relates
    assert relates["m.in_reply_to"]["event_id"] == question and relates["is_falling_back"] is False
    request = rig.model.requests[-1].body["messages"][-1]["content"]
    assert "what about this?" in request and rig.bot["user_id"] not in request, "the mention is stripped"


def test_a_20000_character_answer_is_split_within_the_event_limit_in_order(rig):
    words = ["größer", "日本語の文", "ünïcödé", "ещё", "text", "🙂", "naïve,", "déjà-vu."]
    answer, index = [], 0
    while sum(map(len, answer)) < 20_000:
        answer.append(words[index % len(words)] + ("\n\n" if index % 40 == 39 else " "))
        index += 1
    text = "".join(answer)[:19_999] + "."
    assert len(text) == 20_000 and len(text.encode()) > pacing_for("matrix").text_limit
    seen = len(rig.rooms.bot_messages("alice"))
    rig.model.script(text_reply(text, pieces=25))
    rig.rooms.say("alice", {"msgtype": "m.text", "body": "a long answer, please"})
    shown = wait_for(lambda: (m := rig.final("alice", seen + 2)[seen:]) and "".join(x["text"] for x in m).endswith(
        text[-30:]) and m, 60, 0.2, "the whole long answer")
    assert "".join(m["text"] for m in shown) == text, "every part, in order, nothing lost or repeated"
    assert len(shown) >= 2, "split: its UTF-8 bytes are over the text limit"
    for message in shown:
        assert len(message["text"].encode()) <= pacing_for("matrix").text_limit
        assert canonical_size(message["event"]) < MAX_EVENT_BYTES
        assert RESENT_MARKER not in message["text"]


def test_synapses_own_429_is_waited_out_for_the_time_it_names(rig):
    rig.synapse.limit_messages(rig.bot["user_id"], 1, 1)
    try:
        before = len(rig.relay.requests)
        rig.model.script(text_reply("one two three four five six seven eight nine ten", pieces=10))
        rig.rooms.say("alice", {"msgtype": "m.text", "body": "stream it"})
        wait_for(lambda: any(r["status"] == 429 for r in rig.relay.requests[before:]), 30, 0.05, "a 429 from Synapse")
        wait_for(lambda: rig.rooms.bot_messages("alice")[-1]["text"] == "one two three four five six seven eight "
                 "nine ten", 60, 0.2, "the answer complete")
    finally:
        rig.synapse.limit_messages(rig.bot["user_id"], 0, 0)
    room = rig.rooms.room("alice")
    writes = [r for r in rig.relay.requests[before:] if r["room"] == room and r["kind"] in ("send", "edit")]
    limited = [r for r in writes if r["status"] == 429]
    assert limited and all(r["retry_after_ms"] > 0 for r in limited), "Synapse named the time to wait"
    for banned, after in zip(writes, writes[1:]):
        if banned["status"] == 429:   # nothing went to the room before the time Synapse named
            assert after["at"] - banned["at"] >= banned["retry_after_ms"] / 1000 - 0.05, (banned, after)


def test_a_sync_token_the_homeserver_no_longer_knows_is_given_up_and_intake_goes_on(rig):
    seen = len(rig.rooms.bot_messages("alice"))
    rig.relay.forget_next_sync_token()
    rig.model.script(text_reply("Woken."), text_reply("Still listening."))
    rig.rooms.say("alice", {"msgtype": "m.text", "body": "wake the long poll"})   # its answer: "Woken."
    wait_for(lambda: any(s["since"] == "s0_never_issued" for s in rig.relay.syncs), 30, 0.05, "the bad token used")
    rig.gw.wait_log("refused the committed sync token", timeout=30)
    rig.final("alice", seen + 1)
    rig.rooms.say("alice", {"msgtype": "m.text", "body": "are you there?"})
    messages = rig.final("alice", seen + 2)
    assert messages[-1]["text"] == "Still listening."
    assert rig.gw.node("matrix")["restarts"] == 0


def test_doctor_asks_the_homeserver_who_the_token_is(rig):
    result = rig.gw.cli("doctor")
    line = next(line for line in result.stdout.splitlines() if "adapter matrix" in line)
    assert "ok" in line and rig.bot["user_id"] in line, line
    assert rig.bot["access_token"] not in result.stdout


def upload(rig: Rig, token: str, data: bytes, mime: str) -> str:
    """The user's file in Synapse's media repository: its mxc:// URI."""
    request = urllib.request.Request(f"{rig.synapse.base_url}/_matrix/media/v3/upload?filename=rec.ogg", data=data,
                                     method="POST", headers={"Authorization": f"Bearer {token}",
                                                             "Content-Type": mime})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())["content_uri"]


def download(rig: Rig, token: str, mxc: str) -> bytes:
    server, media = mxc[len("mxc://"):].split("/", 1)
    request = urllib.request.Request(f"{rig.synapse.base_url}/_matrix/client/v1/media/download/{server}/{media}",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.read()


def test_a_voice_message_is_answered_with_the_text_then_a_voice_message(rig):
    """Carol records a voice message (m.audio with the MSC3245 mark); the bot fetches and transcribes it, answers
    with its text, then an m.audio voice message whose audio, fetched from Synapse, is the one the speech service
    spoke; its send went under a transaction id like any part."""
    carol = rig.users["carol"]["access_token"]
    room = rig.rooms.room("carol")
    asked, heard = len(rig.model.speeches), len(rig.model.transcriptions)
    before = len(rig.relay.requests)
    rig.model.script(text_reply("The gym opens at seven."))
    mxc = upload(rig, carol, OGG_OPUS + b"\x00" * 64, "audio/ogg")
    rig.rooms.say("carol", {"msgtype": "m.audio", "body": "Voice message", "url": mxc,
                            "info": {"mimetype": "audio/ogg", "size": len(OGG_OPUS) + 64, "duration": 2000},
                            "org.matrix.msc1767.audio": {"duration": 2000}, "org.matrix.msc3245.voice": {}})
    text, voice = rig.final("carol", 2)
    assert text["text"] == "The gym opens at seven." and text["event"]["content"]["msgtype"] == "m.text", text
    content = voice["event"]["content"]
    assert content["msgtype"] == "m.audio" and "org.matrix.msc3245.voice" in content, content
    assert content["info"]["mimetype"] == "audio/ogg" and content["info"]["size"] == len(OGG_OPUS), content
    assert download(rig, carol, content["url"]) == OGG_OPUS
    assert len(rig.model.transcriptions) == heard + 1, "the voice message was fetched and transcribed"
    assert len(rig.model.speeches) == asked + 1 and rig.model.speeches[-1]["input"] == "The gym opens at seven."
    sends = [r for r in rig.relay.requests[before:] if r["room"] == room and r["kind"] == "send"]
    assert len({s["txn"] for s in sends}) == len(sends) == 2, sends   # the text and the voice, each its own key


def test_kill_9_between_the_put_and_its_event_id_leaves_one_event_for_the_reply(rig):
    """The daemon dies while the relay holds Synapse's answer to the reply's first PUT: the event exists, its id
    was never recorded. The resumed reply PUTs the same txnId from the same device; Synapse answers with the event
    the first PUT made, the reply goes on editing it, and the room holds one event for it, unmarked."""
    gw, room = rig.gw, rig.rooms.room("alice")
    before = len(rig.relay.requests)
    seen = len(rig.rooms.bot_messages("alice"))
    rig.relay.hold_next_send()
    rig.model.script(text_reply("The answer that survived a kill -9.", delay_between_s=0.3),
                     text_reply("The answer that survived a kill -9.", delay_between_s=0.3))
    rig.rooms.say("alice", {"msgtype": "m.text", "body": "answer me across a crash"})
    wait_for(rig.relay.holding.is_set, 30, 0.01, "the first PUT made and its answer held")
    os.kill(gw.launcher_pid, signal.SIGKILL)
    gw.assert_no_process_left()
    rig.relay.release()
    gw.start()
    gw.wait_ready()
    messages = rig.final("alice", seen + 1)
    assert len(messages) == seen + 1, [m["text"][:40] for m in messages[seen:]]
    assert messages[-1]["text"] == "The answer that survived a kill -9." and RESENT_MARKER not in messages[-1]["text"]
    sends = [r for r in rig.relay.requests[before:] if r["room"] == room and r["kind"] == "send"]
    assert len(sends) >= 2, "the part was PUT again after the restart"
    assert {s["txn"] for s in sends} == {sends[0]["txn"]}, [s["txn"] for s in sends]
    obligation = newest_obligation(gw)
    assert sends[0]["txn"] == f"gw.{obligation.obligation_id[:16]}.0", "the txnId is the obligation's key, part 0"
    # The room shows the final text as soon as Synapse has the edit; the ledger says delivered once its answer is
    # back at the consumer, a moment later.
    seen_states = []
    try:
        wait_for(lambda: seen_states.append(newest_obligation(gw)) or seen_states[-1].state == "delivered", 30, 0.1,
                 "the reply's obligation delivered")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {seen_states[-1]}") from None
    obligation = seen_states[-1]
    assert obligation.parts == {0: messages[-1]["message_id"]}
    assert all(s["status"] == 200 for s in sends)
