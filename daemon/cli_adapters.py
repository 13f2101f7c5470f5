"""``run_gateway.py adapters ...``: the operator's commands to a running adapter (the console's adapters page sends
the same AdapterCommand: actors/adapters/operator_commands.py).

    adapters pause NAME       the adapter takes no new messages from its platform (which keeps them); outbound goes on
    adapters resume NAME      it takes them again, from where it stopped: nothing sent meanwhile is lost
    adapters reconnect NAME   its intake closes the platform connection and opens a new one

Each is logged by the gateway with who asked (``cli (USER)``). A pause lasts the adapter's life: a restart of the
adapter or of the gateway takes messages again. Each adapter's state and its messages in/out: `status` (--json).
"""
from __future__ import annotations

import getpass
import time

from actors.adapters.connection import adapter_node
from actors.messages import ADAPTER_COMMANDS, AdapterCommand, AdapterCommandDone
from daemon.admin import AdminClient, AdminError, NoGateway
from daemon.asking import ask_for
from daemon.cli_output import fail, out
from daemon.cli_parsing import add_json, command

ANSWER_TIMEOUT_S = 15.0
# A session's shard or an adapter restarted by its supervisor is back within seconds: a command for it waits this
# long (polling the tree) rather than failing while it restarts.
SHARD_BACK_S, FIND_POLL_S = 15.0, 0.5
EX_NOT_RUNNING = 3
HELP = {"pause": "take no new messages from NAME's platform (it keeps them) until resumed",
        "resume": "take messages again, from where the pause stopped",
        "reconnect": "close NAME's platform connection and open a new one"}


def add_parsers(sub) -> None:
    adapters = command(sub, "adapters", "pause, resume or reconnect a running adapter's intake",
                       "An operator's commands to a running adapter. A paused adapter takes nothing from its\n"
                       "platform (outbound replies still go); resumed, it takes what was sent meanwhile. Every\n"
                       "command is logged with who gave it; `status` shows each adapter's state and messages in/out.",
                       "adapters pause telegram\nadapters resume telegram\nadapters reconnect telegram")
    asub = adapters.add_subparsers(dest="action", metavar="ACTION", required=True)
    parsers = []
    for action in ADAPTER_COMMANDS:
        p = command(asub, action, HELP[action], HELP[action].capitalize() + ".", f"adapters {action} telegram")
        p.add_argument("name", metavar="NAME", help="the adapter's name, as in [adapters.NAME]")
        parsers.append(p)
    add_json(adapters, *parsers)


def cli_who() -> str:
    try:
        return f"cli ({getpass.getuser()})"
    except (KeyError, OSError):   # a uid with no name
        return "cli"


def cmd_adapters(config: dict, args) -> int:
    # A configured adapter always has a child in the tree; a walk on a loaded machine may show it without its
    # address (its supervisor answered with the last state it knew) or it may be restarting: wait for it then.
    # A name no [adapters.NAME] table gives fails at once.
    configured = args.name in (config.get("adapters") or {})
    return command_in_tree(args, config, lambda root: adapter_node(root, args.name),
                           f"no adapter called {args.name!r} is running (see `status`)",
                           AdapterCommand(args.action, cli_who()), AdapterCommandDone, f"adapter {args.name}",
                           lambda done: {"adapter": done.adapter}, wait_s=SHARD_BACK_S if configured else 0.0)


def command_in_tree(args, config: dict, find, missing: str, message, wanted: type, who: str, fields,
                    wait_s: float = 0.0) -> int:
    """An operator's command to the actor ``find(tree)`` names, its answer ``wanted`` printed: the CLI's face of
    what the console sends the same way (``ok`` and ``detail`` of the answer, and ``fields(answer)``). ``wait_s``:
    for an actor that always exists (a session's shard), how long to wait for it while it restarts, or while a
    loaded machine keeps it from answering the tree's walk, before saying it is not running."""
    try:
        client = AdminClient(config)
    except NoGateway as exc:
        return fail(args, str(exc), EX_NOT_RUNNING, running=False)
    try:
        deadline = time.monotonic() + wait_s
        while (node := find(client.tree())) is None:
            if time.monotonic() >= deadline:
                return fail(args, missing)
            time.sleep(FIND_POLL_S)
        done = ask_for(client.asys, node.ref, message, wanted, ANSWER_TIMEOUT_S)
    except AdminError as exc:
        return fail(args, str(exc))
    if done is None:
        return fail(args, f"{who} did not answer within {ANSWER_TIMEOUT_S:g}s")
    data = {"ok": done.ok, **fields(done), "action": done.action, "detail": done.detail}
    return out(args, data, 0 if done.ok else 1, f"{who}: {done.detail}" if done.ok else
               f"error: {who} {done.action}: {done.detail}")
