"""A fake of the QQ open platform's bot API for tests, written from its public documentation (bot.q.qq.com/wiki:
develop/api-v2 — the access token, the WebSocket gateway's opcodes and close codes, the message events, the
send endpoints of C2C users, groups, guild channels and DMs, their errors).

In process::

    with FakeQQ() as qq:
        qq.wait_for(qq.established, timeout=10)            # the adapter's gateway connection got READY / RESUMED
        qq.inject_c2c("alice", "hello")                     # a C2C_MESSAGE_CREATE to the bot's sessions
        qq.wait_for(lambda: qq.sent("c2c:" + openid("alice")), timeout=5)

Wire format implemented:

* ``POST /app/getAppAccessToken`` ``{"appId", "clientSecret"}`` -> ``{"access_token", "expires_in"}`` (seconds, a
  string, ``token_lifetime_s``); a wrong pair 400 ``{"code": 100016}``. Every OpenAPI call needs
  ``Authorization: QQBot <token>`` with a token not yet expired (the sends ``X-Union-Appid`` too): else 401 code
  11244.
* ``GET /users/@me`` -> the bot (``id``, ``username``). ``GET /gateway`` -> ``{"url"}``; the gateway at
  ``/websocket``: Hello (op 10, ``heartbeat_interval`` ms), Identify (op 2: ``token`` ``QQBot <token>``,
  ``intents``, ``shard``) -> READY (op 0 ``t`` READY, ``session_id``, ``user``), Heartbeat (op 1) -> ACK (op 11),
  Resume (op 6: ``token``, ``session_id``, ``seq``) -> what the session got after ``seq``, then RESUMED; an unknown
  session -> Invalid Session (op 9, ``d`` false). A bad token closes with 4004, intents no number with 4013, a frame
  no JSON with 4002. Each dispatch is numbered per session (``s``) and kept in it (the newest ``SESSION_EVENTS``),
  so a session resumed later gets what came while nobody was connected; sessions and their events are in the state
  file, so a fake restarted on its state file (the dropped connection) resumes them. Dispatches go to every session
  whose intents cover them (bits 25, 30, 12).
* Events: ``C2C_MESSAGE_CREATE`` (``author.user_openid``), ``GROUP_AT_MESSAGE_CREATE`` (``group_openid``,
  ``author.member_openid``, the text after a space), ``AT_MESSAGE_CREATE`` (``channel_id``, ``guild_id``,
  ``author.id``, ``<@!bot>`` in ``content``, ``mentions``), ``DIRECT_MESSAGE_CREATE``; each with ``id``
  (``ROBOT1.0_...``) and ``timestamp`` (ISO 8601, +08:00). ``replay(message_id)`` dispatches one again.
* Sends: ``POST /v2/users/{openid}/messages``, ``/v2/groups/{group_openid}/messages`` (``content``, ``msg_type``,
  ``msg_id``, ``msg_seq``) -> ``{"id", "timestamp"}``; ``POST /channels/{channel_id}/messages``,
  ``/dms/{guild_id}/messages`` (``content``, ``msg_id``) -> the message object. A passive reply (``msg_id``) to a
  message this chat did not get: 400; the same ``msg_id`` + ``msg_seq`` twice: 400 code 40054005 (消息被去重) and
  nothing sent; a ``msg_id`` that already has ``replies_per_message`` (5) passive replies: 400 code 40034128
  (被动回复时间或次数超限) and nothing sent; with ``active_quota_used_up`` set, a send without ``msg_id``: 400 code
  40034100 (主动消息发送超过频控限制); no content, or over ``max_text`` characters: 400.
* Faults (``set_faults``, on the send routes): "flood" (429 code 22009 msg limit exceed, the chat banned for
  ``flood_retry_after``; a send inside the ban counts in ``stats()["retry_after_violations"]``), "error" (500),
  "drop" (the connection closed before the send takes effect), "drop_after" (it took effect, the answer is lost).
  A held answer (``hold_next_answer("send", chat)``); ``lose_answer_in``: chats whose next send takes effect and
  loses its answer (once each). ``close_sessions(code)``, ``send_garbled()``, ``refusing``
  (new gateway connections answered 503), ``expire_tokens()``.

* The webhook (``callback_url``): every dispatch also POSTed there as ``{"op": 0, "id", "s", "t", "d"}``, signed:
  ``X-Signature-Timestamp`` and ``X-Signature-Ed25519`` (hex), Ed25519 over the timestamp and the body with the key
  whose seed is the AppSecret repeated to 32 bytes; ``validate_callback`` sends op 13 (``plain_token``,
  ``event_ts``); ``post_callback`` any body, with a signature of the test's. Answers in ``callback_answers``.

* Rich media (api-v2 富媒体消息): ``POST /v2/users/{openid}/files``, ``/v2/groups/{group_openid}/files``
  (``file_type`` 1-4, ``file_data`` base64, ``srv_send_msg`` a bool, ``file_name``) -> ``{"file_uuid",
  "file_info", "ttl"}``; a file_type 1 that is no png or jpg: 400. ``srv_send_msg`` true sends it at once as an
  active message (recorded like one). A send with ``msg_type`` 7 and ``media.file_info`` shows the upload, in a
  chat of the kind it was uploaded for only (else 400 code 304083), with ``content`` given (a space will do).
  Guild channels and DMs take ``multipart/form-data`` with ``file_image`` (png or jpg, else 400 code 304017) and
  the other fields as form fields. A sent message records ``file`` (``file_type``, ``sha256``, ``name``).
* Markdown: ``msg_type`` 2 with ``markdown.content`` (guild channels and DMs: the ``markdown`` field); with
  ``markdown_allowed`` False: 400 code 50056 (不允许发送 markdown content) and nothing sent. A sent message
  records ``markdown`` True.
* A user's files: ``attachment(data, content_type, filename)`` serves the bytes under ``GET /media/<token>`` (a
  request carrying an Authorization header is refused: QQ's media server gets no bot token) and returns the
  ``attachments`` entry an event carries; ``inject_c2c(user, text, attachments=[...])``.

Left out: ``url`` uploads, keyboards and ark messages, recall, the passive window (the adapter keeps to it itself),
the active-message quota's counting (only its refusal, when told), guild and member APIs, sharding.
"""
from tests.fakes.qq.server import APP_ID, APP_SECRET, BOT_ID, FakeQQ, openid

__all__ = ["FakeQQ", "APP_ID", "APP_SECRET", "BOT_ID", "openid"]
