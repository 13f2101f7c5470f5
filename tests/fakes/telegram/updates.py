"""Inbound side of the fake Bot API: injecting user messages, getUpdates (offset confirmation, long polling,
limit, allowed_updates, 409 for a second poller or while a webhook is set) and webhook delivery (POST with
X-Telegram-Bot-Api-Secret-Token, in order, retried until the receiver answers 2xx).

Every getUpdates served is recorded (``polls``: when it came, from which address, how it ended), and two stats tell
whether pollers ever overlapped: ``poll_conflicts`` counts the polls answered 409 because a newer one arrived while
they waited, ``max_polls_pending`` is the most polls ever waiting at once. One bot instance polling keeps them at 0
and 1; two gateways fighting over one token raise both (a network-cut poller's last poll still waits here until its
own timeout, as at Telegram, so a newer poll within that time counts too).

Webhook delivery is one update at a time, oldest first: simpler than Telegram's ``max_connections`` parallel
pushes and stricter about order, which is what the gateway's tests need. Plain http:// URLs are accepted.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import time
from typing import Optional

import aiohttp

from tests.fakes.telegram.botapi import ApiError, bool_param, int_param, json_param

SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
POLLS_KEPT = 20_000   # records of getUpdates kept (the oldest go first): hours of one poller at a 1 s long poll
DEFAULT_CHAT_IDS = {"group": -100200, "supergroup": -1001000000001}


class Described:
    """A result with the description some methods add (setWebhook: "Webhook was set")."""

    def __init__(self, result, description: str):
        self.result, self.description = result, description


def pending_updates(state: dict) -> list[dict]:
    return [u for u in state["updates"] if u["update_id"] >= state["confirmed_offset"]]


# Update kinds Telegram delivers only to a bot that lists them in allowed_updates (core.telegram.org/bots/api#update).
OPT_IN_KINDS = ("message_reaction", "message_reaction_count", "chat_member")


class UpdateMethods:
    """Mixin for FakeTelegram (uses ``store_message``, ``message_object``, ``mutate``, ``read``)."""

    # -- injection (in-process API; the control API calls these)
    def inject_message(self, text: str, chat_id: Optional[int] = None, *, chat_type: str = "private",
                       user_id: Optional[int] = None, username: str = "alice", first_name: str = "Alice",
                       title: Optional[str] = None, is_forum: bool = False,
                       thread_id: Optional[int] = None, media: Optional[dict] = None) -> dict:
        """A user's message arrives; returns the Update (``update_id``, ``message.message_id``).

        In a private chat the chat id is the user's id (either may be given); groups get a default id."""
        if chat_type not in ("private", "group", "supergroup"):
            raise ValueError(f"chat_type must be private, group or supergroup, not {chat_type!r}")
        if chat_type == "private":
            user_id = chat_id = next((int(i) for i in (chat_id, user_id) if i is not None), 1001)
        chat_id = int(chat_id if chat_id is not None else DEFAULT_CHAT_IDS[chat_type])
        sender = {"id": int(user_id if user_id is not None else 1001), "is_bot": False, "first_name": first_name,
                  "username": username}
        with self.mutate() as state:
            chat = self._ensure_chat(state, chat_id, chat_type, sender, title, is_forum)
            if thread_id is not None and thread_id not in chat["topics"]:
                chat["topics"].append(int(thread_id))
            message = self.store_message(chat, outgoing=False, text=str(text), entities=[], sender=sender,
                                         thread_id=None if thread_id is None else int(thread_id))
            if media:   # a photo, document, voice...: the text is its caption (tests/fakes/telegram/files.py)
                message["media"] = dict(media)
            return self._queue_update(state, "message", self.message_object(chat, message))

    def inject_reaction(self, chat_id: int, message_id: int, emoji: list, user_id: Optional[int] = None,
                        old: Optional[list] = None) -> dict:
        """A user reacts to a message (the bot's, say): a ``message_reaction`` update showing ``emoji`` now."""
        with self.mutate() as state:
            chat = state["chats"][str(int(chat_id))]
            user = {"id": int(user_id if user_id is not None else chat_id), "is_bot": False, "first_name": "Alice"}
            body = {"chat": chat["chat"], "message_id": int(message_id), "user": user, "date": int(time.time()),
                    "old_reaction": [{"type": "emoji", "emoji": e} for e in old or ()],
                    "new_reaction": [{"type": "emoji", "emoji": e} for e in emoji]}
            return self._queue_update(state, "message_reaction", body)

    def inject_edit(self, chat_id: int, message_id: int, text: str) -> dict:
        """The user edits an earlier message: an ``edited_message`` update."""
        with self.mutate() as state:
            chat = state["chats"][str(int(chat_id))]
            message = chat["messages"][str(int(message_id))]
            message.update(text=str(text), edit_date=int(time.time()))
            message["history"].append({"text": str(text), "raw_text": str(text), "parse_mode": None,
                                       "at": time.time()})
            return self._queue_update(state, "edited_message", self.message_object(chat, message))

    def press_button(self, chat_id: int, message_id: int, data: str, user_id: Optional[int] = None,
                     username: str = "alice", first_name: str = "Alice", query_id: Optional[str] = None) -> dict:
        """A user presses the inline button with ``data`` on a message of the bot: a ``callback_query`` update
        (core.telegram.org/bots/api#callbackquery) with a unique ``id`` (or ``query_id``: a client's retry of the
        same press), ``from``, ``message`` (the message the button is on, with its chat) and ``data``. Refused
        (ValueError) when the message has no button with that data, as no client could press it."""
        with self.mutate() as state:
            chat = state["chats"][str(int(chat_id))]
            message = chat["messages"][str(int(message_id))]
            buttons = [b for row in (message.get("reply_markup") or {}).get("inline_keyboard", ()) for b in row]
            if not any(b.get("callback_data") == data for b in buttons):
                raise ValueError(f"message {message_id} of chat {chat_id} has no button with data {data!r}")
            query_id = str(query_id) if query_id is not None else f"{chat_id}{state['next_update_id']}"
            state["callback_queries"].setdefault(query_id, {"answer": None})
            sender = {"id": int(user_id if user_id is not None else chat_id), "is_bot": False,
                      "first_name": first_name, "username": username}
            body = {"id": query_id, "from": sender, "message": self.message_object(chat, message),
                    "chat_instance": str(chat_id), "data": data}
            return self._queue_update(state, "callback_query", body)

    def add_topic(self, chat_id: int, thread_id: int) -> None:
        with self.mutate() as state:
            topics = state["chats"][str(int(chat_id))]["topics"]
            if int(thread_id) not in topics:
                topics.append(int(thread_id))

    def _ensure_chat(self, state, chat_id, chat_type, sender, title, is_forum) -> dict:
        if str(chat_id) not in state["chats"]:
            if chat_type == "private":
                chat = {"id": chat_id, "type": "private", "first_name": sender["first_name"],
                        "username": sender["username"]}
            else:
                chat = {"id": chat_id, "type": chat_type, "title": title or f"Test {chat_type} {chat_id}"}
                if is_forum:
                    chat["is_forum"] = True
            state["chats"][str(chat_id)] = {"chat": chat, "next_message_id": 1, "messages": {}, "ops": [],
                                            "topics": [], "blocked": False}
        return state["chats"][str(chat_id)]

    def _queue_update(self, state: dict, kind: str, message: dict) -> dict:
        update = {"update_id": state["next_update_id"], kind: message}
        state["next_update_id"] += 1
        allowed = state["allowed_updates"]
        # Filtered as the bot asked, never delivered; without a list, the kinds Telegram sends only when asked.
        if (allowed and kind not in allowed) or (not allowed and kind in OPT_IN_KINDS):
            state["stats"]["updates_filtered"] += 1
            return update
        state["updates"].append(update)
        return update

    # -- getUpdates
    async def get_updates(self, params: dict, peer: Optional[str] = None) -> list[dict]:
        """``peer``: the caller's address, kept in the poll's record."""
        offset = int_param(params, "offset") or 0
        limit = min(max(int_param(params, "limit") or 100, 1), 100)
        timeout = max(int_param(params, "timeout") or 0, 0)
        allowed = json_param(params, "allowed_updates")
        with self.mutate() as state:
            record = self._open_poll(state, peer, offset, timeout)
        try:
            batch = await self._long_poll(record, offset, limit, timeout, allowed)
        except ApiError as exc:
            self._close_poll(record, exc.code)
            raise
        except BaseException:   # the client went away (aiohttp cancels the handler) or the fake stops
            self._close_poll(record, None)
            raise
        self._close_poll(record, 200, len(batch))
        return batch

    def _open_poll(self, state: dict, peer: Optional[str], offset: int, timeout: int) -> dict:
        polls = state.setdefault("polls", [])
        record = {"id": state.get("next_poll_id", 1), "peer": peer, "at": time.time(), "offset": offset,
                  "timeout": timeout, "ended_at": None, "status": None, "updates": None, "ended_by": None}
        state["next_poll_id"] = record["id"] + 1
        polls.append(record)
        del polls[:-POLLS_KEPT]
        self.polls_pending += 1
        stats = state["stats"]
        stats["max_polls_pending"] = max(stats.get("max_polls_pending", 0), self.polls_pending)
        return record

    def _close_poll(self, record: dict, status: Optional[int], updates: Optional[int] = None) -> None:
        """``status`` None: never answered (the client left first). A poll a newer one cut (``ended_by``) counts
        as a conflict."""
        with self.mutate() as state:
            self.polls_pending -= 1
            record.update(ended_at=time.time(), status=status, updates=updates)
            if record["ended_by"] is not None:
                state["stats"]["poll_conflicts"] = state["stats"].get("poll_conflicts", 0) + 1

    async def _long_poll(self, record: dict, offset: int, limit: int, timeout: int, allowed) -> list[dict]:
        with self.mutate() as state:
            if state["webhook"] is not None:
                raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active; "
                                    "use deleteWebhook to delete the webhook first")
            pending = pending_updates(state)
            if offset > 0:  # confirms every update below offset: they are never returned again
                state["confirmed_offset"] = max(state["confirmed_offset"], offset)
            elif offset < 0 and len(pending) > -offset:  # keep only the last -offset updates
                state["confirmed_offset"] = pending[offset]["update_id"]
            if allowed is not None:
                state["allowed_updates"] = list(allowed)
            self.poll_generation += 1
            mine, self.newest_poll = self.poll_generation, record
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            with self._lock:
                if self.poll_generation != mine:
                    newer = self.newest_poll   # persisted as the poll closes, right after this
                    record["ended_by"] = {"id": newer["id"], "peer": newer["peer"]}
                    raise ApiError(409, "Conflict: terminated by other getUpdates request; make sure that only "
                                        "one bot instance is running")
                batch = self.read(lambda s: pending_updates(s)[:limit])
            if batch or loop.time() >= deadline:
                return batch
            await self.wait_for_change(deadline - loop.time())

    # -- webhooks
    def method_set_webhook(self, state: dict, params: dict):
        url = params.get("url") or ""
        if not url:
            return self.method_delete_webhook(state, params)
        if not re.match(r"https?://", url):
            raise ApiError(400, "Bad Request: bad webhook: invalid webhook URL specified")
        secret = params.get("secret_token")
        if secret is not None and not SECRET_TOKEN.fullmatch(str(secret)):
            raise ApiError(400, "Bad Request: secret token contains unallowed characters")
        if bool_param(params, "drop_pending_updates"):
            state["confirmed_offset"] = state["next_update_id"]
        allowed = json_param(params, "allowed_updates")
        if allowed is not None:
            state["allowed_updates"] = list(allowed)
        state["webhook"] = {"url": url, "secret_token": secret, "max_connections":
                            int_param(params, "max_connections") or 40, "last_error_date": None,
                            "last_error_message": None}
        return Described(True, "Webhook was set")

    def method_delete_webhook(self, state: dict, params: dict):
        was_set, state["webhook"] = state["webhook"] is not None, None
        if bool_param(params, "drop_pending_updates"):
            state["confirmed_offset"] = state["next_update_id"]
        return Described(True, "Webhook was deleted" if was_set else "Webhook is already deleted")

    def method_get_webhook_info(self, state: dict, params: dict) -> dict:
        hook = state["webhook"] or {}
        info = {"url": hook.get("url", ""), "has_custom_certificate": False,
                "pending_update_count": len(pending_updates(state))}
        if hook:
            info["max_connections"] = hook["max_connections"]
            if hook["last_error_date"]:
                info["last_error_date"] = hook["last_error_date"]
                info["last_error_message"] = hook["last_error_message"]
        if state["allowed_updates"]:
            info["allowed_updates"] = state["allowed_updates"]
        return info

    async def deliver_webhooks(self) -> None:
        """Background task: push pending updates to the webhook, oldest first, until each is answered 2xx."""
        async with aiohttp.ClientSession() as session:
            while True:
                hook, update = self.read(lambda s: (s["webhook"], next(iter(pending_updates(s)), None)))
                if hook is None or update is None:
                    await self.wait_for_change(30.0)
                    continue
                headers = {"X-Telegram-Bot-Api-Secret-Token": hook["secret_token"]} if hook["secret_token"] else {}
                error = None
                try:
                    async with session.post(hook["url"], json=update, headers=headers,
                                            timeout=aiohttp.ClientTimeout(total=10)) as resp:
                        if not 200 <= resp.status < 300:
                            error = f"Wrong response from the webhook: {resp.status} {resp.reason}"
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    error = f"Connection failed: {type(exc).__name__}"
                self._record_delivery(hook["url"], update["update_id"], error)
                if error:
                    # Server-side retry backoff (Telegram's is longer); not a test synchronisation point.
                    await asyncio.sleep(self.limits["webhook_retry_delay"])

    def _record_delivery(self, url: str, update_id: int, error: Optional[str]) -> None:
        with self.mutate() as state:
            state["webhook_log"].append({"update_id": update_id, "at": time.time(), "url": url, "error": error})
            hook = state["webhook"]
            if error is None:
                state["stats"]["webhook_deliveries"] += 1
                state["confirmed_offset"] = max(state["confirmed_offset"], update_id + 1)
            else:
                state["stats"]["webhook_failures"] += 1
                if hook is not None and hook["url"] == url:
                    hook["last_error_date"], hook["last_error_message"] = int(time.time()), error

    async def stop_webhook_delivery(self, task: Optional[asyncio.Task]) -> None:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
