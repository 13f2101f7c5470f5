"""Teams' files that are no inline images: pure functions, no network (the adapter makes the calls).

Out, a document in a personal chat (Microsoft Learn, Teams platform, "Send and receive files using bot",
learn.microsoft.com/microsoftteams/platform/bots/how-to/bots-filesv4): the Teams bot APIs take a bot's file only in
the ``personal`` scope, and only once the user consented. The bot sends a message whose attachment is a **file
consent card** (``application/vnd.microsoft.teams.card.file.consent``: ``name``, and ``content`` with
``description``, ``sizeInBytes``, ``acceptContext``, ``declineContext``); the user's Allow or Decline comes back as
an ``invoke`` activity named ``fileConsent/invoke`` whose ``value`` is ``{type: "fileUpload", action: "accept" |
"decline", context: <the card's context>, uploadInfo: {name, uploadUrl, contentUrl, uniqueId, fileType}}``. On an
accept the bot PUTs the bytes to ``uploadUrl`` (a OneDrive upload session: ``Content-Range`` ranges of a multiple of
320 KiB, here ``UPLOAD_PIECE_BYTES``, the last one shorter) and then sends a message with a **file info card**
(``application/vnd.microsoft.teams.card.file.info``: ``contentUrl``, ``name``, ``content`` ``{uniqueId,
fileType}``). In a group chat or a channel file consent does not apply (the file would have to be put in SharePoint
through Microsoft Graph, not built): such a document is refused, and the reply shows its line instead.

What a file waiting for consent needs travels in the card itself: the context names the file's cache key, its name,
type and size, the conversation and when the offer expires, sealed with an HMAC (``seal``), so that nothing is kept
on the gateway while the user decides. A kill -9 meanwhile loses nothing (the bytes stay in the media cache, the
card in the chat), nothing accumulates however many offers go unanswered (each expires: the table's ``file_consent_ttl_s``), and a
context a client altered (another file's key, a later expiry, another chat) is refused.

In, a file a user shared (the same page, "Receive files in personal chat"): an attachment of content type
``application/vnd.microsoft.teams.file.download.info`` whose ``content.downloadUrl`` is a pre-authenticated link
valid for a few minutes, fetched without the bot's token (``file_host_allowed`` bounds where).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from typing import Any, Optional, Union
from urllib.parse import urlsplit

CONSENT_CARD = "application/vnd.microsoft.teams.card.file.consent"
FILE_INFO_CARD = "application/vnd.microsoft.teams.card.file.info"
DOWNLOAD_INFO = "application/vnd.microsoft.teams.file.download.info"
CONSENT_INVOKE = "fileConsent/invoke"
# OneDrive upload sessions take ranges of a multiple of 320 KiB: 12 of them, under 4 MB a request.
UPLOAD_PIECE_BYTES = 12 * 320 * 1024
MAX_CONTEXT_NAME = 200
_CACHE_KEY = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Offer:
    """A file offered with a consent card: what the card's context names."""
    conversation: str
    cache_key: str
    name: str
    mime: str
    size: int
    expires: int        # unix seconds


@dataclass(frozen=True)
class Accepted:
    offer: Offer
    upload_url: str
    content_url: str
    name: str
    unique_id: str
    file_type: str


@dataclass(frozen=True)
class Declined:
    offer: Offer


@dataclass(frozen=True)
class Unusable:
    """A consent answer that cannot be acted on: ``offer`` when its context was ours (expired), ``why`` says."""
    why: str
    offer: Optional[Offer] = None


def sealing_key(app_password: str) -> bytes:
    """The HMAC key of consent contexts: derived from the bot's secret, which only the gateway (and Microsoft's
    identity platform) holds. A rotated secret makes the offers made under the old one refused as altered."""
    return hashlib.sha256(b"teams file consent\n" + app_password.encode()).digest()


def _fields(offer: Offer) -> list:
    return [offer.conversation, offer.cache_key, offer.name, offer.mime, offer.size, offer.expires]


def seal(offer: Offer, key: bytes) -> dict:
    """The card's context for ``offer``: its fields and their HMAC."""
    mac = hmac.new(key, json.dumps(_fields(offer), separators=(",", ":")).encode(), hashlib.sha256).hexdigest()
    return {"file": offer.cache_key, "name": offer.name, "mime": offer.mime, "size": offer.size,
            "expires": offer.expires, "seal": mac}


