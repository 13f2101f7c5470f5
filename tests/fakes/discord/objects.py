"""Discord's JSON objects (user, channel, guild, member, message) built from the fake's stored records.

Records keep integer ids and epoch times; the objects carry ids as strings and times as ISO8601, as the API does.
Message content is shown or blanked here, by the MESSAGE_CONTENT rule: content, embeds, attachments and
components are empty for a reader without the intent, except in DMs, in the bot's own messages and in messages
that mention the bot.
"""
from __future__ import annotations

import re
import time
from typing import Optional

from tests.fakes.discord.protocol import DM, GUILD_TEXT, MESSAGE_REPLY, PUBLIC_THREAD, iso_timestamp

USER_MENTION = re.compile(r"<@!?(\d{1,20})>")
EVERYONE_PERMISSIONS = str((1 << 10) | (1 << 11) | (1 << 14) | (1 << 15) | (1 << 16) | (1 << 6) | (1 << 38))


def user_object(state: dict, user_id: int) -> dict:
    return dict(state["users"][str(int(user_id))])


def make_user(user_id: int, username: str, *, bot: bool = False, global_name: Optional[str] = None) -> dict:
    user = {"id": str(int(user_id)), "username": username, "global_name": global_name, "discriminator": "0",
            "avatar": None, "public_flags": 0, "flags": 0, "banner": None, "accent_color": None,
            "avatar_decoration_data": None}
    if bot:
        user.update(bot=True, global_name=None, verified=True, mfa_enabled=False)
    return user


# -- channels
def text_channel(channel_id: int, guild_id: int, name: str, position: int) -> dict:
    return {"id": str(channel_id), "type": GUILD_TEXT, "guild_id": str(guild_id), "name": name, "position": position,
            "permission_overwrites": [], "rate_limit_per_user": 0, "nsfw": False, "topic": None,
            "last_message_id": None, "parent_id": None, "default_auto_archive_duration": 1440, "flags": 0}


def dm_channel(channel_id: int, recipient: dict) -> dict:
    return {"id": str(channel_id), "type": DM, "last_message_id": None, "recipients": [recipient], "flags": 0}


def thread_channel(thread_id: int, guild_id: int, parent_id: int, owner_id: int, name: str) -> dict:
    now = iso_timestamp(time.time())
    return {"id": str(thread_id), "type": PUBLIC_THREAD, "guild_id": str(guild_id), "parent_id": str(parent_id),
            "owner_id": str(owner_id), "name": name, "last_message_id": None, "message_count": 0,
            "member_count": 1, "total_message_sent": 0, "rate_limit_per_user": 0, "flags": 0,
            "thread_metadata": {"archived": False, "auto_archive_duration": 1440, "archive_timestamp": now,
                                "locked": False, "create_timestamp": now}}


def channel_guild_id(channel: dict) -> Optional[int]:
    return int(channel["guild_id"]) if channel.get("guild_id") else None


# -- guilds and members
def member_object(state: dict, guild: dict, user_id: int, with_user: bool = True) -> dict:
    member = {"roles": [], "joined_at": guild["joined_at"], "deaf": False, "mute": False, "flags": 0,
              "pending": False, "nick": None, "avatar": None, "banner": None, "premium_since": None,
              "communication_disabled_until": None}
    if with_user:
        member["user"] = user_object(state, user_id)
    return member


def everyone_role(guild_id: int) -> dict:
    return {"id": str(guild_id), "name": "@everyone", "color": 0, "colors": {"primary_color": 0,
            "secondary_color": None, "tertiary_color": None}, "hoist": False, "icon": None,
            "unicode_emoji": None, "position": 0, "permissions": EVERYONE_PERMISSIONS, "managed": False,
            "mentionable": False, "flags": 0}


def guild_object(state: dict, guild: dict) -> dict:
    """The available guild of a GUILD_CREATE: the guild with its channels, active threads and members."""
    channels = [state["channels"][str(c)]["channel"] for c in guild["channel_ids"]]
    gid = int(guild["id"])
    return {
        "id": str(gid), "name": guild["name"], "icon": None, "splash": None, "discovery_splash": None,
        "owner_id": str(guild["owner_id"]), "afk_channel_id": None, "afk_timeout": 300, "verification_level": 0,
        "default_message_notifications": 0, "explicit_content_filter": 0, "roles": [everyone_role(gid)],
        "emojis": [], "stickers": [], "features": [], "mfa_level": 0, "application_id": None,
        "system_channel_id": None, "system_channel_flags": 0, "rules_channel_id": None, "max_members": 500000,
        "vanity_url_code": None, "description": None, "banner": None, "premium_tier": 0,
        "premium_subscription_count": 0, "preferred_locale": "en-US", "public_updates_channel_id": None,
        "nsfw_level": 0, "premium_progress_bar_enabled": False, "safety_alerts_channel_id": None,
        "joined_at": guild["joined_at"], "large": False, "unavailable": False, "lazy": True,
        "member_count": len(guild["members"]), "voice_states": [], "presences": [], "stage_instances": [],
        "guild_scheduled_events": [], "soundboard_sounds": [],
        "members": [member_object(state, guild, int(uid)) for uid in guild["members"]],
        "channels": [c for c in channels if c["type"] != PUBLIC_THREAD],
        "threads": [c for c in channels if c["type"] == PUBLIC_THREAD],
    }


