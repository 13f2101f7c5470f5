"""The http adapter without an actor system: its server on a plain event loop, the test playing the stream consumer
(platform operations) and the session (marking inbox rows done). Covers what the daemon cannot show on demand:
streaming previews, rewrites, timeouts, client disconnects, drain and stop."""
from __future__ import annotations

import asyncio
import json

import aiohttp
import openai
import pytest

from actors.adapters import base, registry
from actors.adapters.http.adapter import HttpApiAdapter
from actors.adapters.http.replies import ReplyBook
from actors.adapters.http.signing import signed_headers
from actors.messages import PlatformOp

pytestmark = pytest.mark.timeout(30)
TOKEN, SECRET = "in-process-token-123", "in-process-secret"


class Posts:
    """Stands in for the bridge; tells the test when the intake is up."""

    def __init__(self):
        self.items, self.connected = [], asyncio.Event()

    def post(self, item):
        self.items.append(item)
        if isinstance(item, base.IntakeConnected):
            self.connected.set()

    def lines(self) -> list[str]:
        return [i.text for i in self.items if isinstance(i, base.LogLine)]


class OpenedBook(ReplyBook):
    """Hands every request whose row is stored to the test, which then answers it like the gateway would."""

    def __init__(self):
        super().__init__()
        self.opened: asyncio.Queue = asyncio.Queue()

        self.idle = asyncio.Event()

    def open(self, chat_id, inbound_id):
        self.idle.clear()
        return super().open(chat_id, inbound_id)

    def stored(self, watch, seq):
        super().stored(watch, seq)
        self.opened.put_nowait(watch)

    def close(self, watch):
        super().close(watch)
        if not self.waiting():
            self.idle.set()


class Rig:
    def __init__(self, tmp_path, **settings):
        adapter = self.adapter = HttpApiAdapter()
        adapter.name = "api"
        fast = {"per_chat_ops_per_s": 100.0, "per_chat_burst": 100}   # the http pacing's budget is not under test
        adapter.settings = registry.validate_adapter("api", {"type": "http", "port": 0, "hmac_secret": SECRET,
                                                             "api_tokens": [TOKEN], "pacing": fast, **settings})
        adapter.configure(adapter.settings)
        adapter.profile = adapter.settings["profile"]
        adapter.pacing = registry.pacing_of(adapter.settings)
        adapter.config = {"gateway": {"state_dir": str(tmp_path)}, "storage": {"durability": "normal"},
                          "profiles": {"work": {}}}
        adapter.replies = self.book = OpenedBook()
        adapter._loop_bridge = self.posts = Posts()
        self.ops = 0

    async def __aenter__(self):
        self.intake = asyncio.create_task(self.adapter.intake.run_forever())
        await self.posts.connected.wait()
        self.base_url = f"http://127.0.0.1:{self.adapter.bound_port}"
        self.client = openai.AsyncOpenAI(base_url=self.base_url + "/v1", api_key=TOKEN, max_retries=0)
        return self

    async def __aexit__(self, *exc):
        await self.client.close()
        self.intake.cancel()
        await asyncio.gather(self.intake, return_exceptions=True)
        await self.adapter.close()
        await self.adapter.store.close()

    async def op(self, action, watch, text="", message_id=None, reply_to=None, final=False):
        self.ops += 1
        op = PlatformOp(f"op-{self.ops}", action, watch.chat_id, text, message_id=message_id, reply_to=reply_to,
                        final=final)
        result = await self.adapter._perform(op)
        assert result.ok, result
        return result.message_id

    async def finish_turn(self, watch):
        await self.adapter.store.inbox.take(watch.seq)
        await self.adapter.store.inbox.done(watch.seq)


def test_a_stream_grows_with_the_previews_and_ends_with_the_final_text(tmp_path):
    async def main():
        async with Rig(tmp_path) as rig:
            request = asyncio.create_task(rig.client.chat.completions.create(
                model="default", stream=True, messages=[{"role": "user", "content": "count to three"}]))
            watch = await rig.book.opened.get()
            chunks = aiter(await request)
            first = await anext(chunks)
            assert first.choices[0].delta.role == "assistant" and not first.choices[0].delta.content
            deltas = []
            message_id = await rig.op("send", watch, "One ▍", reply_to=watch.inbound_id)
            deltas.append((await anext(chunks)).choices[0].delta.content)
            await rig.op("edit", watch, "One, two\n\n⚙ calculator… ▍", message_id=message_id)
            deltas.append((await anext(chunks)).choices[0].delta.content)
            await rig.op("edit", watch, "One, two, three ▍", message_id=message_id)
            deltas.append((await anext(chunks)).choices[0].delta.content)
            await rig.op("edit", watch, "One, two, three.", message_id=message_id, final=True)
            await rig.finish_turn(watch)
            rest = [chunk async for chunk in chunks]
            return deltas, rest, rig.book.waiting()

    deltas, rest, waiting = asyncio.run(main())
    assert deltas == ["One", ", two", ", three"]
    assert [c.choices[0].delta.content for c in rest] == [".", None]
    assert rest[-1].choices[0].finish_reason == "stop" and rest[0].model == "default"
    assert "".join(deltas) + rest[0].choices[0].delta.content == "One, two, three."
    assert waiting == [], "the request stopped waiting"


