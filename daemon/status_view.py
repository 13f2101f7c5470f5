"""``run_gateway.py status``: the gateway's health on one screen, and the one judgement of that health.

Pure: everything here works on a ``GatewayStatus`` (the root's answer to a status walk) and plain values, so the
screen, the JSON, the exit code, the service manager's STATUS= line and ``health`` cannot disagree.

The gateway is healthy when no actor is restarting or failed, no configured adapter is down (see
``actors/adapters/connection.py`` for the adapter states) and no model service is failing (its last turn failed
because of it: ``actors/sessions/model_health.py``). An adapter still connecting after a start is not down yet: it is
shown as connecting, and ``health --ready`` says not ready. That judgement is ``health_of``
(actors/console/health.py), shared with the console's overview.
"""
from __future__ import annotations

import time

from actors.console.health import health_of
from actors.agents.base import agent_kind
from actors.sessions.model_health import FAILING
from actors.media.limits import human_size
from supervision.tree import duration

EX_HEALTHY, EX_DEGRADED = 0, 1   # and 3: no gateway running (run_gateway.py)
EXIT_CODES = """exit codes:
  0  healthy: every actor up, every adapter connected (or still connecting after a start)
  1  degraded: an actor is restarting or failed, an adapter is down (retrying, restarting, failed), a model
     service is failing (the last turn that asked it failed because of it), the metrics server cannot listen, or
     the gateway is draining; the screen (and --json "problems") says which and why
  3  no gateway running
"""


def config_line(conf: dict, now: float) -> str:
    """Which reading of the configuration file runs: a reload that landed shows here (`run_gateway.py reload`)."""
    read = f"read {duration(now - conf['loaded_at'])} ago" if conf.get("loaded_at") else "read at start"
    return (f"  config       generation {conf.get('generation', 1)}, sha256 {(conf.get('sha256') or '-')[:12]}, "
            f"{read}: {conf.get('file') or '(embedded defaults)'}")


def report(status, runtime: dict, admin: str, config: dict, now: float | None = None,
           media=None) -> tuple[dict, str, int]:
    """(the --json document, the screen, the exit code) of one status answer; ``media``: the media cache's
    ``CacheStats`` (storage/media.py), read by the caller from the state directory."""
    now = time.time() if now is None else now
    health, problems = health_of(status)
    listener = runtime.get("metrics") or {}
    if listener.get("error") and not listener.get("url"):
        problems = problems + [f"metrics cannot listen on {listener['host']}:{listener['port']}: {listener['error']}"]
        health = "degraded" if health == "healthy" else health
    adapters = status.detail.get("adapters") or []
    data = {"running": True, "health": health, "problems": problems, "pid": runtime["launcher_pid"],
            "uptime_s": round(now - status.started_at, 1), "actors_up": status.actors_up,
            "actors_restarting": status.actors_restarting, "actors_failed": status.actors_failed,
            "sessions_live": status.sessions_live, "obligations_pending": status.obligations_pending,
            "draining": status.draining, "admin": admin, "metrics_url": (runtime.get("metrics") or {}).get("url"),
            **({"media_files": media.files, "media_bytes": media.bytes} if media is not None else {}),
            **status.detail}
    recovery = status.detail.get("recovery") or {}
    metrics = (f"{data['metrics_url']}  (and /healthz, /readyz)" if data["metrics_url"] else
               f"not listening: {listener['error']} (retried every few seconds)" if listener.get("error") else
               "not listening (see the log)" if config["metrics"]["enabled"] else "off")
    name_width = max([len(row["name"]) for row in adapters] + [8])
    kind_width = max([len(row["kind"]) for row in adapters] + [8])
    lines = [
        f"gateway {health}: pid {data['pid']}, up {duration(now - status.started_at)}",
        *([f"  problems     {'; '.join(p.split(': ', 1)[0] for p in problems)}"] if problems else []),
        f"  actors       {status.actors_up} up, {status.actors_restarting} restarting, {status.actors_failed} failed",
        f"  adapters     {len(adapters)}" + ("" if adapters else " (none configured)"),
        *(f"    {adapter_line(row, now, name_width, kind_width)}" for row in adapters),
        *model_lines(status.detail.get("models") or [], config, now),
        f"  sessions     {status.sessions_live} live",
        *(f"    {sh['name']:<10} [{sh['state']}] pid {sh['pid']}: {sh.get('sessions', '?')} sessions, "
          f"{sh.get('consumers', '?')} replies in flight, {sh.get('waiting', 0)} waiting, "
          f"loop lag {sh.get('loop_lag_ms', '?')} ms" for sh in status.detail.get("shards", [])),
        *(f"    {sh['name']:<10} mcp: {sh['mcp']}" for sh in status.detail.get("shards", []) if sh.get("mcp")),
        *([f"  hosts        {len(hosts)}, {sum(h['state'] == 'lost' for h in hosts)} lost"] +
          [f"    {h['name']:<10} [{h['state']}] {h.get('role', '?')} at {h['address']} "
           f"{'since' if h['state'] == 'running' else 'lost for'} {duration(now - h['since'])}: "
           f"{h.get('shards', 0)} shard(s), {h.get('sessions', 0)} session(s) live"
           for h in hosts] if (hosts := status.detail.get("hosts")) else []),
        f"  deliveries   {status.obligations_pending} pending",
        *([f"  media        {media.files} file(s), {human_size(media.bytes)} cached"] if media is not None else []),
        f"  recovery     {recovery.get('resumes', '?')} turn(s) resumed after a restart, "
        f"{recovery.get('notices', '?')} message(s) given up on (told to send again), "
        f"{recovery.get('late', '?')} waiting past the answer bound",
        *([f"  cron         {cron.get('jobs', '?')} job(s); since this start {cron.get('runs', '?')} run(s), "
           f"{cron.get('skipped', '?')} skipped (`cron list`)"] if (cron := status.detail.get("cron")) else []),
        *([f"  watches      {watch.get('watches', '?')} watched; since this start {watch.get('changes', '?')} "
           f"change(s) told, {watch.get('refused', '?')} read(s) refused"] if (watch := status.detail.get("watch"))
          else []),
        *([config_line(conf, now)] if (conf := status.detail.get("config")) else []),
        f"  admin        {admin}   state {config['gateway']['state_dir']}",
        f"  metrics      {metrics}",
    ]
    return data, "\n".join(lines), EX_HEALTHY if health == "healthy" else EX_DEGRADED


