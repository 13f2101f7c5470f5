"""``run_gateway.py report``: one archive for a bug report.

    report [--session ID_OR_KEY] [-o FILE] [--include-text]

What it holds (one file each, under ``gateway-report/``): ``manifest.json`` (when, which parts, what was left out),
``versions.json``, ``config.toml`` (the effective configuration, secrets redacted: ``config show``),
``plugins.json``, ``live.json`` (``status`` and ``tree --json`` of the running gateway, or why there are none: a
stopped gateway's report is made from its state dir), ``storage.json`` (inbox and ledger counts by state, the oldest
open rows), ``crashes.txt`` and ``restarts.txt`` (from the log, tracebacks whole), ``log-tail.txt``, ``state.json``
(the state dir's files), and with ``--session`` ``timeline.json``: the session's inbox rows, turns, tool calls,
obligations and their parts, in time order.

Nothing a chat user wrote (nor any reply) is in it unless ``--include-text``: texts become their lengths. Every
member is redacted of every configured secret and known credential shape, and shows every URL of the configuration
as its scheme and host only, before it is written; the archive is a new 0600 file, written whole or not at all
(common/privacy.write_private).
"""
from __future__ import annotations

import asyncio
import io
import json
import tarfile
import time
import zipfile
from pathlib import Path

from common.privacy import write_private
from common.redact import configured_secrets, configured_urls, redact, without_configured_urls
from daemon import report_parts
from daemon.cli_output import EX_USAGE, fail, out
from daemon.cli_parsing import add_json, command
from daemon.cli_config import effective, toml_text
from storage import Store, StorageError
from storage import cli as storage_cli
from supervision.storage_access import store_exists, store_location

ROOT_DIR = "gateway-report"


def add_parsers(sub) -> None:
    report = command(sub, "report", "one archive for a bug report: versions, config, status, storage, crashes, log",
                     "Write one archive (tar.gz, or zip if FILE ends in .zip) with what a bug report needs: versions,\n"
                     "the effective configuration (secrets redacted), status and tree of the running gateway, inbox\n"
                     "and ledger counts with the oldest open rows, crashes and restarts with their tracebacks, the\n"
                     "recent log, and with --session that session's timeline. No chat text unless --include-text.\n"
                     "Works on a stopped gateway too (from its state dir).",
                     "report\nreport --session 02aca8c3ef8a -o bug.tar.gz\nreport -o bug.zip --include-text")
    report.add_argument("--session", metavar="ID_OR_KEY", help="add this session's timeline (an id, a unique "
                                                               "prefix of one, or a session key)")
    report.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: "
                                                               "gateway-report-<time>.tar.gz here)")
    report.add_argument("--include-text", action="store_true",
                        help="keep the chat's text (messages and replies); default: only their lengths")
    add_json(report)


def cmd_report(config: dict, args) -> int:
    output = Path(args.output or time.strftime("gateway-report-%Y%m%d-%H%M%S.tar.gz")).expanduser()
    if output.is_dir():
        return fail(args, f"{output} is a directory: give a file name (-o FILE)", EX_USAGE)
    members, notes = gather(config, args.session, args.include_text)
    if isinstance(members, str):
        return fail(args, members)
    secrets, urls = configured_secrets(config), configured_urls(config)
    clean = {name: without_configured_urls(redact(text, secrets), urls) for name, text in members.items()}
    data = _zip(clean) if output.suffix == ".zip" else _tar_gz(clean)
    write_private(output, data)
    return out(args, {"ok": True, "path": str(output), "bytes": len(data), "members": sorted(clean),
                      "include_text": args.include_text, "notes": notes}, 0,
               f"report written to {output} ({len(data):,} bytes, {len(clean)} files)"
               + "".join(f"\n  note: {n}" for n in notes))


def gather(config: dict, session: str | None, include_text: bool) -> tuple[dict | str, list]:
    """The archive's members (name -> text), and notes on what could not be had; or an error text."""
    notes: list[str] = []
    members = {"versions.json": _json(report_parts.versions()), "state.json": _json(report_parts.state_files(config))}
    try:
        members["config.toml"] = toml_text(effective(config))
    except Exception as exc:  # noqa: BLE001 - a report is most wanted when something is wrong
        notes.append(f"config: {type(exc).__name__}: {exc}")
    members["plugins.json"] = _json(_guarded(notes, "plugins", report_parts.plugins, config))
    live = _guarded(notes, "live", report_parts.live, config) or {}
    if not live.get("running"):
        notes.append(f"the gateway is not running: {live.get('why', 'unknown')}; status and tree are missing")
    members["live.json"] = _json(live)
    stored = _stored(config, session, include_text)
    if isinstance(stored, str):
        if session is not None and stored.startswith("session:"):
            return stored.removeprefix("session:"), notes
        notes.append(stored)
    else:
        timeline = stored.pop("timeline", None)
        members["storage.json"] = _json(stored)
        if timeline is not None:
            members["timeline.json"] = _json({"session": session, "entries": timeline})
    log = report_parts.log_parts(config)
    if log.get("why"):
        notes.append(log["why"])
    members["crashes.txt"] = "\n\n".join(f"--- {c['record']}" for c in log["crashes"]) + "\n"
    members["restarts.txt"] = "\n".join(log["restarts"]) + "\n"
    members["log-tail.txt"] = "\n".join(log["tail"]) + "\n"
    members["manifest.json"] = _json({"made_at": time.time(), "made": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                    time.gmtime()),
                                      "state_dir": config["gateway"]["state_dir"], "session": session,
                                      "include_text": include_text, "members": sorted(members) + ["manifest.json"],
                                      "crashes": len(log["crashes"]), "notes": notes})
    return members, notes


def _stored(config: dict, session: str | None, include_text: bool) -> dict | str:
    path = store_location(config)
    if not store_exists(path):
        return f"no database at {path}: storage counts are missing"

    async def go():
        store = await Store.open(path, config["storage"]["durability"])
        try:
            key = None
            if session is not None:
                try:
                    key = (await storage_cli.resolve(store, session)).session_key
                except StorageError as exc:
                    return f"session:{exc}"
            return await report_parts.stored(store, key, include_text)
        finally:
            await store.close()
    try:
        return asyncio.run(go())
    except Exception as exc:  # noqa: BLE001 - said in the report's notes; the other parts are still worth having
        return f"storage: {type(exc).__name__}: {exc}"


def _guarded(notes: list, name: str, fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - one part missing must not lose the others
        notes.append(f"{name}: {type(exc).__name__}: {exc}")
        return None


def _json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False) + "\n"


def _tar_gz(members: dict) -> bytes:
    buffer = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in sorted(members.items()):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"{ROOT_DIR}/{name}")
            info.size, info.mtime, info.mode = len(data), now, 0o600
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in sorted(members.items()):
            archive.writestr(f"{ROOT_DIR}/{name}", text)
    return buffer.getvalue()
