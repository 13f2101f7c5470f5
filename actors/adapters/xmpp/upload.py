"""Files by HTTP upload (XEP-0363): the server's upload service, found by service discovery; a slot asked of it; the
bytes PUT to the slot's address; the message that shows the file (its GET address as the body and as an out-of-band
link, XEP-0066, which clients show inline). The parsing is pure; ``put`` is the one HTTP request.

Plain HTTP: the PUT carries the file and the slot's credentials, so a put address must be ``https``, except on a
loopback host (a server on the same machine, as the tests run Prosody). An ``https`` address is verified with the
system's CAs and the adapter's ``ca_file``, as the XMPP stream is.
"""
from __future__ import annotations

import ipaddress
import re
import ssl
from typing import Callable, Optional
from urllib.parse import urlsplit

import aiohttp

from actors.adapters.errors import PermanentError, RetryableError
from actors.adapters.http_session import capped_body

UPLOAD_NS = "urn:xmpp:http:upload:0"
OOB_NS = "jabber:x:oob"
PUT_TIMEOUT_S = 120.0
ALLOWED_HEADERS = ("authorization", "cookie", "expires")     # the only headers a slot may set (XEP-0363 7)


def service_from_info(jid: str, info_xml) -> Optional[tuple[str, int]]:
    """(jid, max file size in bytes, 0: none said) where the disco#info answer ``info_xml`` is an upload service's."""
    if info_xml is None:
        return None
    features = {f.get("var") for f in info_xml.iter("{http://jabber.org/protocol/disco#info}feature")}
    if UPLOAD_NS not in features:
        return None
    limit = 0
    for form in info_xml.iter("{jabber:x:data}x"):
        fields = {f.get("var"): f for f in form.iter("{jabber:x:data}field")}
        kind = fields.get("FORM_TYPE")
        value = kind.find("{jabber:x:data}value") if kind is not None else None
        size = fields.get("max-file-size")
        if value is not None and value.text == UPLOAD_NS and size is not None:
            number = size.find("{jabber:x:data}value")
            if number is not None and (number.text or "").strip().isdigit():
                limit = int(number.text.strip())
    return jid, limit


def slot_from_answer(slot_xml) -> tuple[str, str, dict]:
    """(put url, get url, headers) of a slot answer; PermanentError for one without both addresses."""
    put = slot_xml.find(f"{{{UPLOAD_NS}}}put") if slot_xml is not None else None
    get = slot_xml.find(f"{{{UPLOAD_NS}}}get") if slot_xml is not None else None
    if put is None or get is None or not put.get("url") or not get.get("url"):
        raise PermanentError("the upload service answered no slot", method="upload slot")
    headers = {}
    for header in put.findall(f"{{{UPLOAD_NS}}}header"):
        name = header.get("name", "")
        if name.lower() in ALLOWED_HEADERS and "\n" not in (header.text or "") and "\r" not in (header.text or ""):
            headers[name] = header.text or ""
    return put.get("url"), get.get("url"), headers


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_origin(url: str) -> str:
    """``http://host:port`` of a plain-HTTP address (the port always written), "" for any other address."""
    parts = urlsplit(url)
    try:
        port = parts.port or 80
    except ValueError:
        return ""
    return f"http://{(parts.hostname or '').lower()}:{port}" if parts.scheme == "http" and parts.hostname else ""


def file_url_allowed(url: str, sources) -> bool:
    """Whether a user's file link may be fetched. ``sources``: host names, each admitting https from it or a
    subdomain of it (the bot's own server: its upload service lives there), and plain-HTTP origins
    (``http://host:port``, an upload service without TLS on the bot's machine), each admitting that origin alone.
    Never anything else: a link is a request the gateway makes for a sender, so a loopback host does not admit its
    other ports (another local service)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    wanted = [str(s).lower() for s in sources if s]
    if parts.scheme == "http":
        origin = http_origin(url)
        return bool(origin) and _loopback(host) and origin in wanted
    if not host or parts.scheme != "https":
        return False
    return any(host == h or host.endswith("." + h) for h in wanted if not h.startswith("http://"))


async def get(url: str, cap: int, ca_file: str, too_large: Callable[[int], Exception],
              gone: Callable[[str], Exception]) -> bytes:
    """A user's file from the upload service, within ``cap`` bytes."""
    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PUT_TIMEOUT_S)) as session:
            async with session.get(url, ssl=context, allow_redirects=False) as answer:
                if answer.status in (403, 404, 410):
                    raise gone(f"the upload service answered {answer.status}")
                if answer.status != 200:
                    raise RetryableError(f"the upload service answered {answer.status}", method="download")
                return await capped_body(answer, cap, too_large)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise RetryableError(f"the download failed: {type(exc).__name__}: {exc}", method="download") from None


def check_url(url: str, what: str) -> None:
    """An upload address we may use: https, or http on a loopback host."""
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and _loopback(parts.hostname or "")):
        return
    raise PermanentError(f"the upload service's {what} address {url!r} is not https", method="upload")


async def put(url: str, headers: dict, data: bytes, mime: str, ca_file: str) -> None:
    """The bytes to the slot: done once the upload service answered 2xx."""
    check_url(url, "put")
    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    headers = dict(headers, **{"Content-Type": mime or "application/octet-stream"})
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PUT_TIMEOUT_S)) as session:
            async with session.put(url, data=data, headers=headers, ssl=context, allow_redirects=False) as answer:
                if 200 <= answer.status < 300:
                    return
                text = " ".join(re.sub(r"<[^>]*>", " ", await answer.text(errors="replace")).split())[:200]
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise RetryableError(f"the upload failed: {type(exc).__name__}: {exc}", method="upload") from None
    if answer.status >= 500 or answer.status == 429:
        raise RetryableError(f"the upload service answered {answer.status}: {text}", method="upload")
    raise PermanentError(f"the upload service answered {answer.status}: {text}", method="upload")
