"""The OneBot v11 adapter: its pure parts (events -> MessageEvent in both message formats, what is skipped, the
account's pace, answers and retcodes, the reverse socket's refusal rule), and in the real daemon against the fake
implementation: the reverse WebSocket refusing a missing or wrong access token (nothing stored) and taking the
right one; the forward connection dropped and back, the messages sent once it is back stored once; a burst of 20
answers in one group sent at the account's pace with no violation at the fake; the daily bound refusing a send
with its reason, the day's count kept across a kill -9 of the adapter. The conformance suite runs the
same adapter too (tests/adapters/harnesses/onebot.py)."""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import os
import re
import signal
import uuid

import pytest

from actors.adapters.errors import PermanentError
from actors.adapters.onebot.account_pace import AccountPace, DailyBoundReached, PaceRule
from actors.adapters.onebot.http_post import signature_ok
from actors.adapters.onebot.inbound import event_from_raw, segments_of, skip_reason
from actors.adapters.onebot.link import ActionFailed, answer_data
from actors.adapters.onebot.reverse import Refusals, refusal
from actors.adapters.payload_fields import MalformedPayload
from actors.messages import OpResult, PlatformOp, Source
from common import config as config_mod
from daemon.admin import AdminClient
from daemon.asking import listen_for
from storage import Store, StorageError, session_key
from tests.actor_system import wait_for
from tests.fakes.onebot import BOT_QQ, DEFAULT_TOKEN, FakeOneBot
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)
SELF = str(BOT_QQ)


def message(kind="private", text="hello", segments=None, **extra) -> dict:
    event = {"time": 1_700_000_000, "self_id": BOT_QQ, "post_type": "message", "message_type": kind,
             "message_id": 77, "user_id": 4242, "sender": {"nickname": "alice", "card": ""},
             "message": segments if segments is not None else [{"type": "text", "data": {"text": text}}]}
    if kind == "group":
        event["group_id"] = 9999
    return {**event, **extra}


# ------------------------------------------------------------------------------------------------ pure parts

def test_private_and_group_messages_map_to_their_chats_with_ids_per_account():
    dm = event_from_raw(message(), "qq", "default", SELF)
    assert (dm.source.chat_id, dm.source.chat_type, dm.source.user_id, dm.source.user_name) == \
        ("private:4242", "dm", "4242", "alice")
    assert dm.platform_message_id == f"{SELF}:77" and dm.sent_at == 1_700_000_000.0 and dm.addressed is True
    group = event_from_raw(message("group", segments=[{"type": "at", "data": {"qq": SELF}},
                                                      {"type": "text", "data": {"text": " status?"}}]),
                           "qq", "default", SELF)
    assert (group.source.chat_id, group.source.chat_type, group.text, group.addressed) == \
        ("group:9999", "group", "status?", True)
    assert session_key(group.source) != session_key(dm.source)


def test_segments_become_text_quotes_and_attachments_and_cq_code_reads_the_same():
    segments = [{"type": "reply", "data": {"id": "55"}}, {"type": "at", "data": {"qq": "123", "name": "bob"}},
                {"type": "text", "data": {"text": " look "}}, {"type": "face", "data": {"id": "14"}},
                {"type": "image", "data": {"file": "a.png", "url": "http://127.0.0.1/a.png"}},
                {"type": "record", "data": {"file": "v.silk"}}, {"type": "file", "data": {"name": "r.pdf",
                                                                                          "url": "https://x/r.pdf"}}]
    event = event_from_raw(message(segments=segments), "qq", "default", SELF)
    assert event.text == "@bob look [face 14][record]" and event.reply_to_message_id == f"{SELF}:55"
    assert [(a.kind, a.ref) for a in event.attachments] == [("photo", "http://127.0.0.1/a.png"),
                                                             ("document", "https://x/r.pdf")]
    cq = segments_of(f"[CQ:at,qq={SELF}] a &#91;b&#93; &amp; [CQ:image,file=x.png,url=http://h/x.png?a=1&#44;2]")
    assert cq[0] == {"type": "at", "data": {"qq": SELF}} and cq[1]["data"]["text"] == " a [b] & "
    assert cq[2]["data"]["url"] == "http://h/x.png?a=1,2"


