"""Which conversation an inbound message belongs to: its route, the profile that answers it and its session key.

Owned by an adapter's Intake (actors/adapters/intake.py), read on the adapter's loop thread and replaced on its actor
thread by a reload (``take_config``), which swaps whole values: the loop reads each once per event, old or new,
never a mix. The web chat asks the same question for a visitor's history and files (``keyed``), so a page shows
the conversation its messages went to. Pure apart from that state; nothing here survives kill -9 (it is read from
the configuration again at start).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from actors.messages import Source
from actors.profiles.identities import Identities, load_identities
from actors.profiles.routes import adapter_route, load_routes
from storage import session_key


class Addressing:
    """State: the [[routes]] and [[identities]] of the adapter's configuration, validated at load already (so a
    bad table never gets this far) and read at first use. Collaborator: the adapter (its ``name``, ``profile``,
    ``settings``, ``config`` and ``per_user_in_groups``)."""

    def __init__(self, platform: Any):
        self.platform = platform
        self._routes: Optional[list] = None
        self._identities: Optional[Identities] = None

    @property
    def routes(self) -> list:
        if self._routes is None:
            self._routes = load_routes(self.platform.config)
        return self._routes

    @property
    def identities(self) -> Identities:
        if self._identities is None:
            self._identities = load_identities(self.platform.config)
        return self._identities

    def route(self, source: Source):
        """The most specific [[routes]] entry for ``source`` (platform = this adapter), or the default one."""
        return adapter_route(self.routes, source, self.platform.settings.get("type") or self.platform.name)

    def keyed(self, source: Source, chosen: str, route=None) -> tuple[Source, str]:
        """``source`` with the profile it is answered by, and its session key. A profile the sender picked
        (``chosen``: an HTTP API request, by its model) stands; else the route's, else the adapter's. The profile is
        part of the key, so two profiles in one chat are two sessions with two transcripts; a linked identity's
        direct chats are one, whichever platform (profiles/identities.py). ValueError for a source no key can be
        made of."""
        route = self.route(source) if route is None else route
        profile = chosen if chosen != self.platform.profile else route.profile or chosen
        source = dataclasses.replace(source, profile=profile)
        per_user = (route.per_user_in_groups if route.per_user_in_groups is not None
                    else self.platform.per_user_in_groups)
        return source, session_key(source, per_user, self.identities.of(source.platform, source.user_id))

    def take_config(self, config: dict) -> None:
        """A reload: the routes and identities apply from the next event on."""
        self._routes, self._identities = load_routes(config), load_identities(config)
