"""A fake OneBot v11 implementation for tests (what NapCat, LLOneBot and Lagrange.OneBot serve), written from the
OneBot v11 specification (github.com/botuniverse/onebot-11: communication/ws.md, event/message.md, event/meta.md,
api/public.md, message/segment.md).

In process::

    with FakeOneBot() as bot:                                  # forward WebSocket at bot.ws_url
        bot.wait_for(bot.connected, timeout=10)
        bot.inject_private("alice", "hello")                   # a message.private event to every connection
        bot.wait_for(lambda: bot.sent("private:" + str(bot.qq("alice"))), timeout=5)

Wire format implemented:

* Forward WebSocket, universal endpoint ``/`` (also ``/api`` and ``/event``): the access token as
  ``Authorization: Bearer TOKEN`` or ``?access_token=TOKEN``; missing 401, wrong 403 at the handshake (no upgrade).
  On connecting, a ``meta_event`` ``lifecycle`` ``connect``; then a ``heartbeat`` meta event every
  ``heartbeat_interval`` seconds (``status``, ``interval`` in ms).
* Reverse WebSocket (``connect_reverse(url, token)``): the fake connects to the bot's server with ``X-Self-ID``,
  ``X-Client-Role: Universal`` and ``Authorization: Bearer``, and again every ``reconnect_interval`` after a drop
  or a refusal; ``reverse_attempts`` holds each attempt's outcome (101, or the refusal's HTTP status).
* HTTP: the HTTP API (``POST /{action}``, params as JSON, the token as above; 404 an unknown action) and HTTP POST
  events (``post_events_to(url, secret)``: every event and a heartbeat every ``heartbeat_interval`` POSTed with
  ``X-Self-ID`` and ``X-Signature: sha1=<HMAC-SHA1 of the body>``; the answers' statuses in ``post_statuses``).
* Events: ``message`` ``private`` (sub_type friend) and ``group`` (sub_type normal) with ``self_id``,
  ``message_id``, ``user_id``, ``group_id``, ``message`` (array of segments), ``raw_message`` (CQ code), ``font``,
  ``sender``, ``time``. The same event pushed again: ``replay(message_id)``. Events of another account on the same
  implementation: ``inject_private(..., self_id=OTHER)``.
* Actions ``{"action", "params", "echo"}`` answered ``{"status", "retcode", "data", "echo"}``:
  ``get_login_info``, ``send_private_msg`` {user_id, message}, ``send_group_msg`` {group_id, message},
  ``send_msg``, ``delete_msg`` {message_id}, ``get_msg`` {message_id}. retcodes: 0 ok, 1400 bad parameters
  (``wording`` says which), 1404 an unknown action, 100 a failed send (a message over ``max_text`` characters,
  a message id it does not hold).
* Pacing (``pace_per_minute``, ``pace_min_gap_s``; QQ has no published rule, these are what a test expects the
  gateway to keep): every send and delete is timed; one closer than the gap to the previous, or over the bound in
  a 60 s window, counts in ``stats()["pace_violations"]``; ``gaps()`` lists the gaps.
* Faults (``set_faults``: FaultScript on send_private_msg, send_group_msg, delete_msg): "error" (retcode 100),
  "drop" (the connection closed before the action takes effect), "drop_after" (it took effect, the connection
  closed before the answer). A held answer (``hold_next_answer("send_private_msg", chat)``).

Left out: quick operations in the answer to an event POST, message formats other than array in answers, notice
and request events, files up and out, group administration, ``get_msg`` history of others' messages.
"""
from tests.fakes.onebot.server import BOT_QQ, DEFAULT_TOKEN, FakeOneBot

__all__ = ["FakeOneBot", "DEFAULT_TOKEN", "BOT_QQ"]
