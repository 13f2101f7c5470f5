"""``run_gateway.py approvals ...``: the tool calls waiting for a person's yes (docs/approvals.md).

    approvals list              every question waiting: its id, conversation, tool, arguments and deadline
    approvals approve ID        the operator's yes: the first answer wins, whoever gives it, and a winning one makes
    approvals deny ID           the paused turn go on (the tool runs once, or the model is told it was denied)

``list`` reads the database beside a running gateway; ``approve`` and ``deny`` go to the shard that hosts the
conversation, which answers in storage and rings the session (actors/sessions/approval_flow.py). Arguments are
shown with every configured secret redacted (G6). Logged with who answered.
"""
from __future__ import annotations

import asyncio
import time

from actors.approvals.answers import shown_arguments
from actors.approvals.rules import policy_name
from actors.messages import APPROVAL_VERDICTS, ApprovalAnswer, ApprovalAnswerDone
from actors.sessions.operator_commands import owner_shard
from common.redact import configured_secrets
from daemon.cli_adapters import SHARD_BACK_S, cli_who, command_in_tree
from daemon.cli_output import fail
from daemon.cli_parsing import add_json, command
from daemon.cli_storage import run_on_store
from storage import Store, StorageError
from supervision.storage_access import store_location

ANSWERS = {"approve": "run the tool call: the paused turn goes on with its result",
           "deny": "refuse the tool call: the paused turn goes on, the model told it was denied"}


def add_parsers(sub) -> None:
    approvals = command(sub, "approvals", "tool calls waiting for approval: list, approve ID, deny ID",
                        "The tool calls of profiles with approve_tools that wait for a person's yes. The first\n"
                        "answer wins, the chat's or the operator's; under approvers = \"operator\" only these\n"
                        "commands answer.", "approvals list\napprovals approve Zq3kV1mP-8xYcT2a")
    asub = approvals.add_subparsers(dest="action", metavar="ACTION")
    listing = command(asub, "list", "every question waiting (the default)",
                      "Every tool call waiting for approval, earliest deadline first: its id (what approve and\n"
                      "deny take), its conversation, the tool, its arguments (secrets redacted) and its deadline.",
                      "approvals list --json")
    answers = []
    for verdict, what in ANSWERS.items():
        parser = command(asub, verdict, what, f"As the operator: {what}.\nExit 1 when another answer came "
                                              "first (said which) or the question expired.", f"approvals {verdict} ID")
        parser.add_argument("approval_id", metavar="ID",
                            help="the question's id, as `approvals list` shows it (one beginning with '-', which "
                                 "older versions made, goes after '--')")
        answers.append(parser)
    add_json(approvals, listing, *answers)


def _row(approval, secrets: list) -> dict:
    return {"id": approval.approval_id, "session_key": approval.session_key, "tool": policy_name(approval.tool_name),
            "arguments": shown_arguments(approval.arguments, secrets), "approvers": approval.approvers,
            "asked_at": approval.asked_at, "deadline": approval.deadline}


def _line(row: dict) -> str:
    until = time.strftime("%H:%M:%S", time.localtime(row["deadline"]))
    return f"{row['id']}  until {until}  {row['session_key']}  {row['tool']} {row['arguments']}"


def _approval(config: dict, approval_id: str):
    async def go():
        store = await Store.open(store_location(config), config["storage"]["durability"])
        try:
            return await store.approvals.get(approval_id)
        finally:
            await store.close()
    return asyncio.run(go())


def cmd_approvals(config: dict, args) -> int:
    action = args.action or "list"
    if action == "list":
        secrets = configured_secrets(config)

        async def listing(store) -> dict:
            return {"ok": True, "approvals": [_row(a, secrets) for a in await store.approvals.listing()]}
        return run_on_store(config, args, listing, lambda r: "\n".join(map(_line, r["approvals"])) or
                            "no tool call waits for approval")
    if action not in APPROVAL_VERDICTS:
        return fail(args, f"no such action {action!r}")
    try:
        approval = _approval(config, args.approval_id)
    except (StorageError, OSError) as exc:
        return fail(args, f"error: {exc}")
    if approval is None:
        return fail(args, f"error: no tool call {args.approval_id!r} waits for approval (`approvals list` shows "
                          "them)")
    key = approval.session_key
    return command_in_tree(args, config, lambda root: owner_shard(root, key, config),
                           "the conversation's shard is not running (see `tree`)",
                           ApprovalAnswer(action, approval.approval_id, key, cli_who()), ApprovalAnswerDone,
                           f"approval {approval.approval_id}",
                           lambda done: {"session_key": done.session_key, "approval_id": approval.approval_id},
                           wait_s=SHARD_BACK_S)
