"""A local fake OpenAI-compatible chat-completions server for tests.

Runs aiohttp on 127.0.0.1 (port 0) in a background thread. Queue scripted replies, then point a client at
``server.base_url``; every request body lands in ``server.requests``. With nothing queued it echoes the last user
message. Chunks follow OpenAI's documented ``chat.completion.chunk`` format::

    with FakeOpenAIServer() as server:
        server.script(tool_call_reply([("calculator", '{"expression": "2+3"}')]), text_reply("It is 5."))
        ...
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from aiohttp import web

MODEL = "fake-gpt"
# What /v1/audio/speech answers by default with response_format "opus": the first page of an OGG Opus stream (the
# capture pattern, then the OpusHead packet: version 1, one channel, 48 kHz), which is what sniffing and Telegram's
# sendVoice look at.
OGG_OPUS = (b"OggS\x00\x02" + bytes(8) + b"\x01\x00\x00\x00" + bytes(8) + b"\x01\x13"
            + b"OpusHead\x01\x01\x38\x01\x80\xbb\x00\x00\x00\x00\x00")


@dataclass
class Reply:
    """One scripted answer. ``chunks`` are payloads (dict -> ``data: <json>``, str -> a raw line)."""
    chunks: list = field(default_factory=list)
    status: int = 200
    error_body: Optional[dict] = None
    headers: dict = field(default_factory=dict)
    delay_before_s: float = 0.0          # before the first byte of the body (headers already sent)
    delay_between_s: float = 0.0
    drop_after: Optional[int] = None     # close the connection after this many chunks, mid-stream
    done: bool = True                    # end with ``data: [DONE]``
    as_json: Optional[dict] = None       # answer with a whole (non-streamed) chat.completion instead


def _chunk(delta: dict, finish_reason: Optional[str] = None) -> dict:
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL,
            "system_fingerprint": "fp_fake", "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                          "finish_reason": finish_reason}]}


def _usage_chunk() -> dict:
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL,
            "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}}


def _split(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def text_chunks(text: str, pieces: int = 3, usage: bool = True) -> list:
    chunks = [_chunk({"role": "assistant", "content": ""})]
    chunks += [_chunk({"content": piece}) for piece in _split(text, pieces)]
    chunks.append(_chunk({}, "stop"))
    return chunks + ([_usage_chunk()] if usage else [])


def text_reply(text: str, pieces: int = 3, **options) -> Reply:
    return Reply(chunks=text_chunks(text, pieces), **options)


def tool_call_reply(calls: list[tuple[str, str]], pieces: int = 3, text: str = "", **options) -> Reply:
    """Tool calls as OpenAI streams them: id, type and name first, the arguments JSON in fragments after."""
    chunks = [_chunk({"role": "assistant", "content": None})]
    chunks += [_chunk({"content": piece}) for piece in (_split(text, 2) if text else [])]
    for index, (name, arguments) in enumerate(calls):
        chunks.append(_chunk({"tool_calls": [{"index": index, "id": f"call_fake_{index}", "type": "function",
                                              "function": {"name": name, "arguments": ""}}]}))
        chunks += [_chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                   for piece in _split(arguments, pieces)]
    chunks.append(_chunk({}, "tool_calls"))
    return Reply(chunks=chunks + [_usage_chunk()], **options)


def with_usage(reply: Reply, prompt: int, completion: int) -> Reply:
    """``reply`` with the service counting ``prompt`` and ``completion`` tokens for it (its usage chunk)."""
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    chunks = [c for c in reply.chunks if not (isinstance(c, dict) and "usage" in c)]
    return Reply(chunks=chunks + [{"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                                   "created": int(time.time()), "model": MODEL, "choices": [], "usage": usage}])


def error_reply(status: int, message: str = "scripted failure", retry_after: Optional[str] = None) -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    body = {"error": {"message": message, "type": "fake_error", "param": None, "code": None}}
    return Reply(status=status, error_body=body, headers=headers)


def raw_reply(lines: list, **options) -> Reply:
    """Full control: each item a payload dict or a raw SSE line (a string without its newline)."""
    return Reply(chunks=list(lines), **options)


def agent_toml(server: "FakeOpenAIServer", extra: str = "") -> str:
    """The ``[agent]`` table of a gateway that asks this fake model (``extra``: more keys of the table)."""
    return f"""