def test_a_rewritten_preview_stops_the_deltas_and_a_reply_in_parts_is_joined(tmp_path):
    async def main():
        async with Rig(tmp_path) as rig:
            request = asyncio.create_task(rig.client.chat.completions.create(
                model="work", stream=True, messages=[{"role": "user", "content": "hi"}]))
            watch = await rig.book.opened.get()
            chunks = aiter(await request)
            await anext(chunks)
            first = await rig.op("send", watch, "Draft ▍", reply_to=watch.inbound_id)
            draft = (await anext(chunks)).choices[0].delta.content
            await rig.op("edit", watch, "Better ▍", message_id=first)
            await rig.op("edit", watch, "Better, part one. ", message_id=first, final=True)
            await rig.op("send", watch, "Part two.", final=True)    # over the text limit: a second message
            await rig.finish_turn(watch)
            return draft, [c.choices[0].delta.content async for c in chunks]

    draft, rest = asyncio.run(main())
    assert draft == "Draft"
    assert rest == ["Better, part one. Part two.", None], "nothing of the rewrite leaks; the final text follows"


def test_a_non_streaming_answer_waits_for_the_whole_turn(tmp_path):
    async def main():
        async with Rig(tmp_path) as rig:
            request = asyncio.create_task(rig.client.chat.completions.create(
                model="work", user="bob", messages=[{"role": "user", "content": "hello"}]))
            watch = await rig.book.opened.get()
            await rig.op("send", watch, "Hello ", reply_to=watch.inbound_id, final=True)
            await rig.op("send", watch, "Bob.", final=True)
            assert not request.done()
            await rig.finish_turn(watch)
            answer = await request
            models = await rig.client.models.list()
            return watch, answer, [m.id for m in models.data]

    watch, answer, models = asyncio.run(main())
    assert answer.choices[0].message.content == "Hello Bob." and answer.choices[0].finish_reason == "stop"
    assert answer.object == "chat.completion" and answer.id == watch.inbound_id and answer.model == "work"
    assert watch.chat_id.endswith(":user:bob") and TOKEN not in watch.chat_id
    assert models == ["default", "work"]


def test_no_reply_in_time_is_a_504_in_openai_shape(tmp_path):
    async def main():
        async with Rig(tmp_path, reply_timeout_s=0.3) as rig:
            with pytest.raises(openai.APIStatusError) as plain:
                await rig.client.chat.completions.create(model="default", messages=[{"role": "user", "content": "x"}])
            stream = await rig.client.chat.completions.create(model="default", stream=True,
                                                              messages=[{"role": "user", "content": "y"}])
            with pytest.raises(openai.APIError) as streamed:
                async for _chunk in stream:
                    pass
            return plain.value, streamed.value

    plain, streamed = asyncio.run(main())
    assert plain.status_code == 504 and plain.body["code"] == "timeout"
    assert "did not answer in time" in str(streamed)


def test_a_client_that_leaves_breaks_nothing(tmp_path, caplog):
    async def main():
        async with Rig(tmp_path) as rig:
            async with aiohttp.ClientSession() as http:
                response = await http.post(f"{rig.base_url}/v1/chat/completions", headers={
                    "Authorization": f"Bearer {TOKEN}"}, json={"stream": True, "messages": [
                        {"role": "user", "content": "bye"}]})
                await response.content.readline()      # the first chunk: the request is waiting
                watch = await rig.book.opened.get()
                response.close()                       # the client hangs up
                plain = asyncio.create_task(http.post(f"{rig.base_url}/v1/chat/completions", headers={
                    "Authorization": f"Bearer {TOKEN}"}, json={"messages": [{"role": "user", "content": "bye"}]}))
                plain_watch = await rig.book.opened.get()
                plain.cancel()                         # this client hangs up before any answer
                await asyncio.gather(plain, return_exceptions=True)
            message_id = await rig.op("send", watch, "Talking ▍", reply_to=watch.inbound_id)
            await rig.op("send", plain_watch, "Nobody listens.", reply_to=plain_watch.inbound_id, final=True)
            await rig.finish_turn(plain_watch)
            await asyncio.wait_for(rig.book.idle.wait(), 5)   # each noticed at its next wake-up (the sends above)
            await rig.op("edit", watch, "Talking to nobody.", message_id=message_id, final=True)
            await rig.finish_turn(watch)
            request = asyncio.create_task(rig.client.chat.completions.create(
                model="default", messages=[{"role": "user", "content": "still there?"}]))
            again = await rig.book.opened.get()
            await rig.op("send", again, "Yes.", reply_to=again.inbound_id, final=True)
            await rig.finish_turn(again)
            return (await request).choices[0].message.content

    assert asyncio.run(main()) == "Yes."
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")], "aiohttp had nothing to complain"


