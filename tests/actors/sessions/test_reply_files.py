"""A reply's files as its parts (actors/sessions/reply_files.py) and what of a reply is on the platform
(actors/sessions/placed_parts.py): pure, no actor."""
from __future__ import annotations

import dataclasses

import pytest

from actors.adapters.pacing import LENGTH_FUNCTIONS
from actors.adapters.registry import pacing_for
from actors.messages import ConsumerArgs, OutgoingFile
from actors.sessions.placed_parts import SUPERSEDED, PlacedParts
from actors.sessions.reply_files import (final_parts, file_of, fit, has_marker, is_file, send_fields,
                                         with_marker)

pytestmark = pytest.mark.timeout(30)

PHOTO = OutgoingFile("a" * 64, "image/png", "photo", "card.png", "our hours", 20_000, 800, 200)
utf16 = LENGTH_FUNCTIONS["utf16"]


def test_files_follow_the_text_chunks_each_as_its_own_part():
    telegram = pacing_for("telegram")
    parts = final_parts("x" * 5000, [PHOTO], telegram, utf16, 4000)
    assert [is_file(p) for p in parts] == [False, False, True]
    assert file_of(parts[2]) == PHOTO
    assert send_fields(parts[2]) == {"text": "", "file": PHOTO} and send_fields(parts[0]) == {"text": parts[0]}


def test_a_reply_of_only_a_file_has_no_empty_text_part():
    assert [is_file(p) for p in final_parts("", [PHOTO], pacing_for("telegram"), utf16, 4000)] == [True]
    assert final_parts("", [], pacing_for("telegram"), utf16, 4000) == [""]


def test_a_platform_without_files_or_under_the_files_size_shows_a_line_instead():
    (text,) = final_parts("Here.", [PHOTO], pacing_for("slack"), len, 4000)
    assert text == "Here.\n\n[file: card.png (PNG, 20 KB) — this chat does not show files]"
    small = dataclasses.replace(pacing_for("telegram"), upload_limit_bytes=10_000)
    (text,) = final_parts("Here.", [PHOTO], small, utf16, 4000)
    assert text.endswith("— larger than the 10 KB this chat takes]")


def test_a_photo_over_the_inline_limit_goes_as_a_document():
    big = dataclasses.replace(PHOTO, size=11 * 1024 * 1024)
    (part,) = final_parts("", [big], pacing_for("telegram"), utf16, 4000)
    assert file_of(part).kind == "document"


def test_captions_are_cut_to_the_platforms_limit_in_its_own_units():
    emoji = "😀" * 600                       # 1,200 UTF-16 units
    cut = fit(emoji, 1024, utf16)
    assert utf16(cut) <= 1024 and cut.endswith("…") and cut.startswith("😀")
    assert fit("short", 1024, utf16) == "short"
    (part,) = final_parts("", [dataclasses.replace(PHOTO, caption=emoji)], pacing_for("telegram"), utf16, 4000)
    assert utf16(file_of(part).caption) <= 1024


def test_the_resent_mark_goes_on_a_texts_first_line_or_a_files_caption():
    assert with_marker("hello", "↻") == "↻\nhello" and has_marker("↻\nhello", "↻")
    marked = with_marker({"file": PHOTO.to_part()}, "↻")
    assert file_of(marked).caption == "↻\nour hours" and has_marker(marked, "↻")
    assert not has_marker({"file": PHOTO.to_part()}, "↻")


def test_placed_parts_show_what_differs_in_order_then_delete_extras_then_superseded_previews():
    placed = PlacedParts()
    photo = {"file": PHOTO.to_part()}
    assert placed.next_step(["a", photo], final=True) == (0, "a")
    placed.ids[0], placed.shown[0] = "m1", "a"
    assert placed.next_step(["a", photo], final=True) == (1, photo)
    placed.ids[1] = "m2"                      # a file on the platform (recovered: nothing shown recorded)
    assert placed.next_step(["a", photo], final=True) is None and placed.shown[1] == photo
    placed.ids[2], placed.shown[2] = "m3", "old"
    assert placed.next_step(["a", photo], final=True) == (2, None)
    assert placed.next_step(["a", photo], final=False) is None   # previews never delete
    del placed.ids[2], placed.shown[2]
    placed.superseded.append("m0")
    assert placed.next_step(["a", photo], final=True) == (SUPERSEDED, None)


def test_where_the_platform_has_no_edits_a_part_on_it_is_never_edited():
    placed = PlacedParts()
    placed.ids[0] = "m1"                      # recovered from the ledger: sent with its final text
    assert placed.next_step(["final"], final=True, editable=False) is None and placed.shown[0] == "final"
    assert PlacedParts().next_step(["final"], final=True, editable=False) == (0, "final")


def test_status_reactions_are_held_until_the_adapter_is_known_and_typing_is_never_late():
    from actors.sessions.reply_status import ReplyStatus, status_reactions
    args = ConsumerArgs("t", "telegram:dm:c", "telegram:c:5", "telegram", "telegram", "c", reply_to="c:5")
    status = ReplyStatus(args, pacing_for("telegram"), status_reactions({"sessions": {"status_reactions": "👀 👍"}}))
    assert status.due(status.started(), adapter_known=False) == []
    assert status.due(status.typing(), adapter_known=False) == []        # dropped: stale by then
    (held, typing) = status.due(status.typing(), adapter_known=True)
    assert (held.action, held.text, held.message_id, typing.action) == ("react", "👀", "c:5", "typing")
    assert status.finished(delivered=True).text == "👍" and status.finished(delivered=False).text == ""
    off = ReplyStatus(args, pacing_for("slack"), ("👀", "👍"))             # no reactions on that platform
    assert off.started() is None and off.finished(True) is None
    assert status_reactions({}) == ("", "")


def test_the_resent_mark_goes_on_top_where_edits_exist_else_on_the_first_part_sent_again():
    from actors.sessions.reply_files import marked_at, marker_index
    assert marker_index(3, {0: "m1", 1: "m2"}, editable=True) == 0
    assert marker_index(3, {0: "m1", 1: "m2"}, editable=False) == 2
    assert marker_index(2, {0: "m1", 1: "m2"}, editable=False) is None        # all there: nothing goes again
    assert marker_index(3, {}, editable=False, decided=1) == 1                 # decided once, kept
    assert marked_at(["a", "b"], 1, "↻") == ["a", "↻\nb"] and marked_at(["a", "↻\nb"], 1, "↻") == ["a", "↻\nb"]
    assert marked_at(["a"], None, "↻") == ["a"] and marked_at(["a"], 5, "↻") == ["a"]


def test_a_profile_chooses_its_own_status_reactions_over_the_sessions_default():
    from actors.sessions.reply_status import status_reactions
    config = {"sessions": {"status_reactions": "👀 👍"},
              "profiles": {"quiet": {"status_reactions": ""}, "party": {"status_reactions": "🔥 🎉"}}}
    assert status_reactions(config, "party") == ("🔥", "🎉")
    assert status_reactions(config, "quiet") == ("", "")
    assert status_reactions(config, "default") == ("👀", "👍") == status_reactions(config)
