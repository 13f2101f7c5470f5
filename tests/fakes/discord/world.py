"""The people and places of the fake: the bot, its guild with text channels and threads, DMs, and the users
whose messages a test injects. Injected messages and edits are dispatched to the connected gateway sessions (and
kept in their replay buffers for a later Resume), exactly as the bot's own REST sends are.
"""
from __future__ import annotations

import time
from typing import Optional

from tests.fakes.discord import protocol as p
from tests.fakes.discord.objects import (dm_channel, guild_object, make_user, message_object, new_record,
                                         parse_mentions, text_channel, thread_channel)

BOT_ID = 1300000000000000001
OWNER_ID = 1300000000000000002
GUILD_ID = 1300000000000000010
GENERAL_CHANNEL_ID = 1300000000000000011
DEFAULT_USER_ID = 1300000000000000100


def initial_world(bot_username: str) -> dict:
    """The state a fake starts with: the bot, its owner, one guild with #general. Stats and logs are empty."""
    joined = p.iso_timestamp(time.time())
    users = {str(BOT_ID): make_user(BOT_ID, bot_username, bot=True),
             str(OWNER_ID): make_user(OWNER_ID, "owner", global_name="Owner")}
    general = text_channel(GENERAL_CHANNEL_ID, GUILD_ID, "general", 0)
    return {
        "bot_id": BOT_ID, "last_snowflake": GENERAL_CHANNEL_ID + 1000, "users": users,
        "guilds": {str(GUILD_ID): {"id": str(GUILD_ID), "name": "Fake Guild", "owner_id": OWNER_ID,
                                   "joined_at": joined, "members": [str(BOT_ID), str(OWNER_ID)],
                                   "channel_ids": [GENERAL_CHANNEL_ID], "manage_messages": False}},
        "channels": {str(GENERAL_CHANNEL_ID): _channel_entry(general)},
        "dm_by_user": {}, "nonces": {}, "interactions": {}, "sessions": {}, "last_identify_at": 0.0, "gateway_log": [],
        "stats": {"requests": {}, "errors": {}, "unauthorized": 0, "rate_limited": 0, "rate_limited_global": 0,
                  "retry_after_violations": 0, "nonce_deduplicated": 0, "connections": 0, "identifies": 0,
                  "identifies_refused": 0, "resumes": 0, "resumes_refused": 0, "heartbeats": 0, "closes": {},
                  "dispatches": {}},
    }


def _channel_entry(channel: dict) -> dict:
    return {"channel": channel, "messages": {}, "ops": [], "blocked": False}


