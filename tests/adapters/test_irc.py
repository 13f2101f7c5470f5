"""The IRC adapter's parts: the line grammar, splitting within 512 bytes, registration (pure), the inbound
filter; then the link and the doctor probe against a real server (ngircd, tests/adapters/ngircd.py). The adapter
in the daemon: tests/adapters/test_conformance.py (-k irc) and tests/pipeline/test_irc_e2e.py."""
from __future__ import annotations

import asyncio
import os
import signal

import pytest

from actors.adapters import registry
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.errors import PermanentError
from actors.adapters.irc.inbound import event_from_line, is_input
from actors.adapters.irc.formatting import (BadLine, addressed, command, irc_lower, parse, privmsg_budget,
                                       split_for_irc)
from actors.adapters.irc.link import IrcLink, LinkLost, Progress, TargetRefused
from actors.adapters.irc.registration import NoNickLeft, Registration, RegistrationRefused
from common.config import ConfigError
from tests.adapters.irc_client import IrcClient
from tests.adapters.ngircd import Ngircd

pytestmark = pytest.mark.timeout(60)


# --------------------------------------------------------------------------------------------- the grammar

def test_a_line_parses_into_prefix_command_and_params():
    msg = parse(b":alice!~a@host PRIVMSG #chan :gw: hello there\r\n")
    assert (msg.prefix, msg.nick, msg.command, msg.params) == ("alice!~a@host", "alice", "PRIVMSG",
                                                               ("#chan", "gw: hello there"))
    assert parse(b"@time=x :s 001 gw :Welcome").params == ("gw", "Welcome")
    assert parse(b"ping :tok").command == "PING"
    assert parse(b":s 005 gw CHANTYPES=# :are supported").params == ("gw", "CHANTYPES=#", "are supported")
    assert parse(b"PRIVMSG gw :\xff broken").params[1] == "\ufffd broken"
    for bad in (b"", b":prefix-only", b"   "):
        with pytest.raises(BadLine):
            parse(bad)


def test_commands_are_built_safely():
    assert command("NICK", "gw") == b"NICK gw\r\n"
    assert command("USER", "gw", "0", "*", "Real Name") == b"USER gw 0 * :Real Name\r\n"
    assert command("PRIVMSG", "#c", "hi", trailing=True) == b"PRIVMSG #c :hi\r\n"
    with pytest.raises(ValueError, match="CR, LF or NUL"):
        command("PRIVMSG", "#c", "hi\r\nQUIT :owned")
    with pytest.raises(ValueError, match="over 512"):
        command("PRIVMSG", "#c", "x" * 520)


@pytest.mark.parametrize("prefix", [None, "gw!~gw@127.0.0.1"])
def test_the_budget_counts_the_prefix_the_server_adds(prefix):
    budget = privmsg_budget("#chan", prefix)
    shown = prefix or "n" * 30 + "!" + "u" * 10 + "@" + "h" * 63
    relayed = f":{shown} PRIVMSG #chan :".encode() + b"x" * budget + b"\r\n"
    assert len(relayed) == 512


def test_splitting_keeps_utf8_sequences_whole_and_cuts_at_spaces():
    text = "é" * 301 + "\n\n" + "🙂" * 80 + "\n" + "word " * 60 + "\r\nlast\0line"
    payloads = split_for_irc(text, 100)
    assert all(len(p.encode()) <= 100 for p in payloads)
    assert payloads[-1] == "last line" and "" not in payloads
    assert "".join(payloads[:7]) == "é" * 301           # 2-byte characters: 50 per line, none cut
    assert "".join(p for p in payloads if "🙂" in p) == "🙂" * 80   # 4-byte ones: 25 per line
    words = [p for p in payloads if "word" in p]
    assert all(p.endswith("word") for p in words) and " ".join(words).split() == ["word"] * 60


def test_addressing_by_nick_in_a_channel():
    assert addressed("gw: hi there", "gw") == "hi there"
    assert addressed("GW, hi", "gw") == "hi"
    assert addressed("@gw what now", "gw") == "what now"
    assert addressed("[gw]: x", "{gw}") == "x" and irc_lower("[A]\\~") == "{a}|^"
    for other in ("gwx: hi", "hello gw: hi", "gw hi", ""):
        assert addressed(other, "gw") is None


# -------------------------------------------------------------------------------------------- registration

def lines_of(*raw: bytes):
    return [parse(r) for r in raw]