def test_a_request_waiting_when_the_adapter_stops_gets_a_503(tmp_path):
    async def main():
        async with Rig(tmp_path) as rig:
            request = asyncio.create_task(rig.client.chat.completions.create(
                model="default", messages=[{"role": "user", "content": "wait for me"}]))
            await rig.book.opened.get()
            await rig.adapter.close()
            with pytest.raises(openai.APIStatusError) as refused:
                await request
            return refused.value

    assert asyncio.run(main()).status_code == 503


def test_webhook_refusals_and_drain(tmp_path):
    async def main():
        async with Rig(tmp_path, max_body_bytes=2048) as rig:
            url = f"{rig.base_url}/webhook"
            body = json.dumps({"conversation_id": "c", "user_id": "u", "message_id": "m", "text": "x"}).encode()
            big = json.dumps({"conversation_id": "c", "user_id": "u", "message_id": "m2", "text": "x" * 4096}).encode()
            async with aiohttp.ClientSession() as http:
                async def post(data, key=None, path=url):
                    """Signed with ``key`` over the current time (None: unsigned)."""
                    headers = signed_headers(key, data) if key is not None else {}
                    async with http.post(path, data=data, headers=headers) as r:
                        return r.status, await r.text()
                statuses = {
                    "unsigned": await post(body),
                    "forged": await post(body, "guess"),
                    "too big": await post(big, SECRET),
                    "not json": await post(b"{oops", SECRET),
                    "no token": await post(b"{}", path=f"{rig.base_url}/v1/chat/completions"),
                    "ok": await post(body, SECRET),
                }
                rig.intake.cancel()                     # what a drain does: no new input, replies still go out
                await asyncio.gather(rig.intake, return_exceptions=True)
                statuses["draining"] = await post(body.replace(b'"m"', b'"m3"'), SECRET)
            counts = await rig.adapter.store.inbox.counts()
            return statuses, counts, rig.posts.lines()

    statuses, counts, lines = asyncio.run(main())
    assert {k: s for k, (s, _) in statuses.items()} == {"unsigned": 401, "forged": 401, "too big": 413,
                                                         "not json": 400, "no token": 401, "ok": 202,
                                                         "draining": 503}
    assert json.loads(statuses["no token"][1])["error"]["code"] == "invalid_api_key"
    assert "body is not JSON" in statuses["not json"][1]
    assert sum(counts.values()) == 1
    assert any("refused POST /webhook" in line and "bad or missing signature" in line for line in lines)
    assert not any(SECRET in line or TOKEN in line for line in lines)


def test_a_data_url_image_is_cached_with_its_row_and_a_remote_url_refused(tmp_path):
    import base64

    from storage import MediaCache
    from tests.actors.media.fixtures import png

    url = "data:image/jpeg;base64," + base64.b64encode(png(64, 48)).decode()   # the declared type lies

    async def main():
        async with Rig(tmp_path) as rig:
            request = asyncio.create_task(rig.client.chat.completions.create(model="default", messages=[
                {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                             {"type": "image_url", "image_url": {"url": url}}]}]))
            watch = await rig.book.opened.get()
            row = await rig.adapter.store.inbox.get(watch.seq)
            await rig.op("send", watch, "A red rectangle.", reply_to=watch.inbound_id, final=True)
            await rig.finish_turn(watch)
            await request
            with pytest.raises(openai.BadRequestError, match="fetches no remote URLs"):
                await rig.client.chat.completions.create(model="default", messages=[{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "http://169.254.169.254/latest/meta-data"}}]}])
            return row

    row = asyncio.run(main())
    assert row.payload["text"] == "what is this?"
    (att,) = row.payload["attachments"]
    assert (att["kind"], att["state"], att["mime"], att["width"], att["height"]) == ("photo", "cached", "image/png",
                                                                                      64, 48)
    assert MediaCache(tmp_path / "media").read(att["cache_key"]) == png(64, 48)


def test_a_turn_forwarded_to_another_host_is_finished_by_its_final_text_not_by_the_forward(tmp_path):
    """A row of a key whose shard runs on a worker is done here as soon as the worker stored it (forwarded): the
    request waits for the reply's final text instead of answering with what it has so far."""
    import asyncio as _asyncio

    from actors.adapters.http.adapter import HttpApiAdapter
    from storage import Store

    async def run():
        adapter = HttpApiAdapter()
        adapter.store = await Store.open(tmp_path / "gateway.db", "normal", inline=True, waits_on_loop=True)
        try:
            forwarded, _ = await adapter.store.inbox.put("k1", "api", "m1", {})
            local, _ = await adapter.store.inbox.put("k2", "api", "m2", {})
            await adapter.store.inbox.forwarded([forwarded], "shard:w1/0")
            assert not await adapter.turn_finished(forwarded), "the worker has it; its reply is not in yet"
            assert await adapter.turn_finished(forwarded, saw_final=True)
            assert not await adapter.turn_finished(local, saw_final=True), "a row here finishes with its turn"
            await adapter.store.inbox.take(local)
            await adapter.store.inbox.done(local)
            assert await adapter.turn_finished(local)
        finally:
            await adapter.store.close()
    _asyncio.run(run())
