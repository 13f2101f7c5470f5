"""What of a reply is on the platform, and the next operation that makes it show what the reply wants: pure, one
reply's bookkeeping for its stream consumer (no actor, no platform: tests/actors/sessions/test_placed_parts.py).

``ids``: part index -> the platform's message id; ``shown``: part index -> what that message shows now;
``superseded``: previews a fallback replaced with new messages, deleted once all is shown. ``next_step`` compares
the wanted parts (text chunks, then files: reply_files.py) with those, in order: the first part that differs is
shown (sent or edited), then parts past the final text's end are deleted, then the superseded previews.
"""
from __future__ import annotations

from typing import Optional

from actors.sessions.reply_files import Part, is_file

SUPERSEDED = -1         # the part index of a delete aimed at a superseded preview


class PlacedParts:
    def __init__(self):
        self.ids: dict[int, str] = {}
        self.shown: dict[int, Part] = {}
        self.superseded: list[str] = []

    def next_step(self, wanted: list, final: bool, editable: bool = True) -> Optional[tuple[int, Optional[Part]]]:
        """(index, part to show) or (index, None: delete it), or None when the platform shows what is wanted.
        ``editable``: the platform edits messages (pacing ``supports_edit``)."""
        for index, part in enumerate(wanted):
            if index in self.ids and (is_file(part) or not editable):
                # Never edited: a file's caption stays as sent, and where the platform has no edits a part went
                # out with its final text already (there are no previews to bring up to date).
                self.shown[index] = part
            elif self.shown.get(index) != part:
                return index, part
        extra = sorted(i for i in self.ids if i >= len(wanted)) if final else []
        if extra:
            return extra[0], None
        if final and self.superseded:
            return SUPERSEDED, None
        return None
