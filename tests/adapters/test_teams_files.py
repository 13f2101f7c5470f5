"""Teams' files beyond inline images, pure and against the fake's upload sessions: a file consent card's sealed
context (what a file waiting for consent needs, carried by the card: nothing kept on the gateway), the answers to
it read and checked (accept, decline, expired, altered, another chat's), the upload in ranges of a multiple of
320 KiB under 4 MB, the hosts files may come from and go to, and files shared from OneDrive taken by their download
link. In the daemon: tests/adapters/test_teams.py."""
from __future__ import annotations

import asyncio
import os
import time

import pytest

from actors.adapters.errors import PermanentError
from actors.adapters.http_session import HttpSession
from actors.adapters.teams.client import put_file
from actors.adapters.teams.files import (CONSENT_CARD, UPLOAD_PIECE_BYTES, Accepted, Declined, Offer, Unusable,
                                         consent_answer, consent_card, content_range, file_host_allowed,
                                         file_info_card, offer_of, seal, sealing_key, upload_ranges)
from actors.adapters.teams.inbound import SHARED_REF, event_from_activity
from tests.fakes.teams import FakeTeams

pytestmark = pytest.mark.timeout(60)
KEY = sealing_key("the bot's secret")
CHAT = "a:1chat"
OFFER = Offer(CHAT, "ab" * 32, "report.pdf", "application/pdf", 1234, int(time.time()) + 3600)


def answer(action: str, context, upload_info=None) -> dict:
    value = {"type": "fileUpload", "action": action, "context": context}
    if upload_info is not None:
        value["uploadInfo"] = upload_info
    return {"type": "invoke", "name": "fileConsent/invoke", "value": value}


INFO = {"uploadUrl": "https://contoso-my.sharepoint.com/upload?s=1", "name": "report.pdf", "uniqueId": "1150D938",
        "contentUrl": "https://contoso-my.sharepoint.com/personal/a/Documents/Applications/report.pdf",
        "fileType": "pdf"}


def test_a_consent_card_carries_the_offer_sealed_and_only_an_unaltered_one_for_its_chat_is_read_back():
    card = consent_card(OFFER, KEY, " the quarterly report ")
    [attachment] = card["attachments"]
    assert (attachment["contentType"], attachment["name"]) == (CONSENT_CARD, "report.pdf")
    content = attachment["content"]
    assert (content["description"], content["sizeInBytes"]) == ("the quarterly report", 1234)
    assert content["acceptContext"] == content["declineContext"] == seal(OFFER, KEY)
    assert consent_card(OFFER, KEY)["attachments"][0]["content"]["description"] == "report.pdf", "no caption: name"
    context = content["acceptContext"]
    assert offer_of(context, CHAT, KEY) == OFFER
    assert offer_of(context, "a:1another", KEY) is None, "another chat's offer"
    assert offer_of(context, CHAT, sealing_key("a rotated secret")) is None
    for change in ({"expires": OFFER.expires + 86400}, {"file": "cd" * 32}, {"size": 1}, {"name": "other.pdf"},
                   {"mime": "text/html"}, {"seal": "0" * 64}, {"file": "../../etc/passwd"}, {"size": "1234"}):
        assert offer_of(dict(context, **change), CHAT, KEY) is None, change
    assert offer_of("not a context", CHAT, KEY) is None


def test_an_answer_is_an_accept_a_decline_or_unusable_saying_why():
    context, now = seal(OFFER, KEY), time.time()
    accepted = consent_answer(answer("accept", context, INFO), CHAT, KEY, now)
    assert accepted == Accepted(OFFER, INFO["uploadUrl"], INFO["contentUrl"], "report.pdf", "1150D938", "pdf")
    assert consent_answer(answer("decline", context), CHAT, KEY, now) == Declined(OFFER)
    assert consent_answer(answer("accept", context, INFO), CHAT, KEY, OFFER.expires + 1) == Unusable(
        "the offer expired", OFFER)
    incomplete = consent_answer(answer("accept", context, dict(INFO, uploadUrl="")), CHAT, KEY, now)
    assert isinstance(incomplete, Unusable) and incomplete.offer == OFFER and "upload URL" in incomplete.why
    foreign = consent_answer(answer("accept", dict(context, size=99), INFO), CHAT, KEY, now)
    assert isinstance(foreign, Unusable) and foreign.offer is None, "altered: nothing to tell the user"
    assert consent_answer(answer("maybe", context), CHAT, KEY, now).why.startswith("not a file upload answer")
    card = file_info_card(accepted)
    assert card["attachments"] == [{"contentType": "application/vnd.microsoft.teams.card.file.info",
                                    "contentUrl": INFO["contentUrl"], "name": "report.pdf",
                                    "content": {"uniqueId": "1150D938", "fileType": "pdf"}}]


