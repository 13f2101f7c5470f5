"""Platform harnesses for the adapter conformance suite: everything platform-specific the suite needs.

To run the suite against a new adapter, write a harness class with the members of ``PlatformHarness`` and add it to
``HARNESSES``. The suite never touches a fake server except through its harness.
"""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Protocol

from actors.messages import Source
from tests.adapters.server_harness import ServerHarness
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform


class PlatformHarness(Protocol):
    adapter_type: str          # the registry type under test
    adapter_name: str          # NAME in [adapters.NAME]: the inbox platform and the tree name
    adapter_kind: str          # the actor class name shown in the tree
    text_limit: int            # the platform's limit: a longer text must fail with too_long

    def start(self) -> None: ...                          # start the fake server (port fixed from then on)
    def stop(self) -> None: ...
    def drop_connection(self) -> None: ...                # stop the server, start a new one on the same port and
                                                          # with the same history: every connection is cut
    def adapter_toml(self) -> str: ...                    # the [adapters.NAME] table pointing at the server
    def inject(self, chat: str, text: str, user: str = "alice") -> str: ...   # -> a handle of the inbound message
    def platform_message_id(self, handle: str) -> str: ...     # what the inbox dedups the message on
    def replay(self, handle: str) -> str: ...             # the platform delivers the same message again -> handle
    def inject_malformed(self) -> tuple[str, str]: ...    # -> (handle, a fragment of the reason the adapter logs)
    def acknowledged(self, handle: str) -> bool: ...      # the adapter told the platform it has this message
    def source(self, chat: str, user: str = "alice") -> Source: ...  # how the adapter should see a DM from user
    def sent(self, chat: str) -> list[dict]: ...          # the bot's messages: {"message_id", "text", "deleted"}
    def attempts(self, chat: str, op: str) -> list[dict]: ...   # every attempt of op on chat: {"at", "status"}
    def script_floods(self, count: int, retry_after: float) -> None: ...  # the next `count` sends answer 429
    def clear_faults(self) -> None: ...
    def flood_violations(self) -> int: ...                # operations the bot sent while banned by a 429
    # Where the platform's pacing says ``sends_files``: the files the bot sent, {"message_id", "kind", "sha256"}.
    def sent_files(self, chat: str) -> list[dict]: ...
    # Where the registry entry says ``receives_files``: a user's message in ``chat`` carrying ``data`` (a photo, as
    # the platform carries one) -> a handle, as ``inject`` gives.
    def inject_file(self, chat: str, data: bytes, caption: str) -> str: ...


class FakePlatformHarness(ServerHarness):
    """The generic fake platform (tests/fakes/fakeplatform.py), in-process, its history in a state file."""
    adapter_type = "fake"
    adapter_name = "fake"
    adapter_kind = "FakePlatformAdapter"
    text_limit = 4000

    state_name = "fakeplatform.json"

    def make_server(self):
        return FakePlatform(port=self.port, state_file=self.state_file, text_limit=self.text_limit)

    def adapter_toml(self) -> str:
        return (self.table_head(access=None) +
                f'base_url = "{self.server.base_url}"\npoll_timeout_s = 0.5\n')

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        return str(self.server.inject(chat, text, user=user))

    def _update(self, handle: str) -> dict:
        return self.server.read(lambda s: next(u for u in s["updates"] if u["id"] == int(handle)))

    def platform_message_id(self, handle: str) -> str:
        return str(self._update(handle)["message_id"])

    def replay(self, handle: str) -> str:
        original = self._update(handle)
        with self.server.mutate() as state:  # a new update carrying the same message: what a re-delivery looks like
            update = dict(original, id=state["next_update_id"])
            state["next_update_id"] += 1
            state["updates"].append(update)
        return str(update["id"])

    def inject_malformed(self) -> tuple[str, str]:
        with self.server.mutate() as state:
            update = {"id": state["next_update_id"], "chat": None, "text": 42, "message_id": "m-bad",
                      "user": "mallory", "thread": None, "chat_type": "dm"}
            state["next_update_id"] += 1
            state["updates"].append(update)
        return str(update["id"]), "chat must be a non-empty string"

    def acknowledged(self, handle: str) -> bool:
        return self.server.stats()["acked_offset"] > int(handle)

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=chat, chat_type="dm", user_id=user, user_name=user)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": m["message_id"], "text": m["text"], "deleted": m["deleted"]}
                for m in self.server.messages(chat)]

    def sent_files(self, chat: str) -> list[dict]:
        return [{"message_id": m["message_id"], "kind": m["file"]["kind"], "sha256": m["file"]["sha256"]}
                for m in self.server.messages(chat) if m.get("file")]

    def attempts(self, chat: str, op: str) -> list[dict]:
        return [{"at": o["at"], "status": o["status"]} for o in self.server.ops(chat, op)]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=("send",))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]


