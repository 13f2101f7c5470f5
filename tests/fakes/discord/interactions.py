"""Message components and the interactions a press makes, as Discord's public documentation gives them.

Components: a message's ``components`` are at most 5 action rows (type 1), each of at most 5 buttons (type 2) with
a ``style`` 1-4, a ``label`` of at most 80 characters and a ``custom_id`` of at most 100, unique in the message;
anything else is 400 50035 naming the field. Only a button that is on a message can be pressed (``press_button``).

A press: ``INTERACTION_CREATE`` (type 3, MESSAGE_COMPONENT) to every session, whatever its intents (interactions
need none), with ``id``, ``application_id``, ``token``, ``version``, ``data`` {custom_id, component_type},
``channel_id``, ``channel`` {id, type}, the ``message`` the button is on, ``guild_id`` and ``member`` {user} in a
guild or ``user`` in a DM, ``app_permissions``, ``locale``. Each press is a new interaction (a double click is two).

``POST /interactions/{id}/{token}/callback`` (no bot token needed: the interaction's token is the credential) takes
one answer within ``interaction_window`` seconds of the press (3; not scaled by ``time_scale``): later, or an
unknown id or wrong token, 404 10062 "Unknown interaction"; a second answer 400 40060 "Interaction has already been
acknowledged."; a type a component interaction does not take 400 50035. Type 6 (DEFERRED_UPDATE_MESSAGE) only
acknowledges; type 7 (UPDATE_MESSAGE) edits the button's message with ``data`` (content, components) and
dispatches MESSAGE_UPDATE; type 4 (CHANNEL_MESSAGE_WITH_SOURCE) with flag 64 (EPHEMERAL) is a message only the
presser sees (kept with the interaction, not in the channel), without the flag a message in the channel. Answers 204.
"""
from __future__ import annotations

import secrets
import time
from tests.fakes.discord import protocol as p
from tests.fakes.discord.objects import member_object, message_object, new_record, user_object
from tests.fakes.discord.world import DEFAULT_USER_ID


def check_components(components) -> list:
    """``components`` as a message may carry them, else the ApiError Discord answers (50035 naming the field)."""
    from tests.fakes.discord.rest import form_error   # rest imports this module's mixin
    if components is None:
        return []
    if not isinstance(components, list) or len(components) > p.MAX_ACTION_ROWS:
        raise form_error("components", "BASE_TYPE_MAX_LENGTH", f"Must be {p.MAX_ACTION_ROWS} or fewer in length.")
    seen = set()
    for r, row in enumerate(components):
        where = f"components.{r}"
        if not isinstance(row, dict) or row.get("type") != p.ACTION_ROW:
            raise form_error(where, "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (1,).")
        buttons = row.get("components")
        if not isinstance(buttons, list) or not 1 <= len(buttons) <= p.MAX_ROW_BUTTONS:
            raise form_error(f"{where}.components", "BASE_TYPE_BAD_LENGTH",
                             f"Must be between 1 and {p.MAX_ROW_BUTTONS} in length.")
        for b, button in enumerate(buttons):
            at = f"{where}.components.{b}"
            if not isinstance(button, dict) or button.get("type") != p.BUTTON:
                raise form_error(at, "UNION_TYPE_CHOICES", "Only buttons are modelled.")
            if button.get("style") not in p.BUTTON_STYLES:
                raise form_error(f"{at}.style", "BASE_TYPE_CHOICES", "Value must be one of (1, 2, 3, 4).")
            custom_id, label = button.get("custom_id"), button.get("label")
            if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= p.MAX_CUSTOM_ID:
                raise form_error(f"{at}.custom_id", "BASE_TYPE_BAD_LENGTH",
                                 f"Must be between 1 and {p.MAX_CUSTOM_ID} in length.")
            if custom_id in seen:
                raise form_error(f"{at}.custom_id", "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot "
                                 "be duplicated")
            seen.add(custom_id)
            if label is not None and (not isinstance(label, str) or len(label) > p.MAX_BUTTON_LABEL):
                raise form_error(f"{at}.label", "BASE_TYPE_MAX_LENGTH", f"Must be {p.MAX_BUTTON_LABEL} or fewer in "
                                 "length.")
    return components


