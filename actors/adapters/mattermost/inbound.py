"""From a Mattermost post to a ``MessageEvent``: pure functions, no network.

A post reaches the adapter two ways: a ``posted`` event of the WebSocket stream, whose ``data.post`` is the post
as a JSON string with ``channel_type`` and ``mentions`` (a JSON string of the user ids it mentions) beside it; or
the REST API's ``GET /channels/{id}/posts?since=`` while recovering what a dropped connection missed, where the
channel's type comes from the channel list and mentions are read from the text. Both become one raw record,
``{"post": {...}, "channel_type": "D"|"G"|"O"|"P", "mentions": [...] | None}`` (``raw_from_event``,
``raw_from_rest``), so ``event_from_post`` sees one shape.

Which posts are input: a person's post (not the bot's own, not another bot's or a webhook's: ``props.from_bot``,
``props.from_webhook``; not a system message: a non-empty ``type``; not deleted) with text. In a channel or group
message only a post that mentions the bot counts unless ``require_mention = false``; direct messages always do.

Identity: post ids are unique on the server (26 characters), so the dedup id is the post id. Chats: a direct
channel (``D``) -> "dm"; any other channel -> "group"; a post with a ``root_id`` -> "thread" with ``thread_id``
= the root post, so each thread is its own session and the answer goes into it.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload, a_string, an_object
from actors.messages import Attachment, MessageEvent, Source

ID_PATTERN = re.compile(r"[a-z0-9]{26}")
MAX_EVENT_JSON = 1 << 20        # a post's JSON string over this is refused before it is parsed
MAX_FILES = 10                  # Mattermost attaches at most 10 files to a post; more is not taken


def is_post_id(value: Any) -> bool:
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def _json_field(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    if len(value) > MAX_EVENT_JSON:
        raise MalformedPayload(f"{what} is {len(value)} characters of JSON, over {MAX_EVENT_JSON}")
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        raise MalformedPayload(f"{what} is no JSON ({value[:40]!r})") from None


def raw_from_event(data: Any) -> dict:
    """A ``posted`` event's ``data`` as the raw record; an unreadable post is kept as it came (``event_from_post``
    refuses it, loudly)."""
    data = data if isinstance(data, dict) else {}
    try:
        post = _json_field(data.get("post"), "data.post")
    except MalformedPayload:
        post = data.get("post")
    try:
        mentions = _json_field(data.get("mentions"), "data.mentions")
    except MalformedPayload:
        mentions = None
    mentions = [m for m in mentions if isinstance(m, str)] if isinstance(mentions, list) else []
    return {"post": post, "channel_type": data.get("channel_type"), "mentions": mentions,
            "sender_name": data.get("sender_name")}


def raw_from_rest(post: dict, channel_type: Optional[str]) -> dict:
    """A post fetched through the REST API (no mention list: the text says)."""
    return {"post": post, "channel_type": channel_type, "mentions": None, "sender_name": None}


def mentions_bot(raw: dict, bot_id: str, bot_username: str) -> bool:
    """The post mentions the bot: the server's mention list names it, or (a fetched post) its text says @name."""
    if isinstance(raw.get("mentions"), list) and bot_id in raw["mentions"]:
        return True
    post = raw.get("post") if isinstance(raw.get("post"), dict) else {}
    message = post.get("message") if isinstance(post.get("message"), str) else ""
    return bool(bot_username) and _mention_pattern(bot_username).search(message) is not None


def _mention_pattern(username: str) -> re.Pattern:
    # Mattermost usernames: letters, digits, '.', '-', '_'; a mention ends where those end ('@bot.' ends a sentence).
    return re.compile(rf"(?<![\w.@-])@{re.escape(username)}(?![\w-]|\.[\w-])", re.I)


def skip_reason(raw: Any, bot_id: str, bot_username: str, require_mention: bool) -> Optional[str]:
    """Why a post is not input (None: it is). A record whose post is no object goes on to ``event_from_post``,
    to be refused loudly."""
    post = raw.get("post") if isinstance(raw, dict) else None
    if not isinstance(post, dict):
        return None
    props = post.get("props") if isinstance(post.get("props"), dict) else {}
    if post.get("user_id") == bot_id:
        return "own post"
    if str(props.get("from_bot")).lower() == "true" or props.get("from_webhook") == "true":
        return "a bot's post"
    if post.get("type"):
        return "system message"
    if post.get("delete_at"):
        return "deleted"
    if isinstance(post.get("message"), str) and not post["message"].strip() and not post.get("file_ids"):
        return "no text"
    if require_mention and raw.get("channel_type") != "D" and not mentions_bot(raw, bot_id, bot_username):
        return "not addressed"
    return None


