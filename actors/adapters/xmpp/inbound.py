"""From an XMPP stanza to a ``MessageEvent``: pure functions, no network.

Which messages are input (``raw_from_message`` drops the rest before they are queued):
- one-to-one: a ``chat`` or ``normal`` message with a body, from anyone but ourselves; a message the server kept
  while we were away comes with a ``<delay>`` and is new to us all the same;
- rooms (XEP-0045): a ``groupchat`` message with a body from a room we have joined (our self-presence came), not
  from our own nick, not one of our own ids (an echo), and without a ``<delay>``: a room's history is replayed on
  join (we ask for none, and a server may send it anyway) and is never new. In a room the bot answers only when
  addressed by nick (``is_input``, ``require_mention``);
- never: errors, chat states and other messages without a body, corrections (XEP-0308) of an earlier message,
  private messages through a room, invitations to a room (``invitation`` reads them: the link may join).

Identity (what the inbox deduplicates on): the server's stanza id (XEP-0359 ``<stanza-id by=...>``, from our own
archive for one-to-one messages or from the room) where it gives one; else the sender's ``origin-id`` or ``id``
prefixed with who sent it, which is what a replay (a resumed stream, offline storage) carries again. A message
with none of these gets an id made up by the link, never equal to another's. Chats: one-to-one -> "dm", chat id =
the peer's bare JID; a room -> "group", chat id = the room's JID, user id = the occupant's real bare JID where the
room shows it (a non-anonymous room), else ``room/nick``. JIDs are compared lower-cased (their node and domain are
case-insensitive; resources are not).
"""
from __future__ import annotations

import mimetypes
import re
from typing import Any, Optional

from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.xmpp.upload import file_url_allowed
from actors.media.names import display_name
from actors.messages import Attachment, MessageEvent, Source

NS_CLIENT = "jabber:client"
MUC_NS = "http://jabber.org/protocol/muc"
MUC_USER_NS = "http://jabber.org/protocol/muc#user"
CONFERENCE_NS = "jabber:x:conference"          # direct invitations (XEP-0249)
NS_CHATSTATES = "http://jabber.org/protocol/chatstates"
CORRECTION_FEATURE = "urn:xmpp:message-correct:0"
DELAY = "{urn:xmpp:delay}delay"
OOB_URL = "{jabber:x:oob}x/{jabber:x:oob}url"
OOB_DESC = "{jabber:x:oob}x/{jabber:x:oob}desc"
MAX_URL = 2000                      # a longer link is taken as text
SID = "urn:xmpp:sid:0"
MAX_ID = 200                        # an id longer than this is no id: the message is taken as having none
FIELDS = ("id", "from", "kind", "chat", "user", "name", "text", "me")


def bare(jid: str) -> str:
    node_domain = jid.split("/", 1)[0]
    return node_domain.lower()


def resource(jid: str) -> str:
    return jid.split("/", 1)[1] if "/" in jid else ""


def _child(xml, tag: str):
    """A child of the stanza in the client namespace (or none, as a stanza built without one has it)."""
    found = xml.find(f"{{{NS_CLIENT}}}{tag}")
    return found if found is not None else xml.find(tag)


def _stanza_id(xml, by: str) -> Optional[str]:
    for element in xml.findall(f"{{{SID}}}stanza-id"):
        if bare(element.get("by", "")) == by and 0 < len(element.get("id", "")) <= MAX_ID:
            return element.get("id")
    return None


def _sender_id(xml) -> Optional[str]:
    origin = xml.find(f"{{{SID}}}origin-id")
    for value in ((origin.get("id") if origin is not None else None), xml.get("id")):
        if value and len(value) <= MAX_ID:
            return value
    return None


def _room_jid(jid: str) -> Optional[str]:
    room = bare(jid)
    node, _at, service = room.partition("@")
    return room if node and service and room.count("@") == 1 and len(room) <= MAX_ID else None


def invitation(xml) -> Optional[dict]:
    """An invitation to a room in the message stanza ``xml``: {"room", "inviter" (who, as for ``allow``), "password",
    "how"}, or None. Mediated (XEP-0045 7.8.2): the room's message, ``<x xmlns=muc#user><invite from=...>``: the
    inviter is the room's word for it, its bare JID, or ``room/nick`` where the room shows occupants only by nick
    (as the sender of a room message is named, inbound.py's identity rules). Direct (XEP-0249): ``<x
    xmlns='jabber:x:conference' jid=ROOM>`` from the inviter itself (its address stamped by its own server). A
    mediated one may carry a direct one beside it: the room sent it, so it is read as mediated."""
    if xml.get("type") == "error":
        return None
    sender = xml.get("from", "")
    invite = xml.find(f"{{{MUC_USER_NS}}}x/{{{MUC_USER_NS}}}invite")
    if invite is not None:
        room, inviter = _room_jid(sender), bare(invite.get("from", ""))
        if room is not None and inviter == room:      # an occupant (the room shows no real JIDs): as it writes there
            inviter = f"{room}/{resource(invite.get('from', ''))}" if resource(invite.get("from", "")) else ""
        password = xml.find(f"{{{MUC_USER_NS}}}x/{{{MUC_USER_NS}}}password")
        how, secret = "mediated", (password.text or "") if password is not None else ""
    else:
        direct = xml.find(f"{{{CONFERENCE_NS}}}x")
        if direct is None:
            return None
        room, inviter = _room_jid(direct.get("jid", "")), bare(sender)
        how, secret = "direct", direct.get("password", "")
    if room is None or "@" not in inviter or room == inviter or len(inviter) > MAX_ID:
        return None
    return {"room": room, "inviter": inviter, "password": secret[:MAX_ID], "how": how}


