"""From a Bot API ``Update`` to a ``MessageEvent``: pure functions, no network.

Which updates become input: a ``message`` with ``text``, or with a photo, document, voice note, audio or video
(its ``caption``, if any, is the text), in private chats, groups, supergroups and forum topics. The file becomes a
``pending`` attachment carrying its ``file_id`` and what Telegram says of it (size, name, duration); the intake
fetches it before the row is stored (actors/adapters/media_intake.py), and its type is sniffed from the bytes then.
Of a photo's sizes the largest within the cap is taken. Everything else is acknowledged and skipped without a word:
edits (``edited_message``: a changed message is not a new question, and answering it again would turn one message
into two turns), stickers, locations, service messages (joins, pins), and update kinds the bot did not ask for. The
adapter asks Telegram for ``message`` and ``message_reaction`` updates only (``ALLOWED_UPDATES``), so the filter is
a second line, not the first. A reaction is never input: it is feedback on a message (``reaction_of``), recorded
with the reply it judges (storage/feedback.py). A button press (``callback_query``, asked for too) is input only as
the answer to a tool approval's question (docs/approvals.md): the adapter reads it (``click_of``), looks its approval
up and, when the click may answer, adds the answer's words (``ANSWER_FIELD``) before the intake stores it; a click
read so is the clicker's message ``approve CODE`` in the chat the button is in (``event_from_click``), stored under
the id ``callback:<query id>``, so a press Telegram delivers twice is one row.

Identity: Telegram numbers messages per chat, so the dedup id is ``"<chat_id>:<message_id>"``; replies name their
target the same way. Chats: private -> "dm"; group/supergroup -> "group", or "thread" with ``thread_id`` for a
message in a forum topic (storage.keys then keys the session by chat and topic).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload, a_string, an_object
from actors.media.limits import cap_for
from actors.messages import Attachment, MessageEvent, Source
from storage import Reaction

# reactions: feedback on the bot's answers (reaction_of); callback queries: presses of a question's buttons
ALLOWED_UPDATES = ["message", "message_reaction", "callback_query"]
ANSWER_FIELD = "approval_answer"   # put on a callback_query update by the adapter: the click's answer, as words
MEDIA_FIELDS = ("photo", "document", "voice", "audio", "video")   # Telegram's field = the attachment's kind
GROUP_TYPES = ("group", "supergroup")


def update_ids(updates: list) -> list[int]:
    return [u["update_id"] for u in updates if isinstance(u, dict) and type(u.get("update_id")) is int]


def is_input(update: Any) -> bool:
    """True for updates that are (or pretend to be) a text message; anything not even a dict goes on to
    ``event_from_update`` so that it is rejected loudly."""
    if not isinstance(update, dict):
        return True
    if "callback_query" in update:
        return ANSWER_FIELD in update   # a click the adapter read as an approval's answer (click_of)
    message = update.get("message")
    if message is None:
        return False
    return not isinstance(message, dict) or "text" in message or any(kind in message for kind in MEDIA_FIELDS)


def reaction_of(update: Any, platform: str) -> Optional[Reaction]:
    """A ``message_reaction`` update as a Reaction (what the user shows on that message now), None for any other
    update or one too malformed to say whose reaction on which message it is. Telegram sends it for private chats,
    and in groups only to a bot that is an administrator; anonymous reactions (``actor_chat``) have no user."""
    body = update.get("message_reaction") if isinstance(update, dict) else None
    if not isinstance(body, dict):
        return None
    chat, user = body.get("chat"), body.get("user") or body.get("actor_chat")
    message_id = body.get("message_id")
    if not (isinstance(chat, dict) and isinstance(user, dict) and type(message_id) is int
            and type(chat.get("id")) is int and type(user.get("id")) is int):
        return None
    emoji = []
    for item in body.get("new_reaction") or ():
        if isinstance(item, dict) and item.get("type") == "emoji" and isinstance(item.get("emoji"), str):
            emoji.append(item["emoji"][:16])
        elif isinstance(item, dict) and item.get("type") == "custom_emoji":
            emoji.append(f"custom:{str(item.get('custom_emoji_id'))[:40]}")
    date = body.get("date")
    return Reaction(platform, str(chat["id"]), str(message_id), str(user["id"]), tuple(emoji),
                    float(date) if type(date) in (int, float) else 0.0)


@dataclass(frozen=True)
class Click:
    """A button press: the query's id (what answerCallbackQuery names), who pressed, the chat and message the button
    is on, and the button's data; the message's text as shown and the presser's name (what an edit of the question
    once settled is made of)."""
    query_id: str
    user_id: str
    chat_id: str
    message_id: int
    data: str
    message_text: str = ""
    user_name: str = ""


def click_of(update: Any) -> Optional[Click]:
    """A ``callback_query`` update as a Click; None for any other update, or one without an id to answer or a
    message to place it (a press on an inline-mode message has none: no question of ours is sent so)."""
    query = update.get("callback_query") if isinstance(update, dict) else None
    if not isinstance(query, dict) or not isinstance(query.get("id"), str) or not query["id"]:
        return None
    sender, message = query.get("from"), query.get("message")
    chat = message.get("chat") if isinstance(message, dict) else None
    if not (isinstance(sender, dict) and type(sender.get("id")) is int and isinstance(chat, dict)
            and type(chat.get("id")) is int and type(message.get("message_id")) is int):
        return None
    data = query.get("data") if isinstance(query.get("data"), str) else ""
    text = message.get("text") if isinstance(message.get("text"), str) else ""
    names = [sender.get(k) for k in ("first_name", "username")]
    name = next((n for n in names if isinstance(n, str) and n), "")
    return Click(query["id"][:64], str(sender["id"]), str(chat["id"]), message["message_id"], data, text, name[:64])


def event_from_click(update: dict, platform: str, profile: str) -> MessageEvent:
    """A click read as an approval's answer (``ANSWER_FIELD``): the clicker's message in the button's chat."""
    where = f"update {update.get('update_id')!r}"
    query = an_object(update.get("callback_query"), f"{where}: callback_query")
    click = click_of(update)
    text = a_string(update.get(ANSWER_FIELD), f"{where}: {ANSWER_FIELD}")
    if click is None:
        raise MalformedPayload(f"{where}: callback_query has no id, sender or message")
    message, sender = query["message"], query["from"]
    chat_type, thread_id = _chat_kind(message["chat"], message)
    names = [sender.get(k) for k in ("username", "first_name")]
    source = Source(platform=platform, chat_id=click.chat_id, chat_type=chat_type, thread_id=thread_id,
                    user_id=click.user_id, user_name=next((n for n in names if isinstance(n, str) and n), None),
                    profile=profile)
    return MessageEvent(source=source, text=text, platform_message_id=f"callback:{click.query_id}",
                        received_at=time.time(), reply_to_message_id=message_ref(click.chat_id, click.message_id),
                        addressed=True)


