"""Malformed payloads through every adapter's real wire, into the real daemon: one gateway runs them all.

Per adapter: a batch of payloads that hypothesis generated from the property tests' strategies, kept only where the
adapter's pure validation refuses them, goes out over the platform's own wire (the fake platform's and the fake
Telegram's update queues, Telegram webhook pushes and direct POSTs, web chat frames, signed webhooks and /v1
requests, terminal lines through the admin port); then one valid message. Checked: the valid one is answered, the
adapter was never restarted (same pid, restarts 0), each malformed payload left one warning naming the adapter and
the reason, no traceback reached the log, and the inbox grew by the valid message only.
"""
from __future__ import annotations

import asyncio
import json
import os
import uuid

import aiohttp
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.intake import NotAddressed
from actors.adapters.http import openai_api
from actors.adapters.http.signing import SIGNATURE_HEADER, sign, signed_headers
from actors.adapters.telegram.inbound import is_input
from actors.adapters.telegram.webhook import SECRET_HEADER
from actors.adapters.webchat.protocol import DEBUG_TYPES, FrameError, parse_frame
from actors.messages import CliSay
from storage import Store, StorageError
from common import config as config_mod
from supervision import tree as tree_mod
from daemon.admin import AdminClient
from tests.actor_system import free_port, wait_for
from tests.gateway import Gateway, nodes
from tests.webchat.client import issued_cookie
from tests.fakes.fakeplatform import FakePlatform
from tests.fakes.telegram import FakeTelegram
from tests.fuzz import test_props_polling as polling
from tests.fuzz import test_props_push as push
from tests.fuzz.strategies import LONG_EXAMPLES, broken, daemon_batch, json_value, tally
from tests.fuzz.test_props_wire import LoopThread
from tests.pipeline.harness import settled_answers

pytestmark = pytest.mark.timeout(600 if LONG_EXAMPLES else 120)
BATCH = daemon_batch(12)
HOOK_SECRET, HMAC_SECRET, API_TOKEN = "fuzz_hook_secret_1", "fuzz-hmac-secret", "fuzz-api-token-1"
SECOND_BOT_TOKEN = "987654321:TEST-second-fake-token-BBBBBBBBBBBBBBBBBBBB"


