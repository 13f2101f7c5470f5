"""Adapter conformance: every platform adapter, run in the REAL daemon against its fake platform, behaves the same.

One daemon per adapter (module scope, started once); each test uses its own chats, so tests do not see each other's
messages. The live session layer answers inbound messages through the adapter too: the outbound tests run first
(file order) and only assert on their own chats. Parametrised over ``harnesses.HARNESSES``, then over
``harnesses.VARIANTS`` (another table of a type, run only on the cases it changes: ``conformance_cases``).
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
import uuid

import pytest

from actors.adapters.pacing import DEFAULT_RESENT_MARKER as RESENT_MARKER
from actors.adapters.registry import REGISTRY, reply_pacing
from actors.messages import OpResult, OutgoingFile, PlatformOp
from storage import MediaCache, Store, StorageError, session_key
from tests.actors.media.fixtures import png
from common import config as config_mod
from daemon.admin import AdminClient
from daemon.asking import ask_for, listen_for
from tests.actor_system import wait_for
from tests.adapters.harnesses import HARNESSES, VARIANTS
from tests.gateway import Gateway, exited, nodes

pytestmark = pytest.mark.timeout(60)
ASK_S = 15.0
ALL_ANSWERED_S = 90.0


@pytest.fixture(scope="module", params=sorted(HARNESSES) + sorted(VARIANTS))
def rig(request, tmp_path_factory):
    workdir = tmp_path_factory.mktemp(f"conformance-{request.param}")
    platform = {**HARNESSES, **VARIANTS}[request.param](workdir)
    platform.start()
    # The watchdog is not under test here: on a loaded machine its short test deadlines can restart a slow actor
    # mid-test, so it walks the tree rarely; the suite itself caches the adapter's address for the same reason.
    gateway = Gateway(workdir, extra_toml=platform.adapter_toml(), watchdog_interval=30.0)
    previous_state_dir = os.environ.get("GATEWAY_STATE_DIR")
    try:
        gateway.start()
        gateway.wait_ready()
        os.environ["GATEWAY_STATE_DIR"] = str(gateway.state)  # AdminClient finds the daemon through it
        admin = AdminClient(config_mod.load(str(gateway.config)))
        yield Rig(platform, gateway, admin)
    finally:
        if previous_state_dir is None:
            os.environ.pop("GATEWAY_STATE_DIR", None)
        else:
            os.environ["GATEWAY_STATE_DIR"] = previous_state_dir
        gateway.cli("stop")
        gateway.kill_everything()
        platform.stop()


@pytest.fixture(autouse=True)
def variant_cases(request, rig):
    """A variant runs only the cases its table changes (the rest are its type's harness's, run already)."""
    cases = getattr(rig.platform, "conformance_cases", None)
    if cases is not None and request.node.originalname not in cases:
        pytest.skip(f"{rig.platform.adapter_type}-{rig.platform.variant}: its table changes nothing this case sees")


class Rig:
    def __init__(self, platform, gateway: Gateway, admin: AdminClient):
        self.platform, self.gateway, self.admin = platform, gateway, admin
        self.ref = self.adapter_node().ref   # refreshed after the adapter is restarted
        # The adapter's pacing as its table decides it (a DingTalk table with an AI card template edits).
        self.pacing = reply_pacing(config_mod.load(str(gateway.config)), platform.adapter_name,
                                   platform.adapter_type)

    def refresh(self) -> None:
        self.ref = self.adapter_node().ref

    def restart_daemon(self) -> None:
        """The daemon started again on its state directory (after a kill -9): a new admin connection (the admin
        port is the new launcher's), the harness told (its clients attached to the daemon that is gone attach
        again) and the adapter's new address, so the tests after this one run as before."""
        self.gateway.start()
        self.gateway.wait_ready(timeout=30)
        if (restarted := getattr(self.platform, "daemon_restarted", None)) is not None:
            restarted()
        self.admin = AdminClient(config_mod.load(str(self.gateway.config)))
        self.refresh()

    def obligations(self, chat: str):
        """The ledger's reply obligations to the chat; None while the database is busy (callers poll)."""
        chat_id = self.platform.source(chat).chat_id

        async def read():
            async with await Store.open(self.gateway.state / "gateway.db") as store:
                return await store.ledger.list(limit=10_000)
        try:
            return [o for o in asyncio.run(read())
                    if o.target.platform == self.platform.adapter_name and o.target.chat_id == chat_id]
        except StorageError:
            return None

    def adapter_node(self):
        """The adapter's TreeNode (ref = its current address). A supervisor slow to answer a walk shows its
        child's last known state without an address: walk again until the adapter answers for itself."""
        return wait_for(self._adapter_node_with_ref, 30, 0.1, f"adapter {self.platform.adapter_name} in the tree")

    def _adapter_node_with_ref(self):
        stack = [self.admin.tree()]
        while stack:
            node = stack.pop()
            if node.name == self.platform.adapter_name:
                return node if node.ref is not None else None
            stack.extend(node.children)
        return None

    def op(self, chat: str, action: str, text: str = "", message_id=None, file=None, final=False) -> OpResult:
        op = PlatformOp(op_id=uuid.uuid4().hex, action=action, chat_id=self.platform.source(chat).chat_id, text=text,
                        message_id=message_id, file=file, final=final)
        result = ask_for(self.admin.asys, self.ref, op, OpResult, ASK_S)
        assert result is not None and result.op_id == op.op_id, f"no OpResult for {op}"
        return result

    def rows(self, chat: str, user: str = "alice"):
        """Inbox rows of the session the chat maps to; None while the database is busy (callers poll)."""
        return session_rows(self.gateway, self.platform.source(chat, user))

    def total_rows(self) -> int | None:
        async def read():
            async with await Store.open(self.gateway.state / "gateway.db") as store:
                return sum((await store.inbox.counts()).values())
        try:
            return asyncio.run(read())
        except StorageError:
            return None

    def wait_rows(self, chat: str, count: int, timeout: float = 15.0) -> list:
        return wait_for(lambda: (rows := self.rows(chat)) is not None and len(rows) >= count and rows,
                        timeout, 0.05, f"{count} inbox row(s) for chat {chat}")


