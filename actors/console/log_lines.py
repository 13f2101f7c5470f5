"""The gateway's log file as the console's logs page reads it: the newest lines, new lines as they are written, and
the filters by level and by actor. Pure but for reading the file (the caller says which, and from where).

A line reads ``2026-12-06 09:26:47,322 INFO gateway.Console: text``: its level is the third word and its actor the
fourth (the logger, ``gateway.KIND``); a line that does not (a traceback's) belongs to the line before it.

Bounded: each read takes at most ``max_bytes`` of the file, whatever was written; a reader that falls further
behind skips to the newest ``max_bytes`` and is told how many bytes it skipped, so a burst of logging never makes
the console hold more than one chunk for a browser.
"""
from __future__ import annotations

import os

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def level_and_actor(line: str) -> tuple[str, str]:
    """("INFO", "gateway.Console") of a log line; ("", "") for a line that is not a record's first."""
    words = line.split(" ", 4)
    if len(words) >= 4 and words[2] in LEVELS:
        return words[2], words[3].rstrip(":")
    return "", ""


def matching(lines: list[str], level: str = "", actor: str = "", words: str = "") -> list[str]:
    """The lines at ``level`` or above, of a logger whose name holds ``actor``, holding ``words`` (each optional,
    case-insensitive); a continuation line (a traceback's) goes with its record."""
    floor = LEVELS.index(level.upper()) if level.upper() in LEVELS else 0
    actor, words = actor.lower(), words.lower()
    kept, keep = [], False
    for line in lines:
        record_level, record_actor = level_and_actor(line)
        if record_level:
            keep = (LEVELS.index(record_level) >= floor and actor in record_actor.lower())
        if keep and words in line.lower():
            kept.append(line)
    return kept


def tail(path, max_bytes: int) -> tuple[list[str], int]:
    """The newest whole lines within the last ``max_bytes`` of the file, and the file's size (where to follow from)."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        start = max(0, size - max_bytes)
        f.seek(start)
        lines = f.read(size - start).decode("utf-8", "replace").splitlines()
    return lines[1 if start else 0:], size


def read_new(path, position: int, max_bytes: int) -> tuple[list[str], int, int]:
    """(the whole lines written since ``position``, the position after them, bytes skipped). A file shorter than
    ``position`` was rotated or truncated: read from its start. More than ``max_bytes`` new: the newest only."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < position:
            position = 0
        skipped = max(0, size - position - max_bytes)
        f.seek(position + skipped)
        data = f.read(size - position - skipped)
    end = data.rfind(b"\n")
    if end < 0:                          # no whole line yet: wait for the rest of it
        return [], position + skipped, skipped
    lines = data[:end].decode("utf-8", "replace").splitlines()
    if skipped:
        lines = lines[1:]                # the first, cut by the skip
    return lines, position + skipped + end + 1, skipped
