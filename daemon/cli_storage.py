"""``run_gateway.py sessions ...`` and ``run_gateway.py deliveries ...``: the stored state, for operators.

They read the database directly (SQLite in WAL mode lets them run beside a live gateway) through the storage CLI
surface (``storage/cli.py``); a retried delivery is picked up by the sweeper on its next pass.
"""
from __future__ import annotations

import asyncio
import json
import sys
import time

from supervision.storage_access import store_path
from storage import Store, StorageError
from storage import cli as storage_cli


def add_parsers(sub) -> None:
    sessions = sub.add_parser("sessions", help="stored conversations: list, show, search, export, import")
    ssub = sessions.add_subparsers(dest="action", metavar="ACTION")
    listing = ssub.add_parser("list", help="sessions, most recent first")
    listing.add_argument("--state", choices=("active", "suspended", "reset", "closed"))
    listing.add_argument("--limit", type=int, default=50)
    show = ssub.add_parser("show", help="one session (by id or key) and its last events")
    show.add_argument("session", metavar="ID_OR_KEY")
    show.add_argument("--last", type=int, default=20, metavar="N")
    search = ssub.add_parser("search", help="full-text search across every transcript")
    search.add_argument("query")
    export = ssub.add_parser("export", help="write one session to a file (msgpack, checksummed)")
    export.add_argument("session", metavar="ID")
    export.add_argument("path", metavar="FILE")
    imported = ssub.add_parser("import", help="read a session exported by 'sessions export'")
    imported.add_argument("path", metavar="FILE")
    suspend = ssub.add_parser("suspend", help="stop answering one session: each message gets a notice that the "
                                              "operator suspended it, until 'sessions resume'")
    suspend.add_argument("session", metavar="ID_OR_KEY")
    resume = ssub.add_parser("resume", help="answer a suspended session again")
    resume.add_argument("session", metavar="ID_OR_KEY")
    deliveries = sub.add_parser("deliveries", help="the delivery ledger: replies pending, failed, abandoned")
    deliveries.add_argument("action", nargs="?", choices=("list", "retry", "abandon"), default="list",
                            help="retry: send a failed or abandoned reply again; abandon: stop trying a pending or "
                                 "failed one")
    deliveries.add_argument("obligation", nargs="?", metavar="ID", help="with retry or abandon: the obligation id")
    deliveries.add_argument("--state", choices=("pending", "attempting", "delivered", "failed", "abandoned"))
    deliveries.add_argument("--limit", type=int, default=50)
    for parser in (listing, show, search, export, imported, suspend, resume, deliveries):
        parser.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_sessions(config: dict, args) -> int:
    action = args.action or "list"
    calls = {
        "list": lambda s: storage_cli.sessions_list(s, state=args.state, limit=args.limit),
        "show": lambda s: storage_cli.session_show(s, args.session, last_n=args.last),
        "search": lambda s: storage_cli.sessions_search(s, args.query),
        "export": lambda s: storage_cli.session_export(s, args.session, args.path),
        "import": lambda s: storage_cli.session_import(s, args.path, config["storage"]["max_import_bytes"]),
        "suspend": lambda s: storage_cli.session_set_state(s, args.session, suspended=True),
        "resume": lambda s: storage_cli.session_set_state(s, args.session, suspended=False),
    }
    return run_on_store(config, args, calls[action], RENDER[action])


def cmd_deliveries(config: dict, args) -> int:
    if args.action in ("retry", "abandon"):
        if not args.obligation:
            print(f"deliveries {args.action} needs the obligation id (see 'deliveries --state failed')",
                  file=sys.stderr)
            return 2
        call = storage_cli.delivery_retry if args.action == "retry" else storage_cli.delivery_abandon
        return run_on_store(config, args, lambda s: call(s, args.obligation), _render_retry)
    return run_on_store(config, args, lambda s: storage_cli.deliveries(s, state=args.state, limit=args.limit),
                _render_deliveries)


def run_on_store(config: dict, args, call, render) -> int:
    path = store_path(config)
    if not path.exists():
        print(f"no database yet at {path} (the gateway has not run with this state dir)", file=sys.stderr)
        return 1

    async def go():
        store = await Store.open(path, config["storage"]["durability"])
        try:
            return await call(store)
        finally:
            await store.close()
    try:
        result = asyncio.run(go())
    except (StorageError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, default=str) if getattr(args, "json", False) else render(result))
    return 0


def _when(ts) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def _render_list(result: dict) -> str:
    rows = [f"{s['session_id'][:12]}  {s['state']:<9} {_when(s['updated_at'])}  {s['session_key']}"
            + (f"  “{s['title']}”" if s.get("title") else "") for s in result["sessions"]]
    return "\n".join(rows) if rows else "no sessions"


def _render_show(result: dict) -> str:
    s = result["session"]
    lines = [f"session {s['session_id']} ({s['state']}) key {s['session_key']}"]
    runtime = result.get("runtime") or {}
    if runtime.get("resumes_total") or runtime.get("notices_total"):
        lines.append(f"  recovery: {runtime.get('resumes_total', 0)} turn(s) resumed after a restart, "
                     f"{runtime.get('notices_total', 0)} message(s) given up on")
    for e in result["events"]:
        payload = e.get("payload") or {}
        text = payload.get("text") or payload.get("name") or payload.get("result") or ""
        first_line = str(text).strip().splitlines()[0] if str(text).strip() else ""
        lines.append(f"  #{e['seq']:<5} {e['role']:<9} {e['kind']:<11} {first_line[:100]}")
    return "\n".join(lines)


def _render_search(result: dict) -> str:
    rows = [f"{h['session_key']}  #{h['seq']}  {h['snippet']}" for h in result["hits"]]
    return "\n".join(rows) if rows else f"nothing found for {result['query']!r}"


def _render_export(result: dict) -> str:
    return f"exported {result['bytes']} bytes to {result['path']} (sha256 {result['sha256'][:16]}…)"


def _render_import(result: dict) -> str:
    return f"imported session {result['session']['session_id']} ({result['last_seq']} events)"


def _render_deliveries(result: dict) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in result["counts"].items())
    if result.get("ambiguous"):
        counts += f" (ambiguous {result['ambiguous']}: re-sent, marked, after a send whose outcome was unknown)"
    rows = [f"{d['obligation_id'][:16]}  {d['state'] + ('~ambiguous' if d.get('ambiguous') else ''):<10} "
            f"attempts={d['attempts']}  {d['target']['platform']}:{d['target']['chat_id']}"
            + (f"  last error: {d['last_error']}" if d.get("last_error") else "") for d in result["deliveries"]]
    return "\n".join([counts] + rows)


def _render_retry(result: dict) -> str:
    if result["state"] == "abandoned":
        return f"obligation {result['obligation_id']} is abandoned: nothing more is sent for it"
    return f"obligation {result['obligation_id']} is pending again; the sweeper re-sends it on its next pass"


def _render_state(result: dict) -> str:
    return f"session {result['session_id']} is {result['state']}"


RENDER = {"list": _render_list, "show": _render_show, "search": _render_search, "export": _render_export,
          "import": _render_import, "suspend": _render_state, "resume": _render_state}
