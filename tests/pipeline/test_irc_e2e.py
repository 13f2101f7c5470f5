"""The IRC adapter in the real daemon against a real IRC server (ngircd): a 2,000-byte answer in a channel arrives
as lines within 512 bytes as relayed, in order, paced by the flood bucket, on one connection; the server restarted
mid-answer: the adapter reconnects and the rest arrives, nothing twice, nothing lost.

One server, one daemon and one model (the fake OpenAI-compatible server, so the answer is exactly the text the
test chose) for the module. The people are test clients (tests/adapters/irc_client.py).
"""
from __future__ import annotations

import itertools
import os
import signal

import pytest

from actors.adapters.pacing import DEFAULT_RESENT_MARKER
from tests.actor_system import wait_for
from tests.adapters.irc_client import IrcClient
from tests.adapters.ngircd import Ngircd
from tests.fakes.openai_server import FakeOpenAIServer, text_reply
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)
BOT, CHANNEL = "gw", "#gwtest"
RATE, BURST = 1.0, 3               # the flood bucket under test: faster than the default (0.5, 4), so the tests are short
WORDS = ("naïve", "café", "über", "jalapeño", "🙂", "résumé", "crème", "brûlée", "façade", "smörgåsbord", "plain",
         "words", "and", "the", "gateway", "answers")


def answer_of(size: int, seed: int) -> str:
    """Prose of exactly ``size`` UTF-8 bytes: paragraphs longer than one IRC line, many multi-byte characters."""
    words = itertools.cycle(WORDS[seed % len(WORDS):] + WORDS[:seed % len(WORDS)])
    text, count = "", 0
    while len(text.encode()) < size:
        count += 1
        text += next(words) + ("\n\n" if count % 140 == 0 else " ")
    data = text.encode()[:size - 1]
    while data and (data[-1] & 0xC0) == 0x80 or data[-1:] >= b"\xc0":
        data = data[:-1]
    text = data.decode().rstrip()
    return text + "." * (size - len(text.encode()))


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("irc-e2e")
    server = Ngircd(workdir / "ngircd").start()
    with FakeOpenAIServer() as model:
        gw = Gateway(workdir, extra_toml=f"""
[adapters.irc]
type = "irc"
access = "open"
host = "127.0.0.1"
port = {server.port}
nick = "{BOT}"
server_password = "{server.password}"
channels = ["{CHANNEL}"]
flood_lines_per_s = {RATE}
flood_burst = {BURST}
pacing = {{ text_limit = 1200 }}   # parts of several lines: the adapter's own split to 512 bytes is what is tested
[agent]
kind = "openai"
base_url = "{model.base_url}"
model = "test-model"
api_key = "sk-test-key-0123456789abcdef"
""")
        try:
            gw.start()
            gw.wait_ready()
            yield server, model, gw
        finally:
            gw.cli("stop")
            gw.kill_everything()
            server.stop()


def heard_words(*clients: IrcClient, target: str) -> list[str]:
    return " ".join(h.msg.params[-1] for c in clients for h in c.privmsgs(BOT, target)).split()


def wait_answer(answer: str, gw: Gateway, *clients: IrcClient, target: str, timeout: float = 60) -> None:
    wanted = answer.split()
    try:
        wait_for(lambda: len(heard_words(*clients, target=target)) >= len(wanted), timeout, 0.05,
                 f"the whole answer ({len(wanted)} words) in {target}")
    except AssertionError as exc:
        tail = [line for line in gw.log().splitlines() if "irc" in line][-15:]
        raise AssertionError(f"{exc}\nheard {len(heard_words(*clients, target=target))} words\n"
                             + "\n".join(tail)) from None


def check_lines(lines) -> None:
    for heard in lines:
        assert len(heard.raw) <= 512, heard.raw
        heard.raw.decode("utf-8")      # strict: no line was cut inside a UTF-8 sequence


def test_a_2000_byte_answer_in_a_channel_arrives_as_paced_lines_within_512_bytes(rig):
    server, model, gw = rig
    answer = answer_of(2000, 0)
    alice = IrcClient(server.port, "alice", server.password).connect()
    try:
        alice.online(BOT)
        alice.join(CHANNEL)
        wait_for(lambda: any(BOT in [n.lstrip("@+") for n in h.msg.params[-1].split()]
                             for h in alice.lines(lambda h: h.msg.command == "353"))
                 or alice.lines(lambda h: h.msg.command == "JOIN" and h.msg.nick == BOT), 30, 0.05,
                 f"{BOT} in {CHANNEL}")
        alice.say(CHANNEL, "just talking among ourselves here")     # not addressed to the bot: no turn
        model.script(text_reply(answer, pieces=8))
        alice.say(CHANNEL, f"{BOT}: tell me everything")
        wait_answer(answer, gw, alice, target=CHANNEL)
        alice.synced()
        lines = alice.privmsgs(BOT, CHANNEL)
        assert heard_words(alice, target=CHANNEL) == answer.split(), "in order, nothing lost, nothing twice"
        check_lines(lines)
        assert len(lines) >= 5 and max(len(h.raw) for h in lines) > 400, "lines filled up to the limit"
        # Paced: a line leaves only after the one before it was confirmed and a token was there, so between the
        # i-th and the j-th line heard at most BURST + RATE * (time between them) + 1 went.
        for i, j in itertools.combinations(range(len(lines)), 2):
            assert j - i <= BURST + RATE * (lines[j].at - lines[i].at) + 1, [round(h.at, 2) for h in lines]
        assert not alice.lines(lambda h: h.msg.nick == BOT and h.msg.command in ("QUIT", "JOIN")
                               and h.at > lines[0].at), "the bot stayed on the one connection"
        assert server.log().count(f'User "{BOT}!') == 1, "registered once: no flood disconnect"
        assert len(model.requests) == 1, "the channel chatter not addressed to the bot made no turn"
    finally:
        alice.close()