class InteractionMethods:
    """Mixin for FakeDiscord: presses (``press_button``), the callback route and what each interaction was
    answered (``interaction``)."""

    def press_button(self, channel_id: int, message_id: int, custom_id: str, *, user_id: int = DEFAULT_USER_ID,
                     username: str = "alice") -> dict:
        """A user presses the button ``custom_id`` of a message; returns the INTERACTION_CREATE data. A button
        the message does not carry cannot be pressed (ValueError)."""
        user_id = int(user_id)
        with self.mutate() as state:
            channel = state["channels"][str(int(channel_id))]
            record = channel["messages"].get(str(int(message_id)))
            if record is None or record["deleted"]:
                raise ValueError(f"no message {message_id} in channel {channel_id}")
            buttons = [b for row in record["components"] for b in row.get("components", [])]
            if not any(b.get("custom_id") == custom_id and not b.get("disabled") for b in buttons):
                raise ValueError(f"message {message_id} has no button {custom_id!r} to press")
            guild_id = record["guild_id"]
            self._ensure_user(state, user_id, username, guild_id)
            interaction_id = p.next_snowflake(state)
            data = {"id": str(interaction_id), "application_id": str(state["bot_id"]),
                    "type": p.MESSAGE_COMPONENT_INTERACTION, "token": "aW50ZXJhY3Rpb24" + secrets.token_urlsafe(40),
                    "version": 1, "data": {"custom_id": custom_id, "component_type": p.BUTTON},
                    "channel_id": str(record["channel_id"]),
                    "channel": {"id": str(record["channel_id"]), "type": channel["channel"]["type"]},
                    "message": message_object(state, record), "app_permissions": "0", "locale": "en-US",
                    "entitlements": [], "context": 0 if guild_id is not None else 1}
            if guild_id is not None:
                data["guild_id"] = str(guild_id)
                data["guild_locale"] = "en-US"
                data["member"] = dict(member_object(state, state["guilds"][str(guild_id)], user_id),
                                      permissions="0")
            else:
                data["user"] = user_object(state, user_id)
            state["interactions"][str(interaction_id)] = {
                "id": str(interaction_id), "token": data["token"], "channel_id": record["channel_id"],
                "message_id": record["id"], "user_id": user_id, "custom_id": custom_id, "created_at": time.time(),
                "response": None, "responded_at": None, "ephemeral": None, "refused": []}
            self.dispatch_event(state, "INTERACTION_CREATE", lambda _: dict(data), guild_id=guild_id, intent=None)
            return data

    def interaction(self, interaction_id) -> dict:
        """What became of a press: ``response`` (the callback's body, None while unanswered), ``responded_at``,
        ``ephemeral`` (the text only the presser saw), ``refused`` (the codes of refused callbacks)."""
        return self.read(lambda s: dict(s["interactions"][str(interaction_id)]))

    def route_interaction_callback(self, state, params, body):
        from tests.fakes.discord.rest import ApiError, form_error
        entry = state["interactions"].get(str(params["interaction_id"]))
        window = self.limits["interaction_window"]
        if entry is None or entry["token"] != params["interaction_token"] or \
                time.time() - entry["created_at"] > window:
            if entry is not None:
                entry["refused"].append(p.UNKNOWN_INTERACTION)
            raise ApiError(404, p.UNKNOWN_INTERACTION, "Unknown interaction")
        if entry["response"] is not None:
            entry["refused"].append(p.INTERACTION_ALREADY_ACKNOWLEDGED)
            raise ApiError(400, p.INTERACTION_ALREADY_ACKNOWLEDGED, "Interaction has already been acknowledged.")
        kind, data = body.get("type"), body.get("data") or {}
        if kind not in p.COMPONENT_CALLBACK_TYPES or not isinstance(data, dict):
            raise form_error("type", "BASE_TYPE_CHOICES", "Value must be one of (4, 5, 6, 7, 9).")
        channel = state["channels"][str(entry["channel_id"])]
        if kind == 7:
            record = self.require_message(channel, entry["message_id"])
            content = self._checked_content(data["content"]) if "content" in data else record["content"]
            components = check_components(data["components"]) if "components" in data else record["components"]
            now = time.time()
            record.update(content=content, components=components, edited_at=now)
            record["history"].append({"content": content, "at": now})
            self.dispatch_message(state, "MESSAGE_UPDATE", record)
        elif kind == 4:
            content = self._checked_content(data.get("content"))
            if (data.get("flags") or 0) & p.EPHEMERAL_FLAG:
                entry["ephemeral"] = content
            else:
                record = new_record(message_id=p.next_snowflake(state), channel=channel,
                                    author_id=state["bot_id"], content=content, outgoing=True, mentions=[])
                channel["messages"][str(record["id"])] = record
                self.dispatch_message(state, "MESSAGE_CREATE", record)
        entry["response"], entry["responded_at"] = body, time.time()
        return 204, None
