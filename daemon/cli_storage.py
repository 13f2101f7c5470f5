"""``run_gateway.py sessions ...`` and ``run_gateway.py deliveries ...``: the stored state, for operators.

They read the database directly (SQLite in WAL mode lets them run beside a live gateway) through the storage CLI
surface (``storage/cli.py``); a retried delivery is picked up by the sweeper on its next pass.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

from supervision.storage_access import store_exists, store_location
from storage import NotFound, Store, StorageError, short_id
from storage import cli as storage_cli
from common.privacy import write_private
from common.redact import configured_secrets, escape_controls, redact
from common.config import setting
from common.state_access import EX_CANTCREAT, unusable_state_dir
from daemon import cli_hosts, cli_rich, cli_session_commands, transcript_text
from daemon.cli_output import EX_USAGE, fail, out
from daemon.cli_parsing import add_json, command


NAMED = ("a session id or a unique prefix of one (4+ characters), a session key, or a user or chat "
         "(NAME or PLATFORM:NAME)")
EXPORT_FORMATS = ("msgpack", "markdown", "json")


def add_parsers(sub) -> None:
    sessions = command(sub, "sessions", "stored conversations: list, show, search, export, import, forget",
                       "Stored conversations, read from the database (beside a running gateway or without one).\n"
                       "A session is named by its id (any unique prefix of it, 4 characters or more:\n"
                       "`sessions list` shows the first 12 characters, /status in the chat the same), by its\n"
                       "session key, or by its user's name or id or its chat id (alone or as PLATFORM:VALUE,\n"
                       "e.g. cli:ada, telegram:123456789); a name that fits several sessions lists them.", "sessions list\nsessions show ada")
    ssub = sessions.add_subparsers(dest="action", metavar="ACTION")
    listing = command(ssub, "list", "sessions, most recent first (the default)",
                      "Sessions, most recently updated first: id, state, last activity, messages (user and\n"
                      "assistant), user (PLATFORM:NAME) and a preview (the title, else the last message).",
                      "sessions list --state active --limit 10")
    listing.add_argument("--state", choices=("active", "suspended", "reset", "closed"),
                         help="only sessions in this state (default: all)")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (default: %(default)s)")
    sessions.set_defaults(state=None, limit=listing.get_default("limit"))   # `sessions` alone is `sessions list`
    show = command(ssub, "show", "one session and its last events",
                   "One session: its state, key and user, then its last events with their times, each message\n"
                   "whole, each tool call with its arguments and its result.",
                   "sessions show 02aca8c3ef8a\nsessions show 02ac --last 100\nsessions show ada\n"
                   "sessions show telegram:123456789")
    show.add_argument("session", metavar="SESSION", help=NAMED)
    show.add_argument("--last", type=int, default=20, metavar="N", help="the last N events (default: %(default)s)")
    search = command(ssub, "search", "full-text search across every transcript",
                     "Find messages in every stored transcript: every word must match. One hit per line: session\n"
                     "id, key, event number and the text around the match.", "sessions search pelican")
    search.add_argument("query", help="the words to find")
    export = command(ssub, "export", "write one session to a file (msgpack, checksummed; or a readable transcript)",
                     "Write one session (transcript, display data, model requests) to a file readable only by you,\n"
                     "for `sessions import` here or on another gateway (docs/storage.md has the format).\n"
                     "--format markdown or json writes its whole transcript to read instead (times, messages,\n"
                     "tool calls with their arguments and results); only the msgpack file can be imported.\n"
                     "To move it to another gateway: with this gateway stopped (the session must not run here\n"
                     "meanwhile), export it --with-state, import the file there, then `sessions forget FILE` here.",
                     "sessions export 02aca8c3ef8a ada.export\nsessions export 02aca8c3ef8a ada.move --with-state\n"
                     "sessions export ada ada.md --format markdown")
    export.add_argument("session", metavar="SESSION", help=NAMED)
    export.add_argument("--format", choices=EXPORT_FORMATS, default="msgpack",
                        help="msgpack: the byte-exact export `sessions import` reads; markdown, json: the "
                             "transcript to read (default: %(default)s)")
    export.add_argument("path", metavar="FILE", help="where to write it (replaced whole, never half-written)")
    export.add_argument("--with-state", action="store_true",
                        help="also its live state (turn in flight, messages waiting, replies owed), to move it to "
                             "another gateway: import it there, then 'sessions forget FILE' here")
    export.add_argument("--interrupted", action="store_true",
                        help="with --with-state: move a session whose turn is in flight as an interrupted turn, "
                             "which the other gateway resumes (refused without it)")
    imported = command(ssub, "import", "read a session exported by 'sessions export'",
                       "Store a session from an export file, all or nothing: a corrupted, truncated or conflicting\n"
                       "file changes nothing. Works on a state dir the gateway has never run with (it creates the\n"
                       "database). The session keeps its id unless --as-new. A file written --with-state brings the\n"
                       "session's live state along; importing it twice changes nothing the second time.",
                       "sessions import ada.export\nsessions import ada.export --as-new")
    imported.add_argument("path", metavar="FILE", help="an export file (at most [storage] max_import_bytes)")
    imported.add_argument("--as-new", action="store_true",
                          help="import a copy under a new session id (closed if its key already has a current "
                               "session); default: keep the file's id, refused if it is stored already")
    forget = command(ssub, "forget", "delete a moved session here, once the other gateway imported it",
                     "The last step of moving a session: delete here exactly what a file written by `sessions\n"
                     "export --with-state` holds (the session, its transcript, its waiting messages and owed\n"
                     "replies), all or nothing, once the other gateway has imported it. Refused, deleting nothing,\n"
                     "if any of it changed here since the export; running it again changes nothing.",
                     "sessions forget ada.move")
    forget.add_argument("path", metavar="FILE", help="the file written by 'sessions export --with-state'")
    suspend = command(ssub, "suspend", "stop answering one session",
                      "Stop answering one session: each message it gets is answered with a notice that the\n"
                      "operator suspended it, until `sessions resume`.", "sessions suspend 02aca8c3ef8a")
    suspend.add_argument("session", metavar="SESSION", help=NAMED)
    resume = command(ssub, "resume", "answer a suspended session again",
                     "Answer a suspended session again, from its next message on.", "sessions resume 02aca8c3ef8a")
    resume.add_argument("session", metavar="SESSION", help=NAMED)
    operator = cli_session_commands.add_parsers(ssub, NAMED)
    deliveries = command(sub, "deliveries", "the delivery ledger: replies pending, failed, abandoned",
                         "The delivery ledger: every reply the gateway owes a chat, its state and attempts, and the\n"
                         "first words of the reply. A retried reply is sent again by the sweeper on its next pass.",
                         "deliveries --state failed\ndeliveries retry 98e5a5244037a3cb\ndeliveries abandon 98e5a5")
    deliveries.add_argument("action", nargs="?", choices=("list", "retry", "abandon"), default="list",
                            help="retry: send a failed or abandoned reply again; abandon: stop trying a pending or "
                                 "failed one (default: %(default)s)")
    deliveries.add_argument("obligation", nargs="?", metavar="ID", help="with retry or abandon: the obligation id")
    deliveries.add_argument("--state", choices=("pending", "attempting", "delivered", "failed", "abandoned"),
                            help="only deliveries in this state (default: all)")
    deliveries.add_argument("--limit", type=int, default=50, help="at most this many (default: %(default)s)")
    add_json(sessions, listing, show, search, export, imported, forget, suspend, resume, *operator, deliveries)


def cmd_sessions(config: dict, args) -> int:
    action = args.action or "list"
    if action in ("stop", "reset"):
        return cli_session_commands.cmd_session_command(config, args)
    calls = {
        "list": lambda s: storage_cli.sessions_list(s, state=args.state, limit=args.limit),
        "show": lambda s: storage_cli.session_show(s, args.session, last_n=args.last,
                                                   secrets=tuple(configured_secrets(config))),
        "search": lambda s: storage_cli.sessions_search(s, args.query),
        "export": lambda s: (storage_cli.session_export(s, args.session, args.path, with_state=args.with_state,
                                                        interrupted=args.interrupted) if args.format == "msgpack"
                             else readable_export(s, args.session, args.path, args.format,
                                                  configured_secrets(config))),
        "import": lambda s: storage_cli.session_import(s, args.path, config["storage"]["max_import_bytes"],
                                                       as_new=args.as_new),
        "forget": lambda s: storage_cli.session_forget(s, args.path, config["storage"]["max_import_bytes"]),
        "suspend": lambda s: storage_cli.session_set_state(s, args.session, suspended=True),
        "resume": lambda s: storage_cli.session_set_state(s, args.session, suspended=False),
    }
    if action == "export" and args.path == "-":   # not standard output: a file of that name, silently
        return fail(args, "error: FILE is the file the export is written to (readable by you only); '-' would be a "
                          "file named '-': give a file name", EX_USAGE)
    if action == "export" and args.interrupted and not args.with_state:
        return fail(args, "--interrupted goes with --with-state (a plain export carries no turn)", EX_USAGE)
    if action == "export" and args.with_state and args.format != "msgpack":
        return fail(args, f"--with-state writes the msgpack export a move imports, not {args.format}", EX_USAGE)
    if setting(config, "cluster", "enabled") and action in ("list", "show", "search"):
        return run_on_store(config, args, calls[action], _with_hosts(RENDER[action]),
                            hosts=_other_hosts(config, action, args))
    # An import may be the first thing a state dir holds (moving a conversation to a new gateway).
    return run_on_store(config, args, calls[action], RENDER[action], create=action == "import",
                        drawn=DRAWN.get(action))


def _other_hosts(config: dict, action: str, args):
    """On a convention's leader: the same read on every worker host's database, merged with this one's
    (daemon/cli_hosts.py). Called with the local result, or None when the leader has no such session."""
    if action == "list":
        return lambda local: cli_hosts.merged_list(local, *cli_hosts.worker_reads(
            config, "sessions_list", {"state": args.state, "limit": args.limit}), args.limit)
    if action == "search":
        return lambda local: cli_hosts.merged_search(local, *cli_hosts.worker_reads(
            config, "sessions_search", {"query": args.query}), 20)
    return lambda local: local if local is not None else cli_hosts.found_elsewhere(*cli_hosts.worker_reads(
        config, "session_show", {"key_or_id": args.session, "last_n": args.last}))


def _with_hosts(render):
    """A render that says which host each row came from and which hosts could not be asked."""
    def rendered(result: dict) -> str:
        lines = [render(result)]
        if result.get("host"):
            lines.insert(0, f"(on host {result['host']})")
        return "\n".join(lines + [f"note: {line}" for line in result.get("unavailable", ())])
    return rendered


def cmd_deliveries(config: dict, args) -> int:
    if args.action in ("retry", "abandon"):
        if not args.obligation:
            return fail(args, f"deliveries {args.action} needs the obligation id (see 'deliveries --state failed')",
                        EX_USAGE)
        call = storage_cli.delivery_retry if args.action == "retry" else storage_cli.delivery_abandon
        return run_on_store(config, args, lambda s: call(s, args.obligation), _render_retry)
    def list_here(store):
        return storage_cli.deliveries(store, state=args.state, limit=args.limit)

    if setting(config, "cluster", "enabled"):
        return run_on_store(config, args, list_here, _with_hosts(_render_deliveries), hosts=lambda local: (
            cli_hosts.merged_deliveries(local, *cli_hosts.worker_reads(
                config, "deliveries", {"state": args.state, "limit": args.limit}), args.limit)))
    return run_on_store(config, args, list_here, _render_deliveries, drawn=_draw_deliveries)


def run_on_store(config: dict, args, call, render, create: bool = False, drawn=None, hosts=None) -> int:
    """``call(store)`` on the state dir's database, its result printed with ``render`` (or as JSON; or drawn by
    ``drawn`` on a terminal). Without ``create`` a missing database is an error (a mistyped state dir must not get
    a new, empty one). ``hosts``: the result passed through it (None for a session not found here) to add what
    the convention's worker hosts hold; None back keeps the not-found error."""
    path = store_location(config)
    if not store_exists(path) and not create:
        return fail(args, f"no database yet at {path} (the gateway has not run with this state dir)")
    if not isinstance(path, str):   # a SQLite file: its directory is made here (PostgreSQL's database exists)
        path.parent.mkdir(parents=True, exist_ok=True)

    async def go():
        store = await Store.open(path, config["storage"]["durability"])
        try:
            return await call(store)
        finally:
            await store.close()
    try:
        result = asyncio.run(go())
    except NotFound as exc:
        try:
            result = hosts(None) if hosts is not None else None
        except cli_hosts.NotAsked as not_asked:
            return fail(args, f"error: {exc} on this host, and a worker host that may hold it could not be asked: "
                              f"{not_asked}")
        if result is None:
            return fail(args, f"error: {exc}")
    except (StorageError, OSError) as exc:
        # SQLite says "unable to open database file" whatever the cause: a state dir that cannot be written is the
        # usual one (the database's -wal and -shm files are written even to read), and it is said as such.
        unusable = unusable_state_dir(path.parent, create=False)
        if unusable:
            return fail(args, unusable, EX_CANTCREAT)
        return fail(args, f"error: {exc}")
    else:
        result = hosts(result) if hosts is not None else result
    return out(args, result, 0, render(result), drawn=drawn and (lambda: drawn(result)))


