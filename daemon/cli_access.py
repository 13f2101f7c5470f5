"""``run_gateway.py pair ...``: who may talk to the agent (G5; actors/adapters/access.py has the policy).

    pair list                      pending pairing codes and the users granted so far
    pair approve CODE              grant the sender who was given CODE (the code is single-use)
    pair deny CODE                 refuse it (the sender may ask again, within the lockout limits)
    pair grant ADAPTER USER_ID     grant a user directly (no code needed)
    pair revoke ADAPTER USER_ID    take a grant back; their next message is treated as a stranger's

They write the database directly, beside a live gateway (WAL); adapters read grants per inbound batch, so a change
applies from the sender's next message on.
"""
from __future__ import annotations

import time

from storage import NotFound
from daemon.cli_output import fail
from daemon.cli_parsing import add_json, command
from daemon.cli_storage import run_on_store
from common.redact import escape_controls


def add_parsers(sub) -> None:
    pair = command(sub, "pair", "who may talk to the agent: pairing codes and grants (list, approve, ...)",
                   "Who may talk to the agent (docs/access.md): a stranger on a pairing adapter gets a code; the\n"
                   "operator approves or denies it here, or grants a user directly. A change applies from the\n"
                   "sender's next message.", "pair list\npair approve K7Q2MX")
    psub = pair.add_subparsers(dest="action", metavar="ACTION")
    listing = command(psub, "list", "pending pairing codes and granted users (the default)",
                      "Pending pairing codes (who asked, when each expires) and the users granted so far.", "pair list")
    for action, text, what in (("approve", "grant the sender who was given CODE",
                                "Grant the sender who was given CODE (a code works once)."),
                               ("deny", "refuse CODE", "Refuse CODE; the sender may ask again, within the lockout "
                                                       "limits.")):
        p = command(psub, action, text, what, f"pair {action} K7Q2MX")
        p.add_argument("code", metavar="CODE", help="the code the sender was given")
    for action, text, what in (("grant", "grant a user of an adapter directly",
                                "Grant a user of an adapter directly, without a code."),
                               ("revoke", "take a grant back", "Take a grant back: the user's next message is "
                                                               "treated as a stranger's.")):
        p = command(psub, action, text, what, f"pair {action} support 12345678")
        p.add_argument("adapter", metavar="ADAPTER", help="the adapter's name, as in [adapters.NAME]")
        p.add_argument("user", metavar="USER_ID", help="the platform's user id")
    add_json(pair, listing, *(psub.choices[a] for a in ("approve", "deny", "grant", "revoke")))


def cmd_pair(config: dict, args) -> int:
    action = args.action or "list"
    calls = {
        "list": _list,
        "approve": lambda s: _approve(s, args.code),
        "deny": lambda s: _deny(s, args.code),
        "grant": lambda s: _grant(s, args.adapter, args.user),
        "revoke": lambda s: _revoke(s, args.adapter, args.user),
    }
    try:
        return run_on_store(config, args, calls[action], RENDER[action])
    except NotFound as exc:
        return fail(args, f"error: {exc}")


async def _list(store) -> dict:
    now = time.time()
    return {"pending": [dict(vars(c), expires_in_s=round(c.expires_at - now)) for c in await store.access.pending(now)],
            "grants": [vars(g) for g in await store.access.grants()]}


async def _approve(store, code: str) -> dict:
    return vars(await store.access.approve(code, by="cli"))


async def _deny(store, code: str) -> dict:
    return vars(await store.access.deny(code))


async def _grant(store, adapter: str, user: str) -> dict:
    await store.access.grant(adapter, user, by="cli")
    return {"adapter": adapter, "user_id": user, "granted": True}


async def _revoke(store, adapter: str, user: str) -> dict:
    return {"adapter": adapter, "user_id": user, "revoked": await store.access.revoke(adapter, user)}


def _who(d: dict) -> str:
    """Who a code or grant is for, as the platform named them: a stranger's name, so control characters escaped."""
    who = f"{d['adapter']}:{d['user_id']}" + (f" ({d['user_name']})" if d.get("user_name") else "")
    return escape_controls(who)


def _render_list(result: dict) -> str:
    lines = ["pending codes:" if result["pending"] else "no pending codes"]
    lines += [f"  {c['code']}  {_who(c)}  expires in {c['expires_in_s'] // 60} min" for c in result["pending"]]
    lines.append("granted:" if result["grants"] else "no grants")
    lines += [f"  {_who(g)}  by {g['granted_by']}" for g in result["grants"]]
    return "\n".join(lines)


RENDER = {
    "list": _render_list,
    "approve": lambda c: f"approved {c['code']}: {_who(c)} may talk to the agent from their next message",
    "deny": lambda c: f"denied {c['code']} ({_who(c)})",
    "grant": lambda r: f"granted {_who(r)}",
    "revoke": lambda r: f"revoked {_who(r)}" if r["revoked"] else f"{_who(r)} had no grant",
}