def test_what_is_skipped_and_what_is_malformed():
    assert skip_reason(message(), SELF, True) is None
    assert skip_reason({"post_type": "meta_event"}, SELF, True) == "not a message event"
    assert skip_reason(message(self_id=55555), SELF, True) == "an event of another account"
    assert skip_reason(message(user_id=BOT_QQ), SELF, True) == "the account's own message"
    assert skip_reason(message("group", "hi all"), SELF, True) == "a group message that does not @-mention the account"
    assert skip_reason(message("group", "hi all"), SELF, False) is None
    assert skip_reason(message("group", f"[CQ:at,qq={SELF}] hi", segments=f"[CQ:at,qq={SELF}] hi"), SELF, True) is None
    for bad, reason in ((message(segments=42), "must be a string or a list of segments"),
                        (message(message_id="x"), "message_id must be a number"),
                        (message("discuss"), "message_type must be private or group"),
                        (message(segments=[{"data": {}}]), "type must be a string")):
        with pytest.raises(MalformedPayload, match=reason):
            event_from_raw(bad, "qq", "default", SELF)


def test_the_account_pace_keeps_the_gap_the_minute_and_the_day():
    pace = AccountPace(PaceRule(per_minute=3, min_gap_s=1.5, jitter_s=1.0, daily=5), rand=lambda: 0.5)
    day = 86400.0 * 20000
    assert pace.wait_s(0.0, day) == 0.0
    pace.spend(0.0, day)
    assert pace.wait_s(0.5, day) == pytest.approx(1.5), "the gap is 1.5 s plus half the jitter"
    pace.spend(2.0, day)
    pace.spend(4.0, day)
    assert pace.wait_s(6.0, day) == pytest.approx(54.0), "the fourth message of a minute waits for the first's"
    pace.spend(60.0, day)
    pace.spend(120.0, day)
    with pytest.raises(DailyBoundReached, match="daily bound of 5"):
        pace.wait_s(200.0, day)
    assert pace.wait_s(200.0, day + 86400.0) == 0.0, "a new UTC day starts the count again"


def test_the_days_count_is_restored_on_its_own_day_only():
    day = 20_000 * 86400.0
    earlier = AccountPace(PaceRule(per_minute=60, min_gap_s=0.0, jitter_s=0.0, daily=3))
    earlier.spend(1.0, day + 10)
    earlier.spend(2.0, day + 20)
    assert earlier.day() == (20_000, 2)
    later = AccountPace(PaceRule(per_minute=60, min_gap_s=0.0, jitter_s=0.0, daily=3))
    later.restore(*earlier.day(), wall=day + 30)
    assert later.wait_s(100.0, day + 30) == 0.0
    later.spend(100.0, day + 30)
    with pytest.raises(DailyBoundReached):
        later.wait_s(101.0, day + 40)
    tomorrow = AccountPace(PaceRule(per_minute=60, min_gap_s=0.0, jitter_s=0.0, daily=3))
    tomorrow.restore(*earlier.day(), wall=day + 86400.0 + 5)
    assert tomorrow.day() == (20_001, 0), "yesterday's count is spent"


def test_the_gap_runs_from_when_the_implementation_took_the_message():
    """A message that set out at 0 s but was taken at 0.8 s (held up on its way): the next one waits the gap from
    0.8 s, so the two never arrive closer than the gap."""
    pace = AccountPace(PaceRule(per_minute=30, min_gap_s=1.5, jitter_s=0.0, daily=100), rand=lambda: 0.0)
    day = 86400.0 * 20000
    pace.spend(0.0, day)
    pace.accepted(0.8)
    assert pace.wait_s(1.5, day) == pytest.approx(0.8)


