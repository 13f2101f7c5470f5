"""Conversations and users of the fake workspace, and message timestamps.

A conversation's kind follows its id's first letter, as Slack's do: ``D…`` a direct message (``channel_type``
"im"), ``C…`` a public channel ("channel"), ``G…`` a private one ("group"). Every message has a ``ts``, a string
of epoch seconds and six digits ("1700000000.000100") that is unique and increasing within its conversation; it is
the message's id for chat.update, chat.delete and ``thread_ts``.

State per conversation: ``{"channel": <conversation object>, "member": bool, "messages": {ts: message},
"ops": [...], "last_ts": str}``; users: ``{user_id: <user object>}``.
"""
from __future__ import annotations

import time
from typing import Optional

from tests.fakes.slack.errors import ApiError, str_param

DEFAULT_USER = "U0USER0001"
DEFAULT_CHANNEL = "C0GENERAL1"
CHANNEL_TYPES = {"D": "im", "C": "channel", "G": "group"}


def next_ts(rec: dict) -> str:
    """A new ts for the conversation: the clock's microseconds, bumped past the last one given out."""
    last = int(rec["last_ts"].replace(".", "")) if rec["last_ts"] else 0
    micros = max(int(time.time() * 1_000_000), last + 1)
    rec["last_ts"] = f"{micros // 1_000_000}.{micros % 1_000_000:06d}"
    return rec["last_ts"]


def dm_id(user_id: str) -> str:
    return "D" + user_id[1:]


def channel_type(channel_id: str) -> str:
    kind = CHANNEL_TYPES.get(channel_id[:1])
    if kind is None:
        raise ValueError(f"a channel id starts with D (DM), C (public) or G (private), not {channel_id!r}")
    return kind


class ChannelMethods:
    """Mixin for FakeSlack: conversations and users in the state (needs ``self.identity``)."""

    def ensure_user(self, state: dict, user_id: str, name: Optional[str] = None) -> dict:
        if user_id not in state["users"]:
            name = name or user_id.lower()
            state["users"][user_id] = {
                "id": user_id, "team_id": self.identity["team_id"], "name": name, "deleted": False,
                "real_name": name.title(), "is_bot": False, "is_app_user": False, "updated": int(time.time()),
                "profile": {"real_name": name.title(), "display_name": name, "team": self.identity["team_id"]}}
        return state["users"][user_id]

    def ensure_channel(self, state: dict, channel_id: str, *, user: Optional[str] = None,
                       name: Optional[str] = None, member: bool = True) -> dict:
        """The conversation, created on first use. A DM belongs to ``user``; the bot is a member of a channel
        unless ``member`` is false (then posting to it answers not_in_channel)."""
        if channel_id in state["channels"]:
            return state["channels"][channel_id]
        kind, created = channel_type(channel_id), int(time.time())
        if kind == "im":
            conv = {"id": channel_id, "created": created, "is_im": True, "is_org_shared": False,
                    "user": user or DEFAULT_USER, "is_user_deleted": False, "priority": 0}
        else:
            name = name or channel_id.lower()
            conv = {"id": channel_id, "name": name, "name_normalized": name, "is_channel": kind == "channel",
                    "is_group": kind == "group", "is_im": False, "is_mpim": False, "is_private": kind == "group",
                    "created": created, "is_archived": False, "is_general": False, "is_shared": False,
                    "is_org_shared": False, "is_ext_shared": False, "context_team_id": self.identity["team_id"],
                    "creator": user or DEFAULT_USER, "topic": {"value": "", "creator": "", "last_set": 0},
                    "purpose": {"value": "", "creator": "", "last_set": 0}}
        state["channels"][channel_id] = {"channel": conv, "member": bool(member), "messages": {}, "ops": [],
                                         "last_ts": ""}
        return state["channels"][channel_id]

    def find_channel(self, state: dict, value: Optional[str]) -> Optional[dict]:
        """By id, by name ("general" or "#general"), or by a user id (the bot's DM with that user)."""
        if not value:
            return None
        if value in state["channels"]:
            return state["channels"][value]
        if value[:1] in "UW" and value in state["users"]:
            return self.ensure_channel(state, dm_id(value), user=value)
        name = value.lstrip("#")
        return next((rec for rec in state["channels"].values() if rec["channel"].get("name") == name), None)

    def require_channel(self, state: dict, params: dict, member: bool = True) -> dict:
        rec = self.find_channel(state, str_param(params, "channel"))
        if rec is None:
            raise ApiError("channel_not_found")
        if member and rec["channel"].get("is_archived"):
            raise ApiError("is_archived")
        if member and not rec["member"]:
            raise ApiError("not_in_channel")
        return rec
