"""runtime/selftest.py: the start-up self-test passes on this runtime, names what a changed one lacks, and the real
``start`` and ``run`` refuse a runtime with one internal removed (exit 69, one message naming this Python and
Thespian and the internal), leaving nothing running."""
from __future__ import annotations

import ast
import asyncio
import platform
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from common.runfiles import RunFiles
from runtime import selftest, versions
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(180)

RUNTIME = Path(selftest.__file__).resolve().parent
# One internal removed before the gateway imports anything: CPython's loop pass, Thespian's accept path.
REMOVED = {
    "asyncio.BaseEventLoop._run_once": "import asyncio\ndel asyncio.BaseEventLoop._run_once\n",
    "TCPTransport._acceptNewIncoming": ("from thespian.system.transport.TCPTransport import TCPTransport\n"
                                        "del TCPTransport._acceptNewIncoming\n"),
}


def test_this_runtime_has_every_internal_the_seam_relies_on():
    assert selftest.problems() == []
    assert selftest.refusal() is None
    started = time.perf_counter()
    selftest.problems()
    took = time.perf_counter() - started
    assert took < 0.5, f"the self-test took {took * 1000:.0f} ms: it runs at every start and must stay cheap"


def test_every_module_of_the_seam_is_checked_and_names_its_versions():
    """A module added to runtime/ is in the self-test, and its docstring says what it was checked against."""
    checked = {module.__name__ for module in selftest.SEAM}
    for path in sorted(RUNTIME.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstring = ast.get_docstring(tree) or ""
        has_missing = any(isinstance(node, ast.FunctionDef) and node.name == "missing" for node in tree.body)
        if has_missing:
            assert f"runtime.{path.stem}" in checked, f"{path.name} has a missing() the self-test does not run"
            assert "checked against" in docstring and "runtime/versions.py" in docstring, \
                f"{path.name}: its docstring names the versions it was checked against"
    assert platform.python_version_tuple()[:2] in [(str(a), str(b)) for a, b in versions.CHECKED_PYTHON]
    assert versions.thespian_version() in versions.CHECKED_THESPIAN


def test_a_missing_or_changed_internal_is_named(monkeypatch):
    from thespian.system.transport.TCPTransport import TCPTransport
    monkeypatch.delattr(asyncio.BaseEventLoop, "_run_once")
    monkeypatch.setattr(TCPTransport, "_nextTransmitStepCheck", lambda self, intent: None)
    found = selftest.problems()
    assert "asyncio.BaseEventLoop._run_once is missing" in found
    assert "TCPTransport._nextTransmitStepCheck takes (self, intent), expected (self, intent, fileno, closed)" in found
    message = selftest.refusal(found)
    assert f"Python {platform.python_version()}" in message and f"Thespian {versions.thespian_version()}" in message
    assert "asyncio.BaseEventLoop._run_once is missing" in message and versions.checked() in message


def _gateway_on_a_changed_runtime(tmp_path: Path, removal: str) -> Gateway:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("# a runtime without one internal the gateway relies on\n" + removal)
    gateway = Gateway(tmp_path)
    gateway.env["PYTHONPATH"] = f"{shim}:{gateway.env['PYTHONPATH']}"
    return gateway


def _assert_refused(result_code: int, output: str, internal: str) -> None:
    assert result_code == selftest.EX_INCOMPATIBLE, output
    lines = [line for line in output.splitlines() if "refused to start" in line]
    assert len(lines) == 1, f"one refusal, said once: {output}"
    assert f"Python {platform.python_version()}" in lines[0], output
    assert f"Thespian {versions.thespian_version()}" in lines[0], output
    assert internal in lines[0], output


def _assert_nothing_runs(gateway: Gateway) -> None:
    files = RunFiles(gateway.state)
    assert not files.running() and files.read_runtime() is None
    config = str(gateway.config)
    left = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        if config in (process.info["cmdline"] or []):
            left.append(process.info)
    assert left == [], f"a gateway process was left running: {left}"


@pytest.mark.parametrize("internal", sorted(REMOVED))
def test_start_refuses_a_runtime_without_an_internal(tmp_path, internal):
    gateway = _gateway_on_a_changed_runtime(tmp_path, REMOVED[internal])
    try:
        result = gateway.cli("start", "--wait", "60", timeout=120)
        _assert_refused(result.returncode, result.stdout + result.stderr, internal)
        _assert_nothing_runs(gateway)
    finally:
        if RunFiles(gateway.state).running():
            gateway.cli("stop", "--timeout", "20", timeout=60)


def test_run_refuses_a_runtime_without_an_internal(tmp_path):
    internal = "asyncio.BaseEventLoop._run_once"
    gateway = _gateway_on_a_changed_runtime(tmp_path, REMOVED[internal])
    proc = gateway.run_foreground()
    try:
        output, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        pytest.fail(f"`run` on a runtime without {internal} did not refuse within 90 s; it said:\n{output}")
    finally:
        gateway.kill_everything()
    _assert_refused(proc.returncode, output, internal)
    _assert_nothing_runs(gateway)


def test_doctor_shows_the_self_test(tmp_path):
    gateway = _gateway_on_a_changed_runtime(tmp_path, REMOVED["TCPTransport._acceptNewIncoming"])
    result = gateway.cli("doctor", timeout=120)
    line = next((line for line in result.stdout.splitlines() if line.split()[1:2] == ["runtime"]), "")
    assert line.startswith("fail") and "TCPTransport._acceptNewIncoming is missing" in line, result.stdout
    assert result.returncode == 1
