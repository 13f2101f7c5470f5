"""A fake Discord for tests: the gateway WebSocket and the REST API (v10), as Discord's public documentation gives
them, so an adapter (discord.py, hikari, or one speaking the protocol itself) can be tested against it.

In process::

    with FakeDiscord(time_scale=0.05) as dc:
        # REST at dc.api_url (http://127.0.0.1:P/api/v10), token DEFAULT_TOKEN, gateway at dc.gateway_url
        dc.inject_message("hello", GENERAL_CHANNEL_ID, mention_bot=True)   # a guild text channel
        dc.inject_message("hi")                                           # a DM from DEFAULT_USER_ID
        ... the bot answers ...
        dc.wait_for(lambda: dc.final_texts(GENERAL_CHANNEL_ID) == ["hi!"], timeout=5)

Standalone (outlives a killed gateway; messages and gateway sessions kept in the state file, so a client can
resume after the fake itself restarted)::

    python -m tests.fakes.discord --port P --state FILE [--config '{"time_scale": 0.05}']

hikari needs only ``GatewayBot(token, rest_url=dc.api_url)``: it learns the gateway URL from ``GET /gateway/bot``.
discord.py has both addresses as class attributes (``http.Route.BASE``, ``gateway.DiscordWebSocket.DEFAULT_GATEWAY``).

Modules: ``protocol`` (opcodes, close codes, intents, error codes, snowflakes), ``objects`` (user, channel, guild,
member and message JSON; the MESSAGE_CONTENT rule), ``gateway`` (WebSocket, sessions, dispatch, controls),
``rest`` (routes, auth, faults, the message methods), ``interactions`` (message components, button presses and
the interaction callback), ``ratelimits`` (buckets, headers, 429s), ``world``
(guild, channels, threads, DMs, injection), ``server`` (FakeDiscord, limits, control API, inspection).

Gateway (``GET /gateway`` and, with the bot token, ``/gateway/bot`` return ``ws://127.0.0.1:P/gateway``):
- Query ``v`` must be 9 or 10 (else close 4012); ``encoding=json`` only; ``compress=zlib-stream`` is served (one
  zlib context per connection, every frame ending in Z_SYNC_FLUSH), absent means plain text frames. The client
  may send its JSON in text or binary frames; a payload over 4096 bytes or not JSON closes with 4002.
- Every payload is ``{"op", "d", "s", "t"}`` with ``s``/``t`` null unless op 0. Op 10 Hello carries
  ``heartbeat_interval`` (ms). Op 1 from the client (``d`` = last seq or null) is answered with op 11; the fake
  may send op 1 itself (``request_heartbeat``). No heartbeat for interval x ``heartbeat_timeout_factor`` closes
  the connection with 4009 and leaves the session resumable ("you will be forced to Resume"). ``ack_heartbeats``
  false makes a zombied connection.
- Op 2 Identify: wrong token 4004; ``intents`` missing, negative or with unknown bits 4013; a privileged intent
  (GUILD_MEMBERS, GUILD_PRESENCES, MESSAGE_CONTENT) not in ``privileged_intents`` 4014; ``shard`` not
  ``[id < n, n]`` 4010; ``sharding_required`` and fewer than 2 shards 4011; a second Identify (or Resume) on a
  connection 4005; any other op before identifying 4003; an unknown op 4001; more than 120 payloads per 60 s
  4008. One Identify per 5 s (max_concurrency 1): a faster one is answered op 9 ``d: false``.
- READY (``s`` 1): ``v``, ``user``, ``guilds`` (unavailable), ``session_id``, ``resume_gateway_url``
  (``/gateway/resume``), ``application`` {id, flags}, ``shard`` if sent; then GUILD_CREATE per guild (with
  channels, active threads, members) when GUILDS was asked. Dispatches of guilds go to shard
  ``(guild_id >> 22) % n``, DMs to shard 0.
- Dispatches: MESSAGE_CREATE / MESSAGE_UPDATE (whole message, plus ``guild_id``, ``member``, ``channel_type``) /
  MESSAGE_DELETE for users' and the bot's own messages, behind GUILD_MESSAGES or DIRECT_MESSAGES; CHANNEL_CREATE,
  THREAD_CREATE, GUILD_CREATE behind GUILDS. Without MESSAGE_CONTENT a guild message has empty ``content``,
  ``embeds``, ``attachments``, ``components``, except the bot's own and those mentioning the bot; DMs are full.
- Op 6 Resume: unknown or ended session, or a seq older than the replay buffer (``resume_buffer`` events), gets
  op 9 ``d: false``; a seq ahead of the session closes with 4007; otherwise the missed dispatches are sent again in
  order, then RESUMED (which has its own ``s``). A session stays resumable for ``session_timeout`` after a drop;
  a client closing with 1000 or 1001 ends it. A session resumed elsewhere has its old connection closed (4000).
- Controls: ``drop_gateway`` (no close frame, or a given close code), ``send_reconnect`` (op 7),
  ``send_invalid_session`` (op 9, ``resumable`` false ends the session); a connection still open
  ``reconnect_grace`` after op 7 / op 9 is closed with 4000. Close codes not to be retried: 4004, 4010-4014.

REST (``/api/v10``, ``Authorization: Bot TOKEN`` else 401 ``{"message": "401: Unauthorized", "code": 0}``; JSON
bodies, or multipart with ``payload_json``; answers ``Content-Type: application/json``; errors
``{"message", "code", "errors"?}``):
- ``GET /users/@me``, ``GET /oauth2/applications/@me`` (and ``/applications/@me``), ``POST /users/@me/channels``
  {recipient_id} (the DM channel), ``GET /channels/{id}``, ``GET /channels/{id}/messages`` (limit, before, after;
  newest first), ``GET /channels/{id}/messages/{mid}``.
- ``POST /channels/{id}/messages``: ``content`` up to ``content_limit`` (2000) characters, else 400 50035
  ``errors.content._errors[0].code == "BASE_TYPE_MAX_LENGTH"``; nothing to show: 400 50006; ``nonce`` (int, or
  a string of up to 25 characters); ``enforce_nonce: true`` returns the bot's earlier message with that nonce
  (if it was made within ``nonce_window`` and still exists) instead of a second one; ``message_reference``
  {message_id, fail_if_not_exists (default true)} makes a reply (type 19, ``referenced_message``), an unknown
  target 400 50035 unless fail_if_not_exists is false; mentions ``<@id>`` of known users fill ``mentions``
  (``allowed_mentions`` honoured, ``replied_user`` adds the replied author). Unknown channel 404 10003; a
  ``block``ed DM 403 50007, a blocked guild channel 403 50013.
- ``PATCH .../messages/{mid}``: only the bot's own (403 50005 "Cannot edit a message authored by another user"),
  gone or unknown 404 10008 "Unknown Message"; MESSAGE_UPDATE. ``DELETE`` the same, 204; another user's message:
  403 50003 in a DM, 403 50013 in a guild unless ``set_manage_messages``; MESSAGE_DELETE.
  ``POST /channels/{id}/typing`` 204.
- Rate limits: fixed windows per route and channel (``route_limits``; create_message 5 per 5 s by default), with
  ``X-RateLimit-Limit``, ``-Remaining``, ``-Reset``, ``-Reset-After``, ``-Bucket`` on every answer of a limited
  route; over it, 429 ``{"message", "retry_after", "global": false}`` with ``X-RateLimit-Scope: user`` and
  ``Retry-After``; a global ``global_limit`` (50 per s) answers ``"global": true`` with ``X-RateLimit-Global``.
  ``stats()["rate_limited"]`` counts 429s, ``["retry_after_violations"]`` requests made before the window a 429
  named had reset.
- Faults (``set_faults``, FaultScript; methods are route names, default the four writes): "flood" (a 429 that
  binds its bucket for ``flood_retry_after``), "error" (500), "drop" (closed before taking effect), "drop_after"
  (took effect, answer lost).

Ids are snowflakes (increasing, from the clock); ``time_scale`` multiplies every window (rate limits, identify
concurrency, session timeout, reconnect grace, nonce window) but not the heartbeat interval, which is given in ms.

Left out: ETF encoding, zstd-stream, payload compression (``compress: true`` in Identify is ignored; text frames
are always valid), voice, presences, member chunking (op 8 and the other send ops are accepted and ignored),
slash commands and interactions other than button presses, follow-up messages, reactions, embeds' validation,
attachments and file uploads, forwards, pins, bulk delete, ``around`` in message history, TYPING_START, thread
membership and archiving, permissions beyond MANAGE_MESSAGES and a blocked channel, invalid-request (Cloudflare)
bans, and the session start limit's reset.

Control API (JSON; ``tests.fakes.harness.ControlClient`` speaks it):

    POST /_control/inject            one {"content", "channel_id"?, "user_id"?, "username"?, "mention_bot"?,
                                     "reply_to"?, "ping_reply"?, "thread_id"?}, a list, or {"messages": [...]}
                                                                          -> {"ok", "messages": [MESSAGE_CREATE d]}
    POST /_control/inject_edit       {"channel_id", "message_id", "content"}  -> the updated message
    POST /_control/inject_delete     {"channel_id", "message_id"}
    POST /_control/channels          {"kind": "text"|"thread"|"guild", "name", "parent_id"?, "guild_id"?}
    GET  /_control/channels          GET /_control/channels/{id} -> {"channel", "messages", "ops", "blocked"}
    GET  /_control/stats             GET /_control/gateway -> {"sessions", "log"}
    POST /_control/gateway/drop      {"session_id"?, "code"?}       POST /_control/gateway/heartbeat {"session_id"?}
    POST /_control/gateway/reconnect {"session_id"?}                 POST /_control/gateway/invalid_session
                                                                     {"session_id"?, "resumable"?}
    POST /_control/faults            FaultScript fields             POST /_control/config  DEFAULT_LIMITS keys
    POST /_control/block             {"channel_id", "blocked"?}     POST /_control/manage_messages {"allowed"?}
    POST /_control/reset
"""
from tests.fakes.discord.protocol import CLOSE_CODES, INTENTS, NOT_RECONNECTABLE
from tests.fakes.discord.server import DEFAULT_LIMITS, DEFAULT_TOKEN, FakeDiscord
from tests.fakes.discord.world import BOT_ID, DEFAULT_USER_ID, GENERAL_CHANNEL_ID, GUILD_ID

__all__ = ["FakeDiscord", "DEFAULT_TOKEN", "DEFAULT_LIMITS", "BOT_ID", "GUILD_ID", "GENERAL_CHANNEL_ID",
           "DEFAULT_USER_ID", "CLOSE_CODES", "INTENTS", "NOT_RECONNECTABLE"]