def test_answers_and_retcodes():
    assert answer_data("a", {"status": "ok", "retcode": 0, "data": {"message_id": 3}}) == {"message_id": 3}
    assert answer_data("a", {"status": "async", "retcode": 1, "data": None}) is None
    with pytest.raises(ActionFailed, match="retcode 1404"):
        answer_data("a", {"status": "failed", "retcode": 1404, "data": None})
    with pytest.raises(PermanentError, match="retcode 100: blocked"):
        answer_data("a", {"status": "failed", "retcode": 100, "wording": "blocked"})


def test_the_post_signature_is_sha1_hmac_of_the_body():
    body = b'{"post_type":"message"}'
    good = "sha1=" + hmac.new(b"s3cret", body, hashlib.sha1).hexdigest()
    assert signature_ok("s3cret", body, good) and signature_ok("s3cret", body, good.upper().replace("SHA1=", "sha1="))
    assert not signature_ok("s3cret", body + b" ", good) and not signature_ok("other", body, good)
    assert not signature_ok("s3cret", body, None) and not signature_ok("s3cret", body, good[5:])


def test_refusals_are_counted_and_each_kind_logged_once_a_minute():
    logged = []
    refusals = Refusals(logged.append)
    for _ in range(3):
        refusals.refused("a POST refused", 403, "a wrong X-Signature")
    refusals.refused("a POST refused", 401, "no X-Signature")
    assert refusals.count == 4 and refusals.last == "no X-Signature"
    assert logged == ["a POST refused: a wrong X-Signature (1 refused so far)",
                      "a POST refused: no X-Signature (4 refused so far)"]


def test_the_reverse_socket_refusal_rule():
    assert refusal("t", "1", None, "Universal", "1") == (401, "no access token")
    assert refusal("t", "1", "x", "Universal", "1") == (403, "a wrong access token")
    assert refusal("t", "1", "t", "Universal", "2")[0] == 403
    assert refusal("t", "1", "t", "API", "1")[0] == 400
    assert refusal("t", "1", "t", "Universal", "2\nfake log line") == (403, "account (not a number) is not this "
                                                                         "table's (1)")
    assert refusal("t", "1", "t", "Universal", "1") is None and refusal("", "", None, "", "") is None


# ---------------------------------------------------------------------------------------------- the daemon

def rows_of(gateway: Gateway, chat_id: str, user_id: str) -> list | None:
    key = session_key(Source(platform="onebot", chat_id=chat_id, chat_type="group" if chat_id.startswith("group:")
                             else "dm", user_id=user_id, user_name=user_id))

    async def read():
        async with await Store.open(gateway.state / "gateway.db") as store:
            return await store.inbox.rows_in_state(key, ("received", "taken", "done", "dropped"))
    try:
        return asyncio.run(read())
    except StorageError:
        return None


def total_rows(gateway: Gateway) -> int | None:
    async def read():
        async with await Store.open(gateway.state / "gateway.db") as store:
            return sum((await store.inbox.counts()).values())
    try:
        return asyncio.run(read())
    except StorageError:
        return None


def started_and_serving(gateway: Gateway, logged: str) -> str:
    """Start the daemon; the address its adapter serves, as its log line ``logged`` names it (a free port)."""
    gateway.start()
    gateway.wait_ready()
    return wait_for(lambda: re.search(logged, gateway.log()), 30, 0.1, f"{logged!r} in the log").group(1)


def table(extra: str) -> str:
    return f'[adapters.onebot]\ntype = "onebot"\naccess = "open"\nself_id = "{SELF}"\n' + extra


