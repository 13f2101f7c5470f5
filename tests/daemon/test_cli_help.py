"""Every admin subcommand's --help says what it does, shows each option's default, and ends with an example that
is itself a valid command line."""
from __future__ import annotations

import argparse
import shlex

import pytest

import run_gateway
from daemon.cli_parsing import subcommands

pytestmark = pytest.mark.timeout(30)


def _all_parsers():
    return subcommands(run_gateway.build_parser())


def test_every_subcommand_describes_itself_and_gives_an_example_that_parses():
    parsers = _all_parsers()
    assert len(parsers) >= 25, [p.prog for p in parsers]
    for parser in parsers:
        assert parser.description and len(parser.description) > 20, f"{parser.prog}: no description"
        assert parser.epilog and parser.epilog.startswith("example:\n"), f"{parser.prog}: no example"
        block = parser.epilog.split("\n\n", 1)[0]   # the examples end at a blank line (exit codes may follow)
        examples = [line.strip() for line in block.splitlines()[1:] if line.strip()]
        assert examples, parser.prog
        for example in examples:
            words = shlex.split(example)
            words = words[:next((i for i, w in enumerate(words) if w in (">", "|")), len(words))]   # the shell's
            assert words[0] == "run_gateway.py", example
            args = run_gateway.build_parser().parse_args(words[1:])   # exits (fails the test) if it does not parse
            command = parser.prog.split()[1]
            assert args.command == command, f"{parser.prog}: its example {example!r} runs {args.command}"


def test_every_option_with_a_default_says_which():
    for parser in _all_parsers():
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            optional = action.option_strings or action.nargs == "?"
            if not optional or action.default in (None, False, argparse.SUPPRESS) or action.help is None:
                continue
            name = (action.option_strings or [action.dest])[0]
            assert "default" in action.help, f"{parser.prog} {name}: its help does not say its default"
            assert f"default: {action.default}" in text, f"{parser.prog} {name}: default {action.default} not shown"


def test_options_of_the_whole_program_are_taken_after_the_command_too():
    parser = run_gateway.build_parser()
    assert parser.parse_args(["sessions", "list", "--config", "x.toml"]).config == "x.toml"
    assert parser.parse_args(["--config", "y.toml", "sessions", "list"]).config == "y.toml"
    assert parser.parse_args(["status"]).config is None
