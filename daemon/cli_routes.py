"""``run_gateway.py routes list|explain``: the route table as configured, and what it makes of one source.

Both read the configuration file (the one the gateway would start with); neither needs a running gateway. The
choice is the one the adapters make for each inbound message (actors/profiles/routes.py), so ``explain`` says what
a turn from that source runs with: route, profile, model, tools, group behaviour, and why the other routes lost.
"""
from __future__ import annotations

from actors.adapters import registry
from actors.profiles.explain import BadSource, explain, parse_source, render
from actors.profiles.profiles import validate_profiles
from actors.profiles.routes import validate_routes
from daemon.cli_output import EX_USAGE, fail, out
from daemon.cli_parsing import add_json, command
from actors.profiles import explain as explain_mod

SOURCE_HELP = "\n\n".join(explain_mod.__doc__.strip().split("\n\n")[1:3])


def add_parsers(sub) -> None:
    routes = command(sub, "routes", "the route table: which profile each chat, thread or user gets",
                     "The [[routes]] of the configuration file and the profile each source gets (docs/profiles.md).",
                     "routes list\nroutes explain telegram:chat=-1001234,user=9,type=group")
    rsub = routes.add_subparsers(dest="action", metavar="ACTION")
    listing = command(rsub, "list", "every route, most specific first",
                      "Every [[routes]] entry with what it matches and what it sets, most specific first (the\n"
                      "order a source is tried in).", "routes list --json")
    explained = command(rsub, "explain", "the route, profile and agent a source gets, and why",
                        "Which route a source takes, the profile and agent its turns run with, how the gateway\n"
                        "behaves in its group chats, which fields matched and why every other route lost.\n\n"
                        + SOURCE_HELP, "routes explain telegram:chat=123,user=9\n"
                        "routes explain discord:community=8123,chat=99,type=group --json")
    explained.add_argument("source", metavar="SOURCE", help="ADAPTER[:FIELD=VALUE,...], e.g. telegram:chat=123")
    add_json(routes, listing, explained)


def cmd_routes(config: dict, args) -> int:
    file = registry.config_file(config)
    adapters = registry.validate_all(config)
    profiles = validate_profiles(config, file)
    routes = validate_routes(config, adapters, profiles, file)
    if getattr(args, "action", None) == "explain":
        try:
            source = parse_source(args.source, adapters)
        except BadSource as exc:
            return fail(args, f"SOURCE: {exc}", EX_USAGE, source=args.source)
        answer = explain(config, routes, profiles, adapters, source)
        return out(args, {"ok": True, **answer}, 0, render(answer))
    ordered = sorted(routes, key=lambda r: (r.specificity(), -r.index), reverse=True)
    rows = [{"route": r.name, "index": r.index + 1, "match": dict(r.match), "profile": r.profile or None,
             "respond": r.respond or None, "per_user_in_groups": r.per_user_in_groups} for r in ordered]
    text = "\n".join(f"{row['route']}: {', '.join(f'{k}={v}' for k, v in row['match'].items()) or 'every source'}"
                     f" -> {row['profile'] or '(adapter profile)'}"
                     + (f", respond {row['respond']}" if row["respond"] else "")
                     + ("" if row["per_user_in_groups"] is None else
                        f", per_user_in_groups {str(row['per_user_in_groups']).lower()}") for row in rows)
    return out(args, {"ok": True, "routes": rows}, 0, text or "no [[routes]]: every adapter's chats get its profile")
