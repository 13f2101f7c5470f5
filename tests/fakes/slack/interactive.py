"""Buttons and their presses, as Slack's public documentation gives them: Block Kit ``actions`` blocks with
``button`` elements, the ``block_actions`` interactive payload over Socket Mode, and ``chat.postEphemeral``.

* ``actions`` blocks (checked on chat.postMessage and chat.update, ``invalid_blocks`` naming the field): at most 25
  elements; a ``button`` has ``text`` (plain_text, at most 75 characters), an ``action_id`` (at most 255, unique in
  the message), a ``value`` (at most 2,000) and a ``style`` of ``primary`` or ``danger`` if any.
* ``press_button(channel, ts, value)``: a person presses a button the message carries (one it does not carry cannot
  be pressed: ValueError). The payload (``type: "block_actions"``, ``user`` {id, username, name, team_id},
  ``api_app_id``, ``token``, ``container`` {type "message", message_ts, channel_id, is_ephemeral, thread_ts?},
  ``trigger_id``, ``team``, ``channel``, ``message`` (as Slack shows it, blocks included), ``state``,
  ``response_url``, ``actions`` [{action_id, block_id, text, value, style, type "button", action_ts}]) is queued
  like an event and delivered in a Socket Mode envelope of ``type: "interactive"``, acknowledged by its
  ``envelope_id`` within 3 s or sent again, as events are (delivery.py). Over the Events API's Request URL
  interactive payloads are not delivered (Slack posts them to a separate Interactivity URL, not modelled).
* ``chat.postEphemeral`` (channel, user, text or blocks, thread_ts) → ``{"message_ts"}``: a message only that user
  sees, kept in ``ephemeral()``, not in the channel; ``user_not_in_channel`` for a user who never wrote there.
"""
from __future__ import annotations

import time
import uuid
from typing import Optional

from tests.fakes.slack.channels import DEFAULT_USER, next_ts
from tests.fakes.slack.errors import ApiError, str_param

MAX_ACTION_ELEMENTS, MAX_BUTTON_TEXT, MAX_ACTION_ID, MAX_BUTTON_VALUE = 25, 75, 255, 2000
BUTTON_STYLES = ("primary", "danger")


def check_actions(blocks: list) -> None:
    """The ``actions`` blocks of ``blocks`` as Slack documents them, else ``invalid_blocks``."""
    seen = set()
    for index, block in enumerate(blocks):
        if block.get("type") != "actions":
            continue
        where = f"[json-pointer:/blocks/{index}/elements"
        elements = block.get("elements")
        if not isinstance(elements, list) or not 1 <= len(elements) <= MAX_ACTION_ELEMENTS:
            raise ApiError("invalid_blocks", errors=[f"must have 1 to {MAX_ACTION_ELEMENTS} items {where}]"])
        for e, element in enumerate(elements):
            at = f"{where}/{e}"
            if not isinstance(element, dict) or element.get("type") != "button":
                raise ApiError("invalid_blocks", errors=[f"only buttons are modelled {at}/type]"])
            text = element.get("text")
            if not (isinstance(text, dict) and text.get("type") == "plain_text" and isinstance(text.get("text"), str)
                    and 0 < len(text["text"]) <= MAX_BUTTON_TEXT):
                raise ApiError("invalid_blocks", errors=[f"must be plain_text of 1 to {MAX_BUTTON_TEXT} characters "
                                                         f"{at}/text]"])
            action_id, value = element.get("action_id"), element.get("value", "")
            if not isinstance(action_id, str) or not 0 < len(action_id) <= MAX_ACTION_ID or action_id in seen:
                raise ApiError("invalid_blocks", errors=[f"action_id missing, too long or repeated {at}/action_id]"])
            seen.add(action_id)
            if not isinstance(value, str) or len(value) > MAX_BUTTON_VALUE:
                raise ApiError("invalid_blocks", errors=[f"must be at most {MAX_BUTTON_VALUE} characters "
                                                         f"{at}/value]"])
            if "style" in element and element["style"] not in BUTTON_STYLES:
                raise ApiError("invalid_blocks", errors=[f"must be primary or danger {at}/style]"])


