"""The Mattermost adapter: its pure parts (post -> MessageEvent, the mention rule, quieted broadcasts, REST errors),
its coroutines on a plain event loop against the in-process fake Mattermost (a seq gap, a lost answer, the
pending_post_id window), and the acceptance in the real daemon: the WebSocket dropped mid-answer, posts made while
it was down fetched once, the answer completed once. The conformance suite runs the same adapter too."""
from __future__ import annotations

import asyncio
import json
import time

import pytest
from hypothesis import given, strategies as st

from actors.adapters import base, registry
from actors.adapters.errors import FloodError, MessageNotFoundError, PermanentError, RetryableError, TooLongError
from actors.adapters.mattermost.adapter import MattermostAdapter
from actors.adapters.mattermost.client import classify_error
from actors.adapters.mattermost.formatting import QUIET, emoji_name, quiet_broadcasts
from actors.adapters.mattermost.inbound import (MAX_FILES, event_from_post, raw_from_event, raw_from_rest,
                                                skip_reason, strip_mention)
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.messages import Attachment
from actors.adapters.mattermost.websocket import socket_url
from actors.adapters.payload_fields import MalformedPayload
from actors.messages import PlatformOp
from storage import Store, StorageError, session_key
from tests.actor_system import wait_for
from tests.fakes.mattermost import BOT_USERNAME, DEFAULT_TOKEN, FakeMattermost
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(120)
BOT = "b" * 26
USER = "u" * 26
DM, TOWN, ROOT = "d" * 26, "c" * 26, "r" * 26


def post(message="hello", channel=DM, post_id="p" * 26, **extra) -> dict:
    return {"id": post_id, "channel_id": channel, "user_id": USER, "message": message, "root_id": "", "type": "",
            "props": {}, "create_at": 1_700_000_000_000, "delete_at": 0, **extra}


def posted(message="hello", channel_type="D", mentions=None, **extra) -> dict:
    data = {"post": json.dumps(post(message, **extra)), "channel_type": channel_type, "sender_name": "@alice"}
    if mentions is not None:
        data["mentions"] = json.dumps(mentions)
    return raw_from_event(data)


# --------------------------------------------------------------------------------------- post -> MessageEvent

def test_dms_channels_and_threads_map_to_their_chat_types():
    dm = event_from_post(posted("hi"), "mm", "default", BOT, BOT_USERNAME)
    assert (dm.source.chat_type, dm.source.chat_id, dm.source.thread_id) == ("dm", DM, None)
    assert dm.platform_message_id == "p" * 26 and dm.source.user_name == "alice" and dm.addressed is True
    assert dm.sent_at == 1_700_000_000.0
    group = event_from_post(posted(f"@{BOT_USERNAME} hi", "O", [BOT], channel=TOWN), "mm", "default", BOT,
                            BOT_USERNAME)
    assert (group.source.chat_type, group.text, group.addressed) == ("group", "hi", True)
    thread = event_from_post(posted(f"@{BOT_USERNAME} more", "O", [BOT], channel=TOWN, root_id=ROOT), "mm",
                             "default", BOT, BOT_USERNAME)
    assert (thread.source.chat_type, thread.source.thread_id, thread.reply_to_message_id) == ("thread", ROOT, ROOT)
    assert session_key(thread.source) != session_key(group.source), "a thread is a session of its own"


def test_what_is_skipped_and_what_is_input():
    def reason(raw, require_mention=True):
        return skip_reason(raw, BOT, BOT_USERNAME, require_mention)
    assert reason(posted("hi")) is None, "a DM is always input"
    assert reason(posted("hi", user_id=BOT)) == "own post"
    assert reason(posted("hi", props={"from_bot": "true"})) == "a bot's post"
    assert reason(posted("hi", props={"from_webhook": "true"})) == "a bot's post"
    assert reason(posted("alice joined", type="system_join_channel")) == "system message"
    assert reason(posted("  ")) == "no text"
    assert reason(posted("hi all", "O", channel=TOWN)) == "not addressed"
    assert reason(posted("hi all", "O", channel=TOWN), require_mention=False) is None
    assert reason(posted("hey @gatewaybot", "O", [BOT], channel=TOWN)) is None
    # a fetched post has no mention list: its text decides, and a longer name is someone else
    assert reason(raw_from_rest(post(f"@{BOT_USERNAME}, status?", channel=TOWN), "O")) is None
    assert reason(raw_from_rest(post(f"@{BOT_USERNAME}2 status?", channel=TOWN), "O")) == "not addressed"
    assert reason(raw_from_rest(post(f"mail {BOT_USERNAME}@example.com", channel=TOWN), "O")) == "not addressed"
    assert reason(raw_from_event({"post": "{not json"})) is None, "refused loudly by normalise, not skipped"


