"""actors/profiles/routes.py: the route table, choosing (most specific wins), and its validation."""
from __future__ import annotations

import pytest

from actors.messages import Source
from actors.profiles.routes import (DEFAULT_ROUTE, RouteSource, choose_route, effective_respond, validate_routes,
                                    wants_everything)
from common.config import ConfigError

ADAPTERS = {"tg": {"type": "telegram", "profile": "default"}, "dc": {"type": "discord", "profile": "dc-default"},
            "tg2": {"type": "telegram", "profile": "default"}}
PROFILES = {"default": None, "support": None, "vip": None, "topic": None, "guild": None, "night": None}

TABLE = [
    {"name": "telegram-wide", "platform": "telegram", "profile": "night"},
    {"name": "tg-adapter", "adapter": "tg", "profile": "support"},
    {"name": "tg-user", "adapter": "tg", "user": 9, "profile": "vip"},
    {"name": "chat", "chat": "-100", "profile": "support", "respond": "all"},
    {"name": "chat-user", "chat": "-100", "user": "9", "profile": "vip"},
    {"name": "topic", "chat": "-100", "thread": "7", "profile": "topic", "per_user_in_groups": True},
    {"name": "guild", "adapter": "dc", "community": "555", "profile": "guild"},
    {"name": "catch-all", "profile": "default"},
]


def routes(table=TABLE):
    return validate_routes({"routes": table}, ADAPTERS, PROFILES)


def src(adapter="tg", chat="1", user=None, thread=None, community=None, chat_type="group"):
    return RouteSource(adapter=adapter, platform=ADAPTERS[adapter]["type"], chat=chat, user=user, thread=thread,
                       community=community, chat_type=chat_type)


@pytest.mark.parametrize("source, expected", [
    (src(chat="-100", thread="7", user="9"), "topic"),            # thread beats chat, even chat + user
    (src(chat="-100", thread="8", user="9"), "chat-user"),        # another thread: the chat routes, user refines
    (src(chat="-100", user="1"), "chat"),
    (src(adapter="tg2", chat="-100"), "chat"),                    # a chat route names no adapter: any adapter's
    (src(chat="2", user="9"), "tg-user"),                         # adapter + user beats adapter alone
    (src(chat="2", user="1"), "tg-adapter"),                      # adapter beats platform
    (src(adapter="tg2", chat="2"), "telegram-wide"),
    (src(adapter="dc", chat="3", community="555"), "guild"),      # community beats adapter
    (src(adapter="dc", chat="3", community="556"), "catch-all"),
    (src(adapter="dc", chat="-100", community="555"), "chat"),    # chat beats community
], ids=["thread", "chat-user", "chat", "chat-any-adapter", "adapter-user", "adapter", "platform", "community",
        "catch-all", "chat-over-community"])
def test_most_specific_route_wins(source, expected):
    route, why = choose_route(routes(), source)
    assert route.name == expected, why.lines()
    lost = dict(why.lost)
    assert expected not in lost and len(lost) == len(TABLE) - 1
    for field, value in why.matched:
        assert str(getattr(source, field)) == value


def test_why_says_which_field_failed_and_which_route_was_more_specific():
    route, why = choose_route(routes(), src(chat="-100", thread="7", user="9"))
    lost = dict(why.lost)
    assert lost["guild"] == "community=555 but the source has community=(none)"
    assert lost["chat-user"] == "matches too, but topic is more specific (it names thread)"
    assert lost["tg-adapter"].startswith("matches too")
    assert dict(why.matched) == {"chat": "-100", "thread": "7"}


def test_no_route_is_the_adapter_default():
    route, why = choose_route([], src())
    assert route is DEFAULT_ROUTE and route.profile == "" and why.lost == ()


def test_route_source_of_a_message_source():
    source = Source("dc", "42", "thread", thread_id="43", user_id="7", profile="x", community="555")
    seen = RouteSource.of(source, "discord")
    assert (seen.adapter, seen.platform, seen.chat, seen.thread, seen.user, seen.community) == (
        "dc", "discord", "42", "43", "7", "555")


@pytest.mark.parametrize("table, key, reason", [
    ([{"chat": "1"}, {"chat": 1, "profile": "vip"}], "[[routes]] routes[2]", "a tie"),
    ([{}, {"name": "x"}], "[[routes]] x", "a tie"),
    ([{"adapter": "nope"}], "[[routes]] routes[1] adapter", "no adapter 'nope'"),
    ([{"platform": "slack"}], "[[routes]] routes[1] platform", "no configured adapter is of type 'slack'"),
    ([{"thread": "3"}], "[[routes]] routes[1] thread", "give chat too"),
    ([{"chat": "1", "profile": "ghost"}], "[[routes]] routes[1] profile", "no profile 'ghost'"),
    ([{"chat": "1", "respond": "some"}], "[[routes]] routes[1] respond", "must be one of"),
    ([{"chat": True}], "[[routes]] routes[1] chat", "expected an id"),
    ([{"chat": "1", "colour": "red"}], "[[routes]] routes[1] colour", "unknown key"),
    ([{"chat": "1", "per_user_in_groups": "yes"}], "[[routes]] routes[1] per_user_in_groups", "true or false"),
], ids=["tie", "two-catch-alls", "adapter", "platform", "thread-alone", "profile", "respond", "id-type",
        "unknown-key", "per-user-type"])
def test_bad_tables_are_refused_naming_the_key(table, key, reason):
    with pytest.raises(ConfigError) as caught:
        validate_routes({"routes": table}, ADAPTERS, PROFILES, "gw.toml")
    assert caught.value.key == key and reason in caught.value.reason and caught.value.file == "gw.toml"


def test_an_adapters_profile_is_a_known_profile():
    assert validate_routes({"routes": [{"chat": "1", "profile": "dc-default"}]}, ADAPTERS, PROFILES)[0].profile == \
        "dc-default"


def test_respond_falls_back_to_the_adapters_require_mention():
    plain = routes([{"chat": "1"}])[0]
    assert effective_respond(plain, {}) == "addressed"
    assert effective_respond(plain, {"require_mention": False}) == "all"
    assert effective_respond(routes([{"chat": "1", "respond": "addressed"}])[0], {"require_mention": False}) == \
        "addressed"


def test_wants_everything_only_for_routes_that_can_reach_the_adapter():
    table = routes([{"adapter": "tg", "chat": "1", "respond": "all"}])
    assert wants_everything(table, "tg", "telegram") and not wants_everything(table, "dc", "discord")
    assert not wants_everything(routes([{"adapter": "tg"}]), "tg", "telegram")
