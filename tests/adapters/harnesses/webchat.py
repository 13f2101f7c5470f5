"""The conformance harness of the embedded web chat."""
from __future__ import annotations

from pathlib import Path

from actors.messages import Source
from tests.actor_system import wait_for


class WebChatHarness:
    """The embedded web chat: the adapter is the server, so the "platform" is a scripted page (a WebSocket client
    per chat, a visitor per chat name; the chat id is the visitor id the gateway issued for it). Floods and attempt records come from the adapter's fault injection,
    armed by [debug] fault_injection in the adapter's config."""
    adapter_type = "webchat"
    adapter_name = "web"
    adapter_kind = "WebChatAdapter"
    text_limit = 1_000_000         # actors.adapters.pacing: webchat
    # Why the delivery case cannot run here yet (test_conformance.py reports it as an xfail with this reason).
    delivery_case_pending = (
        "the page is served by the adapter itself: a send is done once its frame is pushed, with no answer from "
        "outside the daemon to hold, and what the bot showed (``sent``) is the adapter's memory, gone with a kill "
        "-9; the case needs a send hold among the adapter's [debug] fault_injection hooks and ``sent`` read from "
        "the page's frames")

    def __init__(self, workdir: Path):
        from tests.actor_system import free_port
        self.port = free_port()
        self.client = None
        self.control = "harness-control"   # the visitor whose connection carries the debug frames

    def start(self) -> None:
        from tests.webchat.client import WebChatClient
        self.client = WebChatClient(f"http://127.0.0.1:{self.port}")

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def drop_connection(self) -> None:
        self.client.drop_all()

    def adapter_toml(self) -> str:
        return (f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\nport = {self.port}\n'
                f'[debug]\nfault_injection = true\n')

    # -- inbound: a handle is "chat/message id/delivery number"
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        import uuid
        message_id = uuid.uuid4().hex[:12]
        self.client.say(chat, message_id, text)
        return f"{chat}/{message_id}/1"

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        import asyncio
        import uuid

        import aiohttp
        from tests.webchat.client import issued_cookie
        base = f"http://127.0.0.1:{self.port}"
        self.client.id_of(chat)      # the visitor exists (and has its cookie) before it uploads

        async def upload() -> str:
            async with aiohttp.ClientSession() as session:
                form = aiohttp.FormData()
                form.add_field("file", data, filename="photo.png", content_type="image/png")
                async with session.post(f"{base}/upload", data=form,
                                        headers=await issued_cookie(session, base, chat)) as response:
                    return (await response.json())["file"]
        message_id = uuid.uuid4().hex[:12]
        self.client.say(chat, message_id, caption, files=[asyncio.run(upload())])
        return f"{chat}/{message_id}/1"

    def platform_message_id(self, handle: str) -> str:
        chat, message_id, _ = handle.split("/")
        return f"{self.client.id_of(chat)}:{message_id}"

    def replay(self, handle: str) -> str:
        chat, message_id, _ = handle.split("/")
        # The row is committed before its ack frame leaves the server: a test that saw the row may be here first.
        frame = wait_for(lambda: next((f for f in self.client.visitor(chat).frames
                                       if f.get("type") == "ack" and f["id"] == message_id), None),
                         30, 0.02, f"the ack frame of {message_id}")
        self.client.say(chat, frame["id"], "replayed: the id, not the text, is what the inbox dedups on")
        return f"{chat}/{message_id}/2"

    def inject_malformed(self) -> tuple[str, str]:
        import uuid
        chat, message_id = f"malformed-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:12]
        self.client.say(chat, message_id, 42)
        return f"{chat}/{message_id}/1", "text must be a string"

    def acknowledged(self, handle: str) -> bool:
        chat, message_id, delivery = handle.split("/")
        visitor = self.client.visitor(chat)
        return visitor.acks[message_id] >= int(delivery) or message_id in visitor.errors

    def source(self, chat: str, user: str = "alice") -> Source:
        visitor = self.client.id_of(chat)
        return Source(platform=self.adapter_name, chat_id=visitor, chat_type="dm", user_id=visitor)

    # -- outbound, as the adapter recorded it (the page has nothing the adapter did not push)
    def _debug(self, chat: str, frame: dict) -> dict:
        reply = self.client.request(chat, frame)
        assert reply.get("type") == "debug", reply
        return reply

    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": m["message_id"], "text": m["text"], "deleted": m["deleted"]}
                for m in self._debug(chat, {"type": "debug.attempts", "op": "send"})["sent"]]

    def attempts(self, chat: str, op: str) -> list[dict]:
        return self._debug(chat, {"type": "debug.attempts", "op": op})["attempts"]

    def sent_files(self, chat: str) -> list[dict]:
        # The page's copy: a file's URL names it by its hash (protocol.file_view), as the media cache does.
        return [{"message_id": f["message_id"], "kind": f["file"]["kind"],
                 "sha256": f["file"]["url"].split("/")[-1]}
                for f in self.client.visitor(chat).frames if f.get("type") == "op" and f.get("file")]

    def script_floods(self, count: int, retry_after: float) -> None:
        self._debug(self.control, {"type": "debug.floods", "count": count, "retry_after": retry_after})

    def clear_faults(self) -> None:
        self._debug(self.control, {"type": "debug.clear"})

    def flood_violations(self) -> int:
        return self._debug(self.control, {"type": "debug.attempts"})["violations"]


HARNESS = WebChatHarness