def test_the_server_restarted_mid_answer_the_rest_arrives_once(rig):
    server, model, gw = rig
    answer = answer_of(2000, 5)
    pid = gw.node("irc")["pid"]
    bob = IrcClient(server.port, "bob", server.password).connect()
    again = IrcClient(server.port, "bob", server.password)
    try:
        bob.online(BOT)
        model.script(text_reply(answer, pieces=8))
        bob.say(BOT, "tell me in private")
        # Past the burst a line leaves a second after the one before: the restart comes between two of them,
        # in the second part (three lines each), so no line is in flight and the rest of the part is still to go.
        wait_for(lambda: len(bob.privmsgs(BOT)) >= BURST + 1, 60, 0.02, "the first lines of the answer")
        server.restart()                 # every connection cut
        carol = IrcClient(server.port, "carol", server.password).connect()
        try:
            carol.online(BOT)            # the bot reconnected on its own; bob is not back yet, so the server
            gw.wait_log("in chat bob: retryable")   # refuses its next line to him (401): the part is tried again
        finally:
            carol.close()
        again.connect()                  # bob is back: the part goes on from its first line not confirmed
        wait_answer(answer, gw, bob, again, target="bob")
        again.synced()
        before, after = bob.privmsgs(BOT), again.privmsgs(BOT)
        assert before and after, "part of the answer on each side of the restart"
        assert heard_words(bob, again, target="bob") == answer.split(), "the rest arrived, nothing twice"
        assert not any(DEFAULT_RESENT_MARKER in h.msg.params[-1] for h in before + after)
        check_lines(before + after)
        gw.wait_log("irc: intake error")
        assert gw.node("irc")["pid"] == pid, "a reconnection, not a restart of the adapter"
    finally:
        bob.close()
        again.close()


def test_the_daemon_killed_mid_answer_the_rest_follows_the_re_sent_marker(rig):
    """kill -9 of the whole daemon between two lines of a part: the next start finishes the reply from the ledger.
    The parts confirmed stay as they are, the marker line comes, then the part that was in flight, whole (its lines
    already shown are not known to the ledger), then the rest: every line of the answer shown, and nothing twice
    but that part's lines after the marker."""
    server, model, gw = rig
    answer = answer_of(2000, 9)
    model.script(text_reply(answer, pieces=8), text_reply(answer, pieces=8))   # the same, if the turn is run again
    dave = IrcClient(server.port, "dave", server.password).connect()
    try:
        dave.online(BOT)
        dave.say(BOT, "tell me, even if you crash")
        wait_for(lambda: len(dave.privmsgs(BOT)) >= BURST + 1, 60, 0.02, "the first lines of the answer")
        os.kill(gw.launcher_pid, signal.SIGKILL)
        gw.assert_no_process_left()
        before = [h.msg.params[-1] for h in dave.privmsgs(BOT)]
        gw.start()
        wait_for(lambda: DEFAULT_RESENT_MARKER in [h.msg.params[-1] for h in dave.privmsgs(BOT)], 60, 0.05,
                 "the re-sent marker")
        marker_at = [h.msg.params[-1] for h in dave.privmsgs(BOT)].index(DEFAULT_RESENT_MARKER)
        assert marker_at == len(before), "nothing between the kill and the marker"
        words = answer.split()
        tail = words[len(" ".join(before).split()):]

        def after_marker() -> list[str]:
            return " ".join(h.msg.params[-1] for h in dave.privmsgs(BOT)[marker_at + 1:]).split()
        wait_for(lambda: after_marker()[-len(tail):] == tail, 60, 0.05, "the rest of the answer, to its end")
        dave.synced()
        after = after_marker()
        assert words[len(words) - len(after):] == after, "after the marker: the part in flight, whole, and the rest"
        assert len(after) >= len(tail), "nothing lost"
        assert [h.msg.params[-1] for h in dave.privmsgs(BOT)].count(DEFAULT_RESENT_MARKER) == 1
        check_lines(dave.privmsgs(BOT))
    finally:
        dave.close()