def test_a_reverse_websocket_with_a_missing_or_wrong_token_is_refused_and_nothing_is_stored(tmp_path):
    gateway = Gateway(tmp_path, watchdog_interval=30.0, extra_toml=table(
        f'mode = "reverse"\nlisten_port = 0\naccess_token = "{DEFAULT_TOKEN}"\nheartbeat_interval_s = 1.0\n'))
    fakes = []
    try:
        url = started_and_serving(gateway, r"listening for the implementation at (ws://\S+)")
        for token, status in ((None, 401), ("not-the-token", 403)):
            fake = FakeOneBot(heartbeat_interval=1.0).start()
            fakes.append(fake)
            fake.connect_reverse(url, token, reconnect_interval=0.2)
            fake.wait_for(lambda: status in fake.reverse_attempts, timeout=30)
            assert fake.connected() == 0 and 101 not in fake.reverse_attempts
            fake.stop()
        assert total_rows(gateway) in (0, None), "nothing of a refused connection is stored"
        wait_for(lambda: "refused: a wrong access token" in gateway.log(), 15, 0.1, "the refusal logged")
        assert "refused: no access token" in gateway.log() and DEFAULT_TOKEN not in gateway.log()
        fake = FakeOneBot(heartbeat_interval=1.0).start()
        fakes.append(fake)
        fake.connect_reverse(url, DEFAULT_TOKEN, reconnect_interval=0.2)
        wait_for(fake.alive_connections, 30, 0.1, "the implementation connected with the right token")
        sent = fake.inject_private("carol", "over the reverse socket")
        rows = wait_for(lambda: rows_of(gateway, f"private:{fake.qq('carol')}", str(fake.qq("carol"))), 30, 0.1,
                        "the message stored")
        assert [r.platform_message_id for r in rows] == [f"{SELF}:{sent['message_id']}"]
        wait_for(lambda: fake.sent(f"private:{fake.qq('carol')}"), 60, 0.1, "the answer over the same socket")
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        for fake in fakes:
            fake.stop()


def test_the_connection_dropped_and_back_reconnects_and_what_comes_after_is_stored_once(tmp_path):
    fake = FakeOneBot(state_file=str(tmp_path / "onebot.json"), heartbeat_interval=1.0).start()
    with forward_daemon(tmp_path, fake) as gateway:
        pid = gateway.node("onebot")["pid"]
        before = fake.accepted
        fake.drop_connections()
        wait_for(lambda: fake.accepted > before and fake.alive_connections(), 30, 0.1, "the adapter reconnected")
        group = "team"
        unaddressed = fake.inject_group(group, "dave", "just chatting", mention=False)
        asked = fake.inject_group(group, "dave", "are you back?")
        fake.replay(asked["message_id"])
        chat = f"group:{fake.qq(group)}"
        rows = wait_for(lambda: rows_of(gateway, chat, str(fake.qq("dave"))), 30, 0.1, "the group message stored")
        wait_for(lambda: fake.sent(chat), 60, 0.1, "the answer in the group")
        rows = rows_of(gateway, chat, str(fake.qq("dave")))
        assert [r.platform_message_id for r in rows] == [f"{SELF}:{asked['message_id']}"], \
            f"stored once, the unaddressed {unaddressed['message_id']} skipped"
        [answer] = fake.sent(chat)
        assert answer["reply"] == str(asked["message_id"]), "the answer quotes the question"
        assert gateway.node("onebot")["pid"] == pid, "a dropped connection is retried, not a crash"


def send_all(gateway: Gateway, monkeypatch, ops: list) -> dict:
    """Hand ``ops`` to the adapter at once through the admin connection; their results by op id."""
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(gateway.state))   # AdminClient finds the daemon through it
    admin = AdminClient(config_mod.load(str(gateway.config)))
    ref = wait_for(lambda: next((n.ref for n in walk(admin.tree()) if n.name == "onebot" and n.ref), None), 30, 0.1,
                   "the adapter's address")
    for op in ops:
        admin.asys.tell(ref, op)
    results = {}
    while len(results) < len(ops):
        result = listen_for(admin.asys, OpResult, 60)
        assert result is not None, f"only {len(results)} of {len(ops)} answered"
        results[result.op_id] = result
    return results


@contextlib.contextmanager
def forward_daemon(tmp_path, fake: FakeOneBot, extra: str = ""):
    """The daemon with the adapter on ``fake``'s forward WebSocket, connected; stopped after, and the fake too."""
    gateway = Gateway(tmp_path, watchdog_interval=30.0, extra_toml=table(
        f'url = "ws://127.0.0.1:{fake.port}"\naccess_token = "{DEFAULT_TOKEN}"\nheartbeat_interval_s = 1.0\n' + extra))
    try:
        gateway.start()
        gateway.wait_ready()
        wait_for(fake.alive_connections, 30, 0.1, "the adapter connected")
        yield gateway
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        fake.stop()


