"""From a Google Chat interaction event to a ``MessageEvent``: pure functions, no network.

An event is one POST to the app's HTTP endpoint, JSON: ``{"type", "eventTime", "space", "message", "user", ...}``
(its bearer token is checked before a byte of it is parsed: auth.py). ``type`` is ``MESSAGE`` (a user wrote to the
app), ``ADDED_TO_SPACE`` (the app was added; with a ``message`` when a user added it by @-mentioning it in a
message, which is then taken as that message), ``REMOVED_FROM_SPACE`` or ``CARD_CLICKED`` (a card's button: a press,
cards.py). Only messages and presses become input; everything else is answered and skipped with a log line
(``skip_reason``).

Identity: the chat is the space's resource name (``spaces/AAAA``): a dm for ``spaceType`` ``DIRECT_MESSAGE`` (or
the older ``type: DM``, ``singleUserBotDm``), a group otherwise. Google Chat delivers a space's message to an app
only when the app is @-mentioned (or a slash command names it), so every message from a space is addressed to the
bot; ``argumentText`` is its text without the mention. Threads: in a space whose messages are threaded
(``spaceThreadingState: THREADED_MESSAGES``) or for a reply in a thread (``threadReply``), the message's
``thread.name`` is the chat's thread (chat type "thread"), and the answer goes into it. Files: the message's
``attachment`` list (``attachments_of``). A message is its
``message.name`` (``spaces/AAAA/messages/BBBB``): the same in every delivery of it, so the inbox's dedup makes one
row of them; the sender is ``message.sender.name`` (``users/123``).
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload, sent_at
from actors.messages import Attachment, MessageEvent, Source

MAX_NAME_CHARS = 200
MAX_FILES = 10                 # attachments taken from one message; any more are left out
MAX_RESOURCE_CHARS = 1024      # an attachmentDataRef's resourceName
TAKEN_EVENTS = ("MESSAGE", "ADDED_TO_SPACE")
_SPACE = re.compile(r"^spaces/[A-Za-z0-9_-]{1,64}$")
_MESSAGE = re.compile(r"^spaces/[A-Za-z0-9_-]{1,64}/messages/[A-Za-z0-9_.-]{1,128}$")
_THREAD = re.compile(r"^spaces/[A-Za-z0-9_-]{1,64}/threads/[A-Za-z0-9_.-]{1,128}$")
_USER = re.compile(r"^users/[A-Za-z0-9_@.-]{1,128}$")


class EventRefused(Exception):
    """A request that carries no interaction event: refused with ``status``, nothing stored."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.reason, self.status = reason, status


def event_of(body: bytes) -> dict:
    """The event of a body whose token was verified; EventRefused for a body that is no event (a malformed message
    inside a well-formed event is ``normalise``'s to refuse)."""
    try:
        event = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise EventRefused(f"the body is no JSON ({type(exc).__name__})") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise EventRefused("the body is no interaction event (no type)")
    return event


def skip_reason(event: dict) -> Optional[str]:
    """None when the event is input (or malformed: ``normalise`` says why); otherwise why it is skipped."""
    kind = event.get("type")
    if kind not in TAKEN_EVENTS:
        return f"event {str(kind)[:24]!r}"
    if kind == "ADDED_TO_SPACE" and not isinstance(event.get("message"), dict):
        return "event 'ADDED_TO_SPACE' without a message"
    return None


def message_name(event: Any) -> Optional[str]:
    """What the event is deduplicated on: its message's resource name (None if it has none)."""
    message = event.get("message") if isinstance(event, dict) else None
    name = message.get("name") if isinstance(message, dict) else None
    return name if isinstance(name, str) and _MESSAGE.match(name) else None


def is_dm(space: dict) -> bool:
    return (space.get("spaceType") == "DIRECT_MESSAGE" or space.get("type") == "DM"
            or space.get("singleUserBotDm") is True)


