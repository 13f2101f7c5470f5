"""The admin CLI for an operator's first hour: --version, --config anywhere (relative too, for `start`), JSON
errors, a closed pipe, `config init|show`, `logs [-f] [--since]`. The real CLI in subprocesses; a real daemon
where one is needed."""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
import tomllib

import psutil
import pytest

from common import config as config_mod
from common.version import VERSION
from daemon import cli_config
from tests.actor_system import wait_for
from tests.gateway import DEFAULT_ADAPTERS_ANY_PORT, PYTHON, ROOT, Gateway, interruptible

pytestmark = pytest.mark.timeout(120)
AGENT_KEY = "an-agent-key-of-no-known-shape"
BOT_TOKEN = "123456:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789"


def cli(tmp_path, *args, cwd=None, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, GATEWAY_STATE_DIR=str(tmp_path / "state"), PYTHONPATH=str(ROOT))
    env.pop("GATEWAY_CONFIG", None)
    return subprocess.run([PYTHON, str(ROOT / "run_gateway.py"), *args], env=env, cwd=cwd or tmp_path,
                          capture_output=True, text=True, timeout=60, **kwargs)


def test_version_and_errors_as_json(tmp_path):
    (tmp_path / "bad.toml").write_text("[gateway]\nadmin_prot = 1\n")
    for args in (("--version",), ("--config", "bad.toml", "--version")):
        version = cli(tmp_path, *args)
        assert version.returncode == 0 and version.stdout.strip() == f"agent-gateway {VERSION}"
    bad = cli(tmp_path, "status", "--json", "--config", "bad.toml")
    error = json.loads(bad.stdout)
    assert bad.returncode == 78 and error["ok"] is False and error["key"] == "[gateway] admin_prot"
    assert error["file"] == str(tmp_path / "bad.toml"), "the relative --config named by its absolute path"
    usage = cli(tmp_path, "sessions", "shw", "--json")
    assert usage.returncode == 2 and "invalid choice: 'shw'" in json.loads(usage.stdout)["error"]
    nothing = cli(tmp_path, "sessions", "show", "abc", "--json")
    assert nothing.returncode == 1 and "no database yet" in json.loads(nothing.stdout)["error"]
    assert nothing.stderr == ""
    for plain in (cli(tmp_path, "sessions", "show", "abc"), cli(tmp_path, "status")):
        assert plain.returncode != 0 and plain.stdout == "" and plain.stderr, "without --json: text on stderr"


def test_config_init_writes_a_sample_of_the_defaults_and_never_replaces_a_file_unasked(tmp_path):
    printed = cli(tmp_path, "config", "init")
    assert printed.returncode == 0
    sample = printed.stdout
    assert config_mod.validate(tomllib.loads(sample), "sample") == config_mod.defaults(), "as written: defaults"
    uncommented, section, keys = [], None, 0
    for line in sample.splitlines():
        if m := re.match(r"\[(\w+)\]", line):
            section = m.group(1)
        elif (m := re.match(r"# (\w+) = ", line)) and m.group(1) in config_mod.SCHEMA.get(section, {}):
            line, keys = line[2:], keys + 1
        uncommented.append(line)
    assert keys == sum(len(k) for s, k in config_mod.SCHEMA.items() if s not in config_mod.OPEN_SECTIONS) \
        - len(cli_config.DEPRECATED), "every key but the deprecated ones"
    assert config_mod.validate(tomllib.loads("\n".join(uncommented)), "sample") == config_mod.defaults(), \
        "every key uncommented: each at its default"

    path = tmp_path / "etc" / "gateway.toml"
    written = cli(tmp_path, "config", "init", "etc/gateway.toml")
    assert written.returncode == 0 and str(path) in written.stdout and path.read_text() == sample
    assert path.stat().st_mode & 0o777 == 0o600
    path.write_text("[gateway]\nadmin_port = 1234\n")
    refused = cli(tmp_path, "config", "init", str(path))
    assert refused.returncode == 1 and "--force" in refused.stderr and "admin_port = 1234" in path.read_text()
    forced = cli(tmp_path, "config", "init", str(path), "--force", "--json")
    assert forced.returncode == 0 and json.loads(forced.stdout)["path"] == str(path)
    assert path.read_text() == sample