FAST_CHATS = 'pacing = { per_chat_ops_per_s = 100.0, per_chat_burst = 100 }\n'   # the account's pace is under test


@pytest.mark.timeout(180)
def test_a_burst_of_20_answers_in_one_group_goes_at_the_accounts_pace(tmp_path, monkeypatch):
    """20 answers handed to the adapter at once, in one group: the account's pace (30 a minute, at least 0.3 s
    apart, plus jitter) holds them in a queue; the fake, told the same pace, counts no violation, and every
    answer arrives, in order. ``status`` shows the pace and the count."""
    fake = FakeOneBot(state_file=str(tmp_path / "onebot.json"), heartbeat_interval=1.0, pace_per_minute=30,
                      pace_min_gap_s=0.3).start()
    with forward_daemon(tmp_path, fake, 'messages_per_minute = 30.0\nmin_gap_s = 0.3\ngap_jitter_s = 0.2\n' +
                        FAST_CHATS) as gateway:
        chat = f"group:{fake.qq('crowd')}"
        results = send_all(gateway, monkeypatch, [
            PlatformOp(op_id=uuid.uuid4().hex, action="send", chat_id=chat, chat_type="group", text=f"answer {i}")
            for i in range(20)])
        assert all(r.ok for r in results.values()), [r for r in results.values() if not r.ok]
        assert [m["text"] for m in fake.sent(chat)] == [f"answer {i}" for i in range(20)]
        assert fake.stats()["pace_violations"] == 0, fake.gaps()
        assert min(fake.gaps()) >= 0.3
        shown = gateway.cli("status").stdout
        assert f"account {SELF} via ws://127.0.0.1:{fake.port}; pace 30/min, gap >= 0.3 s (+ up to 0.2 s), " \
               "1000/day; 20 sent today" in shown, shown


def test_past_the_daily_bound_a_send_fails_saying_so_and_a_kill_9_keeps_the_days_count(tmp_path, monkeypatch):
    fake = FakeOneBot(heartbeat_interval=1.0, pace_min_gap_s=0.0).start()
    unpaced = 'min_gap_s = 0.0\ngap_jitter_s = 0.0\ndaily_limit = 3\n'
    with forward_daemon(tmp_path, fake, unpaced + FAST_CHATS) as gateway:
        chat = f"private:{fake.qq('frank')}"
        ops = [PlatformOp(op_id=f"daily-{i}", action="send", chat_id=chat, text=f"message {i}") for i in range(4)]
        before = send_all(gateway, monkeypatch, ops[:2])
        assert all(r.ok for r in before.values()), before
        old = gateway.node("onebot")
        os.kill(old["pid"], signal.SIGKILL)    # the adapter's process: its day's count was in its memory too
        wait_for(lambda: (n := node_or_none(gateway, "onebot")) and n["pid"] != old["pid"] and
                 n["state"] == "running", 60, 0.1, f"the onebot adapter back after its kill -9 (it was {old})")
        seen = [""]

        def restored() -> str | None:
            seen[0] = gateway.cli("status").stdout
            return seen[0] if "2 sent today" in seen[0] else None
        try:
            shown = wait_for(restored, 60, 0.2, "status to show the 2 messages of the earlier life")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; status showed: {seen[0]}") from None
        assert "3/day" in shown, shown
        results = send_all(gateway, monkeypatch, ops[2:])
        assert [results[op.op_id].ok for op in ops[2:]] == [True, False], results
        refused = results["daily-3"]
        assert refused.error_kind == "permanent" and "daily bound of 3 messages" in refused.error, refused
        assert len(fake.sent(chat)) == 3


def node_or_none(gateway: Gateway, name: str) -> dict | None:
    try:
        return gateway.node(name)
    except Exception:   # noqa: BLE001 - the tree asked for while the adapter restarts: asked again
        return None


def walk(node):
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


