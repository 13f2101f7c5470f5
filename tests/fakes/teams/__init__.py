"""A fake Microsoft Teams for tests, in the Bot Framework's wire format (from learn.microsoft.com: Azure Bot Service
"Authentication with the Bot Connector API", "Send and receive messages with the Bot Connector API", "API reference
for the Bot Connector" (Conversations: send to conversation, reply to activity, update activity, delete activity),
the Activity schema, Teams "Optimize your bot with rate limiting", and the Microsoft identity platform's OAuth 2.0
client credentials flow).

In process::

    with FakeTeams(webhook_url="http://127.0.0.1:3978/api/messages") as teams:
        delivery = teams.inject_text(teams.personal("alice"), "hello")     # signed, POSTed
        teams.wait_for(lambda: teams.activities(teams.personal("alice")), timeout=30)

Wire format implemented:

* Activities: one ``POST`` of the activity (``type``, ``id``, ``timestamp``, ``serviceUrl`` = the fake's base URL,
  ``channelId`` ``msteams``, ``from``, ``conversation`` with ``conversationType`` personal / groupChat / channel and
  ``tenantId``, ``recipient`` the bot ``28:<app id>``, ``text`` with ``<at>Gateway</at>`` and a ``mention`` entity in
  a group or channel, ``channelData``, ``replyToId`` for a reply in a channel thread) with ``Authorization: Bearer``
  a JWT the fake signs (RS256; ``iss`` ``https://api.botframework.com``, ``aud`` the app id, ``serviceurl`` (so
  spelt in the Connector's tokens), ``nbf``, ``exp``). A channel post's conversation id ends in
  ``;messageid=<the thread's first post>``. Unanswered (no 2xx) deliveries are sent again ``retries`` times.
* ``GET /v1/.well-known/openidconfiguration`` (its ``jwks_uri``) and ``GET /v1/.well-known/keys`` (a JWKS whose keys
  carry ``endorsements`` ``["msteams"]``, with ``Cache-Control: max-age``); ``rotate_keys()`` signs with a new key
  and publishes only it.
* ``POST /{tenant}/oauth2/v2.0/token``: the client-credentials grant; the app id, its secret and the scope
  ``https://api.botframework.com/.default`` checked (``AADSTS`` errors otherwise). Tokens expire after
  ``token_lifetime``; every Connector call needs a live one, else 401.
* ``POST /v3/conversations/{id}/activities`` (send) and ``POST .../activities/{activityId}`` (reply) -> 201
  ``{"id"}``; ``PUT .../activities/{activityId}`` (update) -> ``{"id"}``; ``DELETE`` of the same; a ``typing``
  activity is taken and shows nothing. Text 1 to ``text_limit`` characters (413 ``MessageSizeTooBig`` past it); 404
  for a conversation or activity the bot does not have.
* Rate limits: Teams' per bot per conversation windows (7 operations in 1 s, 8 in 2 s, 60 in 30 s, 1,800 in an
  hour, ``thread_windows``); one more is 429 with ``Retry-After`` and counts as a ``pace_violation``. A scripted
  ``flood`` is a 429 that bans the conversation for ``flood_retry_after``: a write inside it is refused again and
  counts as a ``retry_after_violation``.

* Adaptive Cards: a send or update may carry ``attachments`` of content type
  ``application/vnd.microsoft.card.adaptive`` (400 for any other); an update replaces them (none: the card is gone).
  ``press_button`` is a user pressing an ``Action.Submit``: a signed message activity with no text, ``value`` the
  action's ``data`` and ``replyToId`` the card's activity.
* Inline images: an attachment of type image/png, image/jpeg or image/gif whose ``contentUrl`` is a base64 ``data:``
  URI of that type (400 otherwise); a message with attachments may have no text; a message's JSON past 28 KB is 413.

* A user's pasted image (``inject_file``): an attachment of its type with ``contentUrl``
  ``<serviceUrl>v3/attachments/<id>/views/original``, served by ``GET`` to a bearer of a live bot token (401
  otherwise, 404 for an unknown one), beside a ``text/html`` attachment.

* Files beyond inline images (files.py): file consent cards (personal chats only) and file info cards on a bot's
  message; ``answer_consent`` (a user's Allow or Decline: a signed ``fileConsent/invoke``), the OneDrive upload
  session it names (``PUT /upload/{session}``, ranges checked), ``inject_shared_file`` (a
  ``file.download.info`` attachment, its ``downloadUrl`` served without a token).

Left out: Graph (SharePoint files in channels), invokes other than file consent (``Action.Execute``),
conversation members and roster calls, creating conversations, sovereign clouds, the Emulator's tokens.

Control API (JSON): ``GET /_control/stats``, ``POST /_control/inject {"user", "text"}`` (a personal chat),
``POST /_control/webhook_url {"url"}``.
"""
from tests.fakes.teams.keys import activity_token
from tests.fakes.teams.server import DEFAULT_APP_ID, DEFAULT_LIMITS, DEFAULT_PASSWORD, FakeTeams

__all__ = ["FakeTeams", "DEFAULT_APP_ID", "DEFAULT_PASSWORD", "DEFAULT_LIMITS", "activity_token"]
