"""``routes explain SOURCE``: a source written on one line, and what the routes make of it (pure).

    SOURCE = ADAPTER[:FIELD=VALUE[,FIELD=VALUE...]]
    FIELD  = chat | thread | user | community | type        (type: dm | group | channel | thread; default dm,
                                                             group when a community is given)
    e.g.  telegram:chat=-1001234,user=9,type=group     discord:community=8123,chat=99,type=group

The adapter is the [adapters.NAME] name (the session key's platform), not its type; the type is looked up in
the configuration. Values are ids as the platform gives them, compared as text.
"""
from __future__ import annotations

from typing import Mapping

from actors.messages import Source
from actors.memory.scope import scope_name
from actors.profiles.identities import load_identities
from actors.profiles.profiles import resolve
from actors.profiles.routes import RouteSource, choose_route, effective_respond
from common.config import setting
from storage import session_key

SPEC_FIELDS = {"chat": "chat", "thread": "thread", "user": "user", "community": "community", "type": "chat_type"}
CHAT_TYPES = ("dm", "group", "channel", "thread")


class BadSource(ValueError):
    """A SOURCE that does not follow the syntax above; the message says what is wrong."""


def parse_source(text: str, adapters: Mapping[str, Mapping]) -> RouteSource:
    adapter, _, rest = text.strip().partition(":")
    if not adapter:
        raise BadSource("SOURCE starts with an adapter name, e.g. telegram:chat=123,user=9")
    if adapter not in adapters:
        raise BadSource(f"no adapter {adapter!r} is configured (adapters: {', '.join(sorted(adapters))})")
    values: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not value.strip():
            raise BadSource(f"{part!r}: expected FIELD=VALUE")
        if key not in SPEC_FIELDS:
            raise BadSource(f"unknown field {key!r} (fields: {', '.join(SPEC_FIELDS)})")
        if SPEC_FIELDS[key] in values:
            raise BadSource(f"field {key!r} given twice")
        values[SPEC_FIELDS[key]] = value.strip()
    chat_type = values.pop("chat_type", "group" if "community" in values else "dm")
    if chat_type not in CHAT_TYPES:
        raise BadSource(f"type must be one of {', '.join(CHAT_TYPES)}, got {chat_type!r}")
    if "thread" in values and "chat" not in values:
        raise BadSource("a thread is within a chat: give chat too")
    return RouteSource(adapter=adapter, platform=str(adapters[adapter].get("type", adapter)), chat_type=chat_type,
                       **values)


def explain(config: Mapping, routes: list, profiles: Mapping, adapters: Mapping[str, Mapping],
            source: RouteSource) -> dict:
    """The route ``source`` gets, its profile, its group behaviour and why, as plain data (``--json`` prints it)."""
    route, why = choose_route(routes, source)
    adapter = adapters[source.adapter]
    profile_name = route.profile or str(adapter.get("profile") or "default")
    profile = resolve(config, profile_name, profiles)
    per_user = (route.per_user_in_groups if route.per_user_in_groups is not None
                else bool(setting(config, "sessions", "per_user_in_groups")))
    agent = profile.agent
    identity = load_identities(config).of(source.adapter, source.user)
    as_source = Source(source.adapter, source.chat, source.chat_type, source.thread, source.user, profile=profile_name)
    # The key the intake gives such a message (a chat is needed to make one): the session `sessions list` shows.
    key = session_key(as_source, per_user, identity) if source.chat else None
    memory = profile.memory
    return {
        "source": {k: v for k, v in vars(source).items() if v is not None},
        "route": route.name, "route_index": route.index + 1 if route.index >= 0 else None,
        "profile": profile_name, "profile_declared": profile.declared,
        "profile_from": "the route" if route.profile else f"[adapters.{source.adapter}] profile",
        "model": agent.get("model") or "", "agent_kind": agent.get("kind") or "",
        "tools": agent.get("tools"), "busy_mode": profile.busy_mode, "stream": profile.stream,
        "respond": "all" if source.chat_type == "dm" else effective_respond(route, adapter),
        "per_user_in_groups": per_user, "session_key": key,
        "identity": identity, "identity_applies": bool(identity) and source.chat_type == "dm",
        "memory": memory.mode,
        "memory_scope": scope_name(memory.mode, as_source, identity) if memory.enabled else None,
        "matched": [f"{k}={v}" for k, v in why.matched],
        "lost": [{"route": name, "why": reason} for name, reason in why.lost],
    }


def render(answer: dict) -> str:
    source = ", ".join(f"{k}={v}" for k, v in answer["source"].items())
    tools = "all built-in" if answer["tools"] is None else (", ".join(answer["tools"]) or "none")
    lines = [f"source:   {source}",
             f"route:    {answer['route']}",
             f"profile:  {answer['profile']} (from {answer['profile_from']}"
             f"{'' if answer['profile_declared'] else '; no [profiles] table: [agent] as is'})",
             f"agent:    {answer['agent_kind'] or 'auto'} {answer['model'] or ''}".rstrip() + f"; tools: {tools}",
             f"groups:   respond {answer['respond']}; "
             f"{'one session per user' if answer['per_user_in_groups'] else 'one session per chat'}; "
             f"busy mode {answer['busy_mode']}{'' if answer['stream'] else '; answers sent whole'}",
             f"session:  {answer['session_key'] or '(give chat=... to see its key)'}",
             *_identity_lines(answer),
             "matched:  " + (", ".join(answer["matched"]) or "no field (a catch-all, or no route matched)")]
    lines += [f"lost:     {lost['route']}: {lost['why']}" for lost in answer["lost"]]
    return "\n".join(lines)


def _identity_lines(answer: dict) -> list[str]:
    lines = []
    if answer["identity"]:
        lines.append(f"identity: {answer['identity']}: " + (
            "linked; its direct chats on every linked platform are this one session" if answer["identity_applies"]
            else "linked, but a link joins direct chats only: this group's session is its own"))
    if answer["memory"] != "off":
        lines.append(f"memory:   {answer['memory']}; scope {answer['memory_scope'] or '(none: the source lacks its id)'}")
    return lines
