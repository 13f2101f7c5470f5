"""A fake Feishu / Lark open platform for tests, in its wire format (from open.feishu.cn / open.larksuite.com:
"获取 tenant_access_token (自建应用)", "发送消息", "回复消息", "编辑消息", "撤回消息", "获取消息中的资源文件",
"事件订阅概述" / "接收事件" / "加密策略", "频控策略", "接收消息 im.message.receive_v1").

In process::

    with FakeFeishu(callback_url="http://127.0.0.1:8093/feishu/events") as feishu:
        handle = feishu.inject_text(feishu.p2p_chat("alice"), feishu.user("alice"), "hello")
        feishu.wait_for(lambda: feishu.messages(feishu.p2p_chat("alice")), timeout=30)

Wire format implemented:

* Event callbacks (callbacks.py): one ``im.message.receive_v1`` event in the 2.0 schema per POST, encrypted with
  the Encrypt Key (AES-256-CBC, key SHA-256(encrypt key), IV first) and signed (``X-Lark-Signature``: hex SHA-256 of
  timestamp + nonce + encrypt key + body), ``header.token`` the Verification Token; text and image messages from
  p2p and group chats, with ``mentions``. A delivery not answered 200 within ``answer_timeout`` is sent again with
  the same ``event_id``, ``retries`` times; ``deliver(body=..., headers=...)`` sends a forged one once.
* ``POST /open-apis/auth/v3/tenant_access_token/internal`` ``{app_id, app_secret}`` -> ``{code: 0,
  tenant_access_token, expire}`` (``token_ttl`` seconds; ``expire_tokens()`` ends every token early). Every other
  call needs ``Authorization: Bearer`` a live token, else 400 code 99991663.
* ``GET /open-apis/bot/v3/info`` -> ``{code: 0, bot: {open_id, app_name, ...}}``.
* ``POST /open-apis/im/v1/messages?receive_id_type=chat_id`` and ``POST /open-apis/im/v1/messages/:id/reply``
  ``{msg_type: "text", content: JSON string {"text"}, uuid, reply_in_thread}`` -> ``{code: 0, data: {message_id,
  root_id, chat_id, ...}}``. A ``uuid`` (1..50 characters) sent before within ``uuid_ttl`` is answered with the
  first message and nothing is sent. Content over ``content_limit`` bytes: code 230025. More than ``sends_per_s``
  sends to one chat within a second: 429 code 99991400 (counted as a ``pacing_violation``).
* ``POST /open-apis/im/v1/images`` (multipart ``image_type`` message, ``image``) and ``POST
  /open-apis/im/v1/files`` (``file_type``, ``file_name``, ``file``) keep the bytes under a new ``image_key`` /
  ``file_key``; an ``image``, ``file`` or ``post`` message must name one of them (else code 230055, the fake's).
* ``PUT /open-apis/im/v1/messages/:id`` edits a text; past ``edits_per_message`` edits it is refused (code 230072,
  the fake's number), a recalled message 230011. ``DELETE`` recalls.
* ``GET /open-apis/im/v1/messages/:id/resources/:key?type=image|file``: the bytes of a user's file.
* ``POST``, ``GET /open-apis/im/v1/messages/:id/reactions`` and ``DELETE .../reactions/:reaction_id``: the app's
  reactions (``{reaction_id, operator: {operator_id: app id, operator_type: "app"}, reaction_type: {emoji_type}}``),
  what they showed after each change in ``reaction_history``.
* Rate limits: a scripted ``flood`` is HTTP 429 ``{"code": 99991400}`` with ``x-ogw-ratelimit-reset`` (whole
  seconds, at least 1); the chat is then refused again until the time has passed, and each call inside it counts as
  a ``retry_after_violation``.

* The long connection (long_connection.py): ``POST /callback/ws/endpoint``, the WebSocket at ``/ws`` speaking the
  SDKs' protobuf frames (pings and pongs with a ClientConfig, events in ``fragments``, answers), redelivery of what
  is not answered within ``ack_timeout``, and faults: the connections cut or closed, the endpoint busy.

Left out: message types out but text, image, file and post, cards (PATCH), user-identity tokens, chats' member
lists, the 1.0 event schema.

Control API (JSON): ``GET /_control/stats``, ``POST /_control/inject {"user", "text"}``, ``GET
/_control/messages/{chat}``, ``POST /_control/callback_url {"url"}``.
"""
from tests.fakes.feishu.server import (DEFAULT_APP_ID, DEFAULT_APP_SECRET, DEFAULT_BOT_OPEN_ID, DEFAULT_ENCRYPT_KEY,
                                       DEFAULT_LIMITS, DEFAULT_VERIFICATION_TOKEN, FakeFeishu)

__all__ = ["FakeFeishu", "DEFAULT_APP_ID", "DEFAULT_APP_SECRET", "DEFAULT_BOT_OPEN_ID", "DEFAULT_ENCRYPT_KEY",
           "DEFAULT_LIMITS", "DEFAULT_VERIFICATION_TOKEN"]
