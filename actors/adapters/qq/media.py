"""A reply's file as QQ takes it (pure): the rich-media upload's body for C2C users and groups, or the image a
guild channel or DM send carries.

QQ's docs (api-v2 "富媒体消息", bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/rich-media.html)
name the upload's ``file_type``: 1 image (png/jpg), 2 video (mp4), 3 voice (silk), 4 file. So:

    image/png, image/jpeg                      1, shown inline
    video/mp4                                  2
    anything else (other images, audio, PDFs)  4, with its file name

The agent's audio is no SILK voice note, so it goes as a file. QQ's docs mark files (4) "not open yet"; where QQ
refuses one for the bot, the send fails with QQ's reason and the reply names the file in its place
(actors/sessions/reply_files.py), as for any file a platform refuses. The bytes go inline as ``file_data``
(base64): the gateway has no public address QQ could fetch a ``url`` from. ``UPLOAD_LIMIT`` bounds them (the
pacing row's ``upload_limit_bytes``: a larger file is named in text before anything is sent).

Guild channels and DMs have no upload: a send carries one image as ``file_image`` (multipart), and nothing else
(api-v2 "发送消息", 文字子频道: ``image``/``file_image`` are the only files). Any other file is refused there, saying
so, before anything is sent.
"""
from __future__ import annotations

import base64

from actors.adapters.errors import PermanentError
from actors.media.limits import human_size

IMAGE, VIDEO, VOICE, FILE = 1, 2, 3, 4
INLINE_IMAGES = ("image/png", "image/jpeg")
UPLOAD_LIMIT = 10 * 1024 * 1024       # bytes in one request: base64 makes a third more of them
GUILD_KINDS = ("channel", "dms")


def file_type(mime: str) -> int:
    if mime in INLINE_IMAGES:
        return IMAGE
    if mime == "video/mp4":
        return VIDEO
    return FILE


def upload_body(mime: str, name: str, data: bytes) -> dict:
    """The body of ``POST /v2/{users,groups}/{id}/files``: uploaded only (``srv_send_msg`` false), sent after by a
    ``msg_type`` 7 message naming its ``file_info``."""
    if len(data) > UPLOAD_LIMIT:
        raise PermanentError(f"{name or 'the file'} is {human_size(len(data))}: QQ takes files up to "
                             f"{human_size(UPLOAD_LIMIT)} from the gateway", method="upload")
    kind = file_type(mime)
    body = {"file_type": kind, "file_data": base64.b64encode(data).decode("ascii"), "srv_send_msg": False}
    if kind == FILE:
        body["file_name"] = name or "file"
    return body


def guild_image(mime: str, name: str) -> None:
    """A guild channel or DM takes an image and no other file: PermanentError saying so for anything else."""
    if mime not in INLINE_IMAGES:
        raise PermanentError(f"QQ guild channels and DMs take PNG and JPEG images only, not {mime or 'this file'} "
                             f"({name or 'unnamed'})", method="send_channel")