HARNESSES = {"fake": FakePlatformHarness}


class WebChatHarness:
    """The embedded web chat: the adapter is the server, so the "platform" is a scripted page (a WebSocket client
    per chat, a visitor per chat name; the chat id is the visitor id the gateway issued for it). Floods and attempt records come from the adapter's fault injection,
    armed by [debug] fault_injection in the adapter's config."""
    adapter_type = "webchat"
    adapter_name = "web"
    adapter_kind = "WebChatAdapter"
    text_limit = 1_000_000         # actors.adapters.pacing: webchat

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


HARNESSES["webchat"] = WebChatHarness


# ------------------------------------------------------------------------------------------------------ Telegram
# Appended as a block of its own (harnesses are added by different people): its imports come with it.
from tests.fakes.telegram import FakeTelegram  # noqa: E402


def telegram_chat_number(chat: str) -> int:
    """A stable positive Telegram chat id for one of the suite's chat names (private chat id = its user's id)."""
    return 10 ** 9 + int(hashlib.sha256(chat.encode()).hexdigest()[:8], 16)


class NamedChatTelegram(FakeTelegram):
    """The suite names its chats ("ops-1a2b3c4d"), sends to them before anyone wrote there, and expects inbound
    messages to carry the name as their chat id. Telegram numbers chats. This fake keeps numbers inside, shows a
    named chat's name as ``chat.id`` in updates, and resolves a name given as ``chat_id`` to its chat, creating
    the private chat on first use (as if the user had started the bot)."""

    def name_chat(self, state: dict, name: str) -> int:
        number = telegram_chat_number(name)
        user = {"id": number, "is_bot": False, "first_name": name, "username": name}
        self._ensure_chat(state, number, "private", user, None, False)["name"] = name
        return number

    def find_chat(self, state: dict, params: dict):
        chat_id = params.get("chat_id")
        if isinstance(chat_id, str) and chat_id and not chat_id.lstrip("-").isdigit() and chat_id[0] != "@":
            params = dict(params, chat_id=self.name_chat(state, chat_id))
        return super().find_chat(state, params)

    def message_object(self, chat: dict, message: dict, with_reply: bool = True) -> dict:
        obj = super().message_object(chat, message, with_reply)
        if "name" in chat:
            for shown in (obj, obj.get("reply_to_message") or {}):
                if "chat" in shown:
                    shown["chat"] = dict(shown["chat"], id=chat["name"])
        return obj


class TelegramHarness(ServerHarness):
    """The fake Bot API (tests/fakes/telegram), in-process, polled by the Telegram adapter."""
    adapter_type = "telegram"
    adapter_name = "telegram"
    adapter_kind = "TelegramAdapter"
    text_limit = 4096
    METHODS = {"send": "sendMessage", "edit": "editMessageText", "delete": "deleteMessage",
               "typing": "sendChatAction"}

    state_name = "telegram.json"

    def make_server(self):
        return NamedChatTelegram(port=self.port, state_file=self.state_file)

    def adapter_toml(self) -> str:
        return (self.table_head() +
                f'token = "{self.server.token}"\n'
                f'base_url = "{self.server.base_url}"\npoll_timeout_s = 1.0\n')

    # -- inbound
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        with self.server.mutate() as state:
            number = self.server.name_chat(state, chat)
        return str(self.server.inject_message(text, chat_id=number, username=user, first_name=user)["update_id"])

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        with self.server.mutate() as state:
            number = self.server.name_chat(state, chat)
        photo = self.server.add_file(data, width=48, height=32)
        return str(self.server.inject_media("photo", [photo], caption=caption, chat_id=number)["update_id"])

    def _update(self, handle: str) -> dict:
        return self.server.read(lambda s: next(u for u in s["updates"] if u["update_id"] == int(handle)))

    def platform_message_id(self, handle: str) -> str:
        message = self._update(handle)["message"]
        return f"{message['chat']['id']}:{message['message_id']}"

    def replay(self, handle: str) -> str:
        original = self._update(handle)
        with self.server.mutate() as state:  # the same message in a new update: what a re-delivery looks like
            update = dict(original, update_id=state["next_update_id"])
            state["next_update_id"] += 1
            state["updates"].append(update)
        return str(update["update_id"])

    def inject_malformed(self) -> tuple[str, str]:
        with self.server.mutate() as state:
            update = {"update_id": state["next_update_id"], "message": {"message_id": 1, "date": 0, "text": "x"}}
            state["next_update_id"] += 1
            state["updates"].append(update)
        return str(update["update_id"]), "message has no chat"

    def acknowledged(self, handle: str) -> bool:
        return self.server.read(lambda s: s["confirmed_offset"]) > int(handle)

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=chat, chat_type="dm",
                      user_id=str(telegram_chat_number(chat)), user_name=user)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": str(m["message_id"]), "text": m["text"], "deleted": m["deleted"]}
                for m in self.server.messages(telegram_chat_number(chat))]

    def attempts(self, chat: str, op: str) -> list[dict]:
        return [{"at": o["at"], "status": o["status"]}
                for o in self.server.ops(telegram_chat_number(chat), self.METHODS[op])]

    def sent_files(self, chat: str) -> list[dict]:
        return [{"message_id": str(u["message_id"]), "kind": u["kind"], "sha256": hashlib.sha256(u["data"]).hexdigest()}
                for u in self.server.uploads if u["chat_id"] == telegram_chat_number(chat)]

    def script_floods(self, count: int, retry_after: float) -> None:
        # Telegram's retry_after is whole seconds: the fake rounds ``retry_after`` up to at least 1.
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=("sendMessage",))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]


