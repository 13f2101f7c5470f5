"""Replies streaming into many Matrix rooms of a real Synapse (tests/servers/synapse.py) while the whole daemon is
killed with -9 again and again, edits in flight: afterwards every reply's *visible* text (its latest ``m.replace``
applied, as a client shows it) is the complete answer, and no room shows a reply twice or anything else.

Why: a reply's edits go out as PUTs under transaction ids, and Synapse answers a transaction id it has seen from
the same device with the earlier event, doing nothing. A turn keeps its id across restarts; when a later life's
edits were numbered like an earlier life's, their ids came out the same and the final edit was silently dropped:
the reply stayed an unfinished preview while the ledger said delivered (actors/adapters/idempotency.py).

The kills are randomised from a seed (printed, with the schedule): each life of the daemon is killed 1-3 s after
it was started. Every room is asked a question at the start of each of the first lives, for a ``#long`` answer of
the offline agent (its text is known from the question: ``long_answer``) streamed in about two seconds, so each
kill meets replies at every stage: being sent, previewed, finished; and a resumed reply, streamed again under the
load of a restart, often needs fewer edits than the life before made (where a counter restarting at 1 met its own
ids).
Default size: 20 rooms, 5 kills, 60 replies (3 waves); GATEWAY_TEST_SCALE=full: 30 rooms, 10 kills, 180 replies.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
import random
import signal
import time
import urllib.parse
import uuid

import pytest

from actors.agents.offline import long_answer
from actors.sessions.turn import GAVE_UP_TEXT, quote, times
from storage import Store
from tests.actor_system import wait_for
from tests.adapters.harnesses.matrix import CLIENT, MatrixRooms
from tests.fakes.openai_server import FakeOpenAIServer, text_reply
from tests.gateway import Gateway
from tests.servers.synapse import shared_synapse

FULL = os.environ.get("GATEWAY_TEST_SCALE") == "full"
ROOMS, KILLS, WAVES = (30, 10, 6) if FULL else (20, 5, 3)   # a wave of questions in each of the first lives
SEED = int(os.environ.get("GATEWAY_TEST_SEED", "39"))
ANSWER_CHARS = 900           # one Matrix message; ~40 word-aligned pieces
PIECE_DELAY_S = 0.05         # ~2 s of streaming per reply: a few previews each
LIFE_S = (1.0, 3.0)          # how long each life runs before its kill -9
SETTLE_S = 90.0
# A turn cut more often than this ends in the notice naming the message (its last life's only operation is an edit
# of the preview an earlier life left): with 5 kills, some replies end so and the rest with their answer.
MAX_RESUMES = 2

pytestmark = pytest.mark.timeout(600 if FULL else 240)


def question(room: int, wave: int) -> str:
    return f"#long {ANSWER_CHARS} #slow {PIECE_DELAY_S} room {room} wave {wave} {uuid.uuid4().hex[:6]}"


def shown(rooms: MatrixRooms, chat: str) -> list[dict]:
    """The bot's messages in the room as a client shows them (deleted ones apart)."""
    return [m for m in rooms.bot_messages(chat) if not m["deleted"]]


def obligation_states(gw: Gateway) -> dict:
    async def read():
        async with await Store.open(gw.state / "gateway.db") as store:
            return await store.ledger.counts()
    return asyncio.run(read())


def complete_replies(text: str) -> tuple[str, str]:
    """The two complete replies a question may end with: its answer, or the notice for a turn cut too often."""
    return long_answer(ANSWER_CHARS, text), GAVE_UP_TEXT.format(quote=quote(text), times=times(MAX_RESUMES + 1))


def differences(rooms: MatrixRooms, asked: dict) -> list[str]:
    """One line per room whose visible replies are not exactly one complete reply per question, in order."""
    wrong = []
    for chat, questions in asked.items():
        texts = [m["text"] or "" for m in shown(rooms, chat)]
        if len(texts) != len(questions) or any(t not in complete_replies(q) for t, q in zip(texts, questions)):
            detail = [f"{len(t)} chars, ends {t[-24:]!r}" + (" (complete)" if t in complete_replies(q) else "")
                      for t, q in zip(texts, questions + [""] * len(texts))]
            wrong.append(f"{chat}: {len(questions)} question(s), {len(texts)} visible repl(ies): {detail}")
    return wrong


def notices(rooms: MatrixRooms, asked: dict) -> int:
    return sum(t == complete_replies(q)[1] for chat, questions in asked.items()
               for t, q in zip((m["text"] for m in shown(rooms, chat)), questions))


@pytest.fixture(scope="module")
def synapse():
    return shared_synapse()


def matrix_gateway(tmp_path, synapse, bot: dict, edit_interval_s: float, more_toml: str) -> Gateway:
    """The daemon with the Matrix adapter on Synapse (its message limits lifted: tests/servers/synapse.py)."""
    return Gateway(tmp_path, extra_toml=f"""
[adapters.matrix]
type = "matrix"
access = "open"
homeserver = "{synapse.base_url}"
access_token = "{bot['access_token']}"
sync_timeout_s = 2.0
pacing = {{ per_chat_ops_per_s = 20.0, per_chat_burst = 20, edit_interval_s = {edit_interval_s} }}
{more_toml}""")


