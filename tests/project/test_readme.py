"""The README's first hour stays true: every command it shows parses with the CLI as it is, and the addresses it
says the gateway serves by default are the defaults the code has."""
from __future__ import annotations

import re
import shlex

import pytest

import run_gateway
from actors.adapters import registry
from common import config as config_mod
from tests.gateway import ROOT

pytestmark = pytest.mark.timeout(30)
README = (ROOT / "README.md").read_text()


def shown_commands() -> list[list[str]]:
    """The words of each ``python run_gateway.py ...`` line in the README's shell blocks, without the comment."""
    blocks = re.findall(r"```sh\n(.*?)```", README, re.DOTALL)
    lines = [re.split(r"\s#", line)[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line)[2:] for line in lines if line.startswith("python run_gateway.py")]


def test_every_command_the_readme_shows_parses():
    commands = shown_commands()
    assert ["chat", "--message", "hello"] in commands and ["logs", "-f"] in commands and ["stop"] in commands
    for words in commands:
        if "|" in " ".join(words) or "[" in " ".join(words) or words == ["--version"]:
            continue   # a synopsis (`tree [--all]`, `list|show|...`), not a command line; --version exits
        args = run_gateway.build_parser().parse_args(words)   # exits, failing the test, on a command that is gone
        assert args.command in (None, words[0]) or words[0].startswith("-"), words


def test_what_it_serves_by_default_is_what_the_defaults_say():
    section = README.split("## What it serves by default", 1)[1].split("\n## ", 1)[0]
    defaults, webchat = config_mod.defaults(), registry.REGISTRY["webchat"].options
    host = defaults["gateway"]["bind_host"]
    assert f"http://{webchat['host'].default}:{webchat['port'].default}/" in section
    assert registry.DEFAULT_ADAPTERS == {"web": {"type": "webchat"}} and "replaces it" in section
    assert defaults["metrics"]["host"] == "" and f"http://{host}:{defaults['metrics']['port']}/metrics" in section
    assert f"{host}:{defaults['gateway']['admin_port']}" in section