async def readable_export(store, key_or_id: str, path: str, fmt: str, secrets: list) -> dict:
    """The whole transcript of a session written to ``path`` (readable only by you, replaced whole) as markdown or
    JSON: to read, not to import. Redacted as everything the admin CLI prints is (G6): configured secrets and
    known credential shapes; the msgpack export stays byte-exact."""
    shown = await storage_cli.session_show(store, key_or_id, last_n=None)
    text = (transcript_text.markdown(shown) if fmt == "markdown"
            else json.dumps(shown, indent=2, ensure_ascii=False, default=str) + "\n")
    data = redact(text, secrets).encode("utf-8")
    write_private(Path(path), data)
    return {"session_id": shown["session"]["session_id"], "short_id": shown["session"]["short_id"],
            "path": str(path), "bytes": len(data), "format": fmt, "events": len(shown["events"])}


LIST_COLUMNS = ("id", "state", "last activity", "msgs", "user", "preview")


def _list_row(s: dict) -> list[str]:
    preview = f"“{s['title']}”" if s.get("title") else (s.get("preview") or "")
    return [short_id(s["session_id"]), s["state"], transcript_text.when(s.get("last_activity") or s["updated_at"]),
            str(s.get("messages", 0)), escape_controls(s.get("user") or ""), escape_controls(preview)]


