"""From a Bot Framework activity to a ``MessageEvent``: pure functions, no network.

An activity is one POST to the bot's messaging endpoint, JSON: ``{"type", "id", "timestamp", "serviceUrl",
"channelId", "from", "conversation", "recipient", "text", "entities", "channelData", "replyToId"}`` (its token is
checked against it first: auth.py). Only ``message`` activities become input; a ``fileConsent/invoke`` is the answer
to a file the bot offered (files.py, the adapter acts on it); ``conversationUpdate``, ``typing``,
``messageReaction``, other ``invoke``s, ``installationUpdate`` and the rest are answered and skipped
(``skip_reason``). Files: ``attachments_of``.

Identity: the chat is ``conversation.id``. ``conversationType`` ``personal`` is a dm, ``groupChat`` a group,
``channel`` a thread of a team's channel: its conversation id ends in ``;messageid=<the thread's first post>``
(a new post's own id when it starts one) and the answer goes into it, as a reply to that post (``replyToId``).
Teams gives a bot a channel's message only when it is @-mentioned (the mention is required here besides: a channel
message that does not mention the bot is skipped), and a group chat's when it is mentioned or the app has the chat's
messages permission (``addressed`` says which). The bot's mentions (``entities`` of type ``mention`` naming the
recipient) are cut from the text, other users' ``<at>`` tags are left as their names. A message is
``<activity id>@<conversation id>`` (activity ids are unique only within a conversation), the same in every
delivery, so the inbox's dedup makes one row of them; the sender is ``from.id`` (``29:...``).
"""
from __future__ import annotations

import html
import json
import re
import time
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload, sent_at
from actors.adapters.teams.files import DOWNLOAD_INFO
from actors.messages import Attachment, MessageEvent, Source

MAX_ID_CHARS = 512
MAX_NAME_CHARS = 200
MAX_FILES = 10            # images taken from one message; any more are left out
MAX_URL_CHARS = 2048
MAX_DOWNLOAD_URL_CHARS = 8192   # a SharePoint download link carries its own access token
SHARED_REF = "shared:"   # a shared file's ref: its pre-authenticated download URL, fetched without the token
IMAGE_FILE_TYPES = ("png", "jpg", "jpeg", "gif", "bmp", "webp")
CHAT_TYPES = {"personal": "dm", "groupChat": "group", "channel": "thread"}
_THREAD_MARK = ";messageid="
_AT_TAG = re.compile(r"</?at>", re.IGNORECASE)


class ActivityRefused(Exception):
    """A request that carries no activity: refused with ``status``, nothing stored."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.reason, self.status = reason, status


def activity_of(body: bytes) -> dict:
    """The activity of a request's body; ActivityRefused for a body that is none (a malformed message inside a
    well-formed activity is ``normalise``'s to refuse)."""
    try:
        activity = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ActivityRefused(f"the body is no JSON ({type(exc).__name__})") from None
    if not isinstance(activity, dict) or not isinstance(activity.get("type"), str):
        raise ActivityRefused("the body is no activity (no type)")
    if not isinstance(activity.get("serviceUrl"), str):
        raise ActivityRefused("the activity names no serviceUrl")
    return activity


def conversation_of(activity: Any) -> dict:
    conversation = activity.get("conversation") if isinstance(activity, dict) else None
    return conversation if isinstance(conversation, dict) else {}


def conversation_id(activity: Any) -> Optional[str]:
    cid = conversation_of(activity).get("id")
    return cid if isinstance(cid, str) and 0 < len(cid) <= MAX_ID_CHARS else None


def mentions_bot(activity: dict) -> bool:
    bot = (activity.get("recipient") or {}).get("id") if isinstance(activity.get("recipient"), dict) else None
    return any(isinstance(e, dict) and e.get("type") == "mention" and isinstance(e.get("mentioned"), dict)
               and e["mentioned"].get("id") == bot for e in activity.get("entities") or [] if bot)


def skip_reason(activity: dict) -> Optional[str]:
    """None when the activity is input (or malformed: ``normalise`` says why); otherwise why it is skipped."""
    kind = activity.get("type")
    if kind != "message":
        return f"activity {str(kind)[:24]!r}"
    if conversation_of(activity).get("conversationType") == "channel" and not mentions_bot(activity):
        return "a channel message that does not mention the bot"
    return None


def message_key(activity: Any) -> Optional[str]:
    """What the activity is deduplicated on: ``<id>@<conversation id>`` (None if it has no usable ids)."""
    aid, cid = activity.get("id") if isinstance(activity, dict) else None, conversation_id(activity)
    if not isinstance(aid, str) or not aid or "@" in aid or len(aid) > MAX_ID_CHARS or cid is None:
        return None
    return f"{aid}@{cid}"


def activity_id_of(key: str) -> str:
    """The activity id of a ``message_key`` (or of a plain activity id)."""
    return key.split("@", 1)[0]