def adapter_line(row: dict, now: float, name_width: int = 10, kind_width: int = 18) -> str:
    """``web  WebChatAdapter  connected 2m10s  http://127.0.0.1:8765/`` or, for one that is down,
    ``tg  TelegramAdapter  retrying for 45s (attempt 6): cannot reach api.telegram.org``."""
    state = row["state"]
    since = row.get("since")
    if state == "retrying":
        told = f"retrying for {duration(now - since)}" if since else "retrying"
        told += f" (attempt {row['attempts']})" if row.get("attempts") else ""
    elif since and state in ("connected", "connecting", "stopped"):
        told = f"{state} {'for ' if state != 'connected' else ''}{duration(now - since)}"
    else:
        told = state
    if row.get("restarts"):
        told += f" after {row['restarts']} restart(s)"
    url = f"  {row['url']}" if row.get("url") else ""
    error = f": {row['error']}" if row.get("error") and state != "connected" else ""
    if row.get("last_restart"):
        error += f" (last restart: {row['last_restart']})"
    note = f"  ({row['note']})" if row.get("note") else ""
    return f"{row['name']:<{name_width}} {row['kind']:<{kind_width}} {told}{url}{error}{note}"



def model_lines(rows: list[dict], config: dict, now: float) -> list[str]:
    """The model services the turns asked, as the adapters are shown (none: no line, unless [agent] names one)."""
    if not rows:
        asks = agent_kind(config.get("agent") or {}) == "openai"
        return ["  models       none asked since the start (a model shows here after its first turn)"] if asks else []
    return [f"  models       {len(rows)}, {sum(r['state'] == FAILING for r in rows)} failing",
            *(f"    {model_line(row, now)}" for row in rows)]


def model_line(row: dict, now: float) -> str:
    """``gpt-4o at https://api.openai.com/v1  up 2m10s`` or, failing,
    ``gpt-4o at http://127.0.0.1:8000/v1  failing for 45s (3 turns failed): HTTP 500: boom``."""
    if row["state"] == FAILING:
        turns = f"{row['failed_turns']} turn{'s' if row['failed_turns'] != 1 else ''} failed"
        return f"{row['name']}  failing for {duration(now - row['since'])} ({turns}): {row.get('error') or '?'}"
    line = f"{row['name']}  up {duration(now - row['since'])}"
    if row.get("error_at"):
        line += f" (last failure {duration(now - row['error_at'])} ago: {row['error']})"
    return line
