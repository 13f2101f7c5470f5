"""``run_gateway.py platforms``: every platform type this gateway can run, with what each can do.

Read from the registry (each platform folder's ``platform.py``: actors/adapters/spec.py), so it needs neither a
configuration nor a running gateway. ``--json`` gives one row per type for scripts; the text table is the one the
README shows (tests/project/test_readme.py holds the two together).
"""
from __future__ import annotations

from actors.adapters import registry
from actors.adapters.spec import capability_row, markdown_table
from daemon.cli_output import out
from daemon.cli_parsing import add_json, command


def add_parsers(sub) -> None:
    platforms = command(sub, "platforms", "every platform type and what it can do",
                        "Every platform type an [adapters.NAME] table can name: how its messages come in, what it\n"
                        "can do (edits, deletes, threads, reactions, files, voice, buttons, typing, idempotent sends\n"
                        "and by which key), its text limit and unit, and its pace per chat. Needs no running gateway.",
                        "platforms\nplatforms --json")
    add_json(platforms)


def rows() -> list[dict]:
    return [capability_row(registry.REGISTRY[name]) for name in sorted(registry.REGISTRY)]


def cmd_platforms(config: dict, args) -> int:
    table = rows()
    return out(args, {"ok": True, "platforms": table}, 0, markdown_table(table))