def invite_refusal(invite: dict, mode: str, policy, granted: bool, rooms_invited: int, bound: int) -> str:
    """Why an invitation is not taken ("" where it is). ``mode``: the table's ``join_on_invite``; ``policy``: the
    adapter's access policy (access.py), ``granted``: the inviter holds a grant from the admin CLI.

    "allowlist": the inviter is someone the access rules admit as a one-to-one sender (``allow``, a grant, or
    anyone under ``access = "open"``). A mediated invitation is the room's word for who invites: it is believed only
    from a room service of the inviter's own server (``conference.example.org`` for ``alice@example.org``), as a
    hostile server could name anyone; a direct one carries the inviter's address as its server stamped it.
    "anyone": every invitation, within the bound."""
    if mode == "off":
        return 'join_on_invite = "off"'
    if rooms_invited >= bound:
        return f"already in {rooms_invited} rooms by invitation (max_invited_rooms)"
    if mode == "anyone":
        return ""
    inviter_domain, service = bare(invite["inviter"]).split("@", 1)[1], invite["room"].split("@", 1)[1]
    if invite["how"] == "mediated" and service != inviter_domain and not service.endswith("." + inviter_domain):
        return f"a room of {service} cannot vouch for a user of {inviter_domain} (a direct invitation can)"
    if not (policy.admits_without_lookup(invite["inviter"]) or granted):
        return "the inviter is not admitted by the access rules"
    return ""


def raw_from_message(xml, own_jid: str, joined: dict, ours) -> Optional[dict]:
    """The message stanza ``xml`` (an ElementTree element) as a raw dict, or None when it is no input.
    ``own_jid``: our bare JID; ``joined``: room -> our nick there; ``ours``: the ids of our recent sends."""
    kind = xml.get("type") or "normal"
    body = _child(xml, "body")
    if kind == "error" or body is None or not (body.text or "").strip():
        return None
    if xml.find(f"{{{CORRECTION_FEATURE}}}replace") is not None or invitation(xml) is not None:
        return None
    sender = xml.get("from", "")
    origin = xml.find(f"{{{SID}}}origin-id")
    if origin is not None and origin.get("id") in ours:
        return None
    joined = {bare(room): nick for room, nick in joined.items()}
    room = bare(sender)
    if kind == "groupchat":
        nick = resource(sender)
        if room not in joined or not nick or nick == joined[room] or xml.find(DELAY) is not None:
            return None
        item = xml.find(f"{{{MUC_USER_NS}}}x/{{{MUC_USER_NS}}}item")
        real = bare(item.get("jid", "")) if item is not None and item.get("jid") else ""
        local = _stanza_id(xml, room) or (f"{room}/{nick}/{_sender_id(xml)}" if _sender_id(xml) else None)
        return _with_file(xml, {"id": local, "from": sender, "kind": "group", "chat": room,
                                "user": real or f"{room}/{nick}", "name": nick, "text": body.text, "me": joined[room]})
    if kind not in ("chat", "normal") or room == bare(own_jid) or room in joined or not sender:
        return None
    local = _stanza_id(xml, bare(own_jid)) or (f"{room}/{_sender_id(xml)}" if _sender_id(xml) else None)
    return _with_file(xml, {"id": local, "from": sender, "kind": "dm", "chat": room, "user": room,
                            "name": room.split("@", 1)[0], "text": body.text, "me": ""})


def _with_file(xml, raw: dict) -> dict:
    """A message whose body is its out-of-band link (XEP-0066; what clients send for a file they uploaded) carries
    a file: the link, and its description as the caption."""
    url, desc = xml.find(OOB_URL), xml.find(OOB_DESC)
    link = (url.text or "").strip() if url is not None else ""
    if link and link == raw["text"].strip() and len(link) <= MAX_URL:
        raw["file"] = link
        raw["caption"] = (desc.text or "").strip()[:MAX_URL] if desc is not None else ""
    return raw


