"""A fake WhatsApp Cloud API for tests: the Graph API calls a business phone number makes and the webhooks Meta
sends its app, in Meta's wire format (from developers.facebook.com/docs/whatsapp/cloud-api: Webhooks, the messages
webhook's payloads, Messages, Media, Mark messages as read, Typing indicators, Error codes, Throughput and the
customer service window).

In process::

    with FakeWhatsApp(webhook_url="http://127.0.0.1:8091/whatsapp/webhook") as wa:
        wa.verify_url(url)                                # the hub.challenge check Meta makes when the URL is saved
        handle = wa.inject_text("15551234567", "hello")   # signed, POSTed; retried until answered 200
        wa.wait_for(lambda: wa.messages("15551234567"), timeout=30)

Wire format implemented (any ``/{version}`` prefix; every call needs ``Authorization: Bearer <token>``, a wrong
one is HTTP 401 with error 190):

* ``GET /{phone-number-id}`` -> ``{"display_phone_number", "verified_name", "id"}``.
* ``POST /{phone-number-id}/messages``: ``type`` ``text`` (``text.body`` of at most 4,096 characters, optional
  ``context.message_id``) or ``reaction`` (``message_id``, ``emoji``; "" takes it away) -> ``{"messaging_product",
  "contacts": [{"input", "wa_id"}], "messages": [{"id": "wamid..."}]}``; an unknown user is 131026. ``image``,
  ``document``, ``audio`` and ``video`` of an uploaded media ``id`` are taken too. A free-form message to a user
  whose last message is older than ``window_s`` (24 h), or who never wrote, is refused with 131047
  (``window_errors = "sync"``) or accepted and failed by a ``failed`` status webhook (``"status"``). ``{"status":
  "read", "message_id", "typing_indicator"}`` -> ``{"success": true}`` (counted: ``reads``, ``typing``).
  ``type`` ``template`` (``template.name``, ``template.language.code``, ``components`` with the body's text
  ``parameters``) of a template ``approve_template`` made known, at any time (the window does not govern it);
  refused as the Cloud API refuses one: 132001 (no such template in that language), 132000 (not as many body
  parameters as placeholders), 132018 (a parameter with a new-line, a tab or more than 4 spaces in a row), 132005
  (a parameter over 32,768 characters, or 1,024 when the template has more than a body). Shown with its body
  filled in (``text``), ``template``, ``language`` and ``parameters``.
* ``POST /{phone-number-id}/media`` (multipart ``messaging_product``, ``type``, ``file``) -> ``{"id"}``.
* ``GET /{media-id}`` -> ``{"url", "mime_type", "sha256", "file_size", "id"}``; the url (``/_download/{id}``)
  answers the bytes only with the bearer; an unknown id is error 100.
* Errors are ``{"error": {"message", "type", "code", "error_data": {"details"}, "fbtrace_id"}}``. A scripted
  ``flood`` is 130429; the user is then refused again until ``flood_retry_after`` has passed, and each send inside
  it counts as a ``retry_after_violation``. ``fail_next(code...)`` answers the next texts with any code (190,
  131047, 131056, ...).
* Pacing counted, as Meta enforces it: more than ``pair_burst`` sends to one user within ``pair_burst`` x
  ``pair_interval_s`` is a ``pair_rate_violation`` (refused with 131056 when ``enforce_pair_rate``); more than
  ``throughput_per_s`` sends a second a ``throughput_violation``.
* Webhooks (webhooks.py): the verification handshake, signed POSTs, retries of an unanswered one, status callbacks.

Left out: template headers, buttons and named parameters, interactive messages out, media by link,
business-initiated conversations' pricing, phone number registration, the WABA's other webhook fields, and the
7-day retry schedule (the fake retries a few times, seconds apart).

Control API (JSON): ``GET /_control/stats``, ``POST /_control/inject {"user", "text"}``, ``GET
/_control/messages/{user}``, ``POST /_control/webhook_url {"url"}``.
"""
from tests.fakes.whatsapp.server import (DEFAULT_APP_SECRET, DEFAULT_LIMITS, DEFAULT_PHONE_NUMBER_ID, DEFAULT_TOKEN,
                                         DEFAULT_VERIFY_TOKEN, FakeWhatsApp)

__all__ = ["FakeWhatsApp", "DEFAULT_APP_SECRET", "DEFAULT_LIMITS", "DEFAULT_PHONE_NUMBER_ID", "DEFAULT_TOKEN",
           "DEFAULT_VERIFY_TOKEN"]
