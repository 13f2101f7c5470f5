"""The parts of a bug report (``run_gateway.py report``), each a JSON-able value gathered on its own: a part that
cannot be had (the gateway is not running, there is no log file) says why instead of failing the report.

Chat text stays out unless asked for (``include_text``): every text a chat user wrote, and every reply (a reply
quotes its question as often as not), is replaced by its length. What the log holds is what the gateway logs, which
is no chat text (common/logging_setup.py), with configured secrets redacted. The report as a whole is redacted once
more before it is written (daemon/cli_report.py).
"""
from __future__ import annotations

import platform
import sqlite3
import sys
import time
from importlib import metadata
from pathlib import Path

from common.runfiles import RunFiles
from common.version import VERSION
from actors.hooks.plugins import load_plugins
from daemon.admin import AdminClient, AdminError, NoGateway
from daemon.status_view import report
from supervision import tree
from daemon.cli_logs import record_time

PACKAGES = ("thespian", "aiohttp", "aiosqlite", "msgpack", "prometheus_client", "tenacity", "psutil", "cryptography",
            "Pillow")
LOG_TAIL_LINES = 400
LOG_SCAN_BYTES = 8 * 1024 * 1024       # the end of the log searched for crashes and restarts
CRASHES_KEPT, RESTARTS_KEPT, OPEN_ROWS_KEPT = 30, 50, 20
EVENT_NAMES = {("user", "message"): "turn input: user message", ("assistant", "message"): "turn answer",
               ("assistant", "tool_call"): "tool call", ("tool", "tool_result"): "tool result"}
CRASH_MARKS = (" crashed on ", "intake failed for good", "agent failed:")
RESTART_MARKS = (": restarting ", "gave up", "escalat", "reply not delivered", "the reply failed")


def versions() -> dict:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return {"gateway": VERSION, "python": sys.version.split()[0], "implementation": platform.python_implementation(),
            "platform": platform.platform(), "sqlite": sqlite3.sqlite_version, "packages": found}


def plugins(config: dict) -> dict:
    loaded = load_plugins(config, make_dirs=False)
    return {"loaded": [{"name": p.name, "origin": p.origin, "hooks": sorted(p.hooks), "see_secrets": p.see_secrets}
                       for p in loaded.plugins],
            "errors": [{"name": e.plugin, "reason": e.reason} for e in loaded.errors]}


def live(config: dict) -> dict:
    """``status`` and ``tree --json`` of the running gateway, or why there are none."""
    runtime = RunFiles(config["gateway"]["state_dir"]).read_runtime()
    try:
        client = AdminClient(config)
    except NoGateway as exc:
        return {"running": False, "why": str(exc), "last_runtime": runtime}
    try:
        status, _text, _code = report(client.status(), client.runtime, f"{client.host}:{client.port}", config)
        return {"running": True, "status": status, "tree": tree.to_json(client.tree()), "runtime": client.runtime}
    except AdminError as exc:
        return {"running": True, "why": f"it did not answer: {exc}", "runtime": runtime}


# --------------------------------------------------------------------------------------------------- the log

def log_parts(config: dict) -> dict:
    """The log's last lines, and the crashes (with their tracebacks) and restarts found near its end."""
    path = RunFiles(config["gateway"]["state_dir"]).log_path(config)
    if not path.exists():
        return {"path": str(path), "why": "no log file: the gateway was not started with `start` on this state dir "
                                          "(a foreground `run` logs to its stderr)", "tail": [], "crashes": [],
                "restarts": []}
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - LOG_SCAN_BYTES))
        lines = f.read().decode("utf-8", "replace").splitlines()
    if size > LOG_SCAN_BYTES and lines:
        lines = lines[1:]            # the first one read is cut
    crashes, restarts = [], []
    for i, line in enumerate(lines):
        if any(mark in line for mark in CRASH_MARKS):
            crashes.append(_record_with_traceback(lines, i))
        elif any(mark in line for mark in RESTART_MARKS):
            restarts.append(line)
    return {"path": str(path), "bytes": size, "tail": lines[-LOG_TAIL_LINES:], "crashes": crashes[-CRASHES_KEPT:],
            "restarts": restarts[-RESTARTS_KEPT:]}


