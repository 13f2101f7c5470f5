"""A streamed answer in paragraph-sized parts where the platform has no edits (profile ``stream_without_edits =
"paragraphs"``: actors/sessions/paragraph_parts.py), through the real daemon and the fake WhatsApp Cloud API
(tests/fakes/whatsapp): the parts arrive as the model writes, in order, each within the limit, none twice; and a
kill -9 of the daemon mid-answer, after which the resumed turn goes on from the parts already sent and sends none of
them again.

One daemon for the module (the conformance harness's fake and table), whose default profile sends answers in parts;
the kill test runs last and starts it again on the same state.
"""
from __future__ import annotations

import asyncio
import os
import signal
import uuid

import pytest

from actors.adapters.pacing import DEFAULT_RESENT_MARKER
from storage import Store, StorageError
from tests.actor_system import wait_for
from tests.adapters.harnesses.whatsapp import WhatsAppHarness, wa_id
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(240)

# The offline agent quotes up to 200 characters of the message: a first paragraph over the 200 a part needs.
ASKED = ("Tell me about the gateway in a few paragraphs please, " * 5).strip()
SLOW = "#slow 0.3"   # about ten seconds of writing: the parts have time to leave before it ends


class Rig:
    def __init__(self, harness: WhatsAppHarness, gateway: Gateway):
        self.harness, self.gateway, self.fake = harness, gateway, harness.server

    def ask(self, tag: str) -> str:
        user = wa_id(f"{tag}-{uuid.uuid4().hex[:8]}")
        self.harness._checked_url()
        self.fake.inject_text(user, f"{ASKED} {SLOW}")
        return user

    def texts(self, user: str) -> list[str]:
        return [m["text"] for m in self.fake.messages(user) if m["kind"] == "text"]

    def obligation(self, user: str):
        async def read():
            async with await Store.open(self.gateway.state / "gateway.db") as store:
                return [o for o in await store.ledger.list(limit=1000) if o.target.chat_id == user]
        try:
            found = asyncio.run(read())
        except StorageError:
            return None
        return found[0] if len(found) == 1 else None

    def delivered(self, user: str):
        return wait_for(lambda: (o := self.obligation(user)) is not None and o.state == "delivered" and o, 90, 0.2,
                        f"the reply to {user} delivered (last seen: {self.obligation(user)}; sent so far: "
                        f"{self.texts(user)})")


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("whatsapp_parts")
    harness = WhatsAppHarness(workdir)
    harness.start()
    gateway = Gateway(workdir, extra_toml=harness.adapter_toml() +
                      '[profiles.default]\nstream_without_edits = "paragraphs"\n')
    try:
        gateway.start()
        gateway.wait_ready()
        harness._checked_url()
        yield Rig(harness, gateway)
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        harness.stop()


def test_a_streamed_answer_arrives_as_several_messages_in_order_while_it_is_written(rig):
    user = rig.ask("parts")
    ob = rig.delivered(user)
    messages = [m for m in rig.fake.messages(user) if m["kind"] == "text"]
    texts = [m["text"] for m in messages]
    assert len(texts) >= 3, f"one message per paragraph-sized part, got {len(texts)}: {texts}"
    assert texts == ob.chunks, "what the chat shows is the reply's parts, in order, each once"
    assert len(set(texts)) == len(texts) and all(0 < len(t) <= rig.harness.text_limit for t in texts)
    assert texts[0].startswith('You said: "Tell me about the gateway') and "api_key_env" in texts[-1]
    assert all(len(t) >= 200 for t in texts[:-1]), [len(t) for t in texts]
    # The first part left while the model still wrote: the last one needs the rest of the answer, seconds later.
    assert messages[-1]["at"] - messages[0]["at"] > 2.0, [m["at"] for m in messages]
    assert DEFAULT_RESENT_MARKER not in "".join(texts)


def test_a_kill_9_mid_answer_sends_no_paragraph_twice_after_the_turn_resumes(rig):
    gw, user = rig.gateway, rig.ask("killed")
    # The first part is on the platform and its id in the ledger; the next needs seconds more of writing.
    first = wait_for(lambda: (o := rig.obligation(user)) is not None and 0 in o.parts and o.send_intent is None
                     and o, 60, 0.05, f"the first part sent and recorded (sent so far: {rig.texts(user)})")
    os.kill(gw.launcher_pid, signal.SIGKILL)
    gw.assert_no_process_left()
    before = rig.texts(user)
    at_kill = rig.obligation(user)
    # A machine stalled for seconds may have killed it inside the next part's send: that part may be in the chat
    # without its id (the intent says so), and then goes again under the re-sent mark, as any such send does.
    unknown = at_kill.send_intent
    assert at_kill.state != "delivered" and len(before) - len(at_kill.parts) in ((0,) if unknown is None else (0, 1)), \
        f"killed mid-answer, every part sent recorded or its send's outcome unknown: {at_kill}, {before}"
    assert at_kill.streamed["parts"][:len(at_kill.parts)] == before[:len(at_kill.parts)], \
        "what each part shows is in the ledger"
    gw.start()
    gw.wait_ready(timeout=60)
    ob = rig.delivered(user)
    texts = rig.texts(user)
    gw.wait_log("resuming the turn interrupted by a restart")
    assert texts[:len(before)] == before and len(set(texts)) == len(texts), f"a part was sent twice: {texts}"
    assert len(texts) > len(before) and "api_key_env" in texts[-1], "the rest of the answer came after the restart"
    assert first.parts[0] == ob.parts[0]
    if unknown is None:
        assert texts == ob.chunks, (before, texts, ob.chunks)
        assert DEFAULT_RESENT_MARKER not in "".join(texts) and not ob.ambiguous, \
            "the resumed answer began with what was sent: it went on from there, unmarked"
    else:
        assert ob.ambiguous and ob.chunks[unknown].startswith(DEFAULT_RESENT_MARKER), ob.chunks
        assert texts[len(before):] == ob.chunks[len(at_kill.parts):], (before, texts, ob.chunks)