[agent]
kind = "openai"
base_url = "{server.base_url}"
model = "{MODEL}"
api_key = "sk-test-key-0123456789abcdef"
{extra}
"""


@dataclass
class RecordedRequest:
    path: str
    headers: dict
    body: dict


class FakeOpenAIServer:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._script: list[Reply] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-openai", daemon=True)
        self._runner: Optional[web.AppRunner] = None
        self.port = 0
        # /v1/audio/transcriptions: every upload (model, file name, type, bytes), and the text answered for it
        # (``transcripts``, in order; then "transcribed N bytes"), or a status to fail with (``transcription_status``).
        self.transcriptions: list[dict] = []
        self.transcripts: list[str] = []
        self.transcription_status = 200
        # /v1/audio/speech: every request's JSON body (model, input, voice, response_format), answered with
        # ``speech_audio`` (as audio/ogg), or a status to fail with (``speech_status``).
        self.speeches: list[dict] = []
        self.speech_audio = OGG_OPUS
        self.speech_status = 200
        # The reply chosen by the request, where a script in order cannot say (concurrent turns with tool rounds):
        # ``answer(body)`` -> a Reply, or None for the script / the echo.
        self.answer: Optional[Callable[[dict], Optional[Reply]]] = None
        # A gate: the requests ``hold(when)`` matches are recorded, then wait unanswered until ``release()``.
        self._hold_when: Optional[Callable[[dict], bool]] = None
        self._released = threading.Event()
        self.holding = 0                 # requests waiting at the gate now
        # An older server that refuses a field it does not know: a request with stream_options gets HTTP 400.
        self.rejects_stream_options = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Reply) -> "FakeOpenAIServer":
        with self._lock:
            self._script.extend(replies)
        return self

    def hold(self, when: Callable[[dict], bool]) -> None:
        """From now on, a request whose body ``when`` matches waits (recorded, unanswered) until ``release``."""
        self._released.clear()
        self._hold_when = when

    def release(self) -> None:
        self._hold_when = None
        self._released.set()

    def __enter__(self) -> "FakeOpenAIServer":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc_info) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speak)
        # Cancel handlers whose client went away and don't linger on shutdown: slow replies must not stall teardown.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def _next_reply(self, body: dict) -> Reply:
        chosen = self.answer(body) if self.answer is not None else None
        if chosen is not None:
            return chosen
        with self._lock:
            if self._script:
                return self._script.pop(0)
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        return text_reply(f"echo: {users[-1].get('content') if users else ''}")

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField) or not form.get("model"):
            return web.json_response({"error": {"message": "file and model are required"}}, status=400)
        data = upload.file.read()
        self.transcriptions.append({"model": form["model"], "filename": upload.filename,
                                    "content_type": upload.content_type, "data": data,
                                    "authorization": request.headers.get("Authorization")})
        if self.transcription_status != 200:
            return web.json_response({"error": {"message": "scripted failure"}}, status=self.transcription_status)
        with self._lock:
            text = self.transcripts.pop(0) if self.transcripts else f"transcribed {len(data)} bytes"
        return web.json_response({"text": text})

    async def _speak(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.speeches.append(dict(body, authorization=request.headers.get("Authorization")))
        if not isinstance(body, dict) or not body.get("model") or not body.get("input") or not body.get("voice"):
            return web.json_response({"error": {"message": "model, input and voice are required"}}, status=400)
        if self.speech_status != 200:
            return web.json_response({"error": {"message": "scripted failure"}}, status=self.speech_status)
        return web.Response(body=self.speech_audio, content_type="audio/ogg")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(RecordedRequest(request.path, dict(request.headers), body))
        when = self._hold_when
        if when is not None and when(body):
            self.holding += 1   # on the server's one loop thread: no lock needed
            try:
                while not self._released.is_set():
                    await asyncio.sleep(0.02)
            finally:
                self.holding -= 1
        if self.rejects_stream_options and "stream_options" in body:
            return web.json_response({"error": {"message": "Unrecognized request argument supplied: stream_options",
                                                "type": "invalid_request_error", "param": None, "code": None}},
                                     status=400)
        reply = self._next_reply(body)
        if reply.status != 200:
            return web.json_response(reply.error_body or {}, status=reply.status, headers=reply.headers)
        if reply.as_json is not None:
            return web.json_response(reply.as_json)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        await asyncio.sleep(reply.delay_before_s)
        for number, chunk in enumerate(reply.chunks):
            if reply.drop_after is not None and number >= reply.drop_after:
                request.transport.close()           # abrupt: the chunked body never terminates
                return response
            if number and reply.delay_between_s:
                await asyncio.sleep(reply.delay_between_s)
            line = chunk if isinstance(chunk, str) else "data: " + json.dumps(chunk)
            await response.write((line + "\n\n" if isinstance(chunk, dict) else line + "\n").encode())
        if reply.done:
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