def test_config_show_is_the_effective_configuration_without_its_secrets(tmp_path):
    (tmp_path / "gw.toml").write_text(f'[agent]\napi_key = "{AGENT_KEY}"\n[sessions]\nbusy_mode = "steer"\n'
                                      f'[adapters.support]\ntype = "telegram"\ntoken = "{BOT_TOKEN}"\n')
    text = cli(tmp_path, "config", "show", "--config", "gw.toml")
    as_json = cli(tmp_path, "--config", "gw.toml", "config", "show", "--json")
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    for output in (text.stdout, as_json.stdout):
        assert AGENT_KEY not in output and BOT_TOKEN not in output and "[redacted]" in output
    shown = json.loads(as_json.stdout)
    assert shown["source"] == str(tmp_path / "gw.toml")
    effective = shown["config"]
    assert effective["sessions"]["busy_mode"] == "steer" and effective["sessions"]["idle_s"] == 600.0
    assert effective["gateway"]["state_dir"] == str(tmp_path / "state")
    assert effective["adapters"]["support"]["mode"] == "polling", "adapter defaults filled in"
    assert effective["adapters"]["cli"]["type"] == "cli", "and the implicit terminal adapter"
    assert effective["agent"]["api_key"] == effective["adapters"]["support"]["token"] == "[redacted]"
    back = tomllib.loads(text.stdout)   # the text form is TOML of the same values
    assert back["sessions"] == effective["sessions"]
    assert back["adapters"] == {name: {k: v for k, v in table.items() if v is not None}   # TOML has no null
                                for name, table in effective["adapters"].items()}
    # (a long path with digits, such as pytest's, reads as an opaque token to the admin output's redaction)
    assert {k: v for k, v in back["gateway"].items() if k != "state_dir"} == \
        {k: v for k, v in effective["gateway"].items() if k != "state_dir"}


def test_logs_follow_prints_what_is_added_across_a_rotation_until_ctrl_c(tmp_path):
    log = tmp_path / "state" / "gateway.log"
    log.parent.mkdir()
    log.write_text("2026-12-01 10:00:00,000 INFO gateway.launcher: an old line\n")
    env = dict(os.environ, GATEWAY_STATE_DIR=str(tmp_path / "state"), PYTHONPATH=str(ROOT))
    env.pop("GATEWAY_CONFIG", None)
    # stderr to a file, not a pipe nobody reads until the end: the process can never block on writing it.
    stderr = open(tmp_path / "stderr.txt", "w+")
    proc = subprocess.Popen([PYTHON, str(ROOT / "run_gateway.py"), "logs", "-f"], env=env, stdout=subprocess.PIPE,
                            stderr=stderr, text=True, preexec_fn=interruptible)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    seen: list[str] = []

    def saw(fragment: str) -> bool:
        while not lines.empty():
            seen.append(lines.get())
        return any(fragment in line for line in seen)
    try:
        wait_for(lambda: saw("an old line"), 20, 0.02, f"the existing log printed (saw {seen})")
        with open(log, "a") as f:
            f.write("2026-12-01 10:00:01,000 INFO gateway.launcher: a new line\n")
        wait_for(lambda: saw("a new line"), 20, 0.02, f"the appended line printed (saw {seen})")
        log.rename(log.with_suffix(".log.1"))
        log.write_text("2026-12-01 10:00:02,000 INFO gateway.launcher: after the rotation\n")
        wait_for(lambda: saw("after the rotation"), 20, 0.02, f"the new file's line printed (saw {seen})")
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            state = psutil.Process(proc.pid).status() if psutil.pid_exists(proc.pid) else "gone"
            raise AssertionError(f"logs -f still running 60 s after Ctrl-C (process {state}); stderr: "
                                 f"{(tmp_path / 'stderr.txt').read_text()[-2000:]!r}") from None
        assert code == 0
        assert "Traceback" not in (tmp_path / "stderr.txt").read_text()
        assert [line for line in seen if "an old line" in line] == [seen[0]], "each line once"
    finally:
        proc.kill()
        stderr.close()


def test_a_relative_config_after_the_command_starts_the_daemon_and_the_cli_reads_it(tmp_path):
    gw = Gateway(tmp_path, extra_toml="[agent]\nchunk_delay_s = 0.0\n" + DEFAULT_ADAPTERS_ANY_PORT)
    gw.config.rename(tmp_path / "relative.toml")
    work = tmp_path / "work"
    work.mkdir()

    def run(*args, stdout=subprocess.PIPE):
        return subprocess.run([PYTHON, str(ROOT / "run_gateway.py"), *args], env=gw.env, cwd=work, stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    try:
        started = run("start", "--config", "../relative.toml", "--json")
        assert started.returncode == 0, started.stdout + started.stderr
        gw.launcher_pid = json.loads(started.stdout)["pid"]
        gw.seen_pids.add(gw.launcher_pid)
        runtime = json.loads((gw.state / "run" / "runtime.json").read_text())
        assert runtime["config"] == str(tmp_path / "relative.toml"), "the daemon ran with the file named"
        reader, writer = os.pipe()
        os.close(reader)   # the reader is gone before a byte is written: `status | head -0`
        try:
            piped = run("status", "--config", "../relative.toml", stdout=writer)
        finally:
            os.close(writer)
        assert "Traceback" not in piped.stderr and "BrokenPipe" not in piped.stderr, piped.stderr
        assert piped.returncode == 141
        shown = run("logs", "--since", "10m", "--config", "../relative.toml")
        assert shown.returncode == 0 and "gateway ready in" in shown.stdout
        assert run("logs", "-n", "1", "--config", "../relative.toml").stdout.count("\n") == 1
        stopped = run("stop", "--config", "../relative.toml", "--json")
        assert stopped.returncode == 0 and json.loads(stopped.stdout)["ok"]
        gw.assert_no_process_left()
    finally:
        run("stop", "--config", str(tmp_path / "relative.toml"))
        gw.kill_everything()