def message_ref(chat_id: Any, message_id: Any) -> str:
    return f"{chat_id}:{message_id}"


def message_id_of(ref: Optional[str]) -> Optional[int]:
    """The Telegram message id inside a ``message_ref`` (or a bare id); None if there is none."""
    if ref is None:
        return None
    tail = str(ref).rsplit(":", 1)[-1]
    digits = tail.lstrip("-")
    return int(tail) if digits.isascii() and digits.isdigit() else None   # "²".isdigit(), but int("²") fails


def event_from_update(update: Any, platform: str, profile: str, bot_username: str = "") -> MessageEvent:
    an_object(update, "update")
    if "callback_query" in update:
        return event_from_click(update, platform, profile)
    where = f"update {update.get('update_id')!r}"
    message = an_object(update.get("message"), f"{where}: message")
    chat, text, message_id = message.get("chat"), message.get("text"), message.get("message_id")
    attachments = attachments_of(message, where)
    if text is None and attachments:
        text = message.get("caption") if isinstance(message.get("caption"), str) else ""
    # Telegram's chat ids are integers; any other non-empty scalar is taken as an opaque id (the conformance
    # suite's fake names its chats), since the gateway only ever hands it back to sendMessage.
    if not isinstance(chat, dict) or type(chat.get("id")) not in (int, str) or chat.get("id") == "":
        raise MalformedPayload(f"{where}: message has no chat with an id")
    a_string(text, f"{where}: text")
    if type(message_id) is not int:
        raise MalformedPayload(f"{where}: message_id must be an integer, got {message_id!r}")
    chat_type, thread_id = _chat_kind(chat, message)
    sender = message.get("from") if isinstance(message.get("from"), dict) else {}
    # A sender field of the wrong type is left out rather than refused: who wrote matters less than what.
    user_id = sender.get("id") if type(sender.get("id")) in (int, str) else None
    names = [sender.get(k) for k in ("username", "first_name")]
    source = Source(platform=platform, chat_id=str(chat["id"]), chat_type=chat_type, thread_id=thread_id,
                    user_id=None if user_id is None else str(user_id),
                    user_name=next((n for n in names if isinstance(n, str) and n), None), profile=profile)
    replied = message.get("reply_to_message")
    reply_to = (message_ref(chat["id"], replied["message_id"])
                if isinstance(replied, dict) and type(replied.get("message_id")) is int else None)
    sent = message.get("date")   # unix seconds, set by Telegram's servers: a sender cannot choose it
    return MessageEvent(source=source, text=strip_bot_mention(text, bot_username),
                        platform_message_id=message_ref(chat["id"], message_id), received_at=time.time(),
                        reply_to_message_id=reply_to, sent_at=float(sent) if type(sent) is int else None,
                        attachments=attachments, addressed=addressed_to_bot(message, chat_type, text, bot_username))