def test_registration_with_a_password_and_sasl_plain():
    reg = Registration("gw", "gw", "Gateway", password="pw", sasl_username="acct", sasl_password="secret")
    assert reg.start() == [b"CAP LS 302\r\n", b"PASS pw\r\n", b"NICK gw\r\n", b"USER gw 0 * Gateway\r\n"]
    assert reg.feed(parse(b":s CAP * LS * :multi-prefix")) == []          # continued: wait for the rest
    assert reg.feed(parse(b":s CAP * LS :sasl=PLAIN,EXTERNAL")) == [b"CAP REQ sasl\r\n"]
    assert reg.feed(parse(b":s CAP * ACK :sasl")) == [b"AUTHENTICATE PLAIN\r\n"]
    assert reg.feed(parse(b"AUTHENTICATE +")) == [b"AUTHENTICATE AGFjY3QAc2VjcmV0\r\n"]
    assert reg.feed(parse(b":s 903 gw :SASL authentication successful")) == [b"CAP END\r\n"]
    assert reg.feed(parse(b":s 001 gw :Welcome to the network gw!~gw@host.example")) == []
    assert reg.done and reg.nick == "gw" and reg.own_prefix == "gw!~gw@host.example"


@pytest.mark.parametrize("answers, refusal", [
    ([b":s CAP * LS :multi-prefix"], "offers no SASL"),
    ([b":s CAP * LS :sasl", b":s CAP * ACK :sasl", b"AUTHENTICATE +", b":s 904 gw :SASL authentication failed"],
     "SASL authentication failed"),
    ([b":s 421 * CAP :Unknown command"], "knows no CAP"),
], ids=["not-offered", "refused", "no-cap"])
def test_sasl_that_cannot_be_done_refuses_the_configuration(answers, refusal):
    reg = Registration("gw", "gw", "Gateway", sasl_username="acct", sasl_password="secret")
    reg.start()
    with pytest.raises(RegistrationRefused, match=refusal):
        for msg in lines_of(*answers):
            reg.feed(msg)


def test_without_sasl_nothing_is_negotiated_and_collisions_take_the_alternates():
    reg = Registration("gw", "gw", "Gateway", alt_nicks=("gw-bot",))
    assert reg.start() == [b"NICK gw\r\n", b"USER gw 0 * Gateway\r\n"], "no CAP without SASL"
    assert reg.feed(parse(b":s CAP * LS :multi-prefix sasl")) == []
    assert reg.feed(parse(b":s 433 * gw :Nickname already in use")) == [b"NICK gw-bot\r\n"]
    assert reg.feed(parse(b":s 433 * gw-bot :Nickname already in use")) == [b"NICK gw_\r\n"]
    assert reg.feed(parse(b":s 433 * gw_ :in use")) == [b"NICK gw__\r\n"]
    reg.feed(parse(b":s 433 * gw__ :in use"))
    with pytest.raises(NoNickLeft):
        reg.feed(parse(b":s 433 * gw___ :in use"))
    with pytest.raises(RegistrationRefused, match="password"):
        Registration("gw", "gw", "G").feed(parse(b":s 464 gw :Password incorrect"))


# ------------------------------------------------------------------------------------------------ inbound

def raw(text: str, target: str = "gw", **extra) -> dict:
    return dict({"id": "18e.1", "nick": "Alice", "user": "~a", "host": "h", "target": target, "text": text,
                 "me": "gw", "at": 1.0}, **extra)


def test_what_is_input_and_how_it_becomes_an_event():
    dm = event_from_line(raw("hello"), "irc", "default")
    assert (dm.source.chat_id, dm.source.chat_type, dm.source.user_id, dm.text) == ("alice", "dm", "alice", "hello")
    channel = event_from_line(raw("gw: what is 2+2", "#Chan"), "irc", "default")
    assert (channel.source.chat_id, channel.source.chat_type, channel.text) == ("#chan", "group", "what is 2+2")
    assert is_input(raw("gw, hi", "#chan")) and not is_input(raw("talking among us", "#chan"))
    assert not is_input(raw("\x01VERSION\x01"))
    assert is_input({"id": 5}), "a broken raw goes on, to be rejected loudly"
    for broken, why in ((raw("x", nick=""), "nick"), (raw("x", id=None), "id"), ("x", "dict")):
        with pytest.raises(MalformedPayload, match=why):
            event_from_line(broken, "irc", "default")


