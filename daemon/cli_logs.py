"""``run_gateway.py logs [-f] [--since DURATION] [-n N]``: the daemon's log file, from the state directory.

The log is the one ``start`` writes (``[gateway] log_file``, else ``<state>/gateway.log``), in either format of
``[logging] format``; under systemd the journal has it instead (``journalctl -u agent-gateway``). ``--since`` keeps
the records of the last DURATION (``90s``, ``10m``, ``2h``, ``1d``, ``1h30m``), judged by each record's own time; a
line without one (a traceback's) goes with the record before it. ``-f`` then follows the file as it grows, across
a rotation or truncation, until Ctrl-C.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Iterable, Iterator, Optional

from common.runfiles import RunFiles
from daemon.cli_output import EX_USAGE, fail
from daemon.cli_parsing import command

FOLLOW_POLL_S = 0.2
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TEXT_TIME = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def add_parsers(sub) -> None:
    logs = command(sub, "logs", "the daemon's log (-f follows it)",
                   "Print the log of the gateway `start` runs (<state>/gateway.log, or [gateway] log_file): all of\n"
                   "it, the last --lines, or the records of the last --since; -f then prints what is added until\n"
                   "Ctrl-C. A foreground `run` logs to its stderr instead; under systemd, see the journal.",
                   "logs --since 10m\nlogs -f -n 20")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing what is added, until Ctrl-C")
    logs.add_argument("--since", metavar="DURATION", help="only the records of the last DURATION: 90s, 10m, 2h, "
                                                          "1d, 1h30m (default: the whole file)")
    logs.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines (default: all)")


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> float:
    """Seconds in ``text``: one or more <number><unit> with unit s, m, h or d (``1h30m``)."""
    cleaned = text.strip().lower()
    parts = _DURATION.findall(cleaned)
    if not cleaned or "".join(n + u for n, u in parts) != cleaned:
        raise DurationError(f"not a duration: {text!r} (say e.g. 90s, 10m, 2h, 1d or 1h30m)")
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def record_time(line: str) -> Optional[float]:
    """When a log line's record was made (epoch seconds), in either format; None for a line that is not a record's
    first line (a traceback, Thespian's own output)."""
    match = _TEXT_TIME.match(line)
    if match:   # the text format writes local time (logging's asctime)
        return time.mktime(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")) + int(match.group(2)) / 1000
    if line.startswith("{"):
        try:
            return datetime.fromisoformat(json.loads(line)["ts"]).timestamp()
        except (ValueError, KeyError, TypeError):
            return None
    return None


def since(lines: Iterable[str], cutoff: float) -> Iterator[str]:
    """The lines of records made at ``cutoff`` or later (with the lines that continue them)."""
    keep = False
    for line in lines:
        at = record_time(line)
        if at is not None:
            keep = at >= cutoff
        if keep:
            yield line


def cmd_logs(config: dict, args) -> int:
    path = RunFiles(config["gateway"]["state_dir"]).log_path(config)
    cutoff = None
    if args.since:
        try:
            cutoff = time.time() - parse_duration(args.since)
        except DurationError as exc:
            return fail(args, str(exc), EX_USAGE)
    if args.lines is not None and args.lines < 0:
        return fail(args, f"--lines must not be negative, got {args.lines}", EX_USAGE)
    if not path.exists() and not args.follow:
        return fail(args, f"no log at {path}: the gateway has not run with `start` on this state dir (a foreground "
                          f"`run` logs to its stderr)")
    try:
        position = _print_existing(path, cutoff, args.lines)
        if args.follow:
            _follow(path, position)
    except KeyboardInterrupt:
        pass   # Ctrl-C is how -f ends
    return 0


def _print_existing(path: Path, cutoff: Optional[float], last: Optional[int]) -> tuple:
    """Print what the file holds now; (inode, offset) of where following goes on."""
    if not path.exists():
        return (None, 0)
    with open(path, "rb") as f:
        data = f.read()
        inode = os.fstat(f.fileno()).st_ino
    complete = data[:data.rfind(b"\n") + 1]   # a line still being written is printed whole, when following
    lines = complete.decode("utf-8", "replace").splitlines(keepends=True)
    if cutoff is not None:
        lines = list(since(lines, cutoff))
    if last is not None:
        lines = lines[-last:] if last else []
    sys.stdout.write("".join(lines))
    sys.stdout.flush()
    return (inode, len(complete))


def _follow(path: Path, position: tuple) -> None:
    inode, offset = position
    pending = b""
    while True:
        try:
            info = path.stat()
        except FileNotFoundError:
            info = None
        if info is not None:
            if info.st_ino != inode or info.st_size < offset:   # rotated or truncated: the new file from its start
                inode, offset, pending = info.st_ino, 0, b""
            if info.st_size > offset:
                with open(path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
                offset += len(chunk)
                pending += chunk
                complete, _, pending = pending.rpartition(b"\n")
                if complete:
                    sys.stdout.write(complete.decode("utf-8", "replace") + "\n")
                    sys.stdout.flush()
        time.sleep(FOLLOW_POLL_S)
