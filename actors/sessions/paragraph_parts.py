"""A reply sent in paragraph-sized parts as it is written, where the platform has no edits (the profile's
``stream_without_edits = "paragraphs"``): where its text is cut, what each part shows, and what a reply resumed
after a crash sends. Pure: no actor, no platform (tests/actors/sessions/test_paragraph_parts.py); the stream
consumer (stream_consumer.py) asks it for the reply's text parts and sends those not on the platform yet.

Cutting: while the model writes, the complete paragraphs (the text up to its last blank line outside a code block)
become parts once they hold at least ``min_chars`` (``PART_MIN_CHARS``, in the platform's length unit), cut at the
chunk limit as the final text is (chunking.py); a paragraph longer than the limit goes out in limit-sized chunks as
its text comes. What is left when the turn ends is cut and sent after them, then the files. A part never changes
once cut: the platform cannot edit it.

Delivery: the parts are the reply's parts in the ledger like any other (intent before each send, id with the
answer); what each part shows is recorded too (``record``: ``Ledger.set_streamed``), before the part leaves, so a
consumer started again for the turn knows what the chat may already show.

Resumed (a turn cut short by a kill -9 is run again, and its model writes the answer anew): the parts already on
the platform stay as they are. If the new answer begins with exactly what they show (``continuation``), it goes on
after them: no part is sent twice, none is lost. If it does not (a model rarely writes the same words twice), the
new answer is sent whole after them, its first part under the one-line ``[sessions] resent_marker`` ("re-sent after
a restart; an unfinished copy may appear above"): the reader gets all of the answer they are meant to read, told
that the parts above it are an unfinished copy. Parts of the earlier answer not on the platform yet are dropped
then (one whose send's outcome is unknown is the "unfinished copy" the mark speaks of). The same rule holds when
the final text does not begin with what was sent of it (a redaction that reads differently once the secret is
whole). Parts on the platform whose text is not known (no record: a reply moved from another host) count as an
earlier answer that differs.

Idempotent sends: where the platform deduplicates by key (LINE, QQ), the key of such a part names its content as
well as its index (``part_key``), so a new answer's part at an index an earlier answer's lost send used is never
taken for that send's retry.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Optional

from actors.adapters.pacing import LengthFn, chunk_limit
from actors.sessions.chunking import paragraph_breaks, plan_chunks, split_message
from actors.sessions.reply_files import Part, final_parts, is_file, marked_at

PART_MIN_CHARS = 200       # the least text a part sent while the answer is written holds (blank space aside)


def paragraph_end(text: str, start: int, min_chars: int, length: LengthFn = len) -> int:
    """Where the complete paragraphs of ``text[start:]`` end: just after its last blank line outside a code block
    (``start`` is outside one), if they hold at least ``min_chars``; else ``start`` (nothing is ready yet)."""
    breaks = paragraph_breaks(text[start:])
    if breaks and length(text[start:start + breaks[-1]].strip()) >= min_chars:
        return start + breaks[-1]
    return start


def ready_parts(text: str, start: int, limit: int, min_chars: int, length: LengthFn = len) -> tuple[list[str], int]:
    """The parts ``text[start:]`` has ready while more is still to come, and where the text they cover ends: its
    complete paragraphs (``paragraph_end``), then whole chunks of a longer unbroken run (all but the run's last,
    which is still growing; never one cut inside a code block, whose next part would have to reopen it)."""
    end = paragraph_end(text, start, min_chars, length)
    parts = [p.strip() for p in split_message(text[start:end], limit, length)] if end > start else []
    if length(text[end:]) > limit:
        for chunk in plan_chunks(text[end:], limit, length)[:-1]:
            if chunk.opened or chunk.closed:
                break
            if chunk.text.strip():
                parts.append(chunk.text.strip())
            end += chunk.end - chunk.start
    return parts, end


def continuation(text: str, sent: list[str], marker: str) -> tuple[str, int]:
    """Whether ``text`` begins with the parts ``sent`` show, in order (blank space between them aside, and the
    re-sent mark on a part aside): ("continues", where they end in ``text``), ("too_short", 0) while ``text`` may
    still grow into them, or ("differs", 0)."""
    pos = 0
    for part in sent:
        shown = part[len(marker) + 1:] if marker and part.startswith(marker + "\n") else part
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if text.startswith(shown, pos):
            pos += len(shown)
        elif shown.startswith(text[pos:]):
            return "too_short", 0
        else:
            return "differs", 0
    return "continues", pos


def part_key(obligation_id: str, index: int, part: Part) -> str:
    """The idempotency key of a send of ``part`` as part ``index`` of a reply sent as it is written: its content
    is in it, so the same key always means the same part with the same content."""
    content = repr(sorted(part["file"].items())) if is_file(part) else part
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{obligation_id[:16]}.{index}.{digest}"


class ParagraphParts:
    """One reply's parts while its answer is written. State: ``kept`` (parts an earlier answer left on the
    platform: they stay, and this answer's parts follow them), ``earlier`` (an earlier life's parts of this answer,
    until the new answer shows whether it continues them; None once known), ``parts`` (this answer's parts so far),
    ``source`` (the answer's text they cover), ``marked`` (this answer's first part carries the re-sent mark),
    ``final`` (the reply's parts once the turn has ended, cut once)."""

    def __init__(self, limit: int, length: LengthFn, marker: str, min_chars: int = PART_MIN_CHARS):
        self.limit, self.length, self.marker = limit, length, marker
        self.min_chars = max(1, min(min_chars, limit // 2))
        self.kept: list[str] = []
        self.earlier: Optional[list[str]] = None
        self.parts: list[str] = []
        self.source = ""
        self.marked = False
        self.final: Optional[list[Part]] = None

    @classmethod
    def for_reply(cls, args, pacing, length: LengthFn, marker: str) -> Optional["ParagraphParts"]:
        """The parts of a reply (ConsumerArgs ``args``) that streams where the platform has no edits and its profile
        says ``paragraphs``; None otherwise. Cut with room for the mark, even where sends are keyed."""
        if pacing.supports_edit or not args.stream or args.stream_without_edits != "paragraphs":
            return None
        return cls(chunk_limit(dataclasses.replace(pacing, idempotent_send=False), length, marker), length, marker)

    def resume(self, record: Optional[dict], placed: dict) -> Optional[int]:
        """Start from what the ledger says an earlier life of this reply sent: its ``record`` (``Ledger.
        set_streamed``, None if none) and the ids of the parts on the platform. Whatever was cut before is
        forgotten: it is cut again from here. Returns the index of the part that carries the re-sent mark already,
        if one does: a reply marked in an earlier life is not marked again on a later part."""
        self.parts, self.source, self.final, self.marked = [], "", None, False
        if record:
            texts = list(record.get("parts", []))
            start = min(int(record.get("from", 0)), len(texts))
            self.kept, self.earlier = texts[:start], texts[start:] or None
            unknown = [i for i in placed if i >= len(texts)]
        else:
            unknown = list(placed)
        if unknown:   # on the platform, and what they show is not known: an earlier answer that differs
            self.kept = (self.kept + (self.earlier or []) + [""] * (max(unknown) + 1))[:max(unknown) + 1]
            self.earlier, self.marked = None, True
        return next((i for i, part in enumerate(self.kept + (self.earlier or []))
                     if isinstance(part, str) and part.startswith(self.marker + "\n")), None)

    def streaming(self, answer: str, placed: dict) -> list[str]:
        """The reply's text parts while ``answer`` is being written: those kept, then this answer's ready ones."""
        if self.earlier is not None:
            outcome = self.go_on(answer, placed)
            if outcome == "too_short":
                return list(self.kept)
        if not answer.startswith(self.source):
            return self.kept + self.parts   # the answer so far reads differently (redaction): decided at the end
        ready, end = ready_parts(answer, len(self.source), self.limit, self.min_chars, self.length)
        if ready:
            if self.marked and not self.parts:
                ready[0] = f"{self.marker}\n{ready[0]}"
            self.parts, self.source = self.parts + ready, answer[:end]
        return self.kept + self.parts

    def finished(self, final_text: str, files: list, pacing, placed: dict) -> list[Part]:
        """The reply's parts once the turn has ended: those kept, this answer's so far, then the rest of
        ``final_text`` cut at the limit, then its files (reply_files.final_parts). Cut once."""
        if self.final is not None:
            return self.final
        if self.earlier is not None and self.go_on(final_text, placed) == "too_short":
            self.diverge(placed)   # the answer ended short of what the earlier one sent: it does not go on from it
        if not final_text.startswith(self.source):
            self.diverge(placed)
        rest = final_parts(final_text[len(self.source):].strip(), files, pacing, self.length, self.limit)
        if self.kept or self.parts:   # the parts before it hold text: no empty one after them
            rest = [p for p in rest if is_file(p) or p.strip()]
        if self.marked and not self.parts:
            rest = marked_at(rest, 0, self.marker)
        self.final = self.kept + self.parts + rest
        return self.final

    def go_on(self, answer: str, placed: dict) -> str:
        """Whether ``answer`` goes on from the text parts an earlier life sent of it (``continuation``): if so they
        are this answer's first parts (its files come from this turn); if it differs, ``diverge``."""
        sent = [p for p in self.earlier if not is_file(p)]
        outcome, end = continuation(answer, sent, self.marker)
        if outcome == "continues":
            self.parts, self.source, self.earlier = sent, answer[:end], None
        elif outcome == "differs":
            self.diverge(placed)
        return outcome

    def diverge(self, placed: dict) -> None:
        """This answer does not go on from the parts on the platform: they stay, and it is sent whole after them,
        marked. Its parts (or an earlier life's) not on the platform yet are dropped."""
        dropped = self.earlier if self.earlier is not None else self.parts
        on_platform = 0
        while on_platform < len(dropped) and len(self.kept) + on_platform in placed:
            on_platform += 1
        self.kept = self.kept + dropped[:on_platform]
        self.earlier, self.parts, self.source, self.marked = None, [], "", True

    def record(self) -> dict:
        """What the ledger keeps of the parts (``Ledger.set_streamed``): each part (a text, or a file once the turn
        has ended), by index, and the index this answer's parts start at."""
        texts = self.final if self.final is not None else \
            self.kept + (self.earlier if self.earlier is not None else self.parts)   # never forgets what was sent
        return {"from": len(self.kept), "parts": list(texts)}
