"""The small things of a first hour: the README's completion command on a fresh account, the hint after `config
init` beside a running gateway, `tree` readable, the sample configuration's one log level and its cron comment,
`start` naming the web chat, and the offline agent's canned answers kept from a model configured later."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.gateway import DEFAULT_ADAPTERS_ANY_PORT, ROOT, Gateway

pytestmark = pytest.mark.timeout(180)


def test_the_readmes_completion_command_works_on_a_fresh_account(tmp_path):
    readme = (ROOT / "README.md").read_text()
    [line] = [m.group(1) for m in re.finditer(r"`([^`]*completion bash[^`]*)`", readme) if ">" in m.group(1)][:1]
    home = tmp_path / "home"
    home.mkdir()                        # a fresh account: no ~/.local/share at all
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(ROOT))
    env.pop("GATEWAY_CONFIG", None)
    ran = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, (line, ran.stderr)
    script = home / ".local/share/bash-completion/completions/agent-gateway"
    assert "complete" in script.read_text(), line


def test_the_sample_configuration_has_one_log_level_and_a_cron_comment_that_fits_its_example(tmp_path):
    gw = Gateway(tmp_path)
    sample = gw.cli("config", "init", check=True).stdout
    assert "log_level" not in sample and "# level = " in sample, "one log level key: [logging] level"
    [schedule] = [line for line in sample.splitlines() if line.startswith("# schedule = ")]
    example = schedule.split('"')[1]
    assert len(example.split()) == 5 and "minute hour day month weekday" in schedule, schedule
    # The old key still works, and says it is deprecated.
    gw.config.write_text(gw.config.read_text().replace("[gateway]\n", '[gateway]\nlog_level = "debug"\n', 1)
                         + DEFAULT_ADAPTERS_ANY_PORT)
    try:
        started = gw.cli("start", timeout=90)
        assert started.returncode == 0, started.stderr
        assert "warning: [gateway] log_level is deprecated: set [logging] level instead" in started.stderr
    finally:
        gw.cli("stop", timeout=60)
        gw.kill_everything()


def test_start_names_the_web_chat_and_the_console_tree_draws_readably_and_config_init_knows_a_gateway_runs(tmp_path):
    gw = Gateway(tmp_path, extra_toml=DEFAULT_ADAPTERS_ANY_PORT)
    gw.env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    try:
        started = gw.cli("start", timeout=90)
        assert started.returncode == 0, started.stderr
        gw.launcher_pid = int(re.search(r"\(pid (\d+)\)", started.stdout).group(1))
        gw.seen_pids.add(gw.launcher_pid)
        [url] = re.findall(r"^  web chat (http://127\.0\.0\.1:\d+/)$", started.stdout, re.M)
        [console] = re.findall(r"^  console (http://127\.0\.0\.1:\d+/)$", started.stdout, re.M)
        assert console == json.loads((gw.state / "run" / "console.json").read_text())["url"], started.stdout
        status = json.loads(gw.cli("status", "--json").stdout)
        assert url in [a.get("url") for a in status["adapters"]], (url, status["adapters"])

        lines = gw.cli("tree", check=True).stdout.splitlines()
        assert lines[1].startswith("├─ ") and lines[-1].lstrip("│ ").startswith("└─ "), lines
        assert any(line.startswith("│  ") for line in lines), lines
        web = next(line for line in lines if "WebChatAdapter" in line)
        assert re.search(r"since=\d+s ago", web) and not re.search(r"since=\d{9}", web), web

        written = gw.cli("config", "init", str(tmp_path / "new.toml"))
        assert written.returncode == 0 and "start" in written.stdout
        hint = written.stdout.splitlines()[1]
        assert hint.startswith(f"a gateway already runs on {gw.state} (pid {gw.launcher_pid}"), hint
        assert "run_gateway.py stop && " in hint, hint
    finally:
        gw.cli("stop", timeout=60)
        gw.kill_everything()
    hint = gw.cli("config", "init", str(tmp_path / "other.toml")).stdout.splitlines()[1]
    assert hint == f"edit it, then: run_gateway.py --config {tmp_path / 'other.toml'} start", hint


def test_the_offline_agents_answers_are_not_sent_to_a_model_configured_later(tmp_path):
    gw = Gateway(tmp_path, extra_toml=DEFAULT_ADAPTERS_ANY_PORT, test_hooks=False)
    try:
        gw.start()
        first = gw.cli("chat", "--as", "ada", "--message", "hello there", timeout=90)
        assert first.returncode == 0 and "offline agent" in first.stdout, first
        gw.cli("stop", timeout=60, check=True)
        with FakeOpenAIServer() as model:
            gw.config.write_text(gw.config.read_text() + f'\n[agent]\nkind = "openai"\nbase_url = "{model.base_url}"\n'
                                                         'model = "m"\napi_key = "sk-test-key-0123456789"\n')
            gw.start()
            second = gw.cli("chat", "--as", "ada", "--message", "and now?", timeout=90)
            assert second.returncode == 0, second
            sent = [r.body["messages"] for r in model.requests if r.path.endswith("/chat/completions")]
    finally:
        gw.cli("stop", timeout=60)
        gw.kill_everything()
    assert sent, "the model was asked"
    turns = [(m["role"], m["content"]) for m in sent[0] if m["role"] != "system"]
    assert turns == [("user", "hello there"), ("user", "and now?")], turns