def _render_list(result: dict) -> str:
    """A header row, then one session a line, the columns aligned (the preview last, as long as it is)."""
    if not result["sessions"]:
        return "no sessions"
    rows = [list(LIST_COLUMNS)] + [_list_row(s) + ([f"[{s['host']}]"] if s.get("host") else [])
                                   for s in result["sessions"]]
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(LIST_COLUMNS) - 1)]
    return "\n".join("  ".join([cell.ljust(width) if i != 3 else cell.rjust(width)
                                for i, (cell, width) in enumerate(zip(row, widths))] + row[len(widths):]).rstrip()
                     for row in rows)


def _render_show(result: dict) -> str:
    s = result["session"]
    lines = [f"session {short_id(s['session_id'])} ({s['state']}) key {s['session_key']}"
             + (f"  “{escape_controls(s['title'])}”" if s.get("title") else ""),
             f"  user {escape_controls(s.get('user') or '?')}, {s.get('messages', 0)} messages, started "
             f"{transcript_text.when(s.get('created_at'))}, last change {transcript_text.when(s.get('updated_at'))}"]
    runtime = result.get("runtime") or {}
    if runtime.get("resumes_total") or runtime.get("notices_total"):
        lines.append(f"  recovery: {runtime.get('resumes_total', 0)} turn(s) resumed after a restart, "
                     f"{runtime.get('notices_total', 0)} message(s) given up on")
    for t in result.get("tasks", ()):   # a worker host of an older version sends none
        lines.append(f"  background task #{t['number']} {t['state']}, started {transcript_text.when(t['started_at'])}"
                     f": “{escape_controls(' '.join(t['prompt'].split())[:60])}” (tasks show {t['task_key']})")
    first = result["events"][0].get("seq") if result["events"] else None
    if isinstance(first, int) and first > 1:
        lines.append(f"  (#1 to #{first - 1} not shown: --last N shows more)")
    for e in result["events"]:
        lines.extend(transcript_text.event_lines(e))
    return "\n".join(lines)