def thread_of(space: dict, message: dict) -> Optional[str]:
    """The thread the answer goes into: in a threaded space, or for a reply in a thread; None otherwise."""
    if is_dm(space):
        return None
    thread = message.get("thread") if isinstance(message.get("thread"), dict) else {}
    name = thread.get("name")
    if not isinstance(name, str) or not _THREAD.match(name):
        return None
    if space.get("spaceThreadingState") == "THREADED_MESSAGES" or message.get("threadReply") is True:
        return name
    return None


def event_from_chat(event: Any, platform: str, profile: str) -> MessageEvent:
    if not isinstance(event, dict):
        raise MalformedPayload(f"event is {type(event).__name__}, not an object")
    name = message_name(event)
    if name is None:
        raise MalformedPayload(f"{str(event.get('type'))[:24]} event: no message name (spaces/*/messages/*)")
    where = f"message {name!r}"
    message, space = event["message"], event.get("space")
    if not isinstance(space, dict):
        space = message.get("space") if isinstance(message.get("space"), dict) else None
    if space is None or not isinstance(space.get("name"), str) or not _SPACE.match(space["name"]):
        raise MalformedPayload(f"{where}: no space name (spaces/*)")
    if not name.startswith(space["name"] + "/"):
        raise MalformedPayload(f"{where}: not a message of {space['name']}")
    sender = message.get("sender") if isinstance(message.get("sender"), dict) else event.get("user")
    user = sender.get("name") if isinstance(sender, dict) else None
    if not isinstance(user, str) or not _USER.match(user):
        raise MalformedPayload(f"{where}: no sender (users/*)")
    text = message.get("argumentText")
    if not isinstance(text, str):
        text = message.get("text")
    attachments = attachments_of(message)
    if not isinstance(text, str):
        if not attachments:
            raise MalformedPayload(f"{where}: a message without text")
        text = ""   # a file sent alone
    thread = thread_of(space, message)
    chat_type = "dm" if is_dm(space) else "thread" if thread else "group"
    display = sender.get("displayName") if isinstance(sender.get("displayName"), str) else None
    source = Source(platform=platform, chat_id=space["name"], chat_type=chat_type, thread_id=thread, user_id=user,
                    user_name=display[:MAX_NAME_CHARS] if display else None, profile=profile)
    return MessageEvent(source=source, text=text.strip(), platform_message_id=name, received_at=time.time(),
                        sent_at=sent_at(message.get("createTime") or event.get("eventTime")),
                        addressed=None if chat_type == "dm" else True, attachments=attachments)


def attachments_of(message: dict) -> tuple:
    """The message's files (``attachment``, a list of Attachment resources), ``MAX_FILES`` at most: uploaded content
    pending, its ref the ``attachmentDataRef.resourceName`` that ``media.download`` takes (the adapter fetches it
    with the app's token); a Google Drive file (``driveDataRef``) ``unavailable``: only the Drive API, under the
    user's own authorisation, gives its bytes, and the app has none. The kind follows ``contentType`` (the bytes'
    own type is sniffed once fetched)."""
    found = []
    items = message.get("attachment") if isinstance(message.get("attachment"), list) else []
    for item in items[:MAX_FILES]:
        if not isinstance(item, dict):
            continue
        name = item.get("contentName") if isinstance(item.get("contentName"), str) else ""
        kind = _kind_of(item.get("contentType"))
        data_ref = item.get("attachmentDataRef") if isinstance(item.get("attachmentDataRef"), dict) else {}
        resource = data_ref.get("resourceName")
        if (isinstance(resource, str) and 0 < len(resource) <= MAX_RESOURCE_CHARS and ".." not in resource
                and not resource.startswith("/") and "?" not in resource and "#" not in resource):
            found.append(Attachment(kind=kind, ref=resource, name=name[:MAX_NAME_CHARS]))
        else:
            found.append(Attachment(kind=kind, name=name[:MAX_NAME_CHARS], state="unavailable"))
    return tuple(found)


def _kind_of(content_type) -> str:
    kind = content_type.split("/", 1)[0] if isinstance(content_type, str) else ""
    return {"image": "photo", "audio": "audio", "video": "video"}.get(kind, "document")
