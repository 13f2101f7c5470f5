"""The Web API methods of the fake: auth.test, chat.postMessage, chat.update, chat.delete, conversations.info,
users.info. Each is a plain function of (state, params) run under the fake's lock; it returns the answer's fields
(``ok: true`` is added) or raises ApiError. Channels, users and messages live in the state; see ``channels.py``.
"""
from __future__ import annotations

import time
from typing import Optional

from tests.fakes.slack.channels import ChannelMethods, next_ts
from tests.fakes.slack.errors import ApiError, bool_param, str_param
from tests.fakes.slack.formatting import blocks_text, check_blocks, render


class ChatMethods(ChannelMethods):
    """Mixin for FakeSlack: needs ``self.identity``, ``self.limits`` and ``self.queue_event`` (events.py)."""

    def method_auth_test(self, state: dict, params: dict) -> dict:
        ident = self.identity
        return {"url": f"https://{ident['team_domain']}.slack.com/", "team": ident["team"],
                "user": ident["bot_name"], "team_id": ident["team_id"], "user_id": ident["bot_user_id"],
                "bot_id": ident["bot_id"], "is_enterprise_install": False}

    def method_post_message(self, state: dict, params: dict) -> dict:
        rec = self.require_channel(state, params)
        blocks = check_blocks(params)
        text = self._text(state, params, blocks, self.limits["text_limit"], can_truncate=True)
        thread_ts = self._thread_parent(state, rec, str_param(params, "thread_ts"))
        message = self.store_message(rec, text=text, blocks=blocks, user=self.identity["bot_user_id"],
                                     outgoing=True, thread_ts=thread_ts,
                                     mrkdwn=bool_param(params, "mrkdwn", True))
        obj = self.message_object(rec, message)
        if self.limits["echo_bot_events"]:
            self.queue_event(state, self.message_event(rec, obj))
        return {"channel": rec["channel"]["id"], "ts": message["ts"], "message": obj}

    def method_update(self, state: dict, params: dict) -> dict:
        rec = self.require_channel(state, params)
        message = self._own_message(rec, params, refusal="cant_update_message")
        blocks = check_blocks(params)
        text = self._text(state, params, blocks, self.limits["update_text_limit"], can_truncate=False)
        previous = self.message_object(rec, message)
        if text == message["text"] and blocks == message["blocks"]:
            state["stats"]["updates_unchanged"] += 1  # Slack accepts it; a client that does this wastes budget
        now = time.time()
        displayed, problems = render(text)
        message.update(text=text, blocks=blocks, displayed=displayed, markup_problems=problems,
                       edited={"user": self.identity["bot_user_id"], "ts": f"{now:.6f}"})
        message["history"].append({"text": text, "blocks": blocks, "at": now})
        obj = self.message_object(rec, message)
        if self.limits["echo_bot_events"]:
            self.queue_event(state, self.changed_event(rec, obj, previous))
        return {"channel": rec["channel"]["id"], "ts": message["ts"], "text": text, "message": obj}

    def method_delete(self, state: dict, params: dict) -> dict:
        rec = self.require_channel(state, params)
        message = self._own_message(rec, params, refusal="cant_delete_message")
        previous = self.message_object(rec, message)
        message["deleted"], message["deleted_at"] = True, time.time()
        if self.limits["echo_bot_events"]:
            self.queue_event(state, self.deleted_event(rec, previous))
        return {"channel": rec["channel"]["id"], "ts": message["ts"]}

    def method_conversations_info(self, state: dict, params: dict) -> dict:
        rec = self.require_channel(state, params, member=False)
        return {"channel": dict(rec["channel"], is_member=rec["member"]) if not rec["channel"].get("is_im")
                else rec["channel"]}

    def method_users_info(self, state: dict, params: dict) -> dict:
        user = state["users"].get(str_param(params, "user") or "")
        if user is None:
            raise ApiError("user_not_found")
        return {"user": user}

    # -- shared pieces
    def _text(self, state: dict, params: dict, blocks: Optional[list], limit: int, can_truncate: bool) -> str:
        """The message text: required unless blocks carry it; over ``limit`` refused with msg_too_long, or cut
        to the limit when configured so (Slack's documentation says it truncates posts beyond 40,000)."""
        text = params.get("text")
        text = "" if text is None else str(text)
        if not text.strip():
            if not blocks:
                raise ApiError("no_text")
            text = ""  # the blocks carry the content; the stored text is empty, ``displayed`` shows the blocks
        if len(text) > limit:
            if not (can_truncate and self.limits["over_limit"] == "truncate"):
                raise ApiError("msg_too_long")
            state["stats"]["truncated"] += 1
            text = text[:limit]
        return text

    def _own_message(self, rec: dict, params: dict, refusal: str) -> dict:
        message = rec["messages"].get(str_param(params, "ts") or "")
        if message is None or message["deleted"]:
            raise ApiError("message_not_found")
        if not message["outgoing"]:
            raise ApiError(refusal)  # a bot token may change only the bot's own messages
        return message

    def _thread_parent(self, state: dict, rec: dict, thread_ts: Optional[str]) -> Optional[str]:
        """Slack asks for the parent's ts; a reply's ts is taken to mean its parent's thread (counted), and a ts
        that names no message is kept as given (counted: the reply would float in an unknown thread)."""
        if thread_ts is None:
            return None
        parent = rec["messages"].get(thread_ts)
        if parent is None:
            state["stats"]["thread_ts_unknown"] += 1
            return thread_ts
        if parent["thread_ts"] and parent["thread_ts"] != parent["ts"]:
            state["stats"]["thread_ts_of_reply"] += 1
            return parent["thread_ts"]
        return thread_ts

    def store_message(self, rec: dict, *, text: str, user: str, outgoing: bool, blocks=None, thread_ts=None,
                      mrkdwn: bool = True, client_msg_id: Optional[str] = None) -> dict:
        now = time.time()
        displayed, problems = render(text) if text else (blocks_text(blocks), [])
        message = {"ts": next_ts(rec), "user": user, "outgoing": outgoing, "text": text, "blocks": blocks,
                   "displayed": displayed, "markup_problems": problems, "mrkdwn": mrkdwn,
                   "thread_ts": thread_ts, "reply_count": 0, "client_msg_id": client_msg_id,
                   "edited": None, "deleted": False, "deleted_at": None, "sent_at": now,
                   "history": [{"text": text, "blocks": blocks, "at": now}]}
        if thread_ts is not None:
            parent = rec["messages"].get(thread_ts)
            if parent is not None:
                parent["thread_ts"] = thread_ts  # a parent carries its own ts as thread_ts once replied to
                parent["reply_count"] += 1
        rec["messages"][message["ts"]] = message
        return message

    def message_object(self, rec: dict, message: dict) -> dict:
        """The message as the Web API and the Events API show it."""
        ident = self.identity
        obj = {"type": "message", "text": message["text"], "user": message["user"], "ts": message["ts"],
               "team": ident["team_id"]}
        if message["outgoing"]:
            obj.update(bot_id=ident["bot_id"], app_id=ident["app_id"],
                       bot_profile={"id": ident["bot_id"], "app_id": ident["app_id"], "name": ident["bot_name"],
                                    "deleted": False, "team_id": ident["team_id"]})
        if message["client_msg_id"]:
            obj["client_msg_id"] = message["client_msg_id"]
        if message["blocks"]:
            obj["blocks"] = message["blocks"]
        if message["thread_ts"]:
            obj["thread_ts"] = message["thread_ts"]
            parent = rec["messages"].get(message["thread_ts"])
            if message["thread_ts"] != message["ts"] and parent is not None:
                obj["parent_user_id"] = parent["user"]
            if message["reply_count"]:
                obj["reply_count"] = message["reply_count"]
        if message["edited"]:
            obj["edited"] = message["edited"]
        return obj
