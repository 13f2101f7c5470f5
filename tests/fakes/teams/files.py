"""The fake Teams' files beyond inline images, from Microsoft Learn's "Send and receive files using bot" (Teams
platform, bots-filesv4) and OneDrive's "Upload large files with an upload session" (Microsoft Graph):

* a bot's message may carry a file consent card (``application/vnd.microsoft.teams.card.file.consent``: ``name``,
  ``content`` with ``description``, ``sizeInBytes``, ``acceptContext``, ``declineContext``), in a personal chat only
  (400 elsewhere), or a file info card (``application/vnd.microsoft.teams.card.file.info``: ``contentUrl``,
  ``name``, ``content`` ``{uniqueId, fileType}``);
* ``answer_consent`` is the user pressing Allow or Decline on a consent card: a signed ``invoke`` activity named
  ``fileConsent/invoke``, ``value`` ``{type: "fileUpload", action, context, uploadInfo}`` (an accept's uploadInfo
  names a new upload session: ``uploadUrl``, ``contentUrl``, ``name``, ``uniqueId``, ``fileType``);
* ``PUT /upload/{session}``: one range of the file, ``Content-Range: bytes first-last/size``; ranges in order, each
  a multiple of 320 KiB but the last, at most 4 MB (the brief's bound; OneDrive's own is 60 MiB) -> 202
  ``{"nextExpectedRanges"}``, the last -> 201 the driveItem; 416 for a range out of order, 400 for a bad size. The
  session's URL is its own authorisation: a request carrying an ``Authorization`` header counts as a
  ``token_leaks`` (Microsoft would see the bot's token);
* ``inject_shared_file``: a user shares a file from OneDrive: a message whose attachment is
  ``application/vnd.microsoft.teams.file.download.info`` (``contentUrl``, ``name``, ``content`` ``{downloadUrl,
  uniqueId, fileType}``), the download URL served by ``GET /download/{id}?tempauth=...`` to anyone holding it
  (a token on it counts as a leak too).
"""
from __future__ import annotations

import base64
import re
import secrets
import uuid
from typing import Optional

from aiohttp import web

CONSENT_CARD = "application/vnd.microsoft.teams.card.file.consent"
FILE_INFO_CARD = "application/vnd.microsoft.teams.card.file.info"
DOWNLOAD_INFO = "application/vnd.microsoft.teams.file.download.info"
FILE_CARDS = (CONSENT_CARD, FILE_INFO_CARD)
RANGE_UNIT = 320 * 1024
MAX_RANGE = 4 * 1000 * 1000
_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")


def card_problem(card: dict, personal: bool) -> Optional[str]:
    """Why a file card is refused (None: taken)."""
    content = card.get("content") if isinstance(card.get("content"), dict) else None
    if content is None or not isinstance(card.get("name"), str) or not card["name"]:
        return "a file card needs a name and a content object"
    if card["contentType"] == CONSENT_CARD:
        if not personal:
            return "a file consent card can be sent in a personal chat only"
        if not (isinstance(content.get("sizeInBytes"), int) and isinstance(content.get("description"), str)
                and "acceptContext" in content and "declineContext" in content):
            return "a file consent card needs description, sizeInBytes, acceptContext and declineContext"
        return None
    if not (isinstance(card.get("contentUrl"), str) and isinstance(content.get("uniqueId"), str)
            and isinstance(content.get("fileType"), str)):
        return "a file info card needs contentUrl and content.uniqueId, content.fileType"
    return None