@pytest.mark.parametrize("raw, fragment", [
    (raw_from_event({"post": "{not json"}), "post is str, not an object"),
    (raw_from_event({"post": json.dumps(post(42))}), "message must be a string"),
    (raw_from_event({"post": json.dumps(post(post_id="x"))}), "post id must be a 26-character id"),
    (raw_from_event({"post": json.dumps(post(channel="../x"))}), "channel_id must be a 26-character id"),
    (raw_from_event({"post": json.dumps(post(root_id=7))}), "root_id must be a 26-character id"),
    (["a list"], "post record is list"),
])
def test_malformed_posts_are_refused_with_a_reason(raw, fragment):
    with pytest.raises(MalformedPayload, match=fragment):
        event_from_post(raw, "mm", "default", BOT, BOT_USERNAME)


def test_a_post_s_files_are_pending_attachments_by_file_id():
    files = [{"id": "f" * 26, "name": "cat.png", "mime_type": "image/png", "size": 12, "width": 4, "height": 3},
             {"id": "g" * 26, "name": "notes.pdf", "mime_type": "application/pdf", "size": "big"}]
    raw = posted("", file_ids=["f" * 26, "g" * 26, "../etc"], metadata={"files": files})
    assert skip_reason(raw, BOT, BOT_USERNAME, True) is None, "a post of files only is input"
    photo, document, bad = event_from_post(raw, "mm", "default", BOT, BOT_USERNAME).attachments
    assert (photo.kind, photo.ref, photo.name, photo.size, photo.state) == ("photo", "f" * 26, "cat.png", 12, "pending")
    assert (document.kind, document.size) == ("document", 0), "a claim of the wrong type is no size"
    assert bad.state == "unavailable" and not bad.ref
    many = posted("x", file_ids=["f" * 26] * (MAX_FILES + 5))
    assert len(event_from_post(many, "mm", "default").attachments) == MAX_FILES


def test_the_mention_is_taken_out_of_the_question():
    assert strip_mention(f"@{BOT_USERNAME} what time is it", BOT_USERNAME) == "what time is it"
    assert strip_mention(f"@{BOT_USERNAME.upper()}", BOT_USERNAME) == f"@{BOT_USERNAME.upper()}"


# ------------------------------------------------------------------------------------------------ formatting

def test_a_broadcast_is_quieted_outside_code_only():
    assert quiet_broadcasts("ping @channel and @ALL, @here.") == \
        f"ping {QUIET}channel and {QUIET}ALL, {QUIET}here."
    assert quiet_broadcasts("`@channel` and\n```\n@all\n```") == "`@channel` and\n```\n@all\n```"
    assert quiet_broadcasts("mail me@all.example and @channels") == "mail me@all.example and @channels"


@given(st.text(alphabet=st.sampled_from(list("@`channel ahre\n*x"))))
def test_quieting_changes_nothing_but_the_broadcasts(text):
    quiet = quiet_broadcasts(text)
    assert quiet.replace(QUIET, "@") == text
    assert quiet.count(QUIET) <= text.count("@")


def test_a_status_reaction_is_named_as_mattermost_names_emoji():
    assert [emoji_name(e) for e in ("👀", "👍", "✅", "⚠", "⚠\ufe0f", ":eyes:", "party_parrot")] == \
        ["eyes", "+1", "white_check_mark", "warning", "warning", "eyes", "party_parrot"]
    with pytest.raises(ValueError, match="no Mattermost emoji name"):
        emoji_name("🦜")
    with pytest.raises(ValueError):
        emoji_name("../../users")