def test_doctor_asks_the_implementation_who_is_logged_in():
    from actors.adapters import registry
    from daemon.doctor_probes import probe_onebot
    with FakeOneBot() as fake:
        table = {"type": "onebot", "url": f"ws://127.0.0.1:{fake.port}"}
        ok = asyncio.run(probe_onebot("qq", registry.validate_adapter("qq", dict(table, access_token=DEFAULT_TOKEN))))
        assert ok.status == "ok" and f"get_login_info: {SELF}" in ok.detail, ok
        bad = asyncio.run(probe_onebot("qq", registry.validate_adapter("qq", dict(table, access_token="wrong-1234"))))
        assert bad.status == "fail" and "access token is wrong" in bad.detail and "wrong-1234" not in bad.detail, bad
        other = asyncio.run(probe_onebot("qq", registry.validate_adapter("qq", dict(
            table, access_token=DEFAULT_TOKEN, self_id="777"))))
        assert other.status == "fail" and f"logged in as {SELF}, not 777" in other.detail, other
        http = asyncio.run(probe_onebot("qq", registry.validate_adapter("qq", {
            "type": "onebot", "mode": "http", "api_url": fake.base_url, "access_token": DEFAULT_TOKEN})))
        assert http.status == "ok" and f"get_login_info: {SELF}" in http.detail, http


def test_http_post_events_need_the_signature_and_answers_go_through_the_http_api(tmp_path):
    """HTTP mode: an event POST without X-Signature is refused 401, with a wrong one 403, and nothing of it is
    stored; signed with the secret it is stored, and the answer goes through the implementation's HTTP API."""
    fake = FakeOneBot(heartbeat_interval=1.0).start()
    gateway = Gateway(tmp_path, watchdog_interval=30.0, extra_toml=table(
        f'mode = "http"\napi_url = "http://127.0.0.1:{fake.port}"\naccess_token = "{DEFAULT_TOKEN}"\n'
        'secret = "post-secret"\nlisten_port = 0\nheartbeat_interval_s = 1.0\n'))
    try:
        url = started_and_serving(gateway, r"taking event POSTs at (http://\S+)")
        for secret, status in ((None, 401), ("not-the-secret", 403)):
            fake.post_statuses.clear()
            fake.post_events_to(url, secret)
            fake.inject_private("erin", f"signed with {secret}")
            fake.wait_for(lambda: status in fake.post_statuses, timeout=30)
            assert 204 not in fake.post_statuses
        assert total_rows(gateway) in (0, None), "nothing of a refused POST is stored"
        wait_for(lambda: "an event POST refused: a wrong X-Signature" in gateway.log(), 15, 0.1, "the refusal logged")
        fake.post_events_to(url, "post-secret")
        sent = fake.inject_private("erin", "signed right")
        chat = f"private:{fake.qq('erin')}"
        rows = wait_for(lambda: rows_of(gateway, chat, str(fake.qq("erin"))), 30, 0.1, "the message stored")
        assert [r.platform_message_id for r in rows] == [f"{SELF}:{sent['message_id']}"]
        assert 204 in fake.post_statuses
        [answer] = wait_for(lambda: fake.sent(chat), 60, 0.1, "the answer through the HTTP API")
        assert answer["reply"] == str(sent["message_id"])
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        fake.stop()


def test_a_table_missing_what_its_mode_needs_is_refused_naming_the_key():
    from actors.adapters import registry
    from common.config import ConfigError
    for table, key in (({}, "url"), ({"mode": "reverse", "listen_host": "0.0.0.0"}, "access_token"),
                       ({"mode": "http"}, "api_url"),
                       ({"mode": "http", "api_url": "http://127.0.0.1:3000", "listen_host": "0.0.0.0"}, "secret"),
                       ({"url": "ws://127.0.0.1:3001", "daily_limit": 0}, "daily_limit")):
        with pytest.raises(ConfigError, match=key):
            registry.validate_adapter("qq", {"type": "onebot", **table})
    assert registry.validate_adapter("qq", {"type": "onebot", "mode": "reverse"})["listen_port"] == 6700