def _render_search(result: dict) -> str:
    rows = [f"{short_id(h['session_id'])}  {h['session_key']}  #{h['seq']}  "
            f"{escape_controls(' '.join(h['snippet'].split()))}" + (f"  [{h['host']}]" if h.get("host") else "")
            for h in result["hits"]]
    return "\n".join(rows) if rows else f"nothing found for {result['query']!r}"


def _render_export(result: dict) -> str:
    if result.get("format"):
        return (f"exported the transcript of session {result['short_id']} ({result['events']} events) as "
                f"{result['format']}: {result['bytes']} bytes to {result['path']} (to read; `sessions import` reads "
                f"only the msgpack export)")
    return (f"exported session {result['short_id']}{' with its live state' if result.get('with_state') else ''}: "
            f"{result['bytes']} bytes to {result['path']} (sha256 {result['sha256'][:16]}…)")


def _render_import(result: dict) -> str:
    s = result["session"]
    if result.get("with_state") and not result["changed"]:
        return f"session {short_id(s['session_id'])} and its live state were here already: nothing changed"
    return (f"imported session {short_id(s['session_id'])} ({s['state']}, {result['last_seq']} events) "
            f"key {s['session_key']}" + (" as a new copy" if result.get("as_new") else "")
            + (f" with {_live_state(result)}" if result.get("with_state") else ""))


def _live_state(result: dict) -> str:
    return f"{result['inbox']} waiting message(s) and {result['obligations']} owed reply(ies)"


