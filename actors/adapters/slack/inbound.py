"""From a Slack ``event_callback`` to a ``MessageEvent``: pure functions, no network.

Both transports carry the same wrapper (``{"type": "event_callback", "event_id", "event": {...}}``; Socket Mode
inside an envelope's ``payload``). Which events become input (``skip_reason`` is None):

* ``message`` without a subtype (or ``thread_broadcast``), written by a person, in a DM, a channel or a private
  channel; in a channel only when it mentions the bot as ``<@BOT_USER_ID>``, unless ``require_mention`` is off;
* ``app_mention`` (a channel message naming the bot; Slack sends it beside the ``message`` event of the same
  message when the app subscribes to both: they share one id below, so the inbox keeps one row).

Skipped, acknowledged without a word: the bot's own messages (Slack delivers an app its own posts; they carry
``bot_id``), edits and deletions (``message_changed``, ``message_deleted``: a changed message is not a new
question), joins and other subtypes, and event types the app did not ask for.

Identity: a message is ``"<channel>:<ts>"`` (``ts`` is unique within a conversation), which is also what every
re-delivery of its event carries, so retries and the message/app_mention pair deduplicate on it (G2). Chats:
``im`` -> "dm"; a channel -> "group", or "thread" with ``thread_id = thread_ts`` for a reply in a thread (its own
session; the answer goes into that thread). A DM reply in a thread keeps the DM's session and is answered in the
thread too.
"""
from __future__ import annotations

import re
import time
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload, a_nonempty_string, a_string, an_object
from actors.adapters.slack.formatting import unescape
from actors.messages import MessageEvent, Source

INPUT_SUBTYPES = (None, "thread_broadcast")
TS = re.compile(r"\d{1,12}\.\d{1,9}")


def event_of(payload: Any) -> Any:
    return payload.get("event") if isinstance(payload, dict) else None


def skip_reason(payload: Any, bot_user_id: str, require_mention: bool) -> Optional[str]:
    """None when ``payload`` is (or pretends to be) input; otherwise why it is acknowledged and skipped. Anything
    not even shaped like an event goes on to ``event_from_callback``, to be rejected loudly."""
    if not isinstance(payload, dict) or not isinstance(event_of(payload), dict):
        return None if not isinstance(payload, dict) or payload.get("type") == "event_callback" else \
            f"payload type {payload.get('type')!r}"
    event = payload["event"]
    kind = event.get("type")
    if kind not in ("message", "app_mention"):
        return f"event type {kind!r}"
    if event.get("subtype") not in INPUT_SUBTYPES:
        return f"message subtype {event.get('subtype')!r}"
    if event.get("bot_id") or (bot_user_id and event.get("user") == bot_user_id):
        return "the bot's own message"
    if kind == "message" and chat_type_of(event) != "dm" and require_mention:
        text = event.get("text")
        if isinstance(text, str) and not mentions(text, bot_user_id):
            return "a channel message that does not mention the bot"
    return None


def mentions(text: str, user_id: str) -> bool:
    return bool(user_id) and re.search(rf"<@{re.escape(user_id)}(\|[^>]*)?>", text) is not None


def strip_mention(text: str, user_id: str) -> str:
    """"<@BOT> what now?" -> "what now?": the model is asked the question, not told its own id."""
    if not user_id:
        return text
    return re.sub(rf"\s*<@{re.escape(user_id)}(\|[^>]*)?>\s*", " ", text).strip()


def chat_type_of(event: dict) -> str:
    kind = event.get("channel_type")
    if kind == "im" or (kind is None and str(event.get("channel", ""))[:1] == "D"):
        return "dm"
    return "group"


def event_from_callback(payload: Any, platform: str, profile: str, bot_user_id: str = "") -> MessageEvent:
    an_object(payload, "payload")
    where = f"event {payload.get('event_id')!r}"
    event = an_object(payload.get("event"), f"{where}: event")
    channel = a_nonempty_string(event.get("channel"), f"{where}: channel")
    text, ts = a_string(event.get("text"), f"{where}: text"), event.get("ts")
    if not isinstance(ts, str) or not TS.fullmatch(ts):
        raise MalformedPayload(f"{where}: ts must be a Slack timestamp string, got {ts!r}")
    thread_ts = event.get("thread_ts")
    thread_ts = thread_ts if isinstance(thread_ts, str) and TS.fullmatch(thread_ts) and thread_ts != ts else None
    chat_type = chat_type_of(event)
    if chat_type != "dm" and thread_ts is not None:
        chat_type = "thread"
    user = event.get("user")
    source = Source(platform=platform, chat_id=channel, chat_type=chat_type, thread_id=thread_ts,
                    user_id=user if isinstance(user, str) and user else None, profile=profile,
                    community=payload.get("team_id") if isinstance(payload.get("team_id"), str) else None)
    return MessageEvent(source=source, text=unescape(strip_mention(text, bot_user_id)),
                        platform_message_id=f"{channel}:{ts}", received_at=time.time(), sent_at=float(ts))
