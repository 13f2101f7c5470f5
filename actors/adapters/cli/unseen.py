"""What the bot showed a terminal user while no terminal of theirs was known: kept, then shown when one attaches.

The adapter learns where a user's terminal is from the user's lines (CliSay). A new life of the adapter (its
supervisor restarted it, or the daemon came back from a kill -9) knows no terminal until one speaks, while the
replies it recovers (the ledger's, G3) are shown at once: without this they would go nowhere, and the user would
never see the answer a restart interrupted. Kept per user, each message as it stands now (a send with its latest
text; an edit of a message sent earlier; a delete of one shown before), in the order first shown. Bounded: the
latest MAX_MESSAGES messages of each of the MAX_USERS users heard of last. A pure object (actor thread only); it
is memory, and goes with the process, as the terminals' addresses do.
"""
from __future__ import annotations

from collections import OrderedDict

from actors.messages import CliShow

MAX_USERS = 64
MAX_MESSAGES = 100


class UnseenShows:
    def __init__(self, max_users: int = MAX_USERS, max_messages: int = MAX_MESSAGES):
        self.max_users, self.max_messages = max_users, max_messages
        self._users: OrderedDict[str, OrderedDict[str, CliShow]] = OrderedDict()

    def keep(self, user: str, show: CliShow) -> None:
        if show.action not in ("send", "edit", "delete"):
            return      # a typing hint is stale by the time a terminal could show it
        messages = self._users.setdefault(user, OrderedDict())
        self._users.move_to_end(user)
        while len(self._users) > self.max_users:
            self._users.popitem(last=False)
        earlier = messages.get(show.message_id)
        if earlier is not None and earlier.action == "send":
            if show.action == "delete":      # never shown: nothing to take back
                del messages[show.message_id]
                return
            show = CliShow("send", show.message_id, show.text)     # the send with its latest text
        messages[show.message_id] = show
        while len(messages) > self.max_messages:
            messages.popitem(last=False)

    def take(self, user: str) -> list[CliShow]:
        """What the user's terminal has not seen, oldest first; forgotten here."""
        return list(self._users.pop(user, {}).values())
