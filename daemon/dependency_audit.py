"""``doctor --audit``: the installed Python packages the gateway runs on, against the advisory database.

It runs pip-audit (the ``audit`` extra: ``pip install 'agent-gateway[audit]'``) on the environment of this very
interpreter, which asks PyPI's vulnerability data about each installed release: a package with a known advisory is
a failed check naming it, its advisories and the release that fixes them. Offline, it says so and fails: an audit
that could not ask proves nothing. The database is reached directly or through the proxy the environment names
(HTTPS_PROXY), as pip and pip-audit themselves do; a quick connection first tells an unreachable database apart
from a slow one, so the command never hangs on a machine without network.
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from typing import Mapping, Optional
from urllib.parse import urlsplit

from daemon.doctor_probes import Check

ADVISORY_HOST = ("pypi.org", 443)     # pip-audit's default vulnerability service asks PyPI's JSON API
CONNECT_TIMEOUT_S = 5.0
AUDIT_TIMEOUT_S = 300.0
NAME = "dependencies"


def audit_check(env: Mapping[str, str] = os.environ) -> Check:
    if importlib.util.find_spec("pip_audit") is None:
        return Check("fail", NAME, "pip-audit is not installed: pip install 'agent-gateway[audit]' (or pip install "
                                   "pip-audit), then run doctor --audit again")
    where = _reachable(env)
    if where is not None:
        return Check("fail", NAME, f"cannot reach the advisory database ({where}); the audit needs network access "
                                   "to pypi.org (directly or through HTTPS_PROXY): nothing was checked")
    try:
        done = subprocess.run([sys.executable, "-m", "pip_audit", "--format", "json", "--progress-spinner", "off",
                               "--desc", "off"], capture_output=True, text=True, timeout=AUDIT_TIMEOUT_S,
                              env=dict(env))
    except subprocess.TimeoutExpired:
        return Check("fail", NAME, f"pip-audit did not finish within {AUDIT_TIMEOUT_S:g}s: nothing was checked")
    return verdict(done.returncode, done.stdout, done.stderr)


def verdict(returncode: int, stdout: str, stderr: str) -> Check:
    """pip-audit's JSON answer as one check: ok, the vulnerable packages, or why it could not tell."""
    try:
        report = json.loads(stdout)
    except ValueError:
        last = (stderr.strip().splitlines() or ["(no output)"])[-1]
        return Check("fail", NAME, f"pip-audit failed (exit {returncode}): {last[:300]}; nothing was checked")
    packages = report.get("dependencies", []) if isinstance(report, dict) else []
    found = [p for p in packages if p.get("vulns")]
    # A package pip-audit could not look up (its own words: "not found on PyPI") was not checked. The gateway
    # itself is not on PyPI; anything else skipped means the database did not answer as PyPI does (a mirror, a
    # proxy that answers for it): all of them skipped is an audit that checked nothing.
    skipped = [p.get("name", "?") for p in packages if p.get("skip_reason") and p.get("name") != "agent-gateway"]
    audited = sum(1 for p in packages if not p.get("skip_reason"))
    if not found and not audited:
        return Check("fail", NAME, f"pip-audit could look up none of the {len(packages)} installed package(s) (\"not "
                                   "found on PyPI\"): the advisory database did not answer as PyPI does (a mirror or "
                                   "a proxy in the way?); nothing was checked")
    if not found:
        return Check("warn" if skipped else "ok", NAME, f"no known advisory for {audited} installed package(s)"
                     + (f"; {len(skipped)} could not be looked up, so were not checked: {', '.join(skipped[:8])}"
                        if skipped else ""))
    named = []
    for package in found:
        ids = ", ".join(v.get("id", "?") for v in package["vulns"])
        fixes = sorted({f for v in package["vulns"] for f in v.get("fix_versions") or []})
        named.append(f"{package['name']} {package.get('version', '?')}: {ids}"
                     + (f" (fixed in {', '.join(fixes)})" if fixes else " (no fixed release yet)"))
    return Check("fail", NAME, f"{len(found)} package(s) with known advisories: " + "; ".join(named))


def _reachable(env: Mapping[str, str]) -> Optional[str]:
    """None if a TCP connection to the database (or to the configured HTTPS proxy) opens, else what failed."""
    proxy = env.get("HTTPS_PROXY") or env.get("https_proxy")
    host, port = ADVISORY_HOST
    via = ""
    if proxy:
        parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port, via = parts.hostname or "", parts.port or 3128, " through the HTTPS proxy"
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
        return None
    except OSError as exc:
        return f"{host}:{port}{via}: {exc.strerror or exc}"
