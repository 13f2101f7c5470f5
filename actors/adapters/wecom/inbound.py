"""From a WeCom callback's XML to a ``MessageEvent``: pure functions, no network.

A POSTed callback is an envelope ``<xml><ToUserName/><AgentID/><Encrypt/></xml>``; ``Encrypt`` holds the message
(crypto.py), itself XML with one element per field::

    <xml><ToUserName>corp id</ToUserName><FromUserName>the member's UserID</FromUserName>
         <CreateTime>1348831860</CreateTime><MsgType>text</MsgType><Content>hello</Content>
         <MsgId>1234567890123456</MsgId><AgentID>1000002</AgentID></xml>

Both are parsed with defusedxml, DTDs forbidden outright: an entity bomb or an external entity is refused before
a byte of it is expanded (``CallbackRefused``), as is anything that is no well-formed ``<xml>`` of flat fields.

Which messages become input: ``text`` (``Content``); ``image`` (``MediaId``, fetched with media/get before the row
is stored: media_intake.py), ``voice`` (``MediaId``, ``Format``) and ``video`` (``MediaId``) as attachments;
``location`` and ``link`` as a line of text saying what was shared. Events (``MsgType`` ``event``: entering the
app, subscribing, menu clicks) are acknowledged and skipped (``skip_reason``): no one asked anything.

Identity: a member writes to the application in a one-to-one chat, so the chat is the member (``chat_id`` =
``user_id`` = ``FromUserName``, a dm), and the answer goes to ``touser`` = that UserID. A message is its ``MsgId``
(64-bit, unique), which every retry of its callback carries: the inbox dedup makes three deliveries one row (G2).
"""
from __future__ import annotations

import time
import xml.etree.ElementTree as ElementTree
from typing import Any, Optional

import defusedxml
import defusedxml.ElementTree as SafeElementTree

from actors.adapters.intake import MalformedPayload
from actors.adapters.wecom.crypto import CallbackRefused
from actors.messages import Attachment, MessageEvent, Source

MAX_FIELDS = 64          # a message has about ten; nothing legitimate comes close
MEDIA_KINDS = {"image": "photo", "voice": "voice", "video": "video"}


def parse_fields(xml: bytes, what: str) -> dict[str, str]:
    """The flat fields of an ``<xml>`` document: {tag: text}; CallbackRefused for anything else."""
    try:
        root = SafeElementTree.fromstring(xml, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except defusedxml.DefusedXmlException as exc:
        raise CallbackRefused(f"{what}: XML refused ({type(exc).__name__}: a DTD, an entity or an external "
                              "reference)") from None
    except (ElementTree.ParseError, ValueError, RecursionError) as exc:
        raise CallbackRefused(f"{what}: malformed XML ({type(exc).__name__}: {str(exc)[:80]})") from None
    if root.tag != "xml":
        raise CallbackRefused(f"{what}: the root element is <{root.tag[:40]}>, not <xml>")
    children = list(root)
    if len(children) > MAX_FIELDS:
        raise CallbackRefused(f"{what}: {len(children)} fields, over {MAX_FIELDS}")
    return {child.tag: (child.text or "").strip() if child.tag != "Content" else (child.text or "")
            for child in children}


def encrypted_of(envelope: bytes) -> str:
    """The ``Encrypt`` field of a POSTed envelope (what the signature covers)."""
    encrypted = parse_fields(envelope, "envelope").get("Encrypt", "")
    if not encrypted:
        raise CallbackRefused("envelope: no Encrypt field")
    return encrypted


def skip_reason(message: dict) -> Optional[str]:
    """None when the message is input; otherwise why it is acknowledged and skipped."""
    kind = message.get("MsgType")
    if kind == "event":
        return f"event {message.get('Event', '?')!r}"
    return None


def _text_of(kind: str, message: dict, where: str) -> str:
    if kind == "text":
        content = message.get("Content")
        if not isinstance(content, str):
            raise MalformedPayload(f"{where}: a text message without Content")
        return content
    if kind == "location":
        label = message.get("Label") or "a place"
        return f"[shared a location: {label} ({message.get('Location_X', '?')}, {message.get('Location_Y', '?')})]"
    if kind == "link":
        title, url = message.get("Title") or "a link", message.get("Url") or ""
        description = message.get("Description") or ""
        return f"[shared a link: {title} {url}]" + (f"\n{description}" if description else "")
    return ""


def event_from_message(message: Any, platform: str, profile: str, agent_id: Optional[int] = None) -> MessageEvent:
    if not isinstance(message, dict):
        raise MalformedPayload(f"message is {type(message).__name__}, not a field table")
    msg_id, user, kind = message.get("MsgId"), message.get("FromUserName"), message.get("MsgType")
    where = f"message {str(msg_id)[:24]!r}"
    if not msg_id or not str(msg_id).isdigit():
        raise MalformedPayload(f"{where}: MsgId must be a number, got {str(msg_id)[:24]!r}")
    if not user:
        raise MalformedPayload(f"{where}: no FromUserName")
    if agent_id is not None and message.get("AgentID") and message["AgentID"] != str(agent_id):
        raise MalformedPayload(f"{where}: for AgentID {message['AgentID'][:12]!r}, not this application's "
                               f"({agent_id})")
    attachments: tuple = ()
    if kind in MEDIA_KINDS:
        media_id = message.get("MediaId")
        if not media_id:
            raise MalformedPayload(f"{where}: a {kind} message without MediaId")
        name = f"voice.{message['Format'].lower()}" if kind == "voice" and message.get("Format", "").isalnum() else ""
        attachments = (Attachment(kind=MEDIA_KINDS[kind], ref=media_id, name=name),)
    elif kind not in ("text", "location", "link"):
        raise MalformedPayload(f"{where}: message type {str(kind)[:20]!r} is not taken")
    created = message.get("CreateTime", "")
    sent_at = float(created) if created.isdigit() else None
    source = Source(platform=platform, chat_id=user, chat_type="dm", user_id=user, profile=profile)
    return MessageEvent(source=source, text=_text_of(kind, message, where), platform_message_id=msg_id,
                        received_at=time.time(), attachments=attachments, sent_at=sent_at)