def test_the_table_is_checked():
    good = {"type": "irc", "host": "irc.example", "nick": "gw", "channels": ["#a", "&b key"]}
    assert registry.validate_adapter("irc", good)["port"] == 6667
    for bad, key in (({"nick": "g w"}, "nick"), ({"channels": ["nochan"]}, "channels"),
                     ({"sasl_username": "acct"}, "sasl_password"), ({"flood_lines_per_s": 0.0}, "flood"),
                     ({"ping_timeout_s": 10.0}, "ping_timeout_s")):
        with pytest.raises(ConfigError, match=key):
            registry.validate_adapter("irc", dict(good, **bad))
    assert "pw" in registry.secret_values(registry.validate_adapter("irc", dict(good, server_password="pw")))


# ------------------------------------------------------------------------------- against a real server

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    ngircd = Ngircd(tmp_path_factory.mktemp("ngircd-link")).start()
    yield ngircd
    ngircd.stop()


def settings(server, **changes) -> dict:
    table = {"type": "irc", "host": "127.0.0.1", "port": server.port, "nick": "lnk",
             "server_password": server.password, "flood_lines_per_s": 20.0, "flood_burst": 10,
             "connect_timeout_s": 10.0}
    return registry.validate_adapter("irc", dict(table, **changes))


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 45))


def test_the_link_takes_another_nick_when_its_own_is_taken_and_asks_for_it_again(server):
    holder = IrcClient(server.port, "lnk", server.password).connect()
    try:
        async def go():
            link = IrcLink(settings(server, channels=["#lnk"]), "irc", lambda *a: None)
            await link.open()
            try:
                await link.wait_ready("#lnk", 20)
                taken = link.nick, link.own_prefix
                holder.close()           # the nick is free again (as when our own old connection is noticed dead)
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 20
                while link.nick != "lnk" and loop.time() < deadline:
                    await asyncio.sleep(0.05)
                return taken, (link.nick, link.own_prefix)
            finally:
                await link.close("bye")
        taken, regained = run(go())
    finally:
        holder.close()
    assert taken == ("lnk_", "lnk_!~lnk@127.0.0.1") and regained == ("lnk", "lnk!~lnk@127.0.0.1")


def test_sasl_the_server_does_not_offer_is_a_permanent_error(server):
    """(A wrong server password is one too: the doctor probe's test below, where it shows as refused.)"""
    link = IrcLink(settings(server, sasl_username="acct", sasl_password="pw"), "irc", lambda *a: None)
    with pytest.raises(PermanentError, match="offers no SASL"):
        run(link.open())


def test_lines_are_confirmed_one_by_one_and_a_missing_nick_is_refused(server):
    human = IrcClient(server.port, "lnkhuman", server.password).connect()

    async def go():
        link = IrcLink(settings(server, nick="lnk2"), "irc", lambda *a: None)
        await link.open()
        try:
            progress = Progress(split_for_irc("é" * 90 + "\nsecond", 100))
            await link.send_part("lnkhuman", progress, "MARK")
            await asyncio.get_running_loop().run_in_executor(None, human.answers, "lnk2")   # CTCP PING
            with pytest.raises(TargetRefused) as refused:
                await link.send_part("nobody-here", Progress(["x"]), "")
            return progress, refused.value.code
        finally:
            await link.close("bye")
    try:
        progress, code = run(go())
        human.synced()
        heard = human.privmsgs("lnk2")
    finally:
        human.close()
    assert progress.done == len(progress.payloads) == 3 and code == "401"
    assert [len(h.msg.params[-1].encode()) for h in heard] == [100, 80, 6]
    assert "".join(h.msg.params[-1] for h in heard[:2]) == "é" * 90 and heard[2].msg.params[-1] == "second"


INJECTION = ("\x01DCC SEND evil.exe 2130706433 4444 1\x01\n\x01ACTION waves\x01 \x02bold\x02 \x0304red\x03 "
             "\x1b[2Jclear\x7f\u009b31m\tend\x00x")


def test_no_control_character_of_a_reply_is_sent():
    payloads = split_for_irc(INJECTION, 400)
    assert payloads == ["DCC SEND evil.exe 2130706433 4444 1", "ACTION waves bold 04red [2Jclear31m end x"]
    assert not [c for p in payloads for c in p if ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f]


