"""``run_gateway.py sessions stop|reset SESSION``: an operator's stop and reset of one conversation, as the chat's
/stop and /new do them (the console's chats page sends the same SessionCommand: actors/sessions/operator_commands.py).

    sessions stop SESSION     stop the turn being answered (its answer so far is delivered, marked stopped)
    sessions reset SESSION    start a new conversation (the current one is kept, listed and searchable); a running
                              turn is stopped first

SESSION is named as `sessions show` takes it (an id or its prefix, a key, a user, a chat). Logged with who asked.
"""
from __future__ import annotations

import asyncio

from actors.messages import SessionCommand, SessionCommandDone
from actors.sessions.operator_commands import owner_shard
from daemon.cli_adapters import SHARD_BACK_S, cli_who, command_in_tree
from daemon.cli_output import fail
from daemon.cli_parsing import command
from storage import AmbiguousId, NotFound, Store, StorageError
from storage import cli as storage_cli
from supervision.storage_access import store_location

HELP = {"stop": ("stop the turn a session is answering (what /stop does in the chat)",
                 "Stop the turn the session is answering, as the chat's /stop does: its answer so far is\n"
                 "delivered, marked stopped. Nothing running: says so, exit 1."),
        "reset": ("start a new conversation in a session (what /new does in the chat)",
                  "Start a new conversation, as the chat's /new does: the current one is kept (listed, searchable)\n"
                  "and the next message starts afresh. A turn running is stopped first.")}


def add_parsers(ssub, named: str) -> list:
    parsers = []
    for action, (text, what) in HELP.items():
        p = command(ssub, action, text, what, f"sessions {action} 02aca8c3ef8a")
        p.add_argument("session", metavar="SESSION", help=named)
        parsers.append(p)
    return parsers


def session_key_of(config: dict, name: str) -> str:
    async def go():
        store = await Store.open(store_location(config), config["storage"]["durability"])
        try:
            return (await storage_cli.resolve(store, name)).session_key
        finally:
            await store.close()
    return asyncio.run(go())


def cmd_session_command(config: dict, args) -> int:
    try:
        key = session_key_of(config, args.session)
    except (NotFound, AmbiguousId, StorageError, ValueError, OSError) as exc:
        return fail(args, f"error: {exc}")
    return command_in_tree(args, config, lambda root: owner_shard(root, key, config),
                           "the session's shard is not running (see `tree`)",
                           SessionCommand(args.action, key, cli_who()), SessionCommandDone, f"session {key}",
                           lambda done: {"session_key": done.session_key}, wait_s=SHARD_BACK_S)