# -- messages
def parse_mentions(state: dict, content: str, allowed_mentions: Optional[dict]) -> list[int]:
    """Users mentioned as <@id> or <@!id> who exist, filtered by allowed_mentions (all parsed when absent)."""
    found = []
    for match in USER_MENTION.finditer(content or ""):
        uid = int(match.group(1))
        if str(uid) in state["users"] and uid not in found:
            found.append(uid)
    if allowed_mentions is None:
        return found
    listed = [int(u) for u in allowed_mentions.get("users") or []]
    if "users" in (allowed_mentions.get("parse") or []):
        return found
    return [uid for uid in found if uid in listed]


def content_visible(state: dict, record: dict, has_content_intent: bool) -> bool:
    if has_content_intent or record["guild_id"] is None:
        return True
    bot_id = state["bot_id"]
    return record["author_id"] == bot_id or bot_id in record["mentions"]


def message_object(state: dict, record: dict, *, has_content_intent: bool = True, gateway: bool = False,
                   nested: bool = False) -> dict:
    """The message object for ``record``; ``gateway`` adds MESSAGE_CREATE's extra fields (guild_id, member,
    channel_type). A reply carries message_reference and referenced_message (null once the original is gone)."""
    visible = content_visible(state, record, has_content_intent)
    channel = state["channels"][str(record["channel_id"])]["channel"]
    obj = {"id": str(record["id"]), "channel_id": str(record["channel_id"]),
           "author": user_object(state, record["author_id"]),
           "content": record["content"] if visible else "", "timestamp": iso_timestamp(record["timestamp"]),
           "edited_timestamp": iso_timestamp(record["edited_at"]) if record["edited_at"] else None,
           "tts": record["tts"], "mention_everyone": False,
           "mentions": [user_object(state, uid) for uid in record["mentions"]], "mention_roles": [],
           "attachments": [], "embeds": record["embeds"] if visible else [], "pinned": False,
           "type": record["type"], "flags": record["flags"], "components": record["components"] if visible else []}
    if record["nonce"] is not None:
        obj["nonce"] = record["nonce"]
    if record["position"] is not None:
        obj["position"] = record["position"]
    ref = record["reference"]
    if ref is not None:
        obj["message_reference"] = {"type": 0, "message_id": str(ref["message_id"]),
                                    "channel_id": str(ref["channel_id"])}
        if record["guild_id"] is not None:
            obj["message_reference"]["guild_id"] = str(record["guild_id"])
        if not nested:
            original = state["channels"][str(ref["channel_id"])]["messages"].get(str(ref["message_id"]))
            obj["referenced_message"] = None if original is None or original["deleted"] else message_object(
                state, original, has_content_intent=has_content_intent, nested=True)
    if gateway:
        obj["channel_type"] = channel["type"]
        if record["guild_id"] is not None:
            obj["guild_id"] = str(record["guild_id"])
            guild = state["guilds"][str(record["guild_id"])]
            obj["member"] = member_object(state, guild, record["author_id"], with_user=False)
    return obj


def new_record(*, message_id: int, channel: dict, author_id: int, content: str, outgoing: bool,
               mentions: list[int], nonce=None, reference: Optional[dict] = None, embeds=None, components=None,
               tts: bool = False, flags: int = 0) -> dict:
    now = time.time()
    position = None
    if channel["channel"]["type"] == PUBLIC_THREAD:
        position = channel["channel"]["total_message_sent"]
        channel["channel"]["total_message_sent"] += 1
        channel["channel"]["message_count"] += 1
    channel["channel"]["last_message_id"] = str(message_id)
    return {"id": message_id, "channel_id": int(channel["channel"]["id"]),
            "guild_id": channel_guild_id(channel["channel"]), "author_id": int(author_id), "outgoing": outgoing,
            "content": content, "nonce": nonce, "type": MESSAGE_REPLY if reference else 0, "reference": reference,
            "mentions": mentions, "embeds": list(embeds or []), "components": list(components or []),
            "tts": bool(tts), "flags": int(flags), "timestamp": now, "edited_at": None, "deleted": False,
            "deleted_at": None, "position": position, "history": [{"content": content, "at": now}]}
