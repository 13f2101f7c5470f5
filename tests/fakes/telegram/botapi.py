"""The chat methods of the fake Bot API: sendMessage, editMessageText, deleteMessage, sendChatAction, getMe,
answerCallbackQuery, inline keyboards (``reply_markup``: kept on the message; an edit without one removes it, as
Telegram does), and the flood control that sendMessage and editMessageText share (deleteMessage and sendChatAction are free). Each method is a plain function of (state, params) run under the fake's lock;
it returns the ``result`` or raises ApiError, which the server turns into the Bot API's error shape.
"""
from __future__ import annotations

import json
import math
import time
from typing import Any, Optional

from tests.fakes.telegram.formatting import EntityParseError, parse_html, parse_markdown_v2, utf16_len

CHAT_ACTIONS = {"typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
                "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note"}


class ApiError(Exception):
    def __init__(self, code: int, description: str, retry_after: Optional[int] = None):
        super().__init__(description)
        self.code, self.description, self.retry_after = code, description, retry_after

    def body(self) -> dict:
        body: dict[str, Any] = {"ok": False, "error_code": self.code, "description": self.description}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return body


def flood_error(seconds: float) -> ApiError:
    retry_after = max(1, math.ceil(seconds - 1e-6))  # the Bot API speaks whole seconds
    return ApiError(429, f"Too Many Requests: retry after {retry_after}", retry_after)


# -- parameters arrive as JSON values or as strings (query, form); these accept both
def int_param(params: dict, name: str, missing: Optional[str] = None) -> Optional[int]:
    value = params.get(name)
    if value is None or value == "":
        if missing:
            raise ApiError(400, f"Bad Request: {missing}")
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ApiError(400, f"Bad Request: invalid {name} specified") from None


def json_param(params: dict, name: str) -> Any:
    value = params.get(name)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ApiError(400, f"Bad Request: can't parse {name} JSON object") from None
    return value


def bool_param(params: dict, name: str) -> bool:
    return params.get(name) in (True, 1, "true", "True", "1")


def inline_keyboard_param(params: dict) -> Optional[dict]:
    """``reply_markup`` as an InlineKeyboardMarkup (core.telegram.org/bots/api#inlinekeyboardmarkup): rows of
    buttons, each with ``text`` and one action; a ``callback_data`` of 1-64 bytes. None when none is given. Other
    markups (reply keyboards) are not modelled: refused, so a test never passes on one by mistake."""
    markup = json_param(params, "reply_markup")
    if markup is None:
        return None
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise ApiError(400, "Bad Request: can't parse inline keyboard button: field \"inline_keyboard\" must be "
                            "an Array of Array")
    for row in rows:
        for button in row:
            if not isinstance(button, dict) or not isinstance(button.get("text"), str) or not button["text"]:
                raise ApiError(400, "Bad Request: can't parse inline keyboard button: Text buttons are unallowed "
                                    "in the inline keyboard")
            data = button.get("callback_data")
            if data is not None and not (isinstance(data, str) and 1 <= len(data.encode("utf-8")) <= 64):
                raise ApiError(400, "Bad Request: BUTTON_DATA_INVALID")
    return {"inline_keyboard": rows}


# The emoji a bot may react with (ReactionTypeEmoji in core.telegram.org/bots/api): ✅ is not among them.
REACTION_EMOJI = frozenset("👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 🥱 🥴 😍 🐳 ❤‍🔥 🌚 🌭 💯 🤣 ⚡ 🍌 🏆 💔 "
                           "🤨 😐 🍓 🍾 💋 🖕 😈 😴 😭 🤓 👻 👨‍💻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪 🗿 🆒 💘 🙉 🦄 "
                           "😘 💊 🙊 😎 👾 🤷‍♂ 🤷 🤷‍♀ 😡".split())


