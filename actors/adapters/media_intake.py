"""Attachments on the inbound path: fetched and cached before their row is stored, so nothing is lost between the
platform's acknowledgement and the file (docs/media.md).

The order, and why it loses nothing. ``normalise`` leaves each attachment ``pending`` with the platform's handle.
Within the intake round, after the access policy and the sender limits (no byte is fetched for a sender who may not
talk to the gateway) and before the round's commit, ``resolve_media`` fetches every pending attachment, puts its
bytes in the media cache (storage/media.py: temp file, fsync, rename) and rewrites the row to name the cached key.
Only then are the rows and the offset that acknowledges them committed together (intake.py). So:

* kill -9 during a download, or after the file is cached and before the commit: the offset was not committed and
  Telegram was not told; the next life polls from the old offset, gets the same update and fetches again. The cache
  makes the second put of the same bytes free; a half-written file is a stray ``.part`` that the sweep removes.
* kill -9 after the commit: the row names a whole file under its hash; the turn runs from the row as from any other.
* a download that keeps failing (network, 5xx) is tried ``MEDIA_TRIES`` times with backoff; then the attachment is
  stored ``unavailable`` and the turn runs with a note saying so: a file the platform cannot give is no reason to
  hold up the chat (or, on a webhook, to have the platform push the update again and again).
* cache writes that fail (a full disk) raise: the round is not committed, the intake backs off and the platform
  keeps the update, as for any storage failure.
* an attachment the platform says is over the cap (``limits.cap_for``) is never fetched; the row is not stored and
  the sender is told the sizes. One whose size the platform did not tell is cut off at the cap while downloading.

The round waits for its downloads: a slow file delays the chats behind it by up to the fetch's timeout times its
tries. That is the price of an acknowledgement that never runs ahead of the file.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Awaitable, Callable

from actors.media.limits import cap_for, too_large_notice
from actors.media.names import display_name
from actors.media.sniff import RASTER, sniff
from actors.messages import Attachment
from common.backoff import backoff_s
from storage import InboundItem, MediaCache

MEDIA_TRIES = 3
MEDIA_BACKOFF_S = (0.5, 4.0)     # base, cap


class AttachmentTooLarge(Exception):
    """The platform (``getFile``'s size, a download past the cap) shows the file is over the cap."""

    def __init__(self, size: int, cap: int):
        super().__init__(f"{size} bytes is over the cap of {cap}")
        self.size, self.cap = size, cap


class AttachmentGone(Exception):
    """The platform will never give this file (expired, deleted, unknown id): not worth another try."""


Download = Callable[[Attachment, int], Awaitable[bytes]]


def cached(att: Attachment, data: bytes, key: str) -> Attachment:
    """The attachment once its bytes are in the cache: type and size are the bytes' own."""
    mime = sniff(data, att.name)
    if mime in RASTER:
        from actors.media.images import image_size   # Pillow: loaded by the first image only
    size = image_size(data) if mime in RASTER else None
    width, height = size if size else (att.width, att.height)
    return dataclasses.replace(att, state="cached", cache_key=key, mime=mime, size=len(data), width=width,
                               height=height, name=display_name(att.name, att.kind, mime))


async def fetch_one(att: Attachment, download: Download, cache: MediaCache, cap: int, say,
                    tries: int = MEDIA_TRIES) -> Attachment:
    if att.state != "pending":
        return att
    att = dataclasses.replace(att, name=display_name(att.name, att.kind) if att.name else "")
    if att.size > cap:
        return dataclasses.replace(att, state="too_large")
    for attempt in range(1, tries + 1):
        try:
            data = await download(att, cap)
        except AttachmentTooLarge as exc:
            return dataclasses.replace(att, state="too_large", size=exc.size)
        except AttachmentGone as exc:
            say(logging.WARNING, "an attachment (%s) cannot be fetched: %s", att.kind, exc)
            break
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - network, 5xx, a cut download: tried again
            if attempt == tries:
                say(logging.WARNING, "an attachment (%s) could not be fetched after %d tries: %s", att.kind, tries,
                    exc)
                break
            await asyncio.sleep(backoff_s(attempt, *MEDIA_BACKOFF_S))
            continue
        if len(data) > cap:
            return dataclasses.replace(att, state="too_large", size=len(data))
        key = await asyncio.to_thread(cache.put, data)   # OSError (a full disk) propagates: the round is retried
        return cached(att, data, key)
    return dataclasses.replace(att, state="unavailable")


async def resolve_media(rows: list, platform: str, download: Download, cache: MediaCache, say,
                        notify: Callable[[dict, str], None]) -> list:
    """``rows`` with every pending attachment fetched (or given up), position for position; None where a row has
    an attachment over the cap: it is not to be stored, and its sender is told (``notify(source, text)``)."""
    out: list = []
    for row in rows:
        items = row.payload.get("attachments") or ()
        if not any(isinstance(item, dict) and item.get("state") == "pending" for item in items):
            out.append(row)
            continue
        resolved = []
        for item in items:
            att = Attachment.from_payload(item)
            resolved.append(await fetch_one(att, download, cache, cap_for(platform, att.kind), say))
        over = next((a for a in resolved if a.state == "too_large"), None)
        if over is not None:
            say(logging.INFO, "an attachment of %d bytes (%s) is over the cap; the sender is told", over.size,
                over.kind)
            notify(row.payload["source"], too_large_notice(over.size, cap_for(platform, over.kind),
                                                           display_name(over.name, over.kind) if over.name else ""))
            out.append(None)
            continue
        payload = dict(row.payload, attachments=[dict(vars(a)) for a in resolved])
        out.append(InboundItem(row.session_key, row.platform, row.platform_message_id, payload))
    return out
