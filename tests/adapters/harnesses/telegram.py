"""The conformance harness of the Telegram adapter, against the fake Bot API (tests/fakes/telegram)."""
from __future__ import annotations

import hashlib

from actors.messages import Source
from tests.adapters.freezing_proxy import through
from tests.adapters.server_harness import ServerHarness
from tests.fakes.telegram import FakeTelegram


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
    send_method = "sendMessage"

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

    def bot_reactions(self, chat: str, handle: str) -> list[list[str]]:
        message_id = int(self.platform_message_id(handle).rsplit(":", 1)[1])
        message = next(m for m in self.server.messages(telegram_chat_number(chat), incoming=True)
                       if m["message_id"] == message_id and not m["outgoing"])
        return [r["emoji"] for r in message.get("reactions", [])]

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

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    freeze_silence_s = 3.0      # getUpdates comes back every second; its own timeout is 30 s past the wait

    def start_relayed(self, relay) -> str:
        self.start()
        relayed = through(self.server.base_url, relay(self.port))
        return self.adapter_toml().replace(self.server.base_url, relayed) + f"max_silence_s = {self.freeze_silence_s}\n"


HARNESS = TelegramHarness