def strip_mention(text: str, bot_username: str) -> str:
    """"@bot what time is it" -> "what time is it": the mention addresses the bot, it is not the question."""
    if not bot_username:
        return text.strip()
    return _mention_pattern(bot_username).sub("", text).strip() or text.strip()


def chat_kind(channel_type: Any, root_id: Any) -> str:
    if isinstance(root_id, str) and root_id:
        return "thread"
    return "dm" if channel_type == "D" else "group"


def event_from_post(raw: Any, platform: str, profile: str, bot_id: str = "", bot_username: str = "") -> MessageEvent:
    an_object(raw, "post record")
    post = an_object(raw.get("post"), "post")
    post_id, channel_id = post.get("id"), post.get("channel_id")
    if not is_post_id(post_id):
        raise MalformedPayload(f"post id must be a 26-character id, got {post_id!r}")
    if not is_post_id(channel_id):
        raise MalformedPayload(f"post {post_id}: channel_id must be a 26-character id, got {channel_id!r}")
    message = a_string(post.get("message"), f"post {post_id}: message")
    root_id = post.get("root_id") or None
    if root_id is not None and not is_post_id(root_id):
        raise MalformedPayload(f"post {post_id}: root_id must be a 26-character id, got {root_id!r}")
    user_id = post.get("user_id") if is_post_id(post.get("user_id")) else None
    created = post.get("create_at")
    kind = chat_kind(raw.get("channel_type"), root_id)
    sender = raw.get("sender_name")
    source = Source(platform=platform, chat_id=channel_id, chat_type=kind, thread_id=root_id, user_id=user_id,
                    user_name=sender.lstrip("@") if isinstance(sender, str) and sender.strip("@") else None,
                    profile=profile)
    direct = raw.get("channel_type") == "D"
    return MessageEvent(source=source, text=strip_mention(message, bot_username), platform_message_id=post_id,
                        received_at=time.time(), reply_to_message_id=root_id, attachments=attachments_of(post),
                        sent_at=created / 1000.0 if isinstance(created, int) and created > 0 else None,
                        addressed=True if direct else mentions_bot(raw, bot_id, bot_username) if bot_id else None)


def attachment_kind(mime_type: Any) -> str:
    major = mime_type.split("/", 1)[0].lower() if isinstance(mime_type, str) else ""
    return {"image": "photo", "audio": "audio", "video": "video"}.get(major, "document")


def attachments_of(post: dict) -> tuple:
    """The post's files, pending (``ref`` = the file id, fetched with ``GET /files/{id}``). What the server says of
    each (``metadata.files``: name, MIME type, size) is a claim until the bytes are fetched and sniffed."""
    file_ids = post.get("file_ids") if isinstance(post.get("file_ids"), list) else []
    metadata = post.get("metadata") if isinstance(post.get("metadata"), dict) else {}
    infos = {f.get("id"): f for f in metadata.get("files") or [] if isinstance(f, dict)}
    found = []
    for file_id in file_ids[:MAX_FILES]:
        if not is_post_id(file_id):
            found.append(Attachment(kind="document", state="unavailable"))
            continue
        info = infos.get(file_id, {})
        found.append(Attachment(kind=attachment_kind(info.get("mime_type")), ref=file_id,
                                name=info.get("name") if isinstance(info.get("name"), str) else "",
                                size=_count(info.get("size")), width=_count(info.get("width")),
                                height=_count(info.get("height"))))
    return tuple(found)


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def create_at_of(raw: Any) -> Optional[int]:
    """The post's creation time (ms, the server's clock), what the intake's offset is made of; None if absent."""
    post = raw.get("post") if isinstance(raw, dict) else None
    created = post.get("create_at") if isinstance(post, dict) else None
    return created if isinstance(created, int) and not isinstance(created, bool) and created > 0 else None