class BotMethods:
    """Mixin for FakeTelegram: needs ``self.bot_user``, ``self.limits``, ``self.flood``, ``self.time_scale``."""

    def method_get_me(self, state: dict, params: dict) -> dict:
        return dict(self.bot_user, can_join_groups=True, can_read_all_group_messages=False,
                    supports_inline_queries=False)

    def method_send_message(self, state: dict, params: dict) -> dict:
        chat = self.require_chat(state, params)
        thread_id = int_param(params, "message_thread_id")
        if thread_id is not None and chat["chat"].get("is_forum") and thread_id not in chat["topics"]:
            raise ApiError(400, "Bad Request: message thread not found")
        reply_to = self._reply_target(chat, params)
        text, entities = self._parse_text(params, too_long="message is too long")
        self.check_flood(state, chat)
        markup = inline_keyboard_param(params)
        message = self.store_message(chat, outgoing=True, text=text, entities=entities, thread_id=thread_id,
                                     reply_to=reply_to, raw_text=params["text"],
                                     parse_mode=params.get("parse_mode"))
        if markup is not None:
            message["reply_markup"] = markup
        return self.message_object(chat, message)

    def method_edit_message_text(self, state: dict, params: dict) -> dict:
        chat = self.require_chat(state, params)
        message = chat["messages"].get(str(int_param(params, "message_id", "message identifier is not specified")))
        if message is None or message["deleted"]:
            raise ApiError(400, "Bad Request: message to edit not found")
        if not message["outgoing"]:
            raise ApiError(400, "Bad Request: message can't be edited")
        # The real API answers MESSAGE_TOO_LONG here, not the sendMessage wording: clients must know both.
        text, entities = self._parse_text(params, too_long="MESSAGE_TOO_LONG")
        markup = inline_keyboard_param(params)
        if text == message["text"] and entities == message["entities"] and markup == message.get("reply_markup"):
            raise ApiError(400, "Bad Request: message is not modified: specified new message content and reply "
                                "markup are exactly the same as a current content and reply markup of the message")
        self.check_flood(state, chat)
        now = time.time()
        message.update(text=text, entities=entities, edit_date=int(now), reply_markup=markup)
        message["history"].append({"text": text, "raw_text": params["text"],
                                   "parse_mode": params.get("parse_mode"), "at": now, "reply_markup": markup})
        return self.message_object(chat, message)

    def method_delete_message(self, state: dict, params: dict) -> bool:
        chat = self.require_chat(state, params)
        message = chat["messages"].get(str(int_param(params, "message_id", "message identifier is not specified")))
        if message is None or message["deleted"]:
            raise ApiError(400, "Bad Request: message to delete not found")
        message["deleted"], message["deleted_at"] = True, time.time()
        return True

    def method_set_message_reaction(self, state: dict, params: dict) -> bool:
        """A bot sets at most one reaction (non-premium), from Telegram's own emoji list; [] takes it away."""
        chat = self.require_chat(state, params)
        message = chat["messages"].get(str(int_param(params, "message_id", "message identifier is not specified")))
        if message is None or message["deleted"]:
            raise ApiError(400, "Bad Request: message to react not found")
        reaction = json_param(params, "reaction") or []
        if not isinstance(reaction, list) or len(reaction) > 1:
            raise ApiError(400, "Bad Request: REACTIONS_TOO_MANY")
        for item in reaction:
            if not isinstance(item, dict) or item.get("type") != "emoji" or item.get("emoji") not in REACTION_EMOJI:
                raise ApiError(400, "Bad Request: REACTION_INVALID")
        self.check_flood(state, chat)
        message.setdefault("reactions", []).append({"emoji": [r["emoji"] for r in reaction], "at": time.time()})
        return True

    def method_answer_callback_query(self, state: dict, params: dict) -> bool:
        """The bot answers a button press (the client's spinner stops; ``text`` shows as a notice). A query is
        answered at most once, and only one the fake delivered: anything else is Telegram's QUERY_ID_INVALID."""
        query_id = params.get("callback_query_id")
        query = state["callback_queries"].get(str(query_id)) if query_id not in (None, "") else None
        if query is None or query["answer"] is not None:
            raise ApiError(400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
        text = params.get("text")
        if text is not None and (not isinstance(text, str) or len(text) > 200):
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        query["answer"] = {"text": text, "show_alert": bool_param(params, "show_alert"), "at": time.time()}
        return True

    def method_send_chat_action(self, state: dict, params: dict) -> bool:
        self.require_chat(state, params)
        if params.get("action") not in CHAT_ACTIONS:
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        return True

    # -- shared pieces
    def find_chat(self, state: dict, params: dict) -> Optional[dict]:
        chat_id = params.get("chat_id")
        if isinstance(chat_id, str) and chat_id.startswith("@"):
            return next((c for c in state["chats"].values() if "@" + c["chat"].get("username", "") == chat_id), None)
        try:
            return state["chats"].get(str(int(chat_id)))
        except (TypeError, ValueError):
            return None

    def require_chat(self, state: dict, params: dict) -> dict:
        if params.get("chat_id") in (None, ""):
            raise ApiError(400, "Bad Request: chat_id is empty")
        chat = self.find_chat(state, params)
        if chat is None:
            raise ApiError(400, "Bad Request: chat not found")
        if chat["blocked"]:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        return chat

    def _reply_target(self, chat: dict, params: dict) -> Optional[int]:
        reply = json_param(params, "reply_parameters") or {}
        if not isinstance(reply, dict):
            raise ApiError(400, "Bad Request: can't parse reply parameters JSON object")
        target = int_param(reply, "message_id") or int_param(params, "reply_to_message_id")
        allow_missing = bool_param(reply, "allow_sending_without_reply") or bool_param(
            params, "allow_sending_without_reply")
        if target is None:
            return None
        message = chat["messages"].get(str(target))
        if message is None or message["deleted"]:
            if allow_missing:
                return None
            raise ApiError(400, "Bad Request: message to be replied not found")
        return target

    def _parse_text(self, params: dict, too_long: str) -> tuple[str, list]:
        raw, mode = params.get("text"), (params.get("parse_mode") or "").lower()
        if not isinstance(raw, str) or not raw.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        parsers = {"markdownv2": parse_markdown_v2, "html": parse_html}
        if mode in parsers:
            try:
                text, entities = parsers[mode](raw)
            except EntityParseError as exc:
                raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
        elif mode in ("", "markdown"):  # legacy Markdown is accepted without parsing (not modelled)
            text, entities = raw, json_param(params, "entities") or []
        else:
            raise ApiError(400, "Bad Request: unsupported parse_mode")
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > self.limits["text_limit"]:
            raise ApiError(400, f"Bad Request: {too_long}")
        return text, entities

    def check_flood(self, state: dict, chat: dict) -> None:
        """Per chat ~1/s (burst), per group 20/min, per bot 30/s, all scaled by ``time_scale``. A request that
        arrives while a 429 still holds is refused again and counted as a retry_after violation."""
        now, chat_id, limits, scale = time.monotonic(), chat["chat"]["id"], self.limits, self.limits["time_scale"]
        scopes = [(("chat", chat_id), limits["per_chat_interval"] * scale, limits["per_chat_burst"]),
                  (("bot",), scale / limits["global_per_second"], limits["global_per_second"])]
        if chat_id < 0:
            scopes.append((("group", chat_id), 60.0 * scale / limits["group_per_minute"], limits["group_per_minute"]))
        banned_for = self.flood.ban_remaining([key for key, _, _ in scopes], now)
        if banned_for > 0:
            state["stats"]["retry_after_violations"] += 1
            raise flood_error(banned_for)
        buckets = [(key, self.flood.bucket(key, interval, burst)) for key, interval, burst in scopes]
        for key, bucket in buckets:
            wait = bucket.wait_needed(now)
            if wait > 0:
                error = flood_error(wait)
                self.flood.ban(key, now, error.retry_after)
                raise error
        for _, bucket in buckets:
            bucket.take()

    def store_message(self, chat: dict, *, outgoing: bool, text: str, entities: list, thread_id=None,
                      reply_to=None, sender: Optional[dict] = None, raw_text=None, parse_mode=None) -> dict:
        now = time.time()
        message_id = chat["next_message_id"]
        chat["next_message_id"] += 1
        message = {"message_id": message_id, "outgoing": outgoing, "from": sender, "date": int(now),
                   "text": text, "entities": entities, "thread_id": thread_id, "reply_to": reply_to,
                   "deleted": False, "deleted_at": None, "edit_date": None, "sent_at": now,
                   "history": [{"text": text, "raw_text": raw_text if raw_text is not None else text,
                                "parse_mode": parse_mode, "at": now}]}
        chat["messages"][str(message_id)] = message
        return message

    def message_object(self, chat: dict, message: dict, with_reply: bool = True) -> dict:
        """The Bot API's Message for a stored message."""
        obj = {"message_id": message["message_id"],
               "from": self.bot_user if message["outgoing"] else message["from"],
               "chat": chat["chat"], "date": message["date"], "text": message["text"]}
        if message["entities"]:
            obj["entities"] = message["entities"]
        if message.get("media"):
            caption = obj.pop("text")
            obj.update(message["media"], **({"caption": caption} if caption else {}))
        if message["thread_id"] is not None:
            obj["message_thread_id"] = message["thread_id"]
            if chat["chat"].get("is_forum"):
                obj["is_topic_message"] = True
        if message["edit_date"]:
            obj["edit_date"] = message["edit_date"]
        if message.get("reply_markup"):
            obj["reply_markup"] = message["reply_markup"]
        replied = chat["messages"].get(str(message["reply_to"]))
        if with_reply and replied is not None:
            obj["reply_to_message"] = self.message_object(chat, replied, with_reply=False)
        return obj