def test_a_reply_carrying_ctcp_reaches_the_other_client_as_plain_text(server):
    human = IrcClient(server.port, "lnkctcp", server.password).connect()

    async def go():
        link = IrcLink(settings(server, nick="lnk4"), "irc", lambda *a: None)
        await link.open()
        try:
            await link.send_part("lnkctcp", Progress(split_for_irc(INJECTION, privmsg_budget("lnkctcp"))), "")
        finally:
            await link.close("bye")
    try:
        run(go())
        human.synced()
        heard = [h.msg.params[-1] for h in human.privmsgs("lnk4")]
    finally:
        human.close()
    assert heard == ["DCC SEND evil.exe 2130706433 4444 1", "ACTION waves bold 04red [2Jclear31m end x"], heard


def test_the_flood_bucket_spaces_the_lines_of_the_whole_connection(server):
    human = IrcClient(server.port, "lnkpace", server.password).connect()
    rate, burst, count = 4.0, 2, 8

    async def go():
        link = IrcLink(settings(server, nick="lnk5", flood_lines_per_s=rate, flood_burst=burst), "irc",
                       lambda *a: None)
        await link.open()
        try:
            await link.wait_ready("lnkpace", 10)
            link.bucket.consume(asyncio.get_running_loop().time() - 60)   # full: registration long ago
            await link.send_part("lnkpace", Progress([f"line {i}" for i in range(count)]), "")
        finally:
            await link.close("bye")
    try:
        run(go())
        human.synced()
        times = [h.at for h in human.privmsgs("lnk5")]
    finally:
        human.close()
    assert len(times) == count
    for i in range(count):
        for j in range(i + 1, count):   # short lines: ngircd throttles none of them, the bucket alone spaces them
            assert j - i <= burst + rate * (times[j] - times[i]) + 0.5, [round(t - times[0], 2) for t in times]


def test_a_line_whose_fate_died_with_the_server_goes_again_after_the_marker(server):
    """The server is stopped (SIGSTOP) with our line read or not, then killed: the line got no confirmation, so it
    goes again, after the re-sent marker, once the link is back."""
    human = IrcClient(server.port, "lnkfate", server.password).connect()
    back = IrcClient(server.port, "lnkfate", server.password)

    async def go():
        link = IrcLink(settings(server, nick="lnk6"), "irc", lambda *a: None)
        await link.open()
        progress = Progress(["the answer"])
        os.kill(server.proc.pid, signal.SIGSTOP)
        sending = asyncio.ensure_future(link.send_part("lnkfate", progress, "MARK"))
        while progress.unknown is None:
            await asyncio.sleep(0.01)
        server.crash()
        with pytest.raises(LinkLost):
            await sending
        assert (progress.done, progress.unknown) == (0, 0)
        server.start()
        await asyncio.get_running_loop().run_in_executor(None, back.connect)
        await link.open()
        await link.send_part("lnkfate", progress, "MARK")
        await link.close("bye")
        return progress
    try:
        progress = run(go())
        back.synced()
        heard = [h.msg.params[-1] for h in human.privmsgs("lnk6") + back.privmsgs("lnk6")]
    finally:
        human.close()
        back.close()
    assert heard == ["MARK", "the answer"] and progress.done == 1 and progress.unknown is None


def test_a_silent_server_is_noticed_by_the_ping_timeout(server):
    async def go():
        link = IrcLink(settings(server, nick="lnk3", ping_interval_s=0.3, ping_timeout_s=1.0), "irc",
                       lambda *a: None)
        await link.open()
        os.kill(server.proc.pid, signal.SIGSTOP)    # the server is alive but answers nothing
        try:
            await asyncio.wait_for(link.closed.wait(), 20)
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        await link.close()
        return link.failure
    failure = run(go())
    assert isinstance(failure, LinkLost) and "ping timeout" in str(failure)


def test_doctor_registers_and_reports_a_refused_password(server):
    from daemon.doctor_probes import probe_irc
    good = asyncio.run(probe_irc("irc", settings(server, nick="doc")))
    assert good.status == "ok" and "registered at" in good.detail and "as doc" in good.detail
    wrong = asyncio.run(probe_irc("irc", settings(server, nick="doc", server_password="not-it-secret")))
    assert wrong.status == "fail" and "refused" in wrong.detail and "not-it-secret" not in wrong.detail
    down = asyncio.run(probe_irc("irc", settings(server, nick="doc", port=1)))
    assert down.status == "fail" and "cannot register" in down.detail
