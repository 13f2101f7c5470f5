"""Files in the fake Bot API: ``getFile`` and the download URL ``/file/bot<token>/<file_path>``, serving real bytes
a test gives it (``add_file``), and user messages that carry them (``inject_media``); the bot's uploads
(``sendPhoto``, ``sendDocument``, ``sendVoice`` as multipart/form-data, the file in the ``photo`` / ``document`` /
``voice`` field), kept with their bytes (``uploads``) and shown as the Bot API's Message with ``photo`` sizes, a
``document`` or a ``voice`` (file_id, file_unique_id, duration, mime_type, file_size). sendVoice takes what the Bot API
documents, "an .OGG file encoded with OPUS, or in .MP3 format, or in .M4A format" (known here by their bytes); other
bytes are refused with a 400.

Limits, as the Bot API documents them: a photo at most 10 MB (and width + height at most 10,000), any upload at most
50 MB (the real server answers 413 past it), a caption at most 1,024 UTF-16 units after entity parsing.

``hold_downloads()`` makes every download wait (headers not sent) until ``release_downloads()``: a test can kill the
gateway while it is fetching. ``downloads`` lists every download asked for. A file added with a ``file_size`` larger
than its bytes claims that size, as Telegram's 20 MB limit reports it: ``getFile`` answers "file is too big" for
anything over ``DOWNLOAD_LIMIT``.
"""
from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Optional

from aiohttp import web

from tests.fakes.telegram.botapi import ApiError, int_param
from tests.fakes.telegram.formatting import utf16_len

DOWNLOAD_LIMIT = 20 * 1024 * 1024
PHOTO_LIMIT = 10 * 1024 * 1024
UPLOAD_LIMIT = 50 * 1024 * 1024
CAPTION_LIMIT = 1024
_ids = itertools.count(1)


def voice_type(data: bytes) -> Optional[str]:
    """The MIME type of a voice note sendVoice takes, from its bytes; None for anything else."""
    if data[:4] == b"OggS" and b"OpusHead" in data[:256]:
        return "audio/ogg"
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "audio/mpeg"
    if data[4:8] == b"ftyp":
        return "audio/mp4"
    return None


class FileMethods:
    """Mixin for FakeTelegram: needs ``inject_message``, ``token``."""

    def init_files(self) -> None:
        self.files: dict[str, dict] = {}
        self.downloads: list[dict] = []
        self.uploads: list[dict] = []     # every file the bot sent, with its bytes
        self._downloads_open = threading.Event()
        self._downloads_open.set()

    def add_file(self, data: bytes, file_size: Optional[int] = None, **fields) -> dict:
        """Store bytes; returns the object a message carries (file_id, file_unique_id, file_size, and ``fields``:
        file_name, mime_type, width, height, duration...). ``mime_type`` is only a claim, as on Telegram."""
        number = next(_ids)
        file_id = f"FILE{number:06d}-{len(data)}"
        size = len(data) if file_size is None else int(file_size)
        self.files[file_id] = {"data": bytes(data), "size": size, "path": f"documents/file_{number}"}
        return {"file_id": file_id, "file_unique_id": f"U{number}", "file_size": size, **fields}

    def inject_media(self, kind: str, media, caption: Optional[str] = None, chat_id: int = 1001, **kwargs) -> dict:
        """A user's message with a photo (``media`` a list of sizes), document, voice, audio or video."""
        return self.inject_message(caption or "", chat_id, media={kind: media}, **kwargs)

    def method_send_photo(self, state: dict, params: dict) -> dict:
        return self._send_upload(state, params, "photo")

    def method_send_document(self, state: dict, params: dict) -> dict:
        return self._send_upload(state, params, "document")

    def method_send_voice(self, state: dict, params: dict) -> dict:
        return self._send_upload(state, params, "voice")

    def _send_upload(self, state: dict, params: dict, kind: str) -> dict:
        chat = self.require_chat(state, params)
        upload = params.get("_upload")
        if not upload or upload["field"] != kind:
            raise ApiError(400, f"Bad Request: there is no {kind} in the request")
        data = upload["data"]
        if len(data) > UPLOAD_LIMIT:
            raise ApiError(413, "Request Entity Too Large")
        if kind == "photo" and len(data) > PHOTO_LIMIT:
            raise ApiError(400, "Bad Request: PHOTO_SAVE_FILE_INVALID")
        if kind == "voice" and voice_type(data) is None:
            raise ApiError(400, "Bad Request: a voice note must be OGG Opus, MP3 or M4A")
        caption = params.get("caption") or ""
        if utf16_len(caption) > CAPTION_LIMIT:
            raise ApiError(400, "Bad Request: message caption is too long")
        reply_to = self._reply_target(chat, params)
        self.check_flood(state, chat)
        stored = self.add_file(data)
        if kind == "photo":
            media = {"photo": [dict(stored, width=0, height=0)]}
        elif kind == "voice":
            media = {"voice": dict(stored, duration=int_param(params, "duration") or 0, mime_type=voice_type(data))}
        else:
            media = {"document": dict(stored, file_name=upload["filename"], mime_type=upload["content_type"])}
        message = self.store_message(chat, outgoing=True, text=caption, entities=[], reply_to=reply_to,
                                     thread_id=int_param(params, "message_thread_id"))
        message["media"] = media
        self.uploads.append({"chat_id": chat["chat"]["id"], "message_id": message["message_id"], "kind": kind,
                             "data": data, "filename": upload["filename"], "caption": caption})
        return self.message_object(chat, message)

    def hold_downloads(self) -> None:
        self._downloads_open.clear()

    def release_downloads(self) -> None:
        self._downloads_open.set()

    def method_get_file(self, state: dict, params: dict) -> dict:
        entry = self.files.get(str(params.get("file_id") or ""))
        if entry is None:
            raise ApiError(400, "Bad Request: wrong file_id or the file is temporarily unavailable")
        if entry["size"] > DOWNLOAD_LIMIT:
            raise ApiError(400, "Bad Request: file is too big")
        return {"file_id": params["file_id"], "file_unique_id": "U", "file_size": entry["size"],
                "file_path": entry["path"]}

    async def serve_file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        path = request.match_info["path"]
        entry = next((f for f in self.files.values() if f["path"] == path), None)
        self.downloads.append({"path": path, "at": time.time(), "found": entry is not None})
        while not self._downloads_open.is_set():   # held by the test: the client waits for headers
            await asyncio.sleep(0.02)
        if entry is None:
            return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)
        return web.Response(body=entry["data"], content_type="application/octet-stream")