class InteractiveMethods:
    """Mixin for FakeSlack: presses, chat.postEphemeral, and what was shown to one person only."""

    def press_button(self, channel: str, ts: str, value: str, *, user: str = DEFAULT_USER,
                     user_name: Optional[str] = None) -> dict:
        """A person presses the button carrying ``value`` on message ``ts``; returns the block_actions payload."""
        with self.mutate() as state:
            rec = state["channels"][channel]
            message = rec["messages"].get(ts)
            if message is None or message["deleted"]:
                raise ValueError(f"no message {ts} in {channel}")
            found = [(block, element) for block in message["blocks"] or [] if block.get("type") == "actions"
                     for element in block["elements"] if element.get("value") == value]
            if not found:
                raise ValueError(f"message {ts} has no button with value {value!r} to press")
            block, element = found[0]
            self.ensure_user(state, user, user_name)
            person = state["users"][user]
            ident = self.identity
            container = {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": False}
            if message["thread_ts"] and message["thread_ts"] != ts:
                container["thread_ts"] = message["thread_ts"]
            payload = {
                "type": "block_actions", "user": {"id": user, "username": person["name"], "name": person["name"],
                                                  "team_id": ident["team_id"]},
                "api_app_id": ident["app_id"], "token": ident["verification_token"], "container": container,
                "trigger_id": f"{int(time.time())}.{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:24]}",
                "team": {"id": ident["team_id"], "domain": ident["team_domain"]}, "enterprise": None,
                "is_enterprise_install": False, "channel": {"id": channel, "name": rec["channel"].get("name", "")},
                "message": self.message_object(rec, message), "state": {"values": {}},
                "response_url": f"http://127.0.0.1:{self.port}/actions/{uuid.uuid4().hex}",
                "actions": [{"action_id": element["action_id"], "block_id": block.get("block_id", ""),
                             "text": element["text"], "value": value, "style": element.get("style"),
                             "type": "button", "action_ts": f"{time.time():.6f}"}]}
            state["next_event"] += 1
            press_id = f"Ia{state['next_event']:08X}"
            state["events"].append({"event_id": press_id, "kind": "interactive", "payload": payload,
                                    "status": "pending", "attempts": [], "due": 0.0, "deadline": None,
                                    "acked": None, "queued_at": time.time()})
            return payload

    def method_post_ephemeral(self, state: dict, params: dict) -> dict:
        rec = self.require_channel(state, params)
        user = str_param(params, "user") or ""
        if user not in state["users"]:
            raise ApiError("user_not_found")
        if not any(m["user"] == user for m in rec["messages"].values()) and not rec["channel"].get("is_im"):
            raise ApiError("user_not_in_channel")
        text = str(params.get("text") or "")
        if not text.strip() and not params.get("blocks"):
            raise ApiError("no_text")
        ts = next_ts(rec)
        state.setdefault("ephemeral", []).append({"channel": rec["channel"]["id"], "user": user, "text": text,
                                                  "thread_ts": str_param(params, "thread_ts"), "ts": ts,
                                                  "at": time.time()})
        return {"message_ts": ts}

    def ephemeral(self, channel: Optional[str] = None) -> list[dict]:
        """What chat.postEphemeral showed, and to whom: {channel, user, text, thread_ts, ts, at}."""
        return [e for e in self.read(lambda s: list(s.get("ephemeral", [])))
                if channel is None or e["channel"] == channel]

    def interactive_events(self) -> list[dict]:
        """The presses queued, with their delivery attempts and acknowledgement (as ``events()`` shows events)."""
        return [e for e in self.read(lambda s: list(s["events"])) if e.get("kind") == "interactive"]
