"""``run_gateway.py completion bash|zsh|fish``: a static script generated from the CLI's own parser. The bash script
is checked by bash itself (``bash -n``), then sourced in a real bash and asked to complete, as Tab would."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

import run_gateway
from daemon.cli_parsing import subcommands
from tests.gateway import PYTHON, ROOT

pytestmark = pytest.mark.timeout(60)


def completion(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GATEWAY_CONFIG", None)
    return subprocess.run([PYTHON, str(ROOT / "run_gateway.py"), "completion", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=30)


def commands() -> list[str]:
    """The top-level commands, as the parser has them."""
    return [p.prog.split()[1] for p in subcommands(run_gateway.build_parser()) if len(p.prog.split()) == 2]


def complete_in_bash(script: str, *words: str, cwd) -> list[str]:
    """What bash offers for the last of ``words`` (the line typed so far, the command first), as on Tab."""
    line = " ".join(words)
    program = (f'source "$1"\nCOMP_WORDS=({" ".join(repr(w) for w in words)})\nCOMP_CWORD={len(words) - 1}\n'
               f'COMP_LINE={line!r}\nCOMP_POINT={len(line)}\n_shtab_agent_gateway\n'
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    path = cwd / "agent-gateway.bash"
    path.write_text(script)
    result = subprocess.run(["bash", "-c", program, "bash", str(path)], cwd=cwd, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr
    return [w for w in result.stdout.splitlines() if w]


def test_the_bash_script_is_valid_and_names_every_command(tmp_path):
    result = completion("bash", "--config", str(tmp_path / "absent.toml"), cwd=tmp_path)   # reads no config
    assert result.returncode == 0, result.stderr
    script = result.stdout
    check = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr
    names = commands()
    assert {"start", "stop", "status", "tree", "chat", "sessions", "logs", "completion"} <= set(names)
    [listed] = [line for line in script.splitlines() if line.startswith("_shtab_agent_gateway_subparsers=")]
    assert listed.split("=", 1)[1].strip("()").split() == names
    assert script.rstrip().endswith("complete -o bashdefault -F _shtab_agent_gateway agent-gateway")


def test_bash_completes_commands_choices_and_file_names(tmp_path):
    script = completion("bash", cwd=tmp_path).stdout
    (tmp_path / "gateway.toml").write_text("")
    assert complete_in_bash(script, "agent-gateway", "sta", cwd=tmp_path) == ["start", "status"]
    assert complete_in_bash(script, "agent-gateway", "sessions", "ex", cwd=tmp_path) == ["export"]
    assert complete_in_bash(script, "agent-gateway", "deliveries", "--state", "f", cwd=tmp_path) == ["failed"]
    assert complete_in_bash(script, "agent-gateway", "tree", "--a", cwd=tmp_path) == ["--all"]
    assert complete_in_bash(script, "agent-gateway", "--config", "gate", cwd=tmp_path) == ["gateway.toml"]


@pytest.mark.timeout(180)   # six runs of the whole program and two shells: ~5 s quiet, 33 s once at load 6
def test_zsh_and_fish_scripts_and_another_program_name(tmp_path):
    for shell, marker in (("zsh", "#compdef agent-gateway"), ("fish", "complete -c agent-gateway")):
        script = completion(shell, cwd=tmp_path).stdout
        assert marker in script and all(name in script for name in commands()), shell
        if shutil.which(shell):
            check = subprocess.run([shell, "-n"], input=script, capture_output=True, text=True, timeout=30)
            assert check.returncode == 0, check.stderr
    script = completion("bash", "--prog", "run_gateway.py", cwd=tmp_path).stdout
    assert script.rstrip().endswith("-F _shtab_run_gateway_py run_gateway.py")
    refused = completion("bash", "--prog", "agent gateway; rm", cwd=tmp_path)
    assert refused.returncode == 2 and "is not a command name" in refused.stderr
    unknown = completion("tcsh", cwd=tmp_path)
    assert unknown.returncode == 2 and "invalid choice: 'tcsh'" in unknown.stderr
