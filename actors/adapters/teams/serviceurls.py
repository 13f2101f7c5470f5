"""Where each conversation's Connector is: the ``serviceUrl`` of its last activity (pure; no network).

An activity's ``serviceUrl`` is taken only from a request whose token verified and signed that very URL (auth.py),
and only if it is https or starts with one of the table's ``allowed_service_urls`` (a local fake): the bot's access
token goes to that host on every answer, so no unauthenticated sender may name it, and a chat id handed to the
adapter from elsewhere never picks a host either. A conversation no verified activity named one for is answered at
the table's ``service_url`` (Teams' global endpoint).

A conversation is its id without a channel thread's ``;messageid=``: every thread of a channel is answered at the
channel's Connector.

What survives kill -9: the adapter commits ``snapshot()`` as its offset with the rows of the activity that taught it
(one transaction), so a reply after a restart goes where the conversation's last stored message came from. It is
bounded to ``MAX_REMEMBERED`` conversations, the least recently taught forgotten first (they fall back to
``service_url``, which serves every tenant).
"""
from __future__ import annotations

import collections
from typing import Any, Iterable, Optional
from urllib.parse import urlsplit

MAX_REMEMBERED = 256
MAX_URL_CHARS = 512


class ServiceUrlRefused(Exception):
    """A serviceUrl the bot's token may not be sent to."""


def checked(url: Any, allowed: Iterable[str]) -> str:
    """``url`` as the Connector base of a conversation, or ServiceUrlRefused saying why not."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise ServiceUrlRefused("no serviceUrl")
    try:
        part = urlsplit(url)
    except ValueError:
        raise ServiceUrlRefused("the serviceUrl is no URL") from None
    if part.username is not None or part.password is not None or part.query or part.fragment or not part.hostname:
        raise ServiceUrlRefused(f"the serviceUrl {url[:80]!r} is no plain base URL")
    if part.scheme == "https" or any(url.startswith(prefix) for prefix in allowed):
        return url if url.endswith("/") else url + "/"
    raise ServiceUrlRefused(f"the serviceUrl {url[:80]!r} is neither https nor in allowed_service_urls")


def _base(conversation: str) -> str:
    return conversation.split(";", 1)[0]


class ServiceUrls:
    def __init__(self, default: str, allowed: Iterable[str], remembered: Optional[dict] = None):
        self.allowed = tuple(allowed)
        self.default = checked(default, self.allowed)
        self._by_conversation: collections.OrderedDict = collections.OrderedDict()
        for conversation, url in (remembered or {}).items():
            try:
                self._by_conversation[_base(str(conversation))] = checked(url, self.allowed)
            except ServiceUrlRefused:
                continue   # the table's allow-list changed since: such a conversation goes to the default

    def checked_url(self, url: Any) -> str:
        return checked(url, self.allowed)

    def learn(self, conversation: str, url: str) -> bool:
        """Take a verified activity's serviceUrl (ServiceUrlRefused if it may not be used); True if it is news."""
        url, conversation = checked(url, self.allowed), _base(conversation)
        if self._by_conversation.get(conversation) == url:
            return False
        self._by_conversation.pop(conversation, None)
        self._by_conversation[conversation] = url
        while len(self._by_conversation) > MAX_REMEMBERED:
            self._by_conversation.popitem(last=False)
        return True

    def for_conversation(self, conversation: str) -> str:
        return self._by_conversation.get(_base(conversation), self.default)

    def snapshot(self) -> dict:
        return {"service_urls": dict(self._by_conversation)}
