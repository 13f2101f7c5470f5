"""The conformance harness of the embedded web chat."""
from __future__ import annotations

from pathlib import Path

from actors.messages import Source
from tests.actor_system import wait_for


RECONNECT_S = (0.05, 0.25)   # the page's reconnection waits: back soon after the daemon is (the delivery case)
SETTLE_S = 5.0               # a round trip on the chat's connection, on a loaded machine


class WebChatHarness:
    """The embedded web chat: the adapter is the server, so the "platform" is a scripted page (a WebSocket client
    per chat, a visitor per chat name; the chat id is the visitor id the gateway issued for it). What the bot showed
    is what the page received: its operation frames, across reconnections (the adapter's memory goes with a kill
    -9). Floods, attempt records and the delivery case's send hold come from the adapter's fault injection, armed
    by [debug] fault_injection in the adapter's config (debug.* frames, actors/adapters/webchat/protocol.py)."""
    adapter_type = "webchat"
    adapter_name = "web"
    adapter_kind = "WebChatAdapter"
    text_limit = 1_000_000         # actors.adapters.pacing: webchat

    def __init__(self, workdir: Path):
        from tests.actor_system import free_port
        self.port = free_port()
        self.client = None
        self.control = "harness-control"   # the visitor whose connection carries the debug frames
        self.holding = self.control        # the chat whose next send is held (the delivery case)

    def start(self) -> None:
        from tests.webchat.client import WebChatClient
        self.client = WebChatClient(f"http://127.0.0.1:{self.port}", reconnect_s=RECONNECT_S)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def drop_connection(self) -> None:
        self.client.drop_all()

    def adapter_toml(self) -> str:
        return (f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\nport = {self.port}\n'
                # a visitor per chat, every one from 127.0.0.1: the per-address limits are not under test here
                'new_visitors_per_hour = 0\nmessages_per_minute_per_address = 0\nuploads_per_hour_per_address = 0\n'
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

    # -- outbound: what the page received
    def _debug(self, chat: str, frame: dict, timeout: float = 15.0) -> dict:
        reply = self.client.request(chat, frame, timeout)
        assert reply.get("type") == "debug", reply
        return reply

    def sent(self, chat: str) -> list[dict]:
        visitor = self.client.visitor(chat)
        if visitor.connected.is_set():
            # The server answers a ping after every frame it pushed before it on this connection: those are in.
            try:
                assert self.client.request(chat, {"type": "ping"}, SETTLE_S).get("type") == "pong"
            except Exception:  # noqa: BLE001 - the connection went meanwhile (a kill): what came before it is in
                pass
        return shown_by_frames(list(visitor.frames))

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

    # -- the delivery case: the adapter holds the send after its frame is pushed, before its record
    def hold_next_send(self, chat: str) -> None:
        self._debug(chat, {"type": "debug.hold_send"})
        self.holding = chat

    def send_held(self) -> bool:
        held = self._debug(self.control, {"type": "debug.attempts"})["held"]
        return held is not None and any(m["message_id"] == held for m in self.sent(self.holding))

    def release_send(self) -> None:
        """Drops a hold (a send held goes on) where the adapter still runs; after a kill there is nothing to drop."""
        try:
            self._debug(self.control, {"type": "debug.clear"}, timeout=2.0)
        except Exception:  # noqa: BLE001 - the daemon is gone: so is its hold
            pass


def shown_by_frames(frames: list[dict]) -> list[dict]:
    """The bot's messages as a page shows them after applying the operation frames it received, oldest first: an
    edit replaces the text, a delete marks it; an edit of a message whose send frame the page missed (it was
    reconnecting) shows it, as the page does (static/app.js applyOp)."""
    shown: dict[str, dict] = {}
    for frame in frames:
        if frame.get("type") != "op" or frame.get("action") not in ("send", "edit", "delete"):
            continue
        message = shown.setdefault(frame["message_id"], {"message_id": frame["message_id"], "text": "",
                                                         "deleted": False})
        if frame["action"] == "delete":
            message["deleted"] = True
        else:
            message["text"] = frame["text"]
    return list(shown.values())


HARNESS = WebChatHarness
