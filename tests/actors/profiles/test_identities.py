"""actors/profiles/identities.py: [[identities]] validated against the adapters; a linked user's direct chats have
one session key across platforms (storage/keys.py), groups keep theirs; `routes explain` says so."""
from __future__ import annotations

import pytest

from actors.adapters import registry
from actors.messages import Source
from actors.profiles.explain import explain, parse_source, render
from actors.profiles.identities import load_identities, validate_identities
from actors.profiles.profiles import validate_profiles
from actors.profiles.routes import validate_routes
from common.config import ConfigError, validate
from storage import session_key

ADAPTERS = {"tg": {"type": "telegram", "token": "123:abc"}, "tg2": {"type": "telegram", "token": "456:def"},
            "fake": {"type": "fake", "base_url": "http://127.0.0.1:1"}}


def config(identities, **more):
    return validate({"adapters": ADAPTERS, "identities": identities, **more}, "gw.toml")


def identities_of(cfg):
    return validate_identities(cfg, registry.validate_all(cfg), "gw.toml")


def test_a_member_names_one_adapter_or_every_adapter_of_a_type():
    linked = identities_of(config([{"name": "ada", "members": ["telegram:1", "fake:ada"]},
                                   {"name": "bo", "members": ["tg2:2"]}]))
    assert (linked.of("tg", 1), linked.of("tg2", "1"), linked.of("fake", "ada")) == ("ada", "ada", "ada")
    assert (linked.of("tg2", "2"), linked.of("tg", "2"), linked.of("fake", None)) == ("bo", None, None)
    assert load_identities(validate({}, "gw.toml")).of("web", "x") is None


@pytest.mark.parametrize("identities, key, reason", [
    ([{"name": "ada", "members": ["signal:+1"]}], "[[identities]] ada members", "unknown platform 'signal'"),
    ([{"name": "ada", "members": ["tg:1"]}, {"name": "bo", "members": ["telegram:1"]}],
     "[[identities]] bo members", "user 1 of adapter tg is linked also by identity 'ada'"),
    ([{"name": "ada", "members": ["fake:1", "fake:1"]}], "[[identities]] ada members", "linked twice"),
    ([{"name": "ada", "members": ["fake"]}], "[[identities]] ada members", "expected PLATFORM:USER_ID"),
    ([{"name": "ada", "members": ["fake:"]}], "[[identities]] ada members", "no user id"),
    ([{"name": "ada", "members": []}], "[[identities]] ada members", "expected a list"),
    ([{"name": "Ada!", "members": ["fake:1"]}], "[[identities]] #1 name", "expected 1-64"),
    ([{"name": "ada", "members": ["fake:1"]}, {"name": "ada", "members": ["fake:2"]}], "[[identities]] ada name",
     "two identities"),
    ([{"name": "ada", "members": ["fake:1"], "profile": "x"}], "[[identities]] #1 profile", "unknown key"),
], ids=["unknown-platform", "two-identities-via-type", "twice", "no-colon", "no-user", "empty", "bad-name",
        "same-name", "unknown-key"])
def test_bad_identities_are_refused_naming_the_key(identities, key, reason):
    with pytest.raises(ConfigError) as caught:
        identities_of(config(identities))
    assert caught.value.key == key and reason in caught.value.reason, caught.value


def test_a_link_gives_direct_chats_one_key_per_profile_and_leaves_groups_alone():
    on_tg = Source("tg", "1", "dm", None, "1", profile="p")
    on_fake = Source("fake", "dm-ada", "dm", None, "ada", profile="p")
    assert session_key(on_tg, identity="ada") == session_key(on_fake, identity="ada")
    assert session_key(on_tg, identity="ada").startswith("p.linked.dm.person-")
    assert session_key(on_tg, identity="ada") != session_key(on_tg)   # unlinked: its own
    assert session_key(Source("tg", "1", "dm", None, "1", profile="q"), identity="ada") != session_key(
        on_tg, identity="ada")                                          # another profile: another session
    group = Source("tg", "-100", "group", None, "1", profile="p")
    assert session_key(group, True, identity="ada") == session_key(group, True)


def test_routes_explain_says_when_a_link_applies():
    cfg = config([{"name": "ada", "members": ["telegram:1", "fake:ada"]}],
                 profiles={"p": {"memory": "user"}}, routes=[{"adapter": "fake", "profile": "p"}])
    adapters = registry.validate_all(cfg)
    profiles = validate_profiles(cfg)
    routes = validate_routes(cfg, adapters, profiles)
    dm = explain(cfg, routes, profiles, adapters, parse_source("fake:chat=dm-ada,user=ada", adapters))
    assert (dm["identity"], dm["identity_applies"], dm["memory_scope"]) == ("ada", True, "identity:ada")
    assert dm["session_key"] == session_key(Source("fake", "x", "dm", None, "ada", profile="p"), identity="ada")
    assert "identity: ada: linked; its direct chats on every linked platform are this one session" in render(dm)
    group = explain(cfg, routes, profiles, adapters, parse_source("fake:chat=room,user=ada,type=group", adapters))
    assert group["identity_applies"] is False and "a link joins direct chats only" in render(group)
    other = explain(cfg, routes, profiles, adapters, parse_source("tg:chat=5,user=5", adapters))
    assert other["identity"] is None and "identity:" not in render(other)
