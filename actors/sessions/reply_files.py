"""The files of a reply as parts of it, beside its text chunks: pure, for the stream consumer and the sweeper.

A reply's parts are its text chunks, then one part per file (``{"file": OutgoingFile.to_part()}``), in the order
the tools made them. The ledger records them together (``set_chunks``), so a reply recovered after a crash sends
the same files at the same indexes; a part already on the platform is never sent again, and a file part is never
edited (its caption stays as sent). Where the platform takes no files (pacing ``sends_files``), or a file is over
its upload limit, the file becomes a line of the reply's text instead, so the reader still learns of it.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Union

from actors.adapters.pacing import PlatformPacing
from actors.media.limits import human_size
from actors.media.outgoing import unsent_line
from actors.messages import OutgoingFile
from actors.sessions.chunking import split_message

Part = Union[str, dict]


def is_file(part: Part) -> bool:
    return isinstance(part, dict) and isinstance(part.get("file"), dict)


def file_of(part: Part) -> OutgoingFile:
    return OutgoingFile.from_part(part["file"])


def final_parts(final_text: str, files: list, pacing: PlatformPacing, length: Callable[[str], int],
                limit: int) -> list[Part]:
    """The reply's final parts: its text (with a line for each file the platform cannot take) cut into chunks of
    ``limit``, then a part per file it can."""
    parts, lines = [], []
    for file in files:
        if file.kind == "voice" and not pacing.sends_voice:
            continue   # a voice note says what the text says: where the platform has none, the text is the reply
        why = unsendable(file, pacing)
        if why:
            lines.append(unsent_line(file, why))
            continue
        if file.kind == "photo" and file.size > pacing.photo_limit_bytes:
            file = dataclasses.replace(file, kind="document")   # too large to show inline: sent to download
        parts.append({"file": dataclasses.replace(file, caption=fit(file.caption, pacing.caption_limit,
                                                                    length)).to_part()})
    text = final_text + ("\n\n" + "\n".join(lines) if lines else "")
    chunks = split_message(text, limit, length)
    return (chunks or ([] if parts else [text])) + parts


class FinalCut:
    """``final_parts`` of a finishing reply, cut once: its final text and files no longer change, and every pump
    of its consumer asks for them (a cut with a code fence in it costs tens of microseconds)."""

    def __init__(self):
        self.cut_of: tuple | None = None
        self.cut: list[Part] = []

    def parts(self, final_text: str, files: list, pacing: PlatformPacing, length: Callable[[str], int],
              limit: int) -> list[Part]:
        if self.cut_of != (final_text, len(files), limit):
            self.cut_of, self.cut = (final_text, len(files), limit), final_parts(final_text, files, pacing, length,
                                                                                 limit)
        return self.cut


def unsendable(file: OutgoingFile, pacing: PlatformPacing) -> str:
    """Why the platform cannot take the file ("" if it can). A voice note goes where the platform sends voice notes,
    even one that sends no other file (Signal, Matrix: ``voice_out`` without ``files_out``)."""
    if not pacing.sends_files and not (file.kind == "voice" and pacing.sends_voice):
        return "this chat does not show files"
    if file.size > pacing.upload_limit_bytes:
        return f"larger than the {human_size(pacing.upload_limit_bytes)} this chat takes"
    return ""


def fit(caption: str, limit: int, length: Callable[[str], int]) -> str:
    """The caption cut (with an ellipsis) to the platform's caption limit, as measured by ``length``."""
    if length(caption) <= limit:
        return caption
    cut = caption[:limit]
    while cut and length(cut) > limit - 1:
        cut = cut[:-1]
    return cut.rstrip() + "…"


def with_marker(part: Part, marker: str) -> Part:
    """The part with the re-sent mark on top: a text's first line, or a file's caption."""
    if is_file(part):
        file = file_of(part)
        return {"file": dataclasses.replace(file, caption=f"{marker}\n{file.caption}".rstrip()).to_part()}
    return f"{marker}\n{part}"


def marker_index(count: int, placed, editable: bool, decided: Optional[int] = None) -> Optional[int]:
    """Which of a reply's ``count`` parts carries the re-sent mark: the first, edited in where the platform edits
    (the reader sees it on top of the reply); where it does not, the first part not on the platform yet, the one
    going out again (a part already there stays as sent). Decided once: ``decided`` is kept if given."""
    if decided is not None:
        return decided
    if editable:
        return 0
    return next((i for i in range(count) if i not in placed), None)


def marked_at(parts: list, index: Optional[int], marker: str) -> list:
    """``parts`` with the mark on part ``index`` (none if None or past the end, or already there)."""
    if index is None or index >= len(parts) or has_marker(parts[index], marker):
        return parts
    return parts[:index] + [with_marker(parts[index], marker)] + parts[index + 1:]


def has_marker(part: Part, marker: str) -> bool:
    return (file_of(part).caption if is_file(part) else part).startswith(marker)


def send_fields(part: Part) -> dict:
    """The ``text`` and ``file`` fields of the PlatformOp that sends ``part``."""
    return {"text": "", "file": file_of(part)} if is_file(part) else {"text": part}
