"""Linked identities: one person known by several platform user ids (pure; docs/profiles.md).

    [[identities]]
    name = "ada"                                   # how keys, memory scopes and `routes explain` name the person
    members = ["telegram:123", "discord:456"]      # PLATFORM:USER_ID, PLATFORM an adapter's name or type

By default every platform user is their own person: a Telegram user and a Discord user are two conversations even
when they are the same human. A linked identity makes the direct chats of its members one session per profile (the
intake gives them one key: storage/keys.py), so a conversation started on one platform continues on the other; each
reply still goes to the platform the message came from. Group chats are not changed by a link: a group is the
group's conversation (or, with ``per_user_in_groups``, each platform user's own in that group), since the others
in it see only that platform. A profile's user memory (``memory = "user"``) follows the person everywhere.

``PLATFORM`` is an adapter's name (``[adapters.NAME]``: that adapter's user) or an adapter type (``telegram``:
the user on every adapter of that type, for platforms whose user ids are the same across bots). Refused at load
(exit 78): a member whose platform names no configured adapter nor type, a user covered by two identities (also
through a name and a type that reach the same adapter), a bad or repeated name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from common.config import ConfigError, unknown_name

IDENTITY_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
KEYS = ("name", "members")
MAX_IDENTITIES = 10_000
MAX_MEMBERS = 100


@dataclass(frozen=True)
class Identities:
    """The validated links: ``by_user`` maps (adapter name, user id) to the identity's name."""
    by_user: Mapping[tuple, str] = field(default_factory=dict)
    members: Mapping[str, tuple] = field(default_factory=dict)     # name -> the members as written

    def of(self, adapter: str, user_id: Any) -> Optional[str]:
        if user_id is None or str(user_id) == "":
            return None
        return self.by_user.get((adapter, str(user_id)))


NO_IDENTITIES = Identities()


def validate_identities(config: Mapping, adapters: Mapping[str, Mapping],
                        file: str = "(configuration)") -> Identities:
    """``[[identities]]`` checked against the validated adapter tables (``adapters``: {name: args})."""
    entries = config.get("identities") or []
    if len(entries) > MAX_IDENTITIES:
        raise ConfigError(file, "[[identities]]", f"at most {MAX_IDENTITIES} identities")
    by_type: dict[str, list] = {}
    for name, args in adapters.items():
        by_type.setdefault(str(args.get("type", name)), []).append(name)
    by_user: dict[tuple, str] = {}
    members: dict[str, tuple] = {}
    for index, entry in enumerate(entries):
        where = f"[[identities]] #{index + 1}"
        if not isinstance(entry, Mapping):
            raise ConfigError(file, where, "must be a table")
        for key in entry:
            if key not in KEYS:
                raise ConfigError(file, f"{where} {key}", unknown_name("key", key, KEYS))
        name = entry.get("name")
        if not isinstance(name, str) or not IDENTITY_NAME.fullmatch(name):
            raise ConfigError(file, f"{where} name", f"expected 1-64 of a-z, 0-9, '_' or '-', got {name!r}")
        where = f"[[identities]] {name}"
        if name in members:
            raise ConfigError(file, f"{where} name", "two identities have this name")
        listed = entry.get("members")
        if not isinstance(listed, list) or not listed:
            raise ConfigError(file, f"{where} members", 'expected a list such as ["telegram:123", "discord:456"]')
        if len(listed) > MAX_MEMBERS:
            raise ConfigError(file, f"{where} members", f"at most {MAX_MEMBERS} members")
        for member in listed:
            for key in _covered(file, f"{where} members", member, adapters, by_type):
                if key in by_user:
                    other = by_user[key]
                    said = "twice" if other == name else f"also by identity {other!r}"
                    raise ConfigError(file, f"{where} members", f"{member!r}: user {key[1]} of adapter {key[0]} is "
                                                                f"linked {said}; a user is one person")
                by_user[key] = name
        members[name] = tuple(listed)
    return Identities(by_user, members)


def _covered(file: str, where: str, member: Any, adapters: Mapping, by_type: Mapping) -> list[tuple]:
    """The (adapter, user id) pairs a member names: one adapter's user, or the user on every adapter of a type."""
    if not isinstance(member, str) or ":" not in member:
        raise ConfigError(file, where, f"expected PLATFORM:USER_ID (e.g. 'telegram:123'), got {member!r}")
    platform, _, user = member.partition(":")
    platform, user = platform.strip(), user.strip()
    if not user:
        raise ConfigError(file, where, f"{member!r}: no user id after {platform!r}")
    if platform in adapters:
        return [(platform, user)]
    if platform in by_type:
        return [(adapter, user) for adapter in by_type[platform]]
    raise ConfigError(file, where, f"{member!r}: unknown platform {platform!r} (configured adapters: "
                                   f"{', '.join(sorted(adapters))}; types: {', '.join(sorted(by_type))})")


def load_identities(config: Mapping) -> Identities:
    """The validated identities of a loaded configuration (its adapters validated on the way)."""
    if not config.get("identities"):
        return NO_IDENTITIES
    # a cycle: the registry imports actors/profiles (tests/project/test_layering.py, KNOWN_CYCLES)
    from actors.adapters import registry
    return validate_identities(config, registry.validate_all(config), registry.config_file(config))
