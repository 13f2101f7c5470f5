"""Finding a lost copy: a send whose answer never came back (the process died, the connection broke after the
request left) may or may not have created a message, and without its id the gateway cannot edit it. On a platform
that numbers a chat's messages in sequence and lets the bot edit only its own (Telegram private chats), the ids
after the last one known before the send tell which it was, by trying to edit each one to the text the part should
show:

    the edit succeeds, or "not modified"       a message of the bot's: the lost copy, which now shows the text
    "message can't be edited"                  someone else's (the user wrote meanwhile): look at the next id
    "message to edit not found"                nothing there: deleted (below the highest id known), or the end
                                               of the chat (above it: after ``END_MISSES`` of those in a row, the
                                               send never landed)

Ids the gateway recorded as parts of replies are skipped: they are other copies of the bot's, never the lost one.
Two lost copies in one chat (two sends cut by the same crash, in two replies) may be found the other way round;
each is then edited to its own reply's text, so the chat still shows each reply once.

``search`` is the pure walk over the ids; the platform's adapter supplies the probe (``edit``) and the facts.
"""
from __future__ import annotations

from typing import Awaitable, Callable, Iterable, Optional

from actors.adapters.errors import PermanentError

OURS, OTHERS, NOTHING = "ours", "others", "nothing"
MAX_PROBES = 8        # edits tried before the search gives up (the reply is then marked as re-sent)
END_MISSES = 2        # "not found" in a row above every known id: the end of the chat


class Unresolved(PermanentError):
    """The search could not tell (or the platform has no way to): the sender marks the reply as re-sent. Permanent:
    the same search would not tell either."""


def search_floor(reply_to: Optional[str], earlier_parts: Iterable[str]) -> Optional[int]:
    """The highest id known to be older than the lost copy: the message the reply answers, and the reply's parts
    before the one that was lost (they were sent, and their ids came back, before it left). None if none is a
    number."""
    known = [int(i) for i in [reply_to, *earlier_parts] if i is not None and str(i).isdigit()]
    return max(known) if known else None


async def search(probe: Callable[[int], Awaitable[str]], floor: int, ours: set[str],
                 highest_known: int) -> Optional[int]:
    """The id of the lost copy (``probe`` has just made it show the wanted text), or None if the send never
    landed. ``probe(id)`` returns OURS, OTHERS or NOTHING (see the module docstring) and raises on anything else
    (a 429, a network error: the caller retries the whole search, which is idempotent). Raises Unresolved after
    ``MAX_PROBES`` probes without an answer."""
    probes, misses, message_id = 0, 0, floor
    while probes < MAX_PROBES:
        message_id += 1
        if str(message_id) in ours:
            continue
        probes += 1
        outcome = await probe(message_id)
        if outcome == OURS:
            return message_id
        if outcome == NOTHING and message_id > highest_known:
            misses += 1
            if misses >= END_MISSES:
                return None
        else:
            misses = 0
    raise Unresolved(f"no answer within {MAX_PROBES} ids after {floor}")
