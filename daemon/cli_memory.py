"""``run_gateway.py memory ...``: what the profiles remember (docs/profiles.md, "Memory").

    memory list [--profile P] [--scope S]   every entry: its number, profile, scope and text
    memory show ID|SCOPE [--profile P]      one entry by its number, or every entry of a scope
    memory forget ID                        delete one entry (the next turn's request no longer holds it)

They read and write the state dir's database beside a running gateway (WAL): a turn started after a ``forget``
does not see the entry. A scope is written as the gateway names it: ``user:ADAPTER:USER_ID``,
``identity:NAME`` (a linked identity), ``chat:ADAPTER:CHAT_ID[:THREAD_ID]``, or ``profile``.
"""
from __future__ import annotations

import time

from daemon.cli_output import EX_USAGE, fail
from daemon.cli_parsing import add_json, command
from daemon.cli_storage import run_on_store
from storage import NotFound

SCOPE_HELP = ("a scope: user:ADAPTER:USER_ID, identity:NAME (a linked identity), chat:ADAPTER:CHAT_ID[:THREAD_ID] "
              "or profile")


def add_parsers(sub) -> None:
    memory = command(sub, "memory", "what the profiles remember: list, show ID|SCOPE, forget ID",
                     "What each profile remembers ([profiles.NAME] memory = \"user\" | \"chat\" | \"profile\"):\n"
                     "entries its remember tool wrote, read into the system prompt of its turns. Two profiles\n"
                     "never read each other's entries. Reads and writes the database beside a running gateway.",
                     "memory list --profile support\nmemory show user:telegram:123\nmemory forget 7")
    msub = memory.add_subparsers(dest="action", metavar="ACTION")
    listing = command(msub, "list", "every entry, by profile and scope (the default)",
                      "Every remembered entry: its number (what `show` and `forget` take), its profile, its scope\n"
                      "and its text, by profile, then scope, oldest first.",
                      "memory list\nmemory list --profile support --json")
    show = command(msub, "show", "one entry by its number, or every entry of a scope",
                   "One entry (ID: its number, as `memory list` shows it) with when it was written and in which\n"
                   "conversation, or every entry of a scope: user:ADAPTER:USER_ID, identity:NAME (a linked\n"
                   "identity), chat:ADAPTER:CHAT_ID[:THREAD_ID] or profile.",
                   "memory show 7\nmemory show identity:ada --profile support")
    show.add_argument("what", metavar="ID|SCOPE", help="an entry's number, or " + SCOPE_HELP)
    forget = command(msub, "forget", "delete one entry by its number",
                     "Delete the entry: the profile's next turns no longer have it in their request. A turn\n"
                     "already running keeps the prompt it started with.", "memory forget 7")
    forget.add_argument("memory_id", metavar="ID", help="the entry's number, as `memory list` shows it")
    for parser in (listing, show):
        parser.add_argument("--profile", metavar="P", help="only this profile's entries")
    listing.add_argument("--scope", metavar="S", help="only this scope's entries (" + SCOPE_HELP + ")")
    add_json(memory, listing, show, forget)


def _row(entry) -> dict:
    return {"id": entry.memory_id, "profile": entry.profile, "scope": entry.scope, "text": entry.text,
            "created_at": entry.created_at, "session_key": entry.session_key}


def _line(row: dict) -> str:
    return f"{row['id']:>5}  {row['profile']}  {row['scope']}  {row['text']}"


def _when(ts) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def cmd_memory(config: dict, args) -> int:
    action = args.action or "list"
    profile = getattr(args, "profile", None)
    if action == "list":
        scope = getattr(args, "scope", None)

        async def listing(store) -> dict:
            return {"ok": True, "entries": [_row(e) for e in await store.memory.listing(profile, scope)]}
        return run_on_store(config, args, listing, lambda r: "\n".join(map(_line, r["entries"])) or
                            "nothing remembered" + (f" by profile {profile}" if profile else ""))
    if action == "show":
        if args.what.isdigit():
            if profile is not None:
                return fail(args, "--profile goes with a SCOPE, not an ID", EX_USAGE)
            return run_on_store(config, args, lambda store: _one(store, int(args.what)), _render_one)

        async def scoped(store) -> dict:
            entries = await store.memory.listing(profile, args.what)
            return {"ok": True, "scope": args.what, "entries": [_row(e) for e in entries]}
        return run_on_store(config, args, scoped, lambda r: "\n".join(map(_line, r["entries"])) or
                            f"nothing remembered in scope {r['scope']!r} ({SCOPE_HELP})")
    if not args.memory_id.isdigit():
        return fail(args, f"ID: expected an entry's number (as `memory list` shows it), got {args.memory_id!r}",
                    EX_USAGE)

    async def forget(store) -> dict:
        gone = await store.memory.forget([int(args.memory_id)])
        if not gone:
            raise NotFound(f"no memory entry {args.memory_id} (`memory list` shows the entries)")
        return {"ok": True, "forgotten": _row(gone[0])}
    return run_on_store(config, args, forget, lambda r: f"forgot entry {r['forgotten']['id']} of profile "
                                                        f"{r['forgotten']['profile']}: {r['forgotten']['text']}")


async def _one(store, memory_id: int) -> dict:
    entry = await store.memory.get(memory_id)
    if entry is None:   # run_on_store says it and exits 1
        raise NotFound(f"no memory entry {memory_id} (`memory list` shows the entries)")
    return {"ok": True, "entry": _row(entry)}


def _render_one(result: dict) -> str:
    e = result["entry"]
    return "\n".join([f"entry:    {e['id']}", f"profile:  {e['profile']}", f"scope:    {e['scope']}",
                      f"written:  {_when(e['created_at'])}", f"session:  {e['session_key'] or '-'}",
                      f"text:     {e['text']}"])
