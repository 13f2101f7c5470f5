"""``run_gateway.py watches ...``: the configured ``[watch.NAME]`` tables and what the watcher saw of each
(docs/background.md, "Watches").

    watches list           every configured watch, and every watch the agent created (``agent-...``, its chat's):
                           kind, target, interval, its last look, its last change and when it is looked at next
    watches show NAME      one watch: its table, and its newest changes with what became of each (told in the
                           chat, or skipped and why; the state of the inbox row it put)

Reads the configuration file and the database beside a live gateway (WAL); writes nothing. A watch's next look is
its last one plus its interval (the watcher keeps its exact clock in memory): "due" when that time has passed (the
gateway is stopped, or its last read was refused and is tried again at the next interval). A watch the
configuration no longer names, whose state is still stored, is listed as removed. What is printed is redacted as
everything the admin CLI prints.
"""
from __future__ import annotations

import time

from actors.scheduling.watches import next_look_at, stored_watch, validate_watches
from common.config import ConfigError
from common.redact import configured_secrets, redact
from daemon.cli_output import fail
from daemon.cli_parsing import add_json, command
from daemon.cli_storage import run_on_store
from storage import NotFound

CHANGES_SHOWN = 20


def add_parsers(sub) -> None:
    watches = command(sub, "watches", "the [watch.NAME] tables: list, show NAME",
                      "The configured watches (docs/background.md): each URL or file, when it was last looked at,\n"
                      "its last change and when it is looked at next.", "watches list\nwatches show status-page")
    wsub = watches.add_subparsers(dest="action", metavar="ACTION")
    listing = command(wsub, "list", "every configured watch (the default)",
                      "Every [watch.NAME]: kind, target, interval, last look, last change, next look.",
                      "watches list\nwatches list --json")
    show = command(wsub, "show", "one watch and its newest changes",
                   "One watch: its table, and its newest changes (told in its chat, or skipped and why).",
                   "watches show status-page")
    show.add_argument("name", metavar="NAME", help="the watch's name (its [watch.NAME] table)")
    add_json(watches, listing, show)


def cmd_watches(config: dict, args) -> int:
    try:
        configured = validate_watches(config)
    except ConfigError as exc:
        return fail(args, f"error: {exc.file}: {exc.key}: {exc.reason}")
    secrets = configured_secrets(config)
    if (args.action or "list") == "list":
        return run_on_store(config, args, lambda store: _list(store, configured, secrets), _render_list)
    return run_on_store(config, args, lambda store: _show(store, configured, args.name, secrets), _render_show)


def watch_row(name: str, watch, seen: dict | None, secrets: list, now: float) -> dict:
    """A watch as the operator reads it: its table (None: removed from the configuration) and what storage holds."""
    seen = seen or {}
    checked = seen.get("checked_at")
    looked_at_target = watch is not None and seen.get("target") == watch.target
    next_look = None
    if watch is not None and watch.enabled:
        next_look = next_look_at(watch, checked) if checked is not None and looked_at_target else now
        next_look = None if next_look == float("inf") else next_look
    return {"name": name, "configured": watch is not None, "enabled": bool(watch and watch.enabled),
            "kind": watch.kind if watch else None,
            "target": redact(watch.target if watch else seen.get("target", ""), secrets),
            "interval_s": watch.interval_s if watch else None,
            "schedule": watch.schedule.expression if watch and watch.schedule else None,
            "chat": f"{watch.adapter}:{watch.chat}" if watch else None,
            "last_look": checked if looked_at_target or watch is None else None,
            "changes": seen.get("changes", 0), "last_change": seen.get("last_change"),
            "next_look": next_look, "due": next_look is not None and next_look <= now}


async def _with_stored(store, configured: dict) -> dict:
    """The configured watches and, after them, the ones the agent created (as the watcher reads them)."""
    return {**configured, **{row.name: stored_watch(row) for row in await store.agent_watches.all()}}


async def _list(store, configured: dict, secrets: list) -> dict:
    configured = await _with_stored(store, configured)
    seen, now = await store.watches.overview(), time.time()
    names = list(configured) + sorted(set(seen) - set(configured))
    return {"ok": True, "now": now,
            "watches": [watch_row(n, configured.get(n), seen.get(n), secrets, now) for n in names]}


async def _show(store, configured: dict, name: str, secrets: list) -> dict:
    configured = await _with_stored(store, configured)
    seen = (await store.watches.overview()).get(name)
    if name not in configured and seen is None:
        raise NotFound(f"no watch {name!r} (`watches list` shows them)")
    now = time.time()
    row = watch_row(name, configured.get(name), seen, secrets, now)
    changes = await store.watches.changes(name, CHANGES_SHOWN)
    for change in changes:
        change["reason"] = redact(change["reason"], secrets) if change["reason"] else change["reason"]
    prompt = configured[name].prompt if name in configured else None
    return {"ok": True, "now": now, "watch": {**row, "prompt": redact(prompt, secrets) if prompt else prompt,
                                              "recent_changes": changes}}


def _utc(ts) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts else "-"


def _when(row: dict) -> str:
    if not row["configured"]:
        return "removed from the configuration"
    if not row["enabled"]:
        return "disabled"
    return "due" if row["due"] else _utc(row["next_look"])


def _change(change: dict | None) -> str:
    if not change:
        return "none"
    said = "told" if change["outcome"] == "injected" else f"skipped ({change['reason']})"
    return f"#{change['number']} {_utc(change['claimed_at'])}, {said}"


def _render_list(result: dict) -> str:
    if not result["watches"]:
        return "no watches (add a [watch.NAME] table: docs/background.md)"
    lines = []
    for w in result["watches"]:
        head = f"{w['name']}  {w['kind'] or '-'} {w['target']}"
        if w["configured"]:
            every = f"at \"{w['schedule']}\"" if w.get("schedule") else f"every {w['interval_s']:g}s"
            head += f" {every} -> {w['chat']}"
        lines += [head, f"  last look:   {_utc(w['last_look'])}",
                  f"  last change: {_change(w['last_change'])} ({w['changes']} in all)",
                  f"  next look:   {_when(w)}"]
    return "\n".join(lines)


def _render_show(result: dict) -> str:
    w = result["watch"]
    lines = [_render_list({"watches": [w]})]
    if w["prompt"]:
        lines.append(f"  prompt:      {w['prompt']}")
    lines.append("")
    if not w["recent_changes"]:
        lines.append("no changes recorded")
    for c in w["recent_changes"]:
        lines.append(f"{_change(c)}; inbox row: {c['inbox_state'] or '-'}")
    return "\n".join(lines)
