"""The people, channels and posts of the fake Mattermost, as the API reference shapes them (model.User,
model.Channel, model.Post): plain JSON-able dicts kept in the fake's state, and the pure helpers that make them."""
from __future__ import annotations

import hashlib
import re
import time
import uuid
from typing import Optional

BOT_USERNAME = "gatewaybot"
MENTION = re.compile(r"@([a-z0-9._-]+)", re.I)
EMOJI_NAME = re.compile(r"[a-zA-Z0-9_+-]{1,64}")      # model.Reaction's rule for emoji_name


def new_id() -> str:
    """A Mattermost id: 26 characters of [a-z0-9]."""
    return uuid.uuid4().hex[:26]


def stable_id(name: str) -> str:
    """The same id for the same name in every run (a test's user names)."""
    return hashlib.sha256(name.encode()).hexdigest()[:26]


def now_ms() -> int:
    return int(time.time() * 1000)


def make_user(user_id: str, username: str, is_bot: bool = False) -> dict:
    return {"id": user_id, "username": username, "nickname": "", "first_name": "", "last_name": "",
            "is_bot": is_bot, "roles": "system_user", "create_at": now_ms(), "update_at": now_ms(), "delete_at": 0,
            "locale": "en", "timezone": {}}


def make_channel(channel_id: str, kind: str, name: str, members: list[str], team_id: str = "") -> dict:
    """kind: "O" open, "P" private, "D" direct, "G" group."""
    return {"channel": {"id": channel_id, "type": kind, "name": name, "display_name": name, "team_id": team_id,
                        "create_at": now_ms(), "update_at": now_ms(), "delete_at": 0, "last_post_at": 0,
                        "total_msg_count": 0, "header": "", "purpose": "", "creator_id": ""},
            "members": list(members), "posts": {}, "ops": []}


def direct_name(a: str, b: str) -> str:
    """A direct channel's name: the two user ids, sorted, joined by two underscores."""
    return "__".join(sorted((a, b)))


def initial_world() -> dict:
    bot_id = stable_id("bot:" + BOT_USERNAME)
    team_id = stable_id("team:fake")
    town = stable_id("channel:town-square")
    return {"bot_id": bot_id, "team_id": team_id, "last_create_at": 0,
            "users": {bot_id: make_user(bot_id, BOT_USERNAME, is_bot=True)},
            "channels": {town: make_channel(town, "O", "town-square", [bot_id], team_id)},
            "direct": {}, "pending_posts": {}, "deliveries": {}, "files": {}, "reactions": {},
            "reaction_log": {},
            "stats": {"requests": {}, "unauthorized": 0, "rate_limited": 0, "retry_after_violations": 0,
                      "pending_deduplicated": 0, "connections": 0, "authenticated": 0, "events_sent": 0,
                      "events_skipped": 0, "refused_upgrades": 0, "typing_actions": 0, "posts_since_calls": 0}}


def next_create_at(state: dict) -> int:
    """Strictly increasing creation times (ms), as one server's clock gives them to consecutive posts."""
    state["last_create_at"] = max(now_ms(), state["last_create_at"] + 1)
    return state["last_create_at"]


def file_info(file_id: str, user_id: str, channel_id: str, name: str, mime: str, size: int) -> dict:
    """A FileInfo: what the server knows of an uploaded file (``post_id`` empty until a post carries it)."""
    return {"id": file_id, "user_id": user_id, "channel_id": channel_id, "post_id": "", "create_at": now_ms(),
            "update_at": now_ms(), "delete_at": 0, "name": name, "extension": name.rsplit(".", 1)[-1].lower()
            if "." in name else "", "size": size, "mime_type": mime, "width": 0, "height": 0,
            "has_preview_image": False}


def make_post(state: dict, channel_id: str, user_id: str, message: str, root_id: str = "",
              pending_post_id: str = "", props: Optional[dict] = None, post_type: str = "") -> dict:
    created = next_create_at(state)
    return {"id": new_id(), "create_at": created, "update_at": created, "edit_at": 0, "delete_at": 0,
            "is_pinned": False, "user_id": user_id, "channel_id": channel_id, "root_id": root_id,
            "original_id": "", "message": message, "type": post_type, "props": dict(props or {}), "hashtags": "",
            "file_ids": [],
            "pending_post_id": pending_post_id, "reply_count": 0, "metadata": {}}


def stored_post(post: dict) -> dict:
    """A post as read back from the database: ``pending_post_id`` is a field of the create call only."""
    return {**post, "pending_post_id": ""}


def mentioned_ids(state: dict, message: str) -> list[str]:
    """The users an @name in the text names (what ``data.mentions`` of a posted event lists)."""
    by_name = {u["username"].lower(): uid for uid, u in state["users"].items()}
    return sorted({by_name[m.group(1).lower().rstrip(".")] for m in MENTION.finditer(message)
                   if m.group(1).lower().rstrip(".") in by_name})
