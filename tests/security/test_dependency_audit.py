"""`doctor --audit`: pip-audit on the installed packages. Its network path cannot run here (no route to the
advisory database), so what is tested is the rest: offline it fails clearly and at once, saying nothing was
checked; and pip-audit's answers (clean, vulnerable, broken) read as one line each."""
from __future__ import annotations

import json
import time

import pytest

from daemon.dependency_audit import verdict
from tests.actor_system import free_port
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(60)


def test_offline_the_audit_fails_at_once_and_says_nothing_was_checked(tmp_path):
    gw = Gateway(tmp_path)
    gw.env["HTTPS_PROXY"] = f"http://127.0.0.1:{free_port()}"    # a proxy that is not there: no way out
    started = time.monotonic()
    done = gw.cli("doctor", "--audit", "--json")
    took = time.monotonic() - started
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    audit = checks["dependencies"]
    assert done.returncode == 1 and audit["status"] == "fail", (done.stdout, done.stderr)
    assert "cannot reach the advisory database" in audit["detail"] and "nothing was checked" in audit["detail"]
    assert "through the HTTPS proxy" in audit["detail"], audit
    assert took < 30, f"doctor --audit took {took:.0f}s offline"
    assert "dependencies" not in {c["name"] for c in json.loads(gw.cli("doctor", "--json").stdout)["checks"]}


def test_pip_audits_answers_read_as_one_line():
    clean = {"dependencies": [{"name": "aiohttp", "version": "3.14.5", "vulns": []},
                              {"name": "agent-gateway", "skip_reason": "not on PyPI"}]}
    ok = verdict(0, json.dumps(clean), "")
    assert ok.status == "ok" and ok.detail == "no known advisory for 1 installed package(s)"
    partly = verdict(0, json.dumps({"dependencies": [*clean["dependencies"], {"name": "pillow", "skip_reason": "x"}]}),
                     "")
    assert partly.status == "warn" and "1 could not be looked up, so were not checked: pillow" in partly.detail
    # What this machine's network gives: something answers for pypi.org, but not as PyPI does.
    none = {"dependencies": [{"name": n, "skip_reason": f"Dependency not found on PyPI and could not be audited: {n}"}
                             for n in ("aiohttp", "pillow", "agent-gateway")]}
    blind = verdict(0, json.dumps(none), "")
    assert blind.status == "fail" and "could look up none of the 3" in blind.detail
    assert "nothing was checked" in blind.detail
    bad = {"dependencies": [{"name": "pillow", "version": "10.0.0", "vulns": [
        {"id": "PYSEC-2023-175", "fix_versions": ["10.0.1"]}, {"id": "GHSA-j7hp-h8jx-5ppr", "fix_versions": []}]}]}
    found = verdict(1, json.dumps(bad), "")
    assert found.status == "fail"
    assert found.detail == ("1 package(s) with known advisories: pillow 10.0.0: PYSEC-2023-175, GHSA-j7hp-h8jx-5ppr "
                            "(fixed in 10.0.1)")
    broken = verdict(1, "", "Traceback ...\nrequests.exceptions.ConnectionError: no route\n")
    assert broken.status == "fail" and "ConnectionError: no route" in broken.detail
    assert "nothing was checked" in broken.detail