def room_presence(xml, rooms, our_nick: str) -> Optional[tuple[str, str, str]]:
    """A presence from one of ``rooms`` about us: (room, "joined" | "left" | "refused", our nick there), else
    None. Ours is the one with status 110 (the room's own word for it), or an error to our join."""
    sender = xml.get("from", "")
    room = bare(sender)
    if room not in {bare(r) for r in rooms}:
        return None
    if xml.get("type") == "error":
        return (room, "refused", resource(sender) or our_nick)
    codes = {s.get("code") for s in xml.findall(f"{{{MUC_USER_NS}}}x/{{{MUC_USER_NS}}}status")}
    if "110" not in codes:
        return None
    return (room, "left" if xml.get("type") == "unavailable" else "joined", resource(sender))


REMOVED_CODES = {"301": "banned", "307": "kicked", "321": "no longer a member", "322": "the room became members-only"}
REFUSED_FOR_GOOD = ("forbidden", "registration-required", "not-authorized", "item-not-found", "gone")


def removal(xml) -> str:
    """Why a presence of ours from a room (``room_presence``: left or refused) says the room does not want us: a
    kick, a ban, a lost membership, the room destroyed, or a join refused for good (banned, members only, a wrong
    password, no such room); "" for anything else (a nick conflict, the service shutting down, a server error)."""
    if xml.get("type") == "error":
        error = xml.find("{jabber:client}error")
        error = error if error is not None else xml.find("error")
        conditions = {child.tag.rsplit("}", 1)[-1] for child in (error if error is not None else ())}
        found = [c for c in REFUSED_FOR_GOOD if c in conditions]
        return f"refused: {found[0]}" if found else ""
    if xml.find(f"{{{MUC_USER_NS}}}x/{{{MUC_USER_NS}}}destroy") is not None:
        return "the room was destroyed"
    codes = {s.get("code") for s in xml.findall(f"{{{MUC_USER_NS}}}x/{{{MUC_USER_NS}}}status")}
    return next((REMOVED_CODES[c] for c in sorted(codes) if c in REMOVED_CODES), "")


def addressed(text: str, nick: str) -> Optional[str]:
    """The text of a room message that addresses ``nick``, with a leading address taken off ("gw: hi", "gw, hi",
    "@gw hi"); the whole text where the nick is mentioned elsewhere as a word; None where it is not mentioned."""
    if not nick:
        return None
    escaped = re.escape(nick)
    lead = re.match(rf"\s*@?{escaped}[:,]?(\s+|$)", text, re.IGNORECASE)
    if lead:
        return text[lead.end():].strip() or text.strip()
    if re.search(rf"(?<![\w@]){'@?'}{escaped}(?!\w)", text, re.IGNORECASE):
        return text.strip()
    return None


def is_input(raw: Any, require_mention: bool) -> bool:
    """True for a message to store. Anything that is no proper raw goes on to ``event_from_raw`` so that it is
    rejected loudly."""
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in FIELDS):
        return True
    if raw["kind"] == "group" and require_mention:
        return addressed(raw["text"], raw["me"]) is not None
    return True


def file_attachment(raw: dict, file_hosts) -> tuple:
    """The file a raw message carries, as a pending attachment, where its link is on one of ``file_hosts`` (the
    bot's own server: nothing is fetched from anywhere else); () otherwise (the link stays text)."""
    url = raw.get("file")
    if not isinstance(url, str) or not file_url_allowed(url, file_hosts):
        return ()
    name = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    kind = "photo" if (mimetypes.guess_type(name)[0] or "").startswith("image/") else "document"
    caption = raw.get("caption") if isinstance(raw.get("caption"), str) else ""
    return (Attachment(kind=kind, ref=url, name=display_name(name, kind), caption=caption),)


def event_from_raw(raw: Any, adapter_name: str, profile: str, require_mention: bool = True,
                   file_hosts=()) -> MessageEvent:
    if not isinstance(raw, dict):
        raise MalformedPayload(f"an XMPP message is a dict, got {type(raw).__name__}")
    for key in FIELDS:
        if not isinstance(raw.get(key), str) or (not raw[key] and key != "me"):
            raise MalformedPayload(f"{key} must be a non-empty string")
    if raw["kind"] not in ("dm", "group") or "@" not in raw["chat"] and raw["kind"] == "dm":
        raise MalformedPayload(f"{raw['kind']!r} message from {raw['chat']!r} is no chat")
    text = raw["text"]
    if raw["kind"] == "group" and require_mention:
        text = addressed(text, raw["me"]) or ""
    source = Source(platform=adapter_name, chat_id=raw["chat"], chat_type=raw["kind"], user_id=raw["user"],
                    user_name=raw["name"], profile=profile)
    at = raw.get("at") if isinstance(raw.get("at"), (int, float)) else None
    attachments = file_attachment(raw, file_hosts)
    if attachments:                     # the body was the link: the text is the file's caption
        text = attachments[0].caption
    return MessageEvent(source=source, text=text, platform_message_id=raw["id"], received_at=at or 0.0,
                        attachments=attachments)
