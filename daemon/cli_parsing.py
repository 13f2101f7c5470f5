"""The admin CLI's argument parsing conventions, shared by every command module.

* ``command(sub, name, help, description, example)``: every subcommand's ``--help`` says what it does, then its
  options with their defaults (``%(default)s`` in the option's help), then an example;
* ``GatewayParser``: a usage error is a JSON object on stdout under ``--json``, like any other error;
* ``accept_everywhere``: options of the whole program (``--config``) are taken after the subcommand as well.
"""
from __future__ import annotations

import argparse
import json
import sys

from daemon.cli_output import EX_USAGE, wants_json

PROG = "run_gateway.py"


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written (line breaks kept); option help wrapped as usual."""


class GatewayParser(argparse.ArgumentParser):
    def error(self, message: str):
        if wants_json():
            print(json.dumps({"ok": False, "error": f"{self.prog}: {message}", "usage": self.format_usage().strip()},
                             indent=2))
            sys.exit(EX_USAGE)
        super().error(message)


def command(sub, name: str, help: str, description: str, example: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand whose --help opens with ``description`` and ends with ``example`` (one or more lines, each a
    command line without the program name)."""
    lines = "\n".join(f"  {PROG} {line}" if line else "" for line in example.strip().splitlines())
    return sub.add_parser(name, help=help, description=description, epilog=f"example:\n{lines}",
                          formatter_class=Formatter, **kwargs)


def add_json(*parsers: argparse.ArgumentParser) -> None:
    for parser in parsers:
        parser.add_argument("--json", action="store_true", help="machine-readable output (errors too, on stdout)")


def subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser below ``parser``, depth first (``sessions``, ``sessions list``, ...)."""
    found = []
    for action in parser._actions:   # argparse keeps subparsers only there
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):   # aliases map to the same parser
                found.append(child)
                found.extend(subcommands(child))
    return found


def accept_everywhere(parser: argparse.ArgumentParser, *flags: str, **kwargs) -> None:
    """Add an option of the whole program to every subcommand too, so ``start --config FILE`` works like
    ``--config FILE start``. SUPPRESS: a subcommand that was not given it leaves the program's value alone."""
    for child in subcommands(parser):
        child.add_argument(*flags, default=argparse.SUPPRESS, **kwargs)