def open_dm(synapse, rooms: MatrixRooms, chat: str) -> None:
    """The chat's user opens a DM with the bot, which joins it with its own token: no daemon needed yet."""
    room = synapse.call("POST", f"{CLIENT}/createRoom", rooms.user(chat)["access_token"], {
        "invite": [rooms.bot["user_id"]], "is_direct": True, "preset": "trusted_private_chat"})["room_id"]
    synapse.call("POST", f"{CLIENT}/join/{urllib.parse.quote(room, safe='')}", rooms.bot["access_token"], {})
    rooms.rooms[chat] = room


def test_replies_killed_mid_stream_again_and_again_end_showing_their_whole_answer_once(synapse, tmp_path):
    rng = random.Random(SEED)
    bot = synapse.register(f"kills-bot-{uuid.uuid4().hex[:8]}")
    rooms = MatrixRooms(synapse, bot)
    gw = matrix_gateway(tmp_path, synapse, bot, 0.4, f"[sessions]\nmax_resumes = {MAX_RESUMES}\n")
    chats = [f"kill-room-{n}" for n in range(ROOMS)]
    asked: dict[str, list[str]] = {chat: [] for chat in chats}
    schedule = []

    def ask(wave: int) -> None:
        for n, chat in enumerate(chats):
            asked[chat].append(question(n, wave))
        with concurrent.futures.ThreadPoolExecutor(ROOMS) as pool:
            list(pool.map(lambda chat: rooms.say(chat, {"msgtype": "m.text", "body": asked[chat][-1]}), chats))

    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda chat: open_dm(synapse, rooms, chat), chats))
        gw.start()
        ask(0)
        for kill in range(KILLS):
            life = rng.uniform(*LIFE_S)
            time.sleep(life)   # the schedule under test: how long this life runs, not a wait for something
            os.kill(gw.launcher_pid, signal.SIGKILL)
            streaming = sum(1 for chat in chats if any("▍" in (m["text"] or "") for m in shown(rooms, chat)))
            schedule.append(f"kill {kill + 1} after {life:.2f}s ({streaming} rooms showing a preview)")
            gw.assert_no_process_left(timeout=20)
            if kill + 1 < WAVES:
                ask(kill + 1)   # while the daemon is down: the next life finds them waiting
            gw.start()
        print(f"\nseed {SEED}: " + "; ".join(schedule))
        try:
            wait_for(lambda: not differences(rooms, asked), SETTLE_S, 0.5, "every room showing its answers")
        except AssertionError:
            pass   # the lines below say what is wrong, room by room
        wrong = differences(rooms, asked)
        replies = sum(len(q) for q in asked.values())
        print(f"{KILLS} kills, {replies} replies checked in {ROOMS} rooms ({notices(rooms, asked)} of them the "
              f"notice of a turn cut {MAX_RESUMES + 1} times), {len(wrong)} wrong")
        assert not wrong, f"seed {SEED}, {schedule}:\n" + "\n".join(wrong[:20])
        wait_for(lambda: (c := obligation_states(gw)) and c["delivered"] == replies and c["pending"] == 0
                 and c["attempting"] == 0 and c["failed"] == 0 and c, 30, 0.2, "every reply delivered in the ledger")
    finally:
        gw.cli("stop")
        gw.kill_everything()


def bot_edits(rooms: MatrixRooms, chat: str) -> int:
    return sum(1 for e in rooms.events(chat) if e.get("sender") == rooms.bot["user_id"]
               and ((e.get("content") or {}).get("m.relates_to") or {}).get("rel_type") == "m.replace")


def test_the_final_edit_of_a_reply_resumed_after_a_kill_is_shown_though_the_life_before_made_more_edits(
        synapse, tmp_path):
    """The issue's trace, made exact with a scripted model: the first life previews a slowly streamed answer (the
    reply's send, then several edits) and is killed mid-stream; the resumed turn's answer streams in two pieces, so
    that life makes one preview edit and the final edit: its second operation, as the first life's second was a
    preview. Numbered ``<turn>:2`` in both lives, the final edit went under the preview's transaction id and
    Synapse answered it with the preview's event: the reply stayed the half-answer with the cursor."""
    answer = " ".join(f"word{n}" for n in range(60)) + "."
    bot = synapse.register(f"kill-one-{uuid.uuid4().hex[:8]}")
    rooms = MatrixRooms(synapse, bot)
    open_dm(synapse, rooms, "one")
    with FakeOpenAIServer() as model:
        model.script(text_reply(answer, pieces=20, delay_between_s=0.3), text_reply(answer, pieces=2,
                                                                                   delay_between_s=1.0))
        gw = matrix_gateway(tmp_path, synapse, bot, 0.5, f'[agent]\nkind = "openai"\nbase_url = "{model.base_url}"\n'
                            'model = "test-model"\napi_key = "sk-test-key-0123456789abcdef"\n')
        try:
            gw.start()
            rooms.say("one", {"msgtype": "m.text", "body": "stream me a long answer"})
            wait_for(lambda: bot_edits(rooms, "one") >= 3, 60, 0.1, "the reply sent and previewed")
            os.kill(gw.launcher_pid, signal.SIGKILL)
            previews = bot_edits(rooms, "one")
            gw.assert_no_process_left(timeout=20)
            gw.start()
            wait_for(lambda: len(model.requests) >= 2, 60, 0.1, "the turn resumed")
            try:
                wait_for(lambda: [m["text"] for m in shown(rooms, "one")] == [answer], 60, 0.2,
                         "the reply showing its whole answer")
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {previews} edits before the kill; shown now: "
                                     f"{[m['text'] for m in shown(rooms, 'one')]}") from None
        finally:
            gw.cli("stop")
            gw.kill_everything()
