"""Routes: which profile an inbound source runs under, and how the gateway behaves in its group chats.

    [[routes]]
    name = "support-guild"       # optional: how `routes explain` and errors call it (default: "routes[N]")
    adapter = "discord"          # match fields, all optional; every one given must equal the source's
    community = "81234"          #   (see FIELDS); ids are compared as text, so 123 and "123" are the same
    profile = "support"          # the profile (default: the adapter's own ``profile`` key)
    respond = "all"              # in groups: "addressed" (mentioned, replied to, a /command) or "all"
    per_user_in_groups = true    # in groups: one session per user instead of one per chat

Choosing (``choose_route``, pure): the routes whose every given field matches the source; among them the most
specific, which is compared field by field in the order of ``FIELDS`` (a route naming a thread beats one naming a
chat, whatever else either names; then chat, community, adapter, platform; the user field decides only between
routes equal on all the others). Two routes naming the same fields can both match only if they name the same
values: that is refused at load (``validate_routes``), so the choice is never a tie. No route matching: the
adapter's default (its ``profile`` key, the adapter's own group behaviour). A route naming no field at all is a
configured catch-all, beaten by every other route that matches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from actors.profiles.profiles import PROFILE_NAME, validate_profiles
from common.config import ConfigError, did_you_mean, gathering, raise_gathered, unknown_name

# Specificity order, most specific first: the route field and the Source attribute it is compared with.
FIELDS = ("thread", "chat", "community", "adapter", "platform", "user")
RESPOND = ("addressed", "all")
SETTINGS = ("name", "profile", "respond", "per_user_in_groups")
MAX_ROUTES = 10_000


@dataclass(frozen=True)
class Route:
    name: str
    match: tuple = ()                       # ((field, value), ...) in FIELDS order, values as text
    profile: str = ""                       # "": the adapter's own profile
    respond: str = ""                       # "": the adapter's own behaviour
    per_user_in_groups: Optional[bool] = None   # None: [sessions] per_user_in_groups
    index: int = -1                         # position in [[routes]]; -1: the adapter's default

    @property
    def fields(self) -> dict:
        return dict(self.match)

    def specificity(self) -> tuple:
        given = self.fields
        return tuple(name in given for name in FIELDS)


DEFAULT_ROUTE = Route(name="default (no route matched: the adapter's own profile)")


@dataclass(frozen=True)
class RouteSource:
    """What a route is matched against: a ``Source`` and the type of the adapter it came through."""
    adapter: str
    platform: str = ""
    community: Optional[str] = None
    chat: Optional[str] = None
    thread: Optional[str] = None
    user: Optional[str] = None
    chat_type: str = "dm"

    @classmethod
    def of(cls, source: Any, platform_type: str = "") -> "RouteSource":
        """From an ``actors.messages.Source`` (its ``platform`` is the adapter's name)."""
        def text(value):
            return None if value is None else str(value)
        return cls(adapter=source.platform, platform=platform_type or source.platform,
                   community=text(getattr(source, "community", None)), chat=text(source.chat_id),
                   thread=text(source.thread_id), user=text(source.user_id), chat_type=source.chat_type or "dm")


@dataclass(frozen=True)
class Why:
    """Why a route was chosen: the fields it matched, and every other route with the reason it lost."""
    matched: tuple                  # ((field, value), ...) of the chosen route
    lost: tuple                     # ((route name, reason), ...) in [[routes]] order

    def lines(self) -> list[str]:
        shown = ", ".join(f"{k}={v}" for k, v in self.matched) or "no field (matches every source)"
        return [f"matched: {shown}"] + [f"lost: {name}: {reason}" for name, reason in self.lost]


def mismatch(route: Route, source: RouteSource) -> Optional[str]:
    """None when every field the route gives equals the source's; else the first that does not, as a reason."""
    for name, wanted in route.match:
        got = getattr(source, name)
        if got != wanted:
            return f"{name}={wanted} but the source has {name}={'(none)' if got is None else got}"
    return None


def choose_route(routes: list, source: RouteSource) -> tuple[Route, Why]:
    """The route ``source`` takes (``DEFAULT_ROUTE`` when none matches) and why. ``routes``: validated."""
    matching = [r for r in routes if mismatch(r, source) is None]
    chosen = max(matching, key=lambda r: (r.specificity(), -r.index), default=DEFAULT_ROUTE)
    lost = []
    for route in routes:
        if route is chosen:
            continue
        reason = mismatch(route, source)
        if reason is None:
            reason = f"matches too, but {chosen.name} is more specific ({_edge(chosen, route)})"
        lost.append((route.name, reason))
    return chosen, Why(chosen.match, tuple(lost))


def _edge(winner: Route, loser: Route) -> str:
    """The first field, in specificity order, that the winner names and the loser does not (the loser cannot name
    one the winner does not before that: it would have won)."""
    for name, won, given in zip(FIELDS, winner.specificity(), loser.specificity()):
        if won and not given:
            return f"it names {name}"
    return "it comes first"


def effective_respond(route: Route, adapter_settings: Mapping) -> str:
    """"addressed" or "all" for a group chat: the route's, else the adapter's ``require_mention`` where it has
    one, else "addressed"."""
    if route.respond:
        return route.respond
    return "all" if adapter_settings.get("require_mention") is False else "addressed"


def wants_everything(routes: list, adapter: str, platform_type: str) -> bool:
    """Whether some route that can match this adapter's sources answers every group message: its platform-side
    filter (``require_mention``) must then let un-addressed messages through, for the route to decide."""
    for route in routes:
        given = route.fields
        if route.respond == "all" and given.get("adapter", adapter) == adapter and \
                given.get("platform", platform_type) == platform_type:
            return True
    return False


def adapter_route(routes: list, source: Any, platform_type: str) -> Route:
    return choose_route(routes, RouteSource.of(source, platform_type))[0]


# ------------------------------------------------------------------------------------------------- validation

def validate_routes(config: Mapping, adapters: Mapping[str, Mapping], profiles: Mapping,
                    file: str = "(configuration)") -> list[Route]:
    """``[[routes]]`` checked: [Route]. ``adapters``: the validated adapter tables by name (a route may name only
    those, and their types); ``profiles``: the validated profiles (a route may name those, and any profile an
    adapter names). Refuses two routes that name the same fields with the same values (a tie)."""
    entries = config.get("routes") or []
    if len(entries) > MAX_ROUTES:
        raise ConfigError(file, "[[routes]]", f"at most {MAX_ROUTES} routes")
    types = {args.get("type", name) for name, args in adapters.items()}
    named_profiles = set(profiles) | {str(args.get("profile") or "default") for args in adapters.values()}
    routes: list[Route] = []
    seen: dict[tuple, Route] = {}
    errors: list[ConfigError] = []
    for index, entry in enumerate(entries):
        with gathering(errors):       # every bad route is reported, not only the first
            route = _route(file, index, entry, adapters, types, named_profiles)
            if route.match in seen:
                other = seen[route.match]
                raise ConfigError(file, f"[[routes]] {route.name}",
                                  f"matches exactly what {other.name} matches ({_shown(route.match)}): a tie; "
                                  "give one of them another field, or remove one")
            seen[route.match] = route
            routes.append(route)
    raise_gathered(errors)
    return routes


def _shown(match: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in match) or "every source"


def _route(file: str, index: int, entry: Any, adapters: Mapping, types: set, named_profiles: set) -> Route:
    name = entry.get("name") if isinstance(entry, Mapping) else None
    label = name if isinstance(name, str) and name else f"routes[{index + 1}]"
    where = f"[[routes]] {label}"
    if not isinstance(entry, Mapping):
        raise ConfigError(file, where, "must be a table")
    raise_gathered([ConfigError(file, f"{where} {key}", unknown_name("key", key, FIELDS + SETTINGS))
                    for key in entry if key not in FIELDS and key not in SETTINGS])
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError(file, f"{where} name", f"expected a non-empty string, got {name!r}")
    match = []
    for field in FIELDS:
        if field not in entry:
            continue
        value = entry[field]
        if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
            raise ConfigError(file, f"{where} {field}", f"expected an id (a string or an integer), got {value!r}")
        match.append((field, str(value)))
    given = dict(match)
    if "adapter" in given and given["adapter"] not in adapters:
        raise ConfigError(file, f"{where} adapter", f"no adapter {given['adapter']!r} is configured"
                                                   f"{did_you_mean(given['adapter'], adapters)} (adapters: "
                                                   f"{', '.join(sorted(adapters))})")
    if "platform" in given and given["platform"] not in types:
        raise ConfigError(file, f"{where} platform", f"no configured adapter is of type {given['platform']!r}"
                                                    f"{did_you_mean(given['platform'], types)} "
                                                    f"(types: {', '.join(sorted(types))})")
    if "thread" in given and "chat" not in given:
        raise ConfigError(file, f"{where} thread", "a thread id is unique only within its chat: give chat too")
    profile = entry.get("profile", "")
    if not isinstance(profile, str) or (profile and not PROFILE_NAME.fullmatch(profile)):
        raise ConfigError(file, f"{where} profile", f"expected a profile name, got {profile!r}")
    if profile and profile not in named_profiles:
        raise ConfigError(file, f"{where} profile", f"no profile {profile!r}{did_you_mean(profile, named_profiles)} "
                                                   f"(declare [profiles.{profile}]; known: "
                                                   f"{', '.join(sorted(named_profiles))})")
    respond = entry.get("respond", "")
    if respond != "" and respond not in RESPOND:
        raise ConfigError(file, f"{where} respond", f"must be one of {', '.join(map(repr, RESPOND))}, got {respond!r}")
    per_user = entry.get("per_user_in_groups")
    if per_user is not None and not isinstance(per_user, bool):
        raise ConfigError(file, f"{where} per_user_in_groups", f"expected true or false, got {per_user!r}")
    return Route(name=label, match=tuple(match), profile=profile, respond=respond, per_user_in_groups=per_user,
                 index=index)


def load_routes(config: Mapping) -> list[Route]:
    """The validated routes of a loaded configuration (adapters and profiles validated on the way)."""
    # upward (profiles -> adapters): the routes name adapters (test_layering.py, KNOWN_UPWARD)
    from actors.adapters import registry
    file = registry.config_file(config)
    # Bad adapter or profile tables do not hide bad routes: the routes are then checked against the names declared.
    errors: list[ConfigError] = []
    adapters = {**registry.IMPLICIT_ADAPTERS, **(config.get("adapters") or registry.DEFAULT_ADAPTERS)}
    profiles = dict(config.get("profiles") or {})
    with gathering(errors):
        adapters = registry.validate_all(config)
    with gathering(errors):
        profiles = validate_profiles(config, file)
    routes: list[Route] = []
    with gathering(errors):
        routes = validate_routes(config, adapters, profiles, file)
    raise_gathered(errors)
    return routes