def session_rows(gateway: Gateway, source):
    """Inbox rows of the session ``source`` maps to, in the daemon's database; None while it is busy (callers
    poll)."""
    key = session_key(source)

    async def read():
        async with await Store.open(gateway.state / "gateway.db") as store:
            return await store.inbox.rows_in_state(key, ("received", "taken", "done", "dropped"))
    try:
        return asyncio.run(read())
    except StorageError:
        return None


def applicable(rig, aspect: str) -> None:
    """Skip a test of something the platform does not have at all (a harness's ``not_applicable``: IRC has no
    429 and no replays), saying why."""
    reason = getattr(rig.platform, "not_applicable", {}).get(aspect)
    if reason:
        pytest.skip(f"{rig.platform.adapter_type}: {reason}")


def new_chat(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------------------------ the adapter

def test_adapter_is_in_the_tree_and_running(rig):
    node = next(n for n in nodes(rig.gateway.tree()) if n["name"] == rig.platform.adapter_name)
    assert node["kind"] == rig.platform.adapter_kind and node["state"] == "running" and node["pid"]


# --------------------------------------------------------------------------------------------------- outbound

def capabilities(rig):
    """What the platform under test declares it can do (its platform.py), or what a variant's table lets its adapter
    do (its harness's ``declared_capabilities``): the cases below follow it."""
    declared = getattr(rig.platform, "declared_capabilities", None)
    return declared or REGISTRY[rig.platform.adapter_type].capabilities


def test_send_edit_delete_land_on_the_platform(rig):
    chat = new_chat("ops")
    if not capabilities(rig).delete:
        return sends_land_and_nothing_is_taken_back(rig, chat)
    edits = capabilities(rig).edit   # a platform without edits gets the final text only
    sent = rig.op(chat, "send", "first draft" if edits else "final text")
    assert sent.ok and sent.message_id
    if edits:
        assert rig.op(chat, "edit", "final text", sent.message_id).ok
    else:   # capability edit = false: a preview's edit is refused clearly (only a final text ever goes out)
        refused = rig.op(chat, "edit", "another text", sent.message_id)
        assert not refused.ok and refused.error_kind == "permanent" and refused.error
    assert rig.op(chat, "edit", "final text", sent.message_id, final=True).ok, "an edit to the same text is a success"
    second = rig.op(chat, "send", "to be deleted")
    assert second.ok and second.message_id != sent.message_id
    assert rig.op(chat, "delete", message_id=second.message_id).ok
    assert rig.platform.sent(chat) == [
        {"message_id": sent.message_id, "text": "final text", "deleted": False},
        {"message_id": second.message_id, "text": "to be deleted", "deleted": True}]
    if edits:
        gone = rig.op(chat, "edit", "too late", second.message_id)
        assert not gone.ok and gone.error_kind == "not_found"
    assert rig.op(chat, "typing").ok


def sends_land_and_nothing_is_taken_back(rig, chat: str) -> None:
    """A platform whose messages cannot be deleted (IRC; DingTalk, whose AI cards can be edited all the same): sends
    land in order with ids of their own, each changed by its edits where the platform has them; a final edit to the
    same text, or a delete, answers ok and changes nothing (the consumer and the sweeper send neither to a platform
    without them, but an operation that comes is answered)."""
    edits = capabilities(rig).edit
    sent = rig.op(chat, "send", "first draft" if edits else "final text")
    assert sent.ok and sent.message_id
    if edits:
        assert rig.op(chat, "edit", "final text", sent.message_id).ok
    assert rig.op(chat, "edit", "final text", sent.message_id, final=True).ok
    second = rig.op(chat, "send", "second message")
    assert second.ok and second.message_id != sent.message_id
    assert rig.op(chat, "delete", message_id=second.message_id).ok
    assert [m["text"] for m in rig.platform.sent(chat)] == ["final text", "second message"]
    assert rig.op(chat, "typing").ok


def test_a_file_is_sent_once_as_its_kind_or_the_platform_declares_it_takes_none(rig):
    if not capabilities(rig).files_out:
        pytest.skip(f"{rig.platform.adapter_type} declares no files (capability files_out): replies name them in "
                    "text")
    chat, data = new_chat("file"), png(48, 32)
    file = OutgoingFile(MediaCache(rig.gateway.state / "media").put(data), "image/png", "photo", "dot.png",
                        "a caption", len(data), 48, 32)
    sent = rig.op(chat, "send", file=file)
    assert sent.ok and sent.message_id
    wait_for(lambda: rig.platform.sent_files(chat), 15, 0.05, "the file on the platform")
    assert rig.platform.sent_files(chat) == [{"message_id": sent.message_id, "kind": "photo",
                                              "sha256": file.cache_key}]
    swept = rig.op(chat, "send", file=dataclasses.replace(file, cache_key="0" * 64))   # gone from the cache
    assert not swept.ok and swept.error_kind == "permanent" and len(rig.platform.sent_files(chat)) == 1


def test_an_inbound_file_is_cached_and_typed_by_its_bytes_or_the_platform_declares_it_takes_none(rig):
    if not capabilities(rig).files_in:
        pytest.skip(f"{rig.platform.adapter_type} declares no inbound files (capability files_in)")
    if not hasattr(rig.platform, "inject_file"):
        pytest.skip(f"{rig.platform.adapter_type}'s files arrive on an endpoint this harness does not drive "
                    "(tests/http covers them)")
    chat, data = new_chat("upload"), png(48, 32)
    rig.platform.inject_file(chat, data, "a photo")
    (row,) = rig.wait_rows(chat, 1, timeout=30)
    (attachment,) = row.payload["attachments"]
    assert attachment["state"] == "cached" and attachment["mime"] == "image/png", attachment
    assert attachment["kind"] == "photo" and attachment["size"] == len(data)
    assert MediaCache(rig.gateway.state / "media").read(attachment["cache_key"]) == data
    # Its turn answers it: done before the next test, which counts the adapter's pending operations.
    wait_for(lambda: (rows := rig.rows(chat)) and rows[0].state == "done", 60, 0.1, "the photo's turn to finish")


def test_a_reaction_lands_on_the_users_message_or_is_refused_where_the_platform_has_none(rig):
    chat = new_chat("react")
    if not capabilities(rig).reactions:   # the session never asks (reply_status.py); one that comes is refused
        sent = rig.op(chat, "send", "a message to react to")
        refused = rig.op(chat, "react", "👍", sent.message_id)
        assert not refused.ok and refused.error_kind == "permanent" and refused.error, refused
        return
    handle = rig.platform.inject(chat, "react to me")
    [row] = rig.wait_rows(chat, 1)
    assert rig.op(chat, "react", "🔥", row.platform_message_id).ok
    assert ["🔥"] in rig.platform.bot_reactions(chat, handle)
    assert rig.op(chat, "react", "", row.platform_message_id).ok, "a reaction is taken away with an empty one"
    assert rig.platform.bot_reactions(chat, handle)[-1] == []
    # Its turn answers it: done before a later test counts the adapter's pending operations.
    wait_for(lambda: (rows := rig.rows(chat)) and rows[0].state == "done", 60, 0.1, "the message's turn to finish")


def test_text_over_the_limit_fails_with_too_long(rig):
    chat = new_chat("long")
    result = rig.op(chat, "send", "x" * (rig.platform.text_limit + 1))
    assert not result.ok and result.error_kind == "too_long" and result.error
    assert rig.platform.sent(chat) == []


def test_a_429_storm_is_waited_out_and_the_op_succeeds(rig):
    applicable(rig, "floods")
    chat = new_chat("flood")
    retry_after = 0.4
    rig.platform.script_floods(3, retry_after)
    try:
        result = rig.op(chat, "send", "after the storm")
    finally:
        rig.platform.clear_faults()
    assert result.ok and result.message_id
    attempts = rig.platform.attempts(chat, "send")
    assert [a["status"] for a in attempts][-1] == 200 and any(a["status"] == 429 for a in attempts)
    for before, after in zip(attempts, attempts[1:]):
        if before["status"] == 429:  # nothing went to the chat before the time the platform named
            assert after["at"] - before["at"] >= retry_after - 0.06, attempts
    assert rig.platform.flood_violations() == 0
    assert [m["text"] for m in rig.platform.sent(chat)] == ["after the storm"]


def test_ops_of_one_chat_run_in_order(rig):
    chat, other = new_chat("order"), new_chat("order")
    asys, ref = rig.admin.asys, rig.ref
    ops = [PlatformOp(op_id=f"{target}-{i}", action="send", chat_id=rig.platform.source(target).chat_id,
                      text=f"message {i}") for i in range(8) for target in (chat, other)]
    for op in ops:
        asys.tell(ref, op)
    # Sixteen sends at the platform's per-chat pace: one deadline for them all, sized for a loaded machine (a
    # pause between two answers is no failure; an answer that never comes is).
    wanted, results, deadline = {op.op_id for op in ops}, {}, time.monotonic() + ALL_ANSWERED_S
    while len(results) < len(ops) and (left := deadline - time.monotonic()) > 0:
        result = listen_for(asys, OpResult, min(ASK_S, left))
        if result is not None and result.op_id in wanted:
            results[result.op_id] = result
    missing = sorted(wanted - set(results))
    assert not missing, (f"{len(results)} of {len(ops)} answered within {ALL_ANSWERED_S:.0f} s; not {missing}; "
                         f"the platform shows {[m['text'] for m in rig.platform.sent(chat)]} and "
                         f"{[m['text'] for m in rig.platform.sent(other)]}")
    assert all(r.ok for r in results.values())
    for target in (chat, other):
        assert [m["text"] for m in rig.platform.sent(target)] == [f"message {i}" for i in range(8)]
    assert rig.adapter_node().pending == 0


# ---------------------------------------------------------------------------------------------------- inbound

def test_inbound_message_becomes_one_inbox_row_and_rings_its_session(rig):
    chat = new_chat("in")
    handle = rig.platform.inject(chat, "hello gateway")
    [row] = rig.wait_rows(chat, 1)
    assert row.session_key == session_key(rig.platform.source(chat))
    assert row.platform == rig.platform.adapter_name
    assert row.platform_message_id == rig.platform.platform_message_id(handle)
    assert row.payload["text"] == "hello gateway"
    assert row.payload["source"]["chat_id"] == rig.platform.source(chat).chat_id
    # The doorbell: the session supervisor spawns the session, which takes the row (no start-up scan covers it).
    wait_for(lambda: (rows := rig.rows(chat)) and rows[0].state != "received", 15, 0.05, "the session to take it")


def test_replayed_message_is_deduplicated(rig):
    applicable(rig, "replay")
    chat = new_chat("replay")
    first = rig.platform.inject(chat, "only once")
    rig.wait_rows(chat, 1)
    again = rig.platform.replay(first)
    wait_for(lambda: rig.platform.acknowledged(again), 15, 0.05, "the replay to be acknowledged")
    rows = rig.rows(chat)
    assert len(rows) == 1 and rows[0].platform_message_id == rig.platform.platform_message_id(first)


def test_malformed_payload_is_rejected_and_logged_and_the_adapter_stays_up(rig):
    applicable(rig, "malformed")
    pid = rig.adapter_node().pid
    # None while the database is busy; 0 is a count (this test may be the module's first)
    before = wait_for(lambda: (count := rig.total_rows()) is not None and (count,), 30, 0.05, "inbox counts")[0]
    handle, reason = rig.platform.inject_malformed()
    # Deadlines for a loaded machine: a mail's payload comes by IMAP IDLE and a fetch, not in the push's answer.
    wait_for(lambda: rig.platform.acknowledged(handle), 60, 0.05, "the malformed payload to be acknowledged")
    line = wait_for(lambda: next((l for l in rig.gateway.log().splitlines() if "malformed payload" in l), None),
                    30, 0.05, "the log line")
    assert "WARNING" in line and rig.platform.adapter_name in line and reason in line
    assert rig.total_rows() == before
    chat = new_chat("after-bad")
    rig.platform.inject(chat, "still listening")
    rig.wait_rows(chat, 1)
    assert rig.adapter_node().pid == pid


@pytest.mark.timeout(180)
def test_reconnects_after_the_platform_drops_every_connection(rig):
    pid = rig.adapter_node().pid
    rig.platform.drop_connection()
    chat = new_chat("reconnect")
    rig.platform.inject(chat, "are you back?")
    # A reconnect that finds the platform still restarting backs off before it tries again (up to the kit's 30 s
    # between tries): a deadline for a loaded machine, inside the test's own timeout (a crash instead of a retry
    # fails the pid check below, whatever the time).
    rig.wait_rows(chat, 1, timeout=120)
    assert rig.adapter_node().pid == pid, "a dropped connection is retried, not a crash"
    assert rig.op(chat, "send", "yes").ok


def test_kill_9_restarts_the_adapter_and_what_came_meanwhile_arrives_once(rig):
    old = next(n for n in nodes(rig.gateway.tree()) if n["name"] == rig.platform.adapter_name)
    os.kill(old["pid"], signal.SIGKILL)
    # Sent once the process is dead (its sockets closed), as a message sent "while the adapter was dead" is: sent
    # in the instant between the signal and the process's end, a push platform (Signal's SSE) may still write it
    # into the connection of a process about to vanish, a message the real platform would lose the same way.
    wait_for(lambda: exited(old["pid"]), 15, 0.01, f"the killed adapter process {old['pid']} to exit")
    chat = new_chat("killed")
    handle = rig.platform.inject(chat, "sent while the adapter was dead")
    new = wait_for(lambda: (n := rig.gateway.node(rig.platform.adapter_name)) and n["pid"] != old["pid"]
                   and n["state"] == "running" and n, 20, 0.05, "the adapter back")
    assert new["restarts"] == old["restarts"] + 1
    rig.refresh()
    try:
        rig.wait_rows(chat, 1, timeout=30)
    except AssertionError as exc:   # where the platform's fake can say what became of the message, it is said
        fate = rig.platform.fate(handle) if hasattr(rig.platform, "fate") else "(its fake does not say)"
        raise AssertionError(f"{exc}; the message on the platform: {fate}") from None
    wait_for(lambda: rig.platform.acknowledged(handle), 15, 0.05, "the message to be acknowledged")
    # Acknowledged = polled past it, which the adapter does only after the round's rows and offset committed:
    # no later delivery of this message can exist, so the count is final.
    assert len(rig.rows(chat)) == 1
    assert rig.op(chat, "send", "still here").ok


# ----------------------------------------------------------------------------------- a reply through kills

CURSOR = "\u258d"
# About 14 s of previews (a tree walk is slow). The offline agent quotes a question's first 40 characters: the hooks
# come after them, so the uninterrupted reply it is compared with (CONTROL_QUESTION) is the same text, streamed fast.
KILLED_QUESTION = "answer at length, through two shard kills #long 700 #slow 0.5"
CONTROL_QUESTION = "answer at length, through two shard kills #long 700 #slow 0.02"


def visible(rig, chat: str) -> list[str]:
    """The texts the chat shows now: every edit applied, deleted messages left out (the harness's ``sent``)."""
    return [m["text"] or "" for m in rig.platform.sent(chat) if not m["deleted"]]


def settled_text(rig, chat: str, timeout: float) -> list[str]:
    return wait_for(lambda: (texts := visible(rig, chat)) and not any(CURSOR in t for t in texts) and texts,
                    timeout, 0.1, f"the reply in {chat} without its streaming cursor")


def shard_pids(rig, other_than: tuple = ()) -> tuple:
    """The session shards' pids, once every shard runs with a pid not in ``other_than`` (the ones killed)."""
    def running():
        shards = [n for n in nodes(rig.gateway.tree()) if n["kind"] == "SessionShard"]
        pids = tuple(n["pid"] for n in shards if n["pid"] and n["state"] in ("running", "busy"))
        return shards and len(pids) == len(shards) and not set(pids) & set(other_than) and pids
    return wait_for(running, 60, 0.1, "every session shard running")


@pytest.mark.timeout(300)
def test_a_reply_whose_shard_is_killed_mid_stream_twice_shows_its_whole_answer_once(rig):
    """G3 as a user sees it: the reply's consumer dies with its shard while previews are being edited, twice; each
    new life resumes the turn and edits the same message. What the chat shows at the end (every edit applied) is
    the whole answer, once: the same text a reply that was never interrupted shows. A new life that reused an
    earlier life's operation ids would have an edit refused by the adapter (or, on a platform that deduplicates by
    key, taken for a retry and dropped), leaving a preview."""
    if not rig.pacing.supports_edit:
        pytest.skip(f"{rig.platform.adapter_type} has no edits: its replies are sent once, final")
    control, chat = new_chat("calm"), new_chat("killed-reply")
    rig.platform.inject(control, CONTROL_QUESTION)
    [answer] = settled_text(rig, control, 120)
    assert len(answer) >= 600, answer   # the whole #long answer, as this platform shows it
    pids, shown_before = shard_pids(rig), None
    rig.platform.inject(chat, KILLED_QUESTION)
    for kill in range(2):
        # A preview (of the resumed turn, after the first kill: another text than the one the kill left)
        try:
            shown_before = wait_for(lambda: (texts := visible(rig, chat)) and CURSOR in texts[0]
                                    and texts[0] != shown_before and texts[0], 60, 0.05,
                                    f"a preview before kill {kill + 1}")
        except AssertionError as exc:
            log = [line for line in rig.gateway.log().splitlines() if "WARN" in line or "ERROR" in line][-15:]
            raise AssertionError(f"{exc}; shown: {[t[-40:] for t in visible(rig, chat)]}\n" + "\n".join(log)) from None
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        pids = shard_pids(rig, other_than=pids)
    try:
        shown = settled_text(rig, chat, 120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; shown: {[t[-40:] for t in visible(rig, chat)]}") from None
    assert shown == [answer], f"{len(shown)} message(s): {[t[-60:] for t in shown]}"


# --------------------------------------------------------------------------------------------------- delivery
# Last in the file: it kills the daemon with -9 and starts it again (Rig.restart_daemon, after which a test below it
# would find the rig as before). Near the end of the offline agent's every answer (its configuration help): a copy
# showing it is complete.
REPLY_TAIL = "OPENAI_API_KEY"


def test_kill_9_between_a_send_and_its_record_shows_the_reply_once_or_marked(rig):
    """G3 across kill -9 (actors/sessions/stream_consumer.py, the ambiguous send): the reply's first send reaches
    the platform and the daemon is killed before the platform's answer (its message id) is recorded. After the
    restart the reply is finished from the ledger, and what the chat shows follows the platform's declaration: with
    an idempotency key (capability idempotent_send) the send repeated under the same key shows once; where the
    adapter can find the lost copy (pacing finds_lost_copies, in a DM) that copy becomes the reply, shown once;
    otherwise the copy stays and the reply comes again with the visible re-sent mark. Never two unmarked copies,
    never none."""
    kind = rig.platform.adapter_type
    if not hasattr(rig.platform, "hold_next_send"):
        pytest.fail(f"{kind}: its harness cannot hold the answer to a send (hold_next_send, send_held, release_send "
                    f"in tests/adapters/harnesses/{kind}.py), so the delivery case cannot run for it: add the hold "
                    f"to its fake, in the platform's wire format (or, where the adapter is the platform, arm the "
                    f"kit's: HoldNextSend, actors/adapters/send_hold.py)")
    declared, pacing = capabilities(rig), rig.pacing
    chat, token = new_chat("lost-send"), f"survive{uuid.uuid4().hex[:8]}"
    rig.platform.hold_next_send(chat)
    try:
        rig.platform.inject(chat, f"answer me across a kill -9 {token}")
        wait_for(rig.platform.send_held, 30, 0.02, "the reply's first send on the platform, its answer held")
        os.kill(rig.gateway.launcher_pid, signal.SIGKILL)
        rig.gateway.assert_no_process_left()
    finally:
        rig.platform.release_send()      # into a dead connection: the gateway never hears it
    assert rig.platform.sent(chat), "the held send is on the platform"
    rig.restart_daemon()
    seen = []
    try:
        wait_for(lambda: seen.append(rig.obligations(chat)) or (seen[-1] and all(
            o.state in ("delivered", "abandoned") for o in seen[-1])), 40, 0.1, "the reply finished after the restart")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {seen[-1]}; the chat shows {rig.platform.sent(chat)}") from None
    [obligation] = seen[-1]
    shown = [m for m in rig.platform.sent(chat) if not m["deleted"]]
    assert obligation.state == "delivered", (obligation, shown)
    marked = [i for i, m in enumerate(shown) if RESENT_MARKER in m["text"]]
    texts = [m["text"][:60] for m in shown]
    if declared.idempotent_send or pacing.finds_lost_copies:
        how = (f"repeated under its {declared.idempotent_send}" if declared.idempotent_send
               else "its lost copy found (finds_lost_copies)")
        assert not marked, f"{kind}: the send {how} needs no mark: {texts}"
        assert [m["message_id"] for m in shown] == list(obligation.parts.values()), (
            f"{kind}: the send {how} shows once: the chat shows the reply's recorded parts and nothing else: "
            f"{texts}, parts {obligation.parts}")
        reply = shown
    else:
        # The reply from its mark on (a platform that splits a text into lines, IRC, shows its parts after it).
        assert len(marked) == 1, f"{kind}: no idempotency key, so the reply is re-sent with the mark, once: {texts}"
        assert marked == [1], f"{kind}: the lost send's copy stays above the marked reply, alone: {texts}"
        reply = shown[1:]
    text = "\n".join(m["text"] for m in reply)
    assert text.count(token) == 1 and REPLY_TAIL in text, f"the whole reply, once: {text!r}"
    assert rig.op(chat, "send", "still here").ok, "the adapter answers after the restart"