def text_without_mentions(activity: dict) -> str:
    text = activity.get("text") if isinstance(activity.get("text"), str) else ""
    bot = (activity.get("recipient") or {}).get("id") if isinstance(activity.get("recipient"), dict) else None
    for entity in activity.get("entities") or []:
        if not (isinstance(entity, dict) and entity.get("type") == "mention" and isinstance(entity.get("text"), str)):
            continue
        mentioned = entity.get("mentioned") if isinstance(entity.get("mentioned"), dict) else {}
        if mentioned.get("id") == bot:
            text = text.replace(entity["text"], "")
    return html.unescape(_AT_TAG.sub("", text)).strip()


def event_from_activity(activity: Any, platform: str, profile: str) -> MessageEvent:
    if not isinstance(activity, dict):
        raise MalformedPayload(f"activity is {type(activity).__name__}, not an object")
    key = message_key(activity)
    if key is None:
        raise MalformedPayload(f"{str(activity.get('type'))[:24]} activity: no id or conversation id")
    where = f"activity {key[:80]!r}"
    conversation = conversation_of(activity)
    chat_type = CHAT_TYPES.get(conversation.get("conversationType") or "personal")
    if chat_type is None:
        raise MalformedPayload(f"{where}: conversation type {str(conversation.get('conversationType'))[:24]!r}")
    sender = activity.get("from") if isinstance(activity.get("from"), dict) else {}
    user = sender.get("id")
    if not isinstance(user, str) or not user or len(user) > MAX_ID_CHARS:
        raise MalformedPayload(f"{where}: no sender (from.id)")
    attachments = attachments_of(activity)
    if not isinstance(activity.get("text"), str) and not (attachments and "text" not in activity):
        raise MalformedPayload(f"{where}: a message without text")
    chat = conversation["id"]
    thread = None
    if chat_type == "thread":
        thread = chat.split(_THREAD_MARK, 1)[1] if _THREAD_MARK in chat else activity_id_of(key)
    name = sender.get("name") if isinstance(sender.get("name"), str) else None
    channel_data = activity.get("channelData") if isinstance(activity.get("channelData"), dict) else {}
    team = channel_data.get("team") if isinstance(channel_data.get("team"), dict) else {}
    tenant = conversation.get("tenantId")
    community = team.get("id") if isinstance(team.get("id"), str) else tenant if isinstance(tenant, str) else None
    source = Source(platform=platform, chat_id=chat, chat_type=chat_type, thread_id=thread, user_id=user,
                    user_name=name[:MAX_NAME_CHARS] if name else None, profile=profile,
                    community=community[:MAX_ID_CHARS] if community else None)
    reply_to = activity.get("replyToId")
    return MessageEvent(source=source, text=text_without_mentions(activity), platform_message_id=key,
                        received_at=time.time(), sent_at=sent_at(activity.get("timestamp")), attachments=attachments,
                        reply_to_message_id=reply_to if isinstance(reply_to, str) and reply_to else None,
                        addressed=None if chat_type == "dm" else mentions_bot(activity))


def attachments_of(activity: dict) -> tuple:
    """The files of the message, pending, ``MAX_FILES`` at most:

    * images pasted into it: an attachment of an ``image/*`` type whose ``contentUrl`` is on the activity's own
      Connector (``<serviceUrl>v3/attachments/...``, fetched with the bot's access token). One elsewhere is
      ``unavailable``: the bot's token goes to no other host;
    * files shared from OneDrive or SharePoint (files.py): ``application/vnd.microsoft.teams.file.download.info``,
      ref ``shared:<content.downloadUrl>`` (a pre-authenticated link, fetched without the token; the adapter checks
      its host before it fetches), named by the attachment's ``name``. One without a download URL is
      ``unavailable``.

    Cards and the ``text/html`` copy of the message are not taken."""
    service = activity.get("serviceUrl")
    base = service if isinstance(service, str) and service.endswith("/") else f"{service}/"
    found = []
    for item in activity.get("attachments") if isinstance(activity.get("attachments"), list) else []:
        kind, url = (item.get("contentType"), item.get("contentUrl")) if isinstance(item, dict) else (None, None)
        shared = kind == DOWNLOAD_INFO
        if not (shared or (isinstance(kind, str) and kind.startswith("image/"))):
            continue
        if len(found) >= MAX_FILES:
            break
        name = item.get("name") if isinstance(item.get("name"), str) else ""
        if shared:
            found.append(_shared_file(item, name[:MAX_NAME_CHARS]))
            continue
        if not (isinstance(url, str) and isinstance(service, str) and url.startswith(base + "v3/attachments/")
                and len(url) <= MAX_URL_CHARS):
            found.append(Attachment(kind="photo", state="unavailable"))
            continue
        found.append(Attachment(kind="photo", ref=url, name=name))
    return tuple(found)


def _shared_file(item: dict, name: str) -> Attachment:
    content = item.get("content") if isinstance(item.get("content"), dict) else {}
    url, file_type = content.get("downloadUrl"), content.get("fileType")
    kind = "photo" if isinstance(file_type, str) and file_type.lower() in IMAGE_FILE_TYPES else "document"
    if not (isinstance(url, str) and url.startswith(("https://", "http://")) and len(url) <= MAX_DOWNLOAD_URL_CHARS):
        return Attachment(kind=kind, name=name, state="unavailable")
    return Attachment(kind=kind, ref=SHARED_REF + url, name=name)