# ---------------------------------------------------------------------------------------------- REST errors

def test_rest_failures_are_classified_by_what_to_do():
    flood = classify_error("create_post", 429, {"Retry-After": "3", "X-RateLimit-Reset": "5"}, None)
    assert isinstance(flood, FloodError) and flood.retry_after == 3.0
    reset_only = classify_error("create_post", 429, {"X-RateLimit-Reset": "2"}, None)
    assert isinstance(reset_only, FloodError) and reset_only.retry_after == 2.0
    assert classify_error("create_post", 429, {}, None).retry_after == 1.0
    assert isinstance(classify_error("create_post", 503, {}, None), RetryableError)
    assert isinstance(classify_error("create_post", 400, {}, {
        "id": "model.post.is_valid.message_length.app_error", "message": "Invalid Message property."}), TooLongError)
    assert isinstance(classify_error("patch_post", 404, {}, {"id": "app.post.get.app_error"}), MessageNotFoundError)
    refused = classify_error("get_me", 401, {}, {"id": "api.context.session_expired.app_error", "message": "x"})
    assert isinstance(refused, PermanentError) and not isinstance(refused, RetryableError)


def test_the_event_stream_is_on_the_server_s_websocket_address():
    assert socket_url("https://chat.example.com/") == "wss://chat.example.com/api/v4/websocket"
    assert socket_url("http://127.0.0.1:8065") == "ws://127.0.0.1:8065/api/v4/websocket"


# -------------------------------------------------------------------------- the adapter on a plain event loop

class Posts:
    def __init__(self):
        self.items = []

    def post(self, item):
        self.items.append(item)

    def lines(self) -> list[str]:
        return [i.text for i in self.items if isinstance(i, base.LogLine)]


@pytest.fixture
def mm():
    with FakeMattermost() as fake:
        yield fake


def make_adapter(fake: FakeMattermost, tmp_path, **settings) -> tuple[MattermostAdapter, Posts]:
    adapter = MattermostAdapter()
    adapter.name = "mm"
    adapter.settings = registry.validate_adapter("mm", {"type": "mattermost", "base_url": fake.base_url,
                                                        "token": DEFAULT_TOKEN, "access": "open", **settings})
    adapter.profile = adapter.settings["profile"]
    adapter.pacing = registry.pacing_of(adapter.settings)
    adapter.secrets = registry.secret_values(adapter.settings)
    adapter.config = {"gateway": {"state_dir": str(tmp_path)}, "storage": {"durability": "normal"}}
    adapter._loop_bridge = posts = Posts()
    return adapter, posts