HARNESSES["telegram"] = TelegramHarness


class HttpApiHarness:
    """The http adapter's webhook side: the adapter is the server, the "platform" is a signed webhook sender
    (tests/http/fakes.py) plus a callback receiver in this process, which records what the bot sent."""
    adapter_type = "http"
    adapter_name = "http"
    adapter_kind = "HttpApiAdapter"
    secret = "harness-webhook-secret"

    def __init__(self, workdir: Path):
        from actors.adapters.registry import pacing_for
        from tests.actor_system import free_port
        from tests.http.fakes import CallbackReceiver, WebhookSender
        self.text_limit = pacing_for(self.adapter_type).text_limit
        self.port = free_port()
        self.receiver = CallbackReceiver(self.secret)
        self.sender = WebhookSender(f"http://127.0.0.1:{self.port}/webhook", self.secret)

    def start(self) -> None:
        self.receiver.start()

    def stop(self) -> None:
        self.receiver.stop()

    def drop_connection(self) -> None:
        self.receiver.stop()
        self.receiver.start()

    def adapter_toml(self) -> str:
        return (f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\nport = {self.port}\n'
                f'hmac_secret = "{self.secret}"\ncallback_url = "{self.receiver.url}"\n')

    # -- inbound: a handle is one delivery of a body
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        import uuid
        return self.sender.deliver({"conversation_id": chat, "user_id": user, "message_id": uuid.uuid4().hex,
                                    "text": text})

    def platform_message_id(self, handle: str) -> str:
        body = self.sender.bodies[handle]
        return f"{body['conversation_id']}/{body['message_id']}"

    def replay(self, handle: str) -> str:
        return self.sender.deliver(self.sender.bodies[handle])

    def inject_malformed(self) -> tuple[str, str]:
        body = {"conversation_id": None, "user_id": "mallory", "message_id": "m-bad", "text": 42}
        return self.sender.deliver(body), "conversation_id must be a non-empty string"

    def acknowledged(self, handle: str) -> bool:
        return self.sender.status(handle) is not None

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=chat, chat_type="dm", user_id=user, user_name=user)

    # -- outbound: what the callback receiver got
    def sent(self, chat: str) -> list[dict]:
        return [{k: m[k] for k in ("message_id", "text", "deleted")} for m in self.receiver.messages(chat)]

    def attempts(self, chat: str, op: str) -> list[dict]:
        return self.receiver.attempts(chat, op)

    def sent_files(self, chat: str) -> list[dict]:
        found = []
        for payload in self.receiver.received:
            for part in payload.get("content") or () if payload.get("conversation_id") == chat else ():
                url = (part.get("image_url") or {}).get("url") or (part.get("file") or {}).get("file_data", "")
                found.append({"message_id": payload["message_id"],
                              "kind": "photo" if part["type"] == "image_url" else "document",
                              "sha256": hashlib.sha256(base64.b64decode(url.split(",", 1)[1])).hexdigest()})
        return found

    def script_floods(self, count: int, retry_after: float) -> None:
        self.receiver.script_floods(count, retry_after)

    def clear_faults(self) -> None:
        self.receiver.clear_faults()

    def flood_violations(self) -> int:
        return self.receiver.flood_violations()


HARNESSES["http"] = HttpApiHarness


# --------------------------------------------------------------------------------------------------------- Slack
from tests.adapters.slack_harness import SlackHarness  # noqa: E402

HARNESSES["slack"] = SlackHarness

from tests.adapters.discord_harness import DiscordHarness  # noqa: E402

HARNESSES["discord"] = DiscordHarness

from tests.adapters.wecom_harness import WeComHarness  # noqa: E402

HARNESSES["wecom"] = WeComHarness
# -------------------------------------------------------------------------------------------------------- Matrix
from tests.adapters.matrix_harness import MatrixHarness  # noqa: E402

HARNESSES["matrix"] = MatrixHarness
from tests.adapters.signal_harness import SignalHarness  # noqa: E402

HARNESSES["signal"] = SignalHarness
from tests.adapters.irc_harness import IrcHarness  # noqa: E402

HARNESSES["irc"] = IrcHarness