def test_the_upload_goes_in_ranges_of_a_multiple_of_320_kib_under_4_mb():
    assert UPLOAD_PIECE_BYTES % (320 * 1024) == 0 and UPLOAD_PIECE_BYTES <= 4_000_000
    assert upload_ranges(1) == [(0, 0)] and upload_ranges(0) == [(0, -1)]
    assert upload_ranges(UPLOAD_PIECE_BYTES) == [(0, UPLOAD_PIECE_BYTES - 1)]
    assert upload_ranges(UPLOAD_PIECE_BYTES + 1) == [(0, UPLOAD_PIECE_BYTES - 1),
                                                     (UPLOAD_PIECE_BYTES, UPLOAD_PIECE_BYTES)]
    assert content_range(0, 9, 10) == "bytes 0-9/10"


def test_files_come_from_and_go_to_onedrive_and_sharepoint_hosts_only():
    hosts, local = ("sharepoint.com",), ("http://127.0.0.1:9/",)
    assert file_host_allowed("https://contoso-my.sharepoint.com/personal/x/_layouts/15/download.aspx?a=1", hosts, ())
    assert file_host_allowed("https://sharepoint.com/x", hosts, ())
    assert file_host_allowed("http://127.0.0.1:9/upload/abc", hosts, local)
    for refused in ("http://contoso.sharepoint.com/x", "https://evil.example.com/x", "https://sharepoint.com.evil.io/",
                    "https://evilsharepoint.com/x", "https://user:pw@contoso.sharepoint.com/x", "http://127.0.0.1:10/",
                    "https://169.254.169.254/latest", None, "x" * 9000):
        assert not file_host_allowed(refused, hosts, local), refused


def test_a_file_shared_from_onedrive_is_taken_by_its_download_link():
    with FakeTeams() as fake:   # only its activity builder: no server is called
        message = fake.message_activity(fake.personal("files"), "see attached")
    download = "https://contoso-my.sharepoint.com/personal/a/_layouts/15/download.aspx?UniqueId=1&tempauth=x"
    shared = {"contentType": "application/vnd.microsoft.teams.file.download.info", "name": "plan.docx",
              "contentUrl": "https://contoso-my.sharepoint.com/personal/a/Documents/plan.docx",
              "content": {"downloadUrl": download, "uniqueId": "1", "fileType": "docx"}}
    photo = dict(shared, name="shot.png", content=dict(shared["content"], fileType="png"))
    broken = dict(shared, content={"fileType": "pdf"})
    event = event_from_activity(dict(message, attachments=[shared, photo, broken]), "teams", "p")
    assert [(a.kind, a.state, a.ref, a.name) for a in event.attachments] == [
        ("document", "pending", SHARED_REF + download, "plan.docx"),
        ("photo", "pending", SHARED_REF + download, "shot.png"),
        ("document", "unavailable", "", "plan.docx")], "no download link: unavailable, named"


def test_an_upload_session_takes_the_ranges_in_order_and_refuses_an_unknown_session():
    data = os.urandom(2 * UPLOAD_PIECE_BYTES + 1000)
    with FakeTeams() as fake:
        chat = fake.personal("uploader")
        with fake.mutate() as state:   # a card the bot sent, as the fake records it
            state["activities"][chat] = [{"id": "1", "text": "", "reply_to": None, "thread": None, "deleted": False,
                                          "edits": 0, "at": 0, "attachments": [{
                                              "contentType": CONSENT_CARD, "name": "big.bin",
                                              "content": {"sizeInBytes": len(data), "acceptContext": {},
                                                          "declineContext": {}, "description": "big"}}]}]
        info = fake.consent_activity(chat, "1", accept=True, user="uploader")["value"]["uploadInfo"]

        async def upload(url: str) -> None:
            async with HttpSession() as http:
                await put_file(http, url, data)
        asyncio.run(upload(info["uploadUrl"]))
        [done] = fake.uploads()
        assert done["complete"] and done["data"] == data
        assert done["ranges"] == [[0, UPLOAD_PIECE_BYTES - 1], [UPLOAD_PIECE_BYTES, 2 * UPLOAD_PIECE_BYTES - 1],
                                  [2 * UPLOAD_PIECE_BYTES, len(data) - 1]]
        with pytest.raises(PermanentError, match="404"):
            asyncio.run(upload(info["uploadUrl"]))   # finished: the session is gone
