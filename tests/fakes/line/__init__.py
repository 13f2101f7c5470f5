"""A fake LINE Messaging API for tests, in LINE's wire format (from developers.line.biz: Messaging API reference,
"Receive messages (webhook)", "Verify webhook signature", "Retry failed API requests", "Handle HTTP status code 429
errors", "Display a loading animation").

In process::

    with FakeLine(webhook_url="http://127.0.0.1:8091/line/webhook") as line:
        handle = line.inject_text(line.user("alice"), "hello")   # signed, POSTed, redelivered until answered 2xx
        line.wait_for(lambda: line.messages(line.user("alice")), timeout=30)

Wire format implemented:

* Webhooks (webhooks.py): ``POST`` of ``{"destination", "events": [...]}`` with ``X-Line-Signature`` (base64
  HMAC-SHA256 of the body, keyed with the channel secret); message events (text, image, audio, file, sticker) and
  postbacks from user, group and room sources, each with ``webhookEventId``, ``timestamp``, ``replyToken``,
  ``deliveryContext.isRedelivery``. A delivery not answered 2xx within ``answer_timeout`` is sent again (webhook
  redelivery on) with ``isRedelivery: true``, ``retries`` times.
* ``Authorization: Bearer`` on every call: another token is 401.
* ``GET /v2/bot/info`` -> ``{"userId", "basicId", "displayName", ...}``.
* ``POST /v2/bot/message/reply`` ``{replyToken, messages}`` -> ``{"sentMessages": [{"id", "quoteToken"}]}``; a
  token unknown, used or older than ``reply_token_ttl`` is 400 ``Invalid reply token``; a retry key on a reply is
  400.
* ``POST /v2/bot/message/push`` ``{to, messages}`` with ``X-Line-Retry-Key`` (a UUID, else 400): a key accepted
  before is 409 ``The retry key is already accepted`` with ``x-line-accepted-request-id`` and the first push's
  ``sentMessages``, and nothing is sent. Past ``push_quota`` pushes (None: no quota) 429 ``You have reached your
  monthly limit.``
* Messages: 1 to 5 objects of type ``text`` (each 1 to 5,000 characters, UTF-16 units), ``image``, ``video`` (an
  HTTPS ``originalContentUrl`` and ``previewImageUrl``, each at most 2,000 characters) or ``audio`` (an HTTPS
  ``originalContentUrl`` and a positive ``duration``), else 400 with ``details``. A media message's URLs are fetched
  when a test looks at the chat (``view``), as a recipient's app loads them: over HTTP from the webhook URL's origin
  in place of the HTTPS one (test-only; server.py says why), the status and SHA-256 of each answer recorded;
  a ``quickReply`` of 1 to 13 ``postback`` actions (label 1-20, data and displayText 1-300 characters), shown under
  the chat's last message until one is pressed or the user writes (``press_quick_reply``: a ``postback`` event is
  delivered).
* ``POST /v2/bot/chat/loading/start`` ``{chatId, loadingSeconds}``: 202 for a user id and 5..60 in steps of 5.
* ``GET /v2/bot/message/{id}/content``: the bytes of a user's file (the fake serves the data API on the same port),
  404 for an id it does not hold.
* Rate limits: a scripted ``flood`` is 429 ``Too Many Requests`` (no Retry-After, as LINE); the chat is then
  refused again until ``flood_retry_after`` has passed, and each call inside it counts as a
  ``retry_after_violation``.

Left out: the message types out but text, image, video and audio (stickers, locations, templates, flex), the
checks of a fetched file's format and size (recorded, not judged), quick reply actions other than postback,
multicast, narrowcast, broadcast, profiles, rich menus, statistics, the quota endpoints, and the coupling of the
429 bans to the channel rather than the chat.

Control API (JSON): ``GET /_control/stats``, ``POST /_control/inject {"user", "text"}``, ``GET
/_control/messages/{chat}``, ``POST /_control/webhook_url {"url"}``.
"""
from tests.fakes.line.server import (DEFAULT_ACCESS_TOKEN, DEFAULT_BOT_USER, DEFAULT_CHANNEL_SECRET, DEFAULT_LIMITS,
                                     FakeLine)

__all__ = ["FakeLine", "DEFAULT_ACCESS_TOKEN", "DEFAULT_BOT_USER", "DEFAULT_CHANNEL_SECRET", "DEFAULT_LIMITS"]