def _render_forget(result: dict) -> str:
    sid = short_id(result["session"]["session_id"])
    if not result["changed"]:
        return f"session {sid} and what the file holds are gone from here already: nothing changed"
    return f"forgot session {sid} here ({result['last_seq']} events, {_live_state(result)})"


def _state_label(delivery: dict) -> str:
    """The state, marked where a copy may be doubled (ambiguous) or the platform reported a part not received."""
    return (delivery["state"] + ("~ambiguous" if delivery.get("ambiguous") else "")
            + ("~not-received" if delivery.get("not_received") else ""))


def _render_deliveries(result: dict) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in result["counts"].items())
    if result.get("ambiguous"):
        counts += f" (ambiguous {result['ambiguous']}: re-sent, marked, after a send whose outcome was unknown)"
    rows = [f"{d['obligation_id'][:16]}  {_state_label(d):<10} "
            f"attempts={d['attempts']}  {d['target']['platform']}:{d['target']['chat_id']}"
            + (f"  “{escape_controls(_words(d['content_preview']))}”" if d["content_preview"] else "  (no text yet)")
            + (f"  last error: {d['last_error']}" if d.get("last_error") else "")
            + (f"  [{d['host']}]" if d.get("host") else "") for d in result["deliveries"]]
    return "\n".join([counts] + rows)


def _words(text: str, limit: int = 60) -> str:
    """The first words of a reply, cut at a word boundary."""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + "…"


def _render_retry(result: dict) -> str:
    if result["state"] == "abandoned":
        return f"obligation {result['obligation_id']} is abandoned: nothing more is sent for it"
    return f"obligation {result['obligation_id']} is pending again; the sweeper re-sends it on its next pass"


def _render_state(result: dict) -> str:
    return f"session {short_id(result['session_id'])} is {result['state']}"


# ------------------------------------------------------------------ the same, drawn for a terminal (cli_rich)

def _draw_list(result: dict):
    rows = [[cell if i != 1 else cli_rich.styled(cell, "green" if cell == "active" else "dim")
             for i, cell in enumerate(_list_row(s))] for s in result["sessions"]]
    return cli_rich.table(list(LIST_COLUMNS), rows, right=("msgs",), wrap=("user", "preview")) if rows else \
        "no sessions"


def _draw_search(result: dict):
    rows = [[short_id(h["session_id"]), h["session_key"], h["seq"], escape_controls(" ".join(h["snippet"].split()))]
            for h in result["hits"]]
    return cli_rich.table(["id", "key", "#", "text"], rows, right=("#",), wrap=("key", "text")) if rows else \
        f"nothing found for {result['query']!r}"


def _draw_deliveries(result: dict):
    colours = {"delivered": "green", "failed": "bold red", "abandoned": "red", "pending": "yellow",
               "attempting": "yellow"}
    rows = [[d["obligation_id"][:16],
             cli_rich.styled(_state_label(d), "bold red" if d.get("not_received") else colours.get(d["state"], "")),
             d["attempts"], f"{d['target']['platform']}:{d['target']['chat_id']}",
             f"“{escape_controls(_words(d['content_preview']))}”" if d["content_preview"] else "(no text yet)",
             d.get("last_error") or ""] for d in result["deliveries"]]
    return cli_rich.table(["id", "state", "attempts", "chat", "reply", "last error"], rows,
                          title=_render_deliveries({**result, "deliveries": []}), right=("attempts",),
                          wrap=("chat", "reply", "last error"))


DRAWN = {"list": _draw_list, "search": _draw_search}

RENDER = {"list": _render_list, "show": _render_show, "search": _render_search, "export": _render_export,
          "import": _render_import, "forget": _render_forget, "suspend": _render_state, "resume": _render_state}


def ledger_now(config: dict) -> dict | None:
    """The delivery ledger's open count and the recovery totals, read from the database now: the sweeper's own
    figures (what the status walk carries) are as old as its last sweep, up to [delivery] sweep_interval_s. None
    when they cannot be read here (no database yet, or a convention: worker hosts keep their own ledgers)."""
    path = store_location(config)
    if setting(config, "cluster", "enabled") or not store_exists(path):
        return None

    async def go():
        store = await Store.open(path, config["storage"]["durability"])
        try:
            return await store.ledger.counts(), await store.sessions.recovery_totals()
        finally:
            await store.close()
    try:
        counts, recovery = asyncio.run(go())
    except (StorageError, OSError):
        return None
    return {"pending": counts["pending"] + counts["attempting"] + counts["failed"], "recovery": recovery}
