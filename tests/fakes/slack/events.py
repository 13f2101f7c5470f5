"""The Events API side of the fake: what happens in the workspace becomes events, queued for delivery.

Every event travels in Slack's standard wrapper (``type: "event_callback"``, ``event_id``, ``event_time``,
``team_id``, ``api_app_id``, ``authorizations``, ``event``), which Socket Mode carries in an envelope
(socketmode.py). Events are queued in the state whether or not a socket is connected, so a restarted fake or a
reconnecting client still gets them.

What produces which event (each only when subscribed, see ``subscriptions``):

* a user's message → ``message`` (``channel_type`` im / channel / group); in a channel, one that mentions the
  bot as ``<@BOT_USER_ID>`` also → a separate ``app_mention`` event (never in a DM, as on Slack);
* a user's edit → ``message`` with ``subtype: "message_changed"``, ``message`` and ``previous_message``;
* a user's deletion → ``message`` with ``subtype: "message_deleted"`` and ``deleted_ts``;
* the bot's own posts, edits and deletions produce the same events (``echo_bot_events``), their messages carrying
  ``bot_id``, ``app_id`` and ``bot_profile``: Slack delivers an app its own messages, and an adapter must skip them.
"""
from __future__ import annotations

import time
import uuid
from typing import Optional

from tests.fakes.slack.channels import DEFAULT_USER, channel_type, dm_id
from tests.fakes.slack.formatting import mentioned_users

ALL_SUBSCRIPTIONS = ["message.im", "message.channels", "message.groups", "app_mention"]


class EventMethods:
    """Mixin for FakeSlack (uses ``store_message``, ``message_object``, ``ensure_*``, ``mutate``)."""

    # -- injection (in-process API; the control API calls these)
    def inject_message(self, text: str, channel: Optional[str] = None, *, user: str = DEFAULT_USER,
                       thread_ts: Optional[str] = None, name: Optional[str] = None,
                       user_name: Optional[str] = None) -> dict:
        """A user writes in ``channel`` (default: the user's DM with the bot; ``C…`` public, ``G…`` private).

        Returns ``{"channel", "ts", "message", "event_ids"}``: the message as Slack shows it and the events queued
        (a ``message``, and an ``app_mention`` when a channel message mentions the bot)."""
        channel = channel or dm_id(user)
        with self.mutate() as state:
            self.ensure_user(state, user, user_name)
            rec = self.ensure_channel(state, channel, user=user, name=name)
            if thread_ts is not None and thread_ts not in rec["messages"]:
                raise ValueError(f"no message {thread_ts} in {channel} to reply to")
            if thread_ts is not None:
                thread_ts = rec["messages"][thread_ts]["thread_ts"] or thread_ts
            message = self.store_message(rec, text=str(text), user=user, outgoing=False, thread_ts=thread_ts,
                                         client_msg_id=str(uuid.uuid4()))
            obj = self.message_object(rec, message)
            event_ids = [self.queue_event(state, self.message_event(rec, obj))]
            if rec["channel"].get("is_im") is not True and self.identity["bot_user_id"] in mentioned_users(text):
                event_ids.append(self.queue_event(state, self.mention_event(rec, obj)))
            return {"channel": channel, "ts": message["ts"], "message": obj,
                    "event_ids": [e for e in event_ids if e is not None]}

    def inject_edit(self, channel: str, ts: str, text: str) -> dict:
        """The author edits an earlier message: a ``message_changed`` event."""
        with self.mutate() as state:
            rec = state["channels"][channel]
            message = rec["messages"][ts]
            if message["outgoing"]:
                raise ValueError("the bot's messages change through chat.update, not inject_edit")
            previous = self.message_object(rec, message)
            now = time.time()
            message.update(text=str(text), edited={"user": message["user"], "ts": f"{now:.6f}"})
            message["history"].append({"text": str(text), "blocks": None, "at": now})
            obj = self.message_object(rec, message)
            return {"message": obj, "event_id": self.queue_event(state, self.changed_event(rec, obj, previous))}

    def inject_delete(self, channel: str, ts: str) -> dict:
        """The author deletes a message: a ``message_deleted`` event."""
        with self.mutate() as state:
            rec = state["channels"][channel]
            message = rec["messages"][ts]
            previous = self.message_object(rec, message)
            message["deleted"], message["deleted_at"] = True, time.time()
            return {"event_id": self.queue_event(state, self.deleted_event(rec, previous))}

    # -- event bodies
    @staticmethod
    def message_event(rec: dict, obj: dict) -> dict:
        channel = rec["channel"]["id"]
        return dict(obj, channel=channel, event_ts=obj["ts"], channel_type=channel_type(channel))

    @staticmethod
    def mention_event(rec: dict, obj: dict) -> dict:
        event = {"type": "app_mention", "user": obj["user"], "text": obj["text"], "ts": obj["ts"],
                 "channel": rec["channel"]["id"], "event_ts": obj["ts"], "team": obj["team"]}
        for key in ("client_msg_id", "thread_ts", "parent_user_id", "blocks"):
            if key in obj:
                event[key] = obj[key]
        return event

    @staticmethod
    def changed_event(rec: dict, obj: dict, previous: dict) -> dict:
        channel, now = rec["channel"]["id"], f"{time.time():.6f}"
        return {"type": "message", "subtype": "message_changed", "hidden": True, "channel": channel, "ts": now,
                "event_ts": now, "message": obj, "previous_message": previous,
                "channel_type": channel_type(channel)}

    @staticmethod
    def deleted_event(rec: dict, previous: dict) -> dict:
        channel, now = rec["channel"]["id"], f"{time.time():.6f}"
        return {"type": "message", "subtype": "message_deleted", "hidden": True, "channel": channel, "ts": now,
                "deleted_ts": previous["ts"], "event_ts": now, "previous_message": previous,
                "channel_type": channel_type(channel)}

    # -- the queue
    def subscription_of(self, event: dict) -> str:
        if event["type"] == "app_mention":
            return "app_mention"
        return "message." + {"im": "im", "channel": "channels", "group": "groups"}[event["channel_type"]]

    def queue_event(self, state: dict, event: dict) -> Optional[str]:
        """Wrap ``event`` and queue it for delivery; None (and counted) when the app is not subscribed to it."""
        if self.subscription_of(event) not in self.limits["subscriptions"]:
            state["stats"]["events_filtered"] += 1
            return None
        ident = self.identity
        state["next_event"] += 1
        event_id = f"Ev{state['next_event']:08X}"
        payload = {"token": ident["verification_token"], "team_id": ident["team_id"],
                   "api_app_id": ident["app_id"], "event": event, "type": "event_callback",
                   "event_id": event_id, "event_time": int(time.time()),
                   "authorizations": [{"enterprise_id": None, "team_id": ident["team_id"],
                                       "user_id": ident["bot_user_id"], "is_bot": True,
                                       "is_enterprise_install": False}],
                   "is_ext_shared_channel": False,
                   "event_context": f"4-{event['type']}-{ident['team_id']}-{event['channel']}"}
        state["events"].append({"event_id": event_id, "payload": payload, "status": "pending", "attempts": [],
                                "due": 0.0, "deadline": None, "acked": None, "queued_at": time.time()})
        return event_id