def offer_of(context: Any, conversation: str, key: bytes) -> Optional[Offer]:
    """The offer a context names, if it is one ``seal`` made for this conversation (None otherwise)."""
    if not isinstance(context, dict):
        return None
    file, name, mime = context.get("file"), context.get("name"), context.get("mime")
    size, expires, mac = context.get("size"), context.get("expires"), context.get("seal")
    if not (isinstance(file, str) and _CACHE_KEY.match(file) and isinstance(name, str) and isinstance(mime, str)
            and type(size) is int and type(expires) is int and isinstance(mac, str)):
        return None
    offer = Offer(conversation, file, name, mime, size, expires)
    if not hmac.compare_digest(seal(offer, key)["seal"], mac):
        return None
    return offer


def consent_card(offer: Offer, key: bytes, caption: str = "") -> dict:
    """The message activity offering ``offer``: one file consent card, both contexts the sealed offer."""
    context = seal(offer, key)
    content = {"description": (caption.strip() or offer.name)[:1000], "sizeInBytes": offer.size,
               "acceptContext": context, "declineContext": context}
    return {"type": "message", "attachments": [{"contentType": CONSENT_CARD, "name": offer.name,
                                                "content": content}]}


def is_consent_answer(activity: Any) -> bool:
    return (isinstance(activity, dict) and activity.get("type") == "invoke"
            and activity.get("name") == CONSENT_INVOKE)


def consent_answer(activity: dict, conversation: str, key: bytes, now: float) -> Union[Accepted, Declined, Unusable]:
    """What a ``fileConsent/invoke`` activity says, checked: its context sealed by us for this conversation, not
    expired, and an accept's ``uploadInfo`` complete."""
    value = activity.get("value") if isinstance(activity.get("value"), dict) else {}
    action = value.get("action")
    if value.get("type") != "fileUpload" or action not in ("accept", "decline"):
        return Unusable(f"not a file upload answer ({str(action)[:20]!r})")
    offer = offer_of(value.get("context"), conversation, key)
    if offer is None:
        return Unusable("its context is none of this bot's offers in this conversation (or was altered)")
    if action == "decline":
        return Declined(offer)
    if now > offer.expires:
        return Unusable("the offer expired", offer)
    info = value.get("uploadInfo") if isinstance(value.get("uploadInfo"), dict) else {}
    fields = [info.get(k) for k in ("uploadUrl", "contentUrl", "name", "uniqueId", "fileType")]
    if not all(isinstance(f, str) and f and len(f) <= 4096 for f in fields[:4]) or not isinstance(fields[4], str):
        return Unusable("its uploadInfo lacks the upload URL, the content URL, the name or the unique id", offer)
    upload_url, content_url, name, unique_id, file_type = fields
    return Accepted(offer, upload_url, content_url, name[:MAX_CONTEXT_NAME], unique_id, file_type[:20])


def upload_ranges(size: int, piece: int = UPLOAD_PIECE_BYTES) -> list[tuple[int, int]]:
    """The (first, last) byte of each PUT of a ``size``-byte file, in order (one empty range for an empty file)."""
    if size <= 0:
        return [(0, -1)]
    return [(start, min(start + piece, size) - 1) for start in range(0, size, piece)]


def content_range(first: int, last: int, size: int) -> str:
    return f"bytes {first}-{last}/{size}" if size else "bytes */0"


def file_info_card(accepted: Accepted) -> dict:
    """The message showing the uploaded file in the chat."""
    return {"type": "message", "attachments": [{
        "contentType": FILE_INFO_CARD, "contentUrl": accepted.content_url, "name": accepted.name,
        "content": {"uniqueId": accepted.unique_id, "fileType": accepted.file_type}}]}


def file_host_allowed(url: Any, hosts: tuple, allowed_prefixes: tuple) -> bool:
    """Whether the bot may fetch from or upload to ``url``: https on one of ``hosts`` (a host or its subdomains:
    OneDrive and SharePoint), or under one of ``allowed_prefixes`` (a local fake). The URLs come in activities the
    Connector signed, but their content is a client's: no file goes to, and nothing is fetched from, any other
    host."""
    if not isinstance(url, str) or len(url) > 8192:
        return False
    if any(url.startswith(prefix) for prefix in allowed_prefixes if prefix):
        return True
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    if parts.scheme != "https" or not host or parts.username or parts.password:
        return False
    return any(host == h.lower().lstrip(".") or host.endswith("." + h.lower().lstrip(".")) for h in hosts if h)