class FileMethods:
    """Mixin for FakeTeams (its state has ``uploads``, ``shared`` and ``stats`` ``token_leaks``)."""

    def add_file_routes(self, app: web.Application) -> None:
        app.router.add_put("/upload/{session}", self.upload_range)
        app.router.add_get("/download/{file}", self.shared_download)

    # -- a user answers a consent card
    def consent_cards(self, conversation: str) -> list[dict]:
        """The consent cards the bot sent in the conversation: {"activity", "name", "content"}."""
        return [{"activity": a["id"], "name": card["name"], "content": card["content"]}
                for a in self.activities(conversation) for card in a["attachments"]
                if card.get("contentType") == CONSENT_CARD]

    def file_cards(self, conversation: str) -> list[dict]:
        """The file info cards the bot sent (its uploaded files shown in the chat)."""
        return [card for a in self.activities(conversation) for card in a["attachments"]
                if card.get("contentType") == FILE_INFO_CARD]

    def consent_activity(self, conversation: str, activity_id: str, accept: bool, user: str = "alice",
                         context: Optional[dict] = None) -> dict:
        """The invoke Teams posts when ``user`` presses Allow (``accept``) or Decline on the consent card of the
        bot's activity ``activity_id``; ``context`` replaces the card's (a client that altered it)."""
        [card] = [c for c in self.consent_cards(conversation) if c["activity"] == activity_id] or [None]
        if card is None:
            raise ValueError(f"no consent card on activity {activity_id}")
        value = {"type": "fileUpload", "action": "accept" if accept else "decline",
                 "context": context if context is not None else
                 card["content"]["acceptContext" if accept else "declineContext"]}
        if accept:
            session = secrets.token_hex(8)
            name = card["name"]
            with self.mutate() as state:
                state["uploads"][session] = {"name": name, "size": card["content"]["sizeInBytes"], "data": "",
                                             "complete": False, "ranges": []}
            value["uploadInfo"] = {"name": name, "uploadUrl": f"{self.base_url}/upload/{session}",
                                   "contentUrl": f"{self.base_url}/personal/{user}/Documents/Applications/{name}",
                                   "uniqueId": str(uuid.uuid4()).upper(),
                                   "fileType": name.rsplit(".", 1)[1] if "." in name else ""}
        activity = self.message_activity(conversation, "", user, mention=False)
        del activity["text"], activity["textFormat"]
        activity.update(type="invoke", name="fileConsent/invoke", value=value, replyToId=activity_id)
        return activity

    def answer_consent(self, conversation: str, activity_id: str, accept: bool = True, user: str = "alice",
                       context: Optional[dict] = None) -> str:
        return self.deliver_activity(self.consent_activity(conversation, activity_id, accept, user, context))

    def uploads(self) -> list[dict]:
        """Every upload session: {"name", "size", "data" (bytes so far), "complete", "ranges"}."""
        return self.read(lambda s: [dict(u, data=base64.b64decode(u["data"])) for u in s["uploads"].values()])

    async def upload_range(self, request: web.Request) -> web.Response:
        body = await request.read()
        with self.mutate() as state:
            if "Authorization" in request.headers:
                state["stats"]["token_leaks"] += 1
            upload = state["uploads"].get(request.match_info["session"])
            if upload is None or upload["complete"]:
                return web.json_response({"error": {"code": "itemNotFound", "message": "The upload session was "
                                                    "not found"}}, status=404)
            match = _RANGE.match(request.headers.get("Content-Range", ""))
            received = len(base64.b64decode(upload["data"]))
            if match is None:
                return web.json_response({"error": {"code": "invalidRequest", "message": "Content-Range"}}, status=400)
            first, last, size = (int(g) for g in match.groups())
            if first != received or size != upload["size"] or last >= size or last - first + 1 != len(body):
                return web.json_response({"error": {"code": "invalidRange", "message": "The range is not the "
                                                    "next expected one"}}, status=416)
            if len(body) > MAX_RANGE or (last + 1 < size and len(body) % RANGE_UNIT):
                return web.json_response({"error": {"code": "invalidRequest", "message": "A range must be a "
                                                    "multiple of 320 KiB, at most 4 MB"}}, status=400)
            upload["data"] = base64.b64encode(base64.b64decode(upload["data"]) + body).decode()
            upload["ranges"].append([first, last])
            if last + 1 < size:
                return web.json_response({"nextExpectedRanges": [f"{last + 1}-"]}, status=202)
            upload["complete"] = True
        return web.json_response({"id": secrets.token_hex(8), "name": upload["name"], "size": size}, status=201)

    # -- a user shares a file
    def inject_shared_file(self, conversation: str, data: bytes, name: str, caption: str = "",
                           user: str = "alice") -> str:
        file_id = secrets.token_hex(8)
        with self.mutate() as state:
            state["shared"][file_id] = base64.b64encode(data).decode()
        activity = self.message_activity(conversation, caption, user)
        activity["attachments"] = [{
            "contentType": DOWNLOAD_INFO, "name": name,
            "contentUrl": f"{self.base_url}/personal/{user}/Documents/Microsoft Teams Chat Files/{name}",
            "content": {"downloadUrl": f"{self.base_url}/download/{file_id}?tempauth={secrets.token_urlsafe(24)}",
                        "uniqueId": str(uuid.uuid4()).upper(), "fileType": name.rsplit(".", 1)[-1],
                        "etag": "{" + str(uuid.uuid4()).upper() + "},2"}}]
        return self.deliver_activity(activity)

    async def shared_download(self, request: web.Request) -> web.Response:
        with self.mutate() as state:
            if "Authorization" in request.headers:
                state["stats"]["token_leaks"] += 1
            found = state["shared"].get(request.match_info["file"])
        if found is None or not request.query.get("tempauth"):
            return web.json_response({"error": {"code": "itemNotFound", "message": "not found"}}, status=404)
        return web.Response(body=base64.b64decode(found), content_type="application/octet-stream")
