"""A fake DingTalk open platform for tests, in its wire format (from open.dingtalk.com: "获取企业内部应用的
accessToken", "Stream 模式" and the dingtalk-stream protocol (connections/open, frames, acknowledgements),
"机器人接收消息" (the robot message's fields), "批量发送人与机器人会话中机器人消息" (oToMessages/batchSend),
"机器人发送群聊消息" (groupMessages/send), "下载机器人接收消息的文件内容" (messageFiles/download), the session webhook (sessionWebhook / sessionWebhookExpiredTime) and its
"send too fast" limit, "创建并投放卡片" (card/instances/createAndDeliver) and "AI 卡片流式更新" (card/streaming)).

In process::

    with FakeDingTalk() as dingtalk:
        handle = dingtalk.inject_text("alice", "hello")          # a one-to-one robot message
        dingtalk.wait_for(lambda: dingtalk.messages(dingtalk.staff("alice")), timeout=30)

Wire format implemented:

* ``POST /v1.0/oauth2/accessToken`` ``{appKey, appSecret}`` -> ``{accessToken, expireIn}`` (``token_ttl``;
  ``expire_tokens()`` ends every token early). The OpenAPI sends need ``x-acs-dingtalk-access-token`` a live token,
  else HTTP 401 ``{"code": "InvalidAuthentication"}``.
* Stream mode (stream.py): connections/open, the WebSocket at ``/connect?ticket=``, CALLBACK frames for robot
  messages redelivered until acknowledged, SYSTEM ping and disconnect frames.
* Robot messages with the platform's fields (``msgId``, ``conversationType`` "1"/"2", ``conversationId``,
  ``senderStaffId``, ``senderNick``, ``sessionWebhook``, ``sessionWebhookExpiredTime``, ``text.content``; in a group
  the text starts with ``@<bot name>`` and ``atUsers`` names the robot).
* HTTP mode: ``post_callback(url, message)`` POSTs a robot message to the robot's message URL with the ``timestamp``
  (ms) and ``sign`` headers (Base64 of HMAC-SHA256 under the app secret over ``timestamp + "\n" + secret``), or a
  forged or stale pair.
* ``POST /robot/sendBySession?session=`` (a message's session webhook) ``{msgtype: "text", text: {content}}`` ->
  ``{errcode: 0, errmsg: "ok"}``; past its expiry ``{errcode: 300001}`` (the fake's number); a flood ``{errcode:
  130101, errmsg: "send too fast, exceed 20 times per minute"}``.
* ``POST /v1.0/robot/oToMessages/batchSend`` ``{robotCode, userIds, msgKey: "sampleText", msgParam}`` ->
  ``{processQueryKey, invalidStaffIdList, flowControlledStaffIdList}``; ``POST /v1.0/robot/groupMessages/send``
  ``{robotCode, openConversationId, msgKey, msgParam}`` -> ``{processQueryKey}``; a flood is HTTP 403 ``{"code":
  "Forbidden.AccessDenied.QpsLimitForApi"}``. Content over ``content_limit`` characters: HTTP 400.
* ``POST /v1.0/robot/messageFiles/download`` ``{downloadCode, robotCode}`` -> ``{downloadUrl}``, a URL serving the
  bytes of a user's picture (``inject_picture``).
* AI cards (cards.py): ``POST /v1.0/card/instances/createAndDeliver`` (one card per ``outTrackId``: a second
  create is refused, HTTP 400 ``param.outTrackIdExists``, the fake's code) and ``PUT /v1.0/card/streaming`` (whole
  contents; a ``guid`` repeated with its content changes nothing, with another content is refused); ``cards(chat)``
  shows each card's content, history, ``finalized`` and ``error``.
* Rate limits: a scripted ``flood`` bans the chat for ``flood_retry_after`` seconds (the platform names no time);
  each call inside it is refused again and counted as a ``retry_after_violation``.

Left out: message types out but text and AI cards (markdown, other cards), the card's own updates
(``PUT /v1.0/card/instances``) and callbacks, files out, videos, EVENT subscriptions, recalls,
redelivery of HTTP callbacks.

Control API (JSON): ``GET /_control/stats``, ``POST /_control/inject {"user", "text"}``, ``GET
/_control/messages/{chat}``.
"""
from tests.fakes.dingtalk.server import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, DEFAULT_LIMITS, FakeDingTalk

__all__ = ["FakeDingTalk", "DEFAULT_CLIENT_ID", "DEFAULT_CLIENT_SECRET", "DEFAULT_LIMITS"]