def _record_with_traceback(lines: list, i: int) -> dict:
    """A crash record: its line (the text format escapes the traceback's newlines into it: shown unescaped), and
    any lines that continue it (output written without the formatter)."""
    following = []
    for line in lines[i + 1:i + 200]:
        if record_time(line) is not None:
            break
        following.append(line)
    text = "\n".join([lines[i], *following]).replace("\\n", "\n")
    return {"at": record_time(lines[i]), "record": text, "has_traceback": "Traceback (most recent call last)" in text}


# ------------------------------------------------------------------------------------------------ the store

async def stored(store, session_key: str | None, include_text: bool) -> dict:
    data = {"counts": await store.forensics.counts(),
            "oldest_open": _texts(await store.forensics.oldest_open(OPEN_ROWS_KEPT), include_text)}
    if session_key is not None:
        data["timeline"] = timeline(await store.forensics.session_records(session_key), include_text)
    return data


def timeline(records: dict, include_text: bool) -> list[dict]:
    """One session key's records in time order: inbox rows (received, and their last change), transcript events
    (the user's message, tool calls, the answer), turn starts and ends as the runtime state shows them, obligations
    and each part the platform returned an id for."""
    entries = []
    for row in records["inbox"]:
        entries.append({"at": row["received_at"], "what": "inbox received", "seq": row["seq"],
                        "platform_message_id": row["platform_message_id"], **_text_of(row["text"], include_text)})
        if row["state"] != "received":
            entries.append({"at": row["updated_at"], "what": f"inbox {row['state']}", "seq": row["seq"],
                            "reason": row["reason"]})
    for event in records["transcript"]:
        what = EVENT_NAMES.get((event["role"], event["kind"]), f"{event['role']} {event['kind']}")
        entries.append({"at": event["created_at"], "what": what,
                        "turn": event["turn_id"], "session_id": event["session_id"], "event_seq": event["seq"],
                        **_event_details(event["payload"], include_text)})
    for rt in records["runtime"]:
        if rt["resume_pending"]:   # a turn begun and not ended: running now, or cut by a crash (resumed at start)
            entries.append({"at": rt["resume_started_at"], "what": "turn begun, not ended", "turn": rt["turn_token"],
                            "inbox_seq": rt["resume_inbox_seq"], "resumes": rt["resume_attempts"]})
    for ob in records["obligations"]:
        entries.append({"at": ob["created_at"], "what": "obligation recorded", "obligation": ob["obligation_id"][:16],
                        "adapter": ob["adapter"], "chunks": ob["chunks"]})
        entries.append({"at": ob["updated_at"], "what": f"obligation {ob['state']}",
                        "obligation": ob["obligation_id"][:16], "attempts": ob["attempts"],
                        "last_error": ob["last_error"], **_text_of(ob["text"], include_text)})
    for part in records["parts"]:
        entries.append({"at": part["recorded_at"], "what": "part recorded", "obligation": part["obligation_id"][:16],
                        "part": part["part_index"], "platform_message_id": part["platform_message_id"]})
    entries.sort(key=lambda e: (e["at"] or 0.0))
    for e in entries:
        e["time"] = _utc(e["at"] or 0.0)
    return entries


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1000):03d}Z"


def _text_of(text: str, include_text: bool) -> dict:
    return {"text": text} if include_text else {"text_chars": len(text or "")}


def _event_details(payload, include_text: bool) -> dict:
    """What the report shows of a transcript event: its tool's name and outcome, the lengths of its texts; the texts
    themselves only with ``include_text``."""
    if not isinstance(payload, dict):
        return {}
    shown = {k: payload[k] for k in ("name", "ok", "reason", "inbound_seq", "call_id") if k in payload}
    for key in ("text", "arguments", "result", "error"):
        if isinstance(payload.get(key), str):
            shown.update({key: payload[key]} if include_text else {f"{key}_chars": len(payload[key])})
    return shown


def _texts(rows: dict, include_text: bool) -> dict:
    if include_text:
        return rows
    return {name: [{**{k: v for k, v in row.items() if k != "text"}, "text_chars": len(row.get("text") or "")}
                   for row in listed] for name, listed in rows.items()}


def state_files(config: dict) -> dict:
    """What the state dir holds (names and sizes): a stopped gateway's report still shows what it left."""
    state = Path(config["gateway"]["state_dir"])
    if not state.is_dir():
        return {"state_dir": str(state), "why": "no such directory"}
    files = {}
    for path in sorted(state.rglob("*")):
        if path.is_file() and "media" not in path.relative_to(state).parts[:1]:
            files[str(path.relative_to(state))] = path.stat().st_size
        if len(files) >= 200:
            break
    return {"state_dir": str(state), "files": files}