def rejected_samples(strategy, refused, count: int, seed: int) -> list:
    """``count`` values of ``strategy`` that ``refused`` says the adapter must reject, drawn by hypothesis."""
    found: list = []

    @settings(max_examples=count * 20, database=None, deadline=None, phases=[Phase.generate],
              derandomize=not LONG_EXAMPLES, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        if len(found) < count and refused(value):
            found.append(value)
    collect.hypothesis.inner_test.__name__ = f"collect_{seed}"
    collect()
    assert len(found) >= count // 2, f"only {len(found)} rejected samples"
    return found


def refused_by(adapter, prepare=lambda raw: raw):
    def refused(raw) -> bool:
        try:
            adapter.intake.item(prepare(raw))
        except MalformedPayload:
            return True
        except NotAddressed:   # valid, and skipped by design: not a malformed payload
            return False
        return False
    return refused


# --------------------------------------------------------------------------------------------------- the rig
class Rig:
    def __init__(self, workdir):
        self.fake = FakePlatform(state_file=str(workdir / "fake.json")).start()
        self.tg = FakeTelegram(state_file=str(workdir / "tg.json"), time_scale=0.05).start()
        self.tghook = FakeTelegram(state_file=str(workdir / "tghook.json"), token=SECOND_BOT_TOKEN,
                                   time_scale=0.05).start()
        self.web_port, self.http_port, self.hook_port = free_port(), free_port(), free_port()
        self.gateway = Gateway(workdir, watchdog_interval=30.0, extra_toml=f"""
[adapters.fake]
type = "fake"
base_url = "{self.fake.base_url}"
poll_timeout_s = 0.5
[adapters.tg]
type = "telegram"
access = "open"
pacing = {{ per_chat_ops_per_s = 50.0, per_chat_burst = 50, edit_interval_s = 0.05 }}
token = "{self.tg.token}"
base_url = "{self.tg.base_url}"
poll_timeout_s = 1.0
[adapters.tghook]
type = "telegram"
access = "open"
pacing = {{ per_chat_ops_per_s = 50.0, per_chat_burst = 50, edit_interval_s = 0.05 }}
token = "{self.tghook.token}"
base_url = "{self.tghook.base_url}"
mode = "webhook"
webhook_port = {self.hook_port}
webhook_path = "/tg"
webhook_secret = "{HOOK_SECRET}"
[adapters.web]
type = "webchat"
port = {self.web_port}
[adapters.http]
type = "http"
port = {self.http_port}
hmac_secret = "{HMAC_SECRET}"
callback_url = "http://127.0.0.1:9/unused"
api_tokens = ["{API_TOKEN}"]
reply_timeout_s = 60.0
[agent]
chunk_delay_s = 0.0
""")
        self.loop = LoopThread()

    def close(self):
        self.gateway.cli("stop")
        self.gateway.kill_everything()
        for server in (self.fake, self.tg, self.tghook):
            server.stop()
        self.loop.close()

    def adapter(self, name: str) -> dict:
        return next(n for n in nodes(self.gateway.tree()) if n["name"] == name)

    def total_rows(self):
        async def read():
            async with await Store.open(self.gateway.state / "gateway.db") as store:
                return sum((await store.inbox.counts()).values())
        try:
            return asyncio.run(read())
        except StorageError:
            return None

    def rows(self) -> int:
        return wait_for(lambda: (n := self.total_rows()) is not None and (n,), 10, 0.05, "the inbox")[0]

    def rejections(self, name: str) -> int:
        return sum(1 for line in self.gateway.log().splitlines()
                   if f" {name}: malformed payload rejected" in line or f" {name}: refused" in line)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    rig = Rig(tmp_path_factory.mktemp("fuzz-daemon"))
    previous = os.environ.get("GATEWAY_STATE_DIR")
    try:
        rig.gateway.start()
        rig.gateway.wait_ready()
        os.environ["GATEWAY_STATE_DIR"] = str(rig.gateway.state)   # AdminClient finds the daemon through it
        yield rig
    finally:
        if previous is None:
            os.environ.pop("GATEWAY_STATE_DIR", None)
        else:
            os.environ["GATEWAY_STATE_DIR"] = previous
        rig.close()


class Round:
    """Before and after one adapter's batch: pid, restarts, rejection lines and inbox rows."""

    def __init__(self, rig: Rig, name: str):
        self.rig, self.name = rig, name
        self.node = rig.adapter(name)
        self.lines, self.rows = rig.rejections(name), rig.rows()

    def check(self, malformed: int, valid: int = 1) -> None:
        rig = self.rig
        wait_for(lambda: rig.rejections(self.name) >= self.lines + malformed, 30, 0.1,
                 f"{malformed} rejection lines of {self.name}")
        assert rig.rejections(self.name) == self.lines + malformed
        assert rig.rows() == self.rows + valid, "a malformed payload reached the inbox"
        node = rig.adapter(self.name)
        assert node["pid"] == self.node["pid"] and node["restarts"] == 0 and node["state"] == "running", node
        assert "Traceback" not in rig.gateway.log()
        for _ in range(malformed):
            tally(f"{self.name} (daemon)", "rejected")


# ------------------------------------------------------------------------------------------------- adapters
def test_fake_platform(rig):
    samples = rejected_samples(polling.fake_update.filter(lambda u: isinstance(u, dict)) | json_value.filter(
        lambda v: isinstance(v, dict)), refused_by(polling.fake_adapter()), BATCH, 1)
    round_ = Round(rig, "fake")
    with rig.fake.mutate() as state:
        for raw in samples:
            state["updates"].append(dict(raw, id=state["next_update_id"]))
            state["next_update_id"] += 1
    chat = f"valid-{uuid.uuid4().hex[:6]}"
    rig.fake.inject(chat, "hello after the noise")
    settled_answers(rig.fake, chat, gw=rig.gateway)
    round_.check(len(samples))


def _telegram_samples(seed: int) -> list:
    adapter = polling.telegram_adapter()
    strategy = polling.tg_update | broken(polling.tg_update)
    # Telegram sends nothing near the webhook's 1 MB body limit (texts are 4096 characters at most); the one
    # oversized body is posted directly, below, where its refusal is checked.
    realistic = strategy.filter(lambda u: isinstance(u, dict) and is_input(u) and len(json.dumps(u)) < 500_000)
    return rejected_samples(realistic, refused_by(adapter), BATCH, seed)


def _queue(server: FakeTelegram, samples: list) -> None:
    with server.mutate() as state:
        for raw in samples:
            state["updates"].append(dict(raw, update_id=state["next_update_id"]))
            state["next_update_id"] += 1


def _answered(server: FakeTelegram, text: str) -> None:
    chat = 5_000_000 + int(uuid.uuid4().hex[:5], 16)
    server.inject_message(text, chat_id=chat)
    wait_for(lambda: any(m["text"] for m in server.messages(chat)), 30, 0.1, "the bot's answer on Telegram")


def test_telegram_polling(rig):
    samples = _telegram_samples(2)
    round_ = Round(rig, "tg")
    _queue(rig.tg, samples)
    _answered(rig.tg, "hello after the noise")
    round_.check(len(samples))


def test_telegram_webhook(rig):
    samples = _telegram_samples(3)
    round_ = Round(rig, "tghook")
    _queue(rig.tghook, samples)      # pushed by the fake Bot API to the adapter's webhook, one by one
    url = f"http://127.0.0.1:{rig.hook_port}/tg"
    direct = [(b"{}", "wrong"), (b"{}", None), (b"not json", HOOK_SECRET), (b"[" * 5000 + b"]" * 5000, HOOK_SECRET),
              (b"\xff\xfe", HOOK_SECRET), (json.dumps(samples[0]).encode()[:9], HOOK_SECRET),
              (b'{"x": "' + b"y" * 2_000_000 + b'"}', HOOK_SECRET)]
    statuses = rig.loop.run(_post_all(url, [(body, {SECRET_HEADER: secret}) for body, secret in direct]))
    assert all(status in (400, 401, 413) for status in statuses), statuses
    _answered(rig.tghook, "hello after the noise")
    round_.check(len(samples) + len(direct))


# ------------------------------------------------------------------------------------------------- web chat
def _frame_refused(adapter):
    def refused(data) -> bool:
        try:
            frame = parse_frame(data)
        except FrameError:
            return True
        if frame["type"] in DEBUG_TYPES:
            return True                # fault injection is off in this gateway
        if frame["type"] != "message":
            return False
        return refused_by(adapter)({"visitor": "fuzz-visitor-1", "id": frame.get("id"), "text": frame.get("text")})
    return refused


def _sendable(data) -> bool:
    try:
        return isinstance(data, bytes) or bool(data.encode("utf-8")) or True
    except UnicodeEncodeError:
        return False


async def _webchat(port: int, frames: list, visitor: str) -> tuple[list, dict]:
    replies = []
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/ws?visitor=bad%20id") as refused:
            assert refused.status == 400   # a client-chosen visitor
        cookie = await issued_cookie(session, f"http://127.0.0.1:{port}", visitor)
        async with session.ws_connect(f"http://127.0.0.1:{port}/ws", max_msg_size=0, headers=cookie) as ws:
            assert (await ws.receive_json(timeout=10))["type"] == "hello"
            for data in frames:
                await (ws.send_bytes(data) if isinstance(data, bytes) else ws.send_str(data))
                replies.append(await ws.receive_json(timeout=10))
            await ws.send_str(json.dumps({"type": "message", "id": "valid-1", "text": "hello after the noise"}))
            while True:
                frame = await ws.receive_json(timeout=30)
                if frame["type"] == "op" and frame.get("final") and frame["action"] in ("send", "edit"):
                    return replies, frame


def test_webchat(rig):
    strategy = st.one_of(push.wire_text, st.binary(max_size=32)).filter(_sendable)
    samples = rejected_samples(strategy, _frame_refused(push.webchat_adapter()), BATCH, 4)
    round_ = Round(rig, "web")
    replies, answer = rig.loop.run(_webchat(rig.web_port, samples, f"fuzz-{uuid.uuid4().hex[:8]}"), timeout=120)
    assert all(r["type"] == "error" and r["error"] for r in replies), replies
    assert answer["text"]
    round_.check(len(samples) + 1)     # + the connection with a bad visitor id


# ------------------------------------------------------------------------------------------------------ http
async def _post_all(url: str, requests: list) -> list[int]:
    statuses = []
    async with aiohttp.ClientSession() as session:
        for body, headers in requests:
            headers = {k: v for k, v in headers.items() if v is not None}
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                statuses.append(response.status)
    return statuses


def test_http_api(rig):
    adapter = push.http_adapter()
    webhook_bodies = rejected_samples(push.payloads(push.webhook_body), refused_by(
        adapter, lambda body: {"origin": "webhook", "body": body}), BATCH // 2, 5)

    def api_refused(body) -> bool:
        try:
            request = openai_api.parse_chat_request(body)
        except openai_api.BadRequest:
            return True
        return refused_by(adapter)({"origin": "api", "chat_id": f"v1:x:user:{request.user}", "user_id": "u",
                                    "message_id": "m", "text": request.text})
    api_bodies = rejected_samples(push.payloads(push.chat_body), api_refused, BATCH // 2, 6)
    base = f"http://127.0.0.1:{rig.http_port}"
    hook = []
    for body in webhook_bodies:
        data = json.dumps(body).encode()
        hook.append((data, {**signed_headers(HMAC_SECRET, data), "Content-Type": "application/json"}))
    hook += [(b"{}", signed_headers("wrong", b"{}")), (b"{}", {}), (b"[" * 5000, {
        **signed_headers(HMAC_SECRET, b"[" * 5000), "Content-Type": "text/plain"}),
        (b"{}", {SIGNATURE_HEADER: sign(HMAC_SECRET, b"{}", 0), "X-Signature-Timestamp": "0"})]
    api = [(json.dumps(body).encode(), {"Authorization": f"Bearer {API_TOKEN}"}) for body in api_bodies]
    api += [(b'{"messages": [{"role": "user", "content": "hi"}]}', {"Authorization": "Bearer wrong"}),
            (b'{"messages": [', {"Authorization": f"Bearer {API_TOKEN}"})]
    round_ = Round(rig, "http")
    statuses = rig.loop.run(_post_all(f"{base}/webhook", hook), 120)
    statuses += rig.loop.run(_post_all(f"{base}/v1/chat/completions", api), 120)
    assert all(status in (400, 401) for status in statuses), statuses
    answer = rig.loop.run(_chat(base), 60)
    assert answer["choices"][0]["message"]["content"]
    round_.check(len(hook) + len(api))


async def _chat(base: str) -> dict:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base}/v1/chat/completions", headers={"Authorization": f"Bearer {API_TOKEN}"},
                                json={"messages": [{"role": "user", "content": "hello after the noise"}]}) as resp:
            assert resp.status == 200, await resp.text()
            return await resp.json()


# -------------------------------------------------------------------------------------------------- terminal
def test_cli(rig):
    def refused(say) -> bool:
        try:
            push.cli_event(say, "cli", "default")
        except MalformedPayload:
            return True
        return False
    strategy = st.builds(CliSay, st.one_of(push.plain_text, json_value), st.one_of(push.plain_text, json_value),
                         st.one_of(push.plain_text, json_value))
    samples = rejected_samples(strategy, refused, BATCH, 7)
    admin = AdminClient(config_mod.load(str(rig.gateway.config)))
    cli_ref = next(n.ref for n, _, _ in tree_mod.walk(admin.tree()) if n.kind == "CliAdapter")
    round_ = Round(rig, "cli")
    for say in samples:
        admin.asys.tell(cli_ref, say)
    result = rig.gateway.cli("chat", "--message", "hello after the noise", timeout=60)
    assert result.returncode == 0 and result.stdout.strip(), result
    round_.check(len(samples))
