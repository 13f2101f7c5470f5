"""How every admin command answers: text for people (tables and the tree drawn by rich on a terminal), or with
``--json`` one JSON object on stdout, errors too.

An error is ``{"ok": false, "error": "..."}`` on stdout with a non-zero exit under ``--json`` (a script reads one
stream and checks the exit code), and its text on stderr otherwise. ``run_guarded`` is the CLI's outermost frame:
a reader that stops early (``status | head -1``) ends the command quietly instead of in a BrokenPipeError.
"""
from __future__ import annotations

import json
import os
import sys

from daemon import cli_rich   # rich itself is imported only to draw

EX_USAGE = 2
EX_BROKEN_PIPE = 141   # 128 + SIGPIPE: what a shell reports for a program its reader stopped listening to


def wants_json(args=None, argv: list[str] | None = None) -> bool:
    """``--json`` was asked for: from the parsed arguments, or (before they parse) anywhere on the command line."""
    if args is not None:
        return bool(getattr(args, "json", False))
    return "--json" in (sys.argv[1:] if argv is None else argv)


def out(args, data: dict, code: int, text: str | None = None, drawn=None) -> int:
    """Print ``data`` as JSON (with --json) or ``text`` (else the error, else the JSON); return ``code``.
    ``drawn``: a function that returns what rich draws instead of ``text`` when stdout is a terminal (a table, the
    tree); called only then, so piped output is ``text`` exactly (daemon/cli_rich.py)."""
    if wants_json(args):
        print(json.dumps(data, indent=2, default=str))
    elif drawn is not None and code == 0 and cli_rich.for_a_person():
        cli_rich.show(drawn())
    else:
        message = text if text is not None else data.get("error", json.dumps(data))
        print(message, file=sys.stderr if code else sys.stdout)
    return code


def fail(args, error: str, code: int = 1, **fields) -> int:
    return out(args, {"ok": False, "error": error, **fields}, code)


def config_failure(args, exc, code: int = 78) -> int:
    """A configuration that does not check: every error it has, one line each (file, key, reason), exit 78."""
    lines = [f"config error: {e.file}: {e.key}: {e.reason}" for e in exc.every()]
    if len(lines) > 1:
        lines.append(f"({len(lines)} errors in the configuration)")
    return fail(args, "\n".join(lines), code, file=exc.file, key=exc.key, reason=exc.reason,
                errors=[{"file": e.file, "key": e.key, "reason": e.reason} for e in exc.every()])


def run_guarded(main, argv: list[str] | None) -> int:
    try:
        code = main(argv)
        sys.stdout.flush()   # what is still buffered meets a closed pipe here, inside the guard
        return code
    except BrokenPipeError:
        # Nothing more can be said to the reader; point stdout at /dev/null so the interpreter's own flush at exit
        # does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EX_BROKEN_PIPE