async def until(predicate, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{what} not met within {timeout} s"
        await asyncio.sleep(0.02)
    return value


async def texts(adapter: MattermostAdapter, channel_id: str) -> list[str]:
    key = session_key(adapter.normalise(raw_from_rest(post(channel=channel_id), "D")).source)
    return [r.payload["text"] for r in await adapter.store.inbox.rows_in_state(key)]


def test_a_skipped_seq_fetches_what_the_stream_lost(mm, tmp_path):
    adapter, posts = make_adapter(mm, tmp_path)
    dm = mm.direct_channel("alice")

    async def main():
        intake = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
        try:
            await until(lambda: mm.open_connections() and adapter.offset, what="a connection and a first offset")
            mm.skip_events(1)                          # the server's queue overflows: the next event is lost
            lost = mm.inject_post(dm, "alice", "lost on the stream")
            await until(lambda: mm.stats()["events_skipped"] == 1, what="the event skipped")
            mm.inject_post(dm, "alice", "after the gap")
            await until(lambda: adapter.recovered >= 1, what="the recovery")
            return await texts(adapter, dm), lost
        finally:
            intake.cancel()
            await asyncio.gather(intake, return_exceptions=True)
            await adapter.disconnect()
            await adapter.close()
            await adapter.store.close()

    stored, lost = asyncio.run(main())
    assert stored == ["lost on the stream", "after the gap"], stored
    assert mm.deliveries(lost["id"]) == 0, "it came through REST, not the stream"
    assert any("skipped to seq" in line for line in posts.lines())


def test_a_recovery_commits_in_creation_order_across_channels(mm, tmp_path, monkeypatch):
    """An offset committed midway through a recovery (a kill -9 then) must not pass a missed post of a channel not
    yet stored: every channel is read first and the posts go oldest first, whatever the channels' order."""
    from actors.adapters.mattermost import adapter as adapter_module
    monkeypatch.setattr(adapter_module, "RECOVERY_BATCH", 1)
    adapter, _posts = make_adapter(mm, tmp_path)
    first_listed, second_listed = mm.direct_channel("alice"), mm.direct_channel("bob")
    # the recovery reads from the offset less its overlap: from just after this post
    since = mm.inject_post(first_listed, "alice", "before")["create_at"] + adapter_module.RECOVERY_OVERLAP_MS
    older = mm.inject_post(second_listed, "bob", "older, in the channel listed second")
    newer = mm.inject_post(first_listed, "alice", "newer, in the channel listed first")
    commits = []

    async def emit(raws, offset):
        commits.append(([r["post"]["id"] for r in raws], offset["create_at"]))

    async def main():
        adapter.bot_id = (await adapter._api().me())["id"]
        await adapter._recover(emit, since)
        await adapter.close()

    asyncio.run(main())
    assert commits == [([older["id"]], older["create_at"]), ([newer["id"]], newer["create_at"])], commits


def test_a_frozen_stream_is_left_and_what_was_posted_meanwhile_is_fetched_once(mm, tmp_path):
    """The server stops sending anything, pongs included, without closing (a half-open connection): the missing
    pong drops it within a ping interval and a half, the adapter reconnects, and the post made while it was frozen
    comes through REST, stored once."""
    adapter, _posts = make_adapter(mm, tmp_path, ping_interval_s=1.0)
    dm = mm.direct_channel("alice")

    async def main():
        intake = asyncio.get_running_loop().create_task(adapter.intake.run_forever())
        try:
            await until(lambda: mm.open_connections() and adapter.offset, what="a connection and a first offset")
            first = mm.stats()["connections"]
            mm.freeze_websockets(True)
            mm.inject_post(dm, "alice", "posted into a frozen stream")
            await until(lambda: not mm.open_connections(), what="the frozen connection left by the adapter")
            mm.freeze_websockets(False)
            await until(lambda: mm.stats()["connections"] > first and mm.open_connections(), what="a new connection")
            await until(lambda: adapter.recovered >= 1, what="the recovery")
            return await texts(adapter, dm)
        finally:
            mm.freeze_websockets(False)
            intake.cancel()
            await asyncio.gather(intake, return_exceptions=True)
            await adapter.disconnect()
            await adapter.close()
            await adapter.store.close()

    assert asyncio.run(main()) == ["posted into a frozen stream"]


def test_typing_goes_on_the_stream_while_it_is_open_and_through_rest_otherwise(mm, tmp_path):
    adapter, _posts = make_adapter(mm, tmp_path)
    dm = mm.direct_channel("alice")
    typing = PlatformOp("t-1", "typing", dm)

    async def main():
        await adapter.send_typing(typing)            # no stream yet: REST
        await adapter.connect()
        await adapter.send_typing(typing)            # the user_typing action
        await until(lambda: mm.stats()["typing_actions"] == 1, what="the typing action")
        await adapter.disconnect()
        await adapter.close()

    asyncio.run(main())
    assert mm.stats()["requests"].get("typing") == 1 and mm.stats()["typing_actions"] == 1
    assert [o["status"] for o in mm.ops(dm, "typing")] == [200, 200]


def test_a_send_whose_answer_was_lost_is_found_by_its_part_label(mm, tmp_path):
    adapter, _posts = make_adapter(mm, tmp_path)
    dm = mm.direct_channel("alice")
    ledger = ("obligation-1", 3, 0)

    async def main():
        mm.set_faults(next=["drop_after"], methods=("create_post",))
        with pytest.raises(RetryableError) as lost:
            await adapter.send_message(PlatformOp("op-1", "send", dm, "draft", ledger=ledger))
        assert lost.value.maybe_done
        found = await adapter.find_lost_copy(PlatformOp("sweep:1", "find_lost", dm, "the final text", final=True,
                                                        ledger=(ledger[0], ledger[1] + 1, ledger[2])))
        other = await adapter.find_lost_copy(PlatformOp("sweep:2", "find_lost", dm, "x", final=True,
                                                         ledger=("obligation-2", 1, 0)))
        await adapter.close()
        return found, other

    found, other = asyncio.run(main())
    [copy] = mm.bot_posts(dm)
    assert found == copy["id"] and copy["message"] == "the final text", "found under a new fence, brought up to date"
    assert copy["props"] == {"gateway_part": "obligation-1.0"}
    assert other is None, "a part that never landed is not found"


def test_a_file_is_fetched_within_its_cap_and_one_gone_or_too_large_says_so(mm, tmp_path):
    adapter, _posts = make_adapter(mm, tmp_path)
    dm = mm.direct_channel("alice")
    data = bytes(range(256)) * 40
    [file_id] = mm.inject_post(dm, "alice", "a file", files=(("blob.bin", "application/octet-stream", data),))[
        "file_ids"]

    async def main():
        got = await adapter.download_attachment(Attachment("document", ref=file_id), len(data))
        with pytest.raises(AttachmentTooLarge):
            await adapter.download_attachment(Attachment("document", ref=file_id), len(data) - 1)
        with pytest.raises(AttachmentGone):
            await adapter.download_attachment(Attachment("document", ref="z" * 26), 1 << 20)
        with pytest.raises(AttachmentGone):
            await adapter.download_attachment(Attachment("document", ref="../../x"), 1 << 20)
        await adapter.close()
        return got

    assert asyncio.run(main()) == data


def test_the_bot_s_reaction_is_replaced_and_taken_back(mm, tmp_path):
    adapter, _posts = make_adapter(mm, tmp_path)
    dm = mm.direct_channel("alice")
    asked = mm.inject_post(dm, "alice", "question")

    def react(text):
        return PlatformOp(f"r-{text}", "react", dm, text, message_id=asked["id"])

    async def main():
        seen = []
        for text in ("👀", "👍", "👍", ""):
            await adapter.set_reaction(react(text))
            seen.append([r["emoji_name"] for r in mm.reactions(asked["id"])])
        with pytest.raises(PermanentError, match="no Mattermost emoji name"):
            await adapter.set_reaction(react("🦜"))
        await adapter.close()
        return seen

    assert asyncio.run(main()) == [["eyes"], ["+1"], ["+1"], []]
    assert [o["op"] for o in mm.ops(dm) if o["op"].endswith("reaction")] == [
        "add_reaction", "remove_reaction", "add_reaction", "remove_reaction"], "nothing asked twice"


def test_a_repeated_create_within_the_server_s_window_is_one_post_and_later_a_second(mm, tmp_path):
    """What the fake holds to (Mattermost's pending_post_id cache, 30 s): why the adapter does not declare
    idempotent sends and finds lost copies by their label instead."""
    adapter, _posts = make_adapter(mm, tmp_path)
    dm = mm.direct_channel("alice")
    op = PlatformOp("op-7", "send", dm, "once")

    async def main():
        first = await adapter.send_message(op)
        again = await adapter.send_message(op)
        mm.configure(pending_post_ttl=0.0)
        late = await adapter.send_message(op)
        await adapter.close()
        return first, again, late

    first, again, late = asyncio.run(main())
    assert first == again and late != first
    assert len(mm.bot_posts(dm)) == 2 and mm.stats()["pending_deduplicated"] == 1


# ------------------------------------------------------------------------------- the acceptance, in the daemon

def rows_of(gateway: Gateway, source) -> list | None:
    async def read():
        async with await Store.open(gateway.state / "gateway.db") as store:
            return await store.inbox.rows_in_state(session_key(source), ("received", "taken", "done", "dropped"))
    try:
        return asyncio.run(read())
    except StorageError:
        return None


def dm_source(fake: FakeMattermost, user: str):
    """How the adapter sees a DM from ``user`` (the session key is made from it)."""
    return event_from_post(raw_from_rest(post(channel=fake.direct_channel(user)), "D"), "mattermost", "default").source


def test_the_websocket_dropped_mid_answer_reconnects_fetches_what_was_missed_once_and_the_answer_completes_once(
        tmp_path):
    fake = FakeMattermost(port=0, state_file=str(tmp_path / "mattermost.json")).start()
    gateway = Gateway(tmp_path, watchdog_interval=30.0, extra_toml=f"""
[adapters.mattermost]
type = "mattermost"
access = "open"
base_url = "{fake.base_url}"
token = "{DEFAULT_TOKEN}"
ping_interval_s = 2.0
""")
    asker, other = fake.direct_channel("asker"), fake.direct_channel("other")
    try:
        gateway.start()
        gateway.wait_ready()
        wait_for(fake.open_connections, 30, 0.1, "the adapter's event stream")
        fake.inject_post(asker, "asker", "#slow 0.7 the question")
        wait_for(lambda: fake.bot_posts(asker), 30, 0.05, "the answer's first part")

        fake.refuse_websockets(True)
        assert fake.drop_websockets() == 1
        dropped_at = time.monotonic()          # the fake's op times are this process's monotonic clock
        missed = [fake.inject_post(other, "other", f"missed {i}") for i in range(2)]
        wait_for(lambda: fake.stats()["refused_upgrades"] >= 1, 30, 0.05, "a reconnection refused while down")
        fake.refuse_websockets(False)

        wait_for(lambda: fake.open_connections(), 30, 0.05, "the adapter reconnected")
        rows = wait_for(lambda: (r := rows_of(gateway, dm_source(fake, "other"))) and len(r) >= 2 and r, 30, 0.1,
                        "the missed posts in the inbox")
        assert sorted(r.platform_message_id for r in rows) == sorted(p["id"] for p in missed)
        assert all(fake.deliveries(p["id"]) == 0 for p in missed), "they came through REST, not the stream"
        asked = wait_for(lambda: (r := rows_of(gateway, dm_source(fake, "asker"))) and r[0].state == "done" and r,
                         60, 0.1, f"the answer to finish; bot posts {fake.bot_posts(asker)}")
        wait_for(lambda: all(r.state == "done" for r in rows_of(gateway, dm_source(fake, "other")) or [None]), 60,
                 0.1, "the missed posts answered")
        answers = [p for p in fake.bot_posts(asker) if not p["delete_at"]]
        assert len(asked) == 1 and len(answers) == 1, f"the answer completes once: {answers}"
        assert "the question" in answers[0]["message"] and "re-sent" not in answers[0]["message"].lower()
        assert any(o["at"] > dropped_at and o["status"] == 200 for o in fake.ops(asker, "patch_post")), \
            "the answer was still streaming when the stream dropped: edits went on meanwhile"
        assert len(rows_of(gateway, dm_source(fake, "other"))) == 2, "each missed post stored once"
        assert fake.stats()["posts_since_calls"] >= 1
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        fake.stop()


def test_doctor_asks_mattermost_whether_the_token_works(mm):
    from daemon.doctor_probes import probe_mattermost
    table = {"type": "mattermost", "base_url": mm.base_url}
    ok = asyncio.run(probe_mattermost("mm", registry.validate_adapter("mm", dict(table, token=DEFAULT_TOKEN))))
    assert ok.status == "ok" and f"@{BOT_USERNAME}" in ok.detail and "a bot account" in ok.detail, ok
    bad = asyncio.run(probe_mattermost("mm", registry.validate_adapter("mm", dict(table, token="revoked-token-1"))))
    assert bad.status == "fail" and "Mattermost refused the token" in bad.detail, bad
    assert "revoked-token-1" not in bad.detail