class WorldMethods:
    """Mixin for FakeDiscord (uses ``mutate``, ``read`` and the gateway's ``dispatch_*``)."""

    # -- setup
    def add_text_channel(self, name: str, guild_id: int = GUILD_ID) -> dict:
        """A new guild text channel (CHANNEL_CREATE to sessions with the GUILDS intent)."""
        with self.mutate() as state:
            guild = state["guilds"][str(int(guild_id))]
            channel = text_channel(p.next_snowflake(state), int(guild_id), name, len(guild["channel_ids"]))
            state["channels"][channel["id"]] = _channel_entry(channel)
            guild["channel_ids"].append(int(channel["id"]))
            self.dispatch_event(state, "CHANNEL_CREATE", lambda _: dict(channel), guild_id=int(guild_id),
                                intent=p.INTENTS["GUILDS"])
            return dict(channel)

    def add_thread(self, parent_id: int = GENERAL_CHANNEL_ID, name: str = "thread",
                   thread_id: Optional[int] = None, owner_id: int = DEFAULT_USER_ID) -> dict:
        """A new public thread under a text channel (THREAD_CREATE with ``newly_created``)."""
        with self.mutate() as state:
            return dict(self._new_thread(state, int(parent_id), name, thread_id, owner_id))

    def _new_thread(self, state: dict, parent_id: int, name: str, thread_id: Optional[int], owner_id: int) -> dict:
        parent = state["channels"][str(parent_id)]["channel"]
        if parent["type"] != p.GUILD_TEXT:
            raise ValueError(f"threads need a guild text channel as parent, not type {parent['type']}")
        guild_id = int(parent["guild_id"])
        self._ensure_user(state, owner_id, None, guild_id)
        thread = thread_channel(int(thread_id) if thread_id else p.next_snowflake(state), guild_id, parent_id,
                                owner_id, name)
        state["channels"][thread["id"]] = _channel_entry(thread)
        state["guilds"][str(guild_id)]["channel_ids"].append(int(thread["id"]))
        self.dispatch_event(state, "THREAD_CREATE", lambda _: dict(thread, newly_created=True), guild_id=guild_id,
                            intent=p.INTENTS["GUILDS"])
        return thread

    def add_guild(self, name: str = "Second Guild") -> dict:
        """Another guild with its own #general (GUILD_CREATE to sessions with GUILDS); returns the guild object."""
        with self.mutate() as state:
            guild_id, channel_id = p.next_snowflake(state), p.next_snowflake(state)
            channel = text_channel(channel_id, guild_id, "general", 0)
            state["channels"][str(channel_id)] = _channel_entry(channel)
            guild = {"id": str(guild_id), "name": name, "owner_id": OWNER_ID, "joined_at": p.iso_timestamp(time.time()),
                     "members": [str(state["bot_id"]), str(OWNER_ID)], "channel_ids": [channel_id],
                     "manage_messages": False}
            state["guilds"][str(guild_id)] = guild
            self.dispatch_event(state, "GUILD_CREATE", lambda _: guild_object(state, guild), guild_id=guild_id,
                                intent=p.INTENTS["GUILDS"])
            return guild_object(state, guild)

    def set_manage_messages(self, allowed: bool = True, guild_id: int = GUILD_ID) -> None:
        """Whether the bot holds MANAGE_MESSAGES in the guild (deleting other users' messages)."""
        with self.mutate() as state:
            state["guilds"][str(int(guild_id))]["manage_messages"] = bool(allowed)

    def _ensure_user(self, state: dict, user_id: int, username: Optional[str], guild_id: Optional[int]) -> None:
        if str(user_id) not in state["users"]:
            state["users"][str(user_id)] = make_user(user_id, username or f"user{user_id % 10000}")
        if guild_id is not None:
            members = state["guilds"][str(guild_id)]["members"]
            if str(user_id) not in members:
                members.append(str(user_id))

    def ensure_dm(self, state: dict, user_id: int) -> dict:
        """The DM channel between the bot and a user, made on first use (no CHANNEL_CREATE: bots get none)."""
        key = str(int(user_id))
        if key not in state["dm_by_user"]:
            channel = dm_channel(p.next_snowflake(state), dict(state["users"][key]))
            state["channels"][channel["id"]] = _channel_entry(channel)
            state["dm_by_user"][key] = int(channel["id"])
        return state["channels"][str(state["dm_by_user"][key])]

    # -- injection
    def inject_message(self, content: str, channel_id: Optional[int] = None, *, user_id: int = DEFAULT_USER_ID,
                       username: str = "alice", mention_bot: bool = False, reply_to: Optional[int] = None,
                       ping_reply: bool = True, thread_id: Optional[int] = None) -> dict:
        """A user's message arrives; returns its MESSAGE_CREATE payload as a reader with every intent sees it.

        No ``channel_id``: the user's DM with the bot. ``thread_id`` with a text channel: a message in that thread
        (made if new). ``mention_bot`` starts the content with ``<@BOT_ID>``; ``reply_to`` answers a message of the
        same channel, pinging its author unless ``ping_reply`` is false (as Discord's client does by default)."""
        user_id = int(user_id)
        with self.mutate() as state:
            if channel_id is None:
                self._ensure_user(state, user_id, username, None)
                channel = self.ensure_dm(state, user_id)
            else:
                channel = state["channels"].get(str(int(channel_id)))
                if channel is None:
                    raise KeyError(f"unknown channel {channel_id}")
                self._ensure_user(state, user_id, username, int(channel["channel"]["guild_id"])
                                  if channel["channel"].get("guild_id") else None)
                if thread_id is not None:
                    channel = state["channels"].get(str(int(thread_id))) or state["channels"][
                        self._new_thread(state, int(channel_id), "thread", int(thread_id), user_id)["id"]]
            if mention_bot:
                content = f"<@{state['bot_id']}> {content}"
            mentions = parse_mentions(state, content, None)
            reference = None
            if reply_to is not None:
                original = channel["messages"][str(int(reply_to))]
                reference = {"message_id": original["id"], "channel_id": original["channel_id"]}
                if ping_reply and original["author_id"] not in mentions:
                    mentions.append(original["author_id"])
            record = new_record(message_id=p.next_snowflake(state), channel=channel, author_id=user_id,
                                content=str(content), outgoing=False, mentions=mentions, reference=reference)
            channel["messages"][str(record["id"])] = record
            self.dispatch_message(state, "MESSAGE_CREATE", record)
            return message_object(state, record, gateway=True)

    def inject_edit(self, channel_id: int, message_id: int, content: str) -> dict:
        """The user edits an earlier message: MESSAGE_UPDATE with the whole message."""
        with self.mutate() as state:
            record = state["channels"][str(int(channel_id))]["messages"][str(int(message_id))]
            now = time.time()
            record.update(content=str(content), edited_at=now, mentions=parse_mentions(state, str(content), None))
            record["history"].append({"content": str(content), "at": now})
            self.dispatch_message(state, "MESSAGE_UPDATE", record)
            return message_object(state, record, gateway=True)

    def inject_delete(self, channel_id: int, message_id: int) -> None:
        """The user deletes a message: MESSAGE_DELETE."""
        with self.mutate() as state:
            record = state["channels"][str(int(channel_id))]["messages"][str(int(message_id))]
            record["deleted"], record["deleted_at"] = True, time.time()
            self.dispatch_deletion(state, record)
