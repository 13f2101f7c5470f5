"""``run_gateway.py platforms [TYPE]``: every platform type this gateway can run, with what each can do; with a
TYPE, every key its [adapters.NAME] table takes (required or its default, and what it is).

Read from the registry (each platform folder's ``platform.py``: actors/adapters/spec.py), so it needs neither a
configuration nor a running gateway. ``--json`` gives one row per type for scripts; the text table is the one the
README shows (tests/project/test_readme.py holds the two together).
"""
from __future__ import annotations

import json

from actors.adapters import registry
from actors.adapters.spec import capability_row, markdown_table
from common.config import unknown_name
from daemon.cli_output import EX_USAGE, fail, out
from daemon.cli_parsing import add_json, command


def add_parsers(sub) -> None:
    platforms = command(sub, "platforms", "every platform type and what it can do",
                        "Every platform type an [adapters.NAME] table can name: how its messages come in, what it\n"
                        "can do (edits, deletes, threads, reactions, files, voice, buttons, typing, idempotent sends\n"
                        "and by which key), its text limit and unit, and its pace per chat. With a TYPE, every key of\n"
                        "its [adapters.NAME] table: required or its default, and what it is. Needs no running gateway.",
                        "platforms\nplatforms telegram\nplatforms --json")
    platforms.add_argument("type", nargs="?", metavar="TYPE", help="a platform type: list the keys of its table")
    add_json(platforms)


def rows() -> list[dict]:
    return [capability_row(registry.REGISTRY[name]) for name in sorted(registry.REGISTRY)]


def keys_of(kind: str) -> list[dict]:
    """Every key of a ``kind`` table: the platform's own first, then those every adapter takes."""
    options = {**registry.REGISTRY[kind].options, **registry.COMMON_OPTIONS}
    return [{"key": key, "type": option.kind.__name__, "required": option.default is registry.REQUIRED,
             "default": None if option.default is registry.REQUIRED else option.default, "secret": option.secret,
             "doc": option.doc} for key, option in options.items()]


def keys_text(kind: str, keys: list[dict]) -> str:
    lines = [f"[adapters.NAME] with type = \"{kind}\": {registry.REGISTRY[kind].summary}"]
    for k in keys:
        value = "required" if k["required"] else f"default {json.dumps(k['default'], ensure_ascii=False)}"
        lines.append(f"  {k['key']} ({k['type']}, {value}{', secret' if k['secret'] else ''})"
                     + (f": {k['doc']}" if k["doc"] else ""))
    return "\n".join(lines)


def cmd_platforms(config: dict, args) -> int:
    kind = getattr(args, "type", None)
    if kind is not None:
        if kind not in registry.REGISTRY:
            return fail(args, unknown_name("platform type", kind, registry.REGISTRY), EX_USAGE)
        keys = keys_of(kind)
        return out(args, {"ok": True, "type": kind, "keys": keys}, 0, keys_text(kind, keys))
    table = rows()
    return out(args, {"ok": True, "platforms": table}, 0, markdown_table(table))