def addressed_to_bot(message: dict, chat_type: str, text: str, bot_username: str):
    """In a group: whether the message mentions the bot (@name) or replies to one of its messages (what a route
    answering only addressed messages keeps; a /command counts too, decided by the intake). None where that cannot
    be told: a channel post, or the bot's name not known yet. A DM is always addressed."""
    if chat_type == "dm":
        return True
    if chat_type == "channel" or not bot_username:
        return None
    name = bot_username.lower()
    replied = message.get("reply_to_message") if isinstance(message.get("reply_to_message"), dict) else {}
    author = replied.get("from") if isinstance(replied.get("from"), dict) else {}
    replied_to_bot = isinstance(author.get("username"), str) and author["username"].lower() == name
    return replied_to_bot or f"@{name}" in text.lower()


def attachments_of(message: dict, where: str = "message") -> tuple:
    """The message's file as a pending Attachment (a Telegram message carries one at most), or ()."""
    kind = next((k for k in MEDIA_FIELDS if k in message), None)
    if kind is None:
        return ()
    media = message[kind]
    if kind == "photo":
        media = _photo_size(media, where)
    if not isinstance(media, dict) or not isinstance(media.get("file_id"), str) or not media["file_id"]:
        raise MalformedPayload(f"{where}: {kind} has no file_id")
    caption = message.get("caption") if isinstance(message.get("caption"), str) else ""
    return (Attachment(kind=kind, size=_int(media.get("file_size")), name=str(media.get("file_name") or ""),
                       caption=caption, ref=media["file_id"], width=_int(media.get("width")),
                       height=_int(media.get("height")), duration_s=_int(media.get("duration"))),)


def _photo_size(sizes, where: str) -> dict:
    """The largest of a photo's sizes within the cap (by bytes, else pixels); the largest of all if none is."""
    if not isinstance(sizes, list) or not sizes or not all(isinstance(p, dict) for p in sizes):
        raise MalformedPayload(f"{where}: photo is no list of sizes")
    by_size = sorted(sizes, key=lambda p: (_int(p.get("file_size")), _int(p.get("width")) * _int(p.get("height"))))
    within = [p for p in by_size if _int(p.get("file_size")) <= cap_for("telegram", "photo")]
    return (within or by_size)[-1]


def _int(value) -> int:
    return value if type(value) is int and value >= 0 else 0


def _chat_kind(chat: dict, message: dict) -> tuple[str, Optional[str]]:
    kind = chat.get("type")
    if kind == "private":
        return "dm", None
    if kind == "channel":
        return "channel", None
    if kind in GROUP_TYPES:
        thread = message.get("message_thread_id")
        # Outside forums message_thread_id also marks reply threads; only forum topics are conversations.
        if message.get("is_topic_message") and type(thread) is int:
            return "thread", str(thread)
        return "group", None
    raise MalformedPayload(f"unknown chat type {kind!r}")


def strip_bot_mention(text: str, bot_username: str) -> str:
    """"/stop@my_bot now" -> "/stop now": in groups Telegram clients address commands to one bot that way."""
    if not bot_username or not text.startswith("/"):
        return text
    command, sep, rest = text.partition(" ")
    suffix = "@" + bot_username.lower()
    if command.lower().endswith(suffix):
        return command[:-len(suffix)] + sep + rest
    return text
