"""A fake WeCom (企业微信) for tests: an application's server API and the callbacks WeCom sends it, in WeCom's wire
format (from developer.work.weixin.qq.com: 接收消息与事件, 加解密方案说明, 获取access_token, 发送应用消息,
撤回应用消息, 获取临时素材; shapes checked against wechatpy's clients).

In process::

    with FakeWeCom(callback_url="http://127.0.0.1:8090/wecom/callback") as wecom:
        wecom.verify_url(url)                          # the echostr check WeCom makes when the URL is saved
        handle = wecom.inject_text("zhangsan", "hello")   # signed, encrypted, POSTed; retried as WeCom does
        wecom.wait_for(lambda: wecom.messages("zhangsan"), timeout=30)

Wire format implemented:

* ``GET /cgi-bin/gettoken?corpid&corpsecret`` -> ``{"errcode": 0, "access_token", "expires_in"}``; 40013 (corp
  id), 40001 (secret). Tokens expire after ``token_ttl`` or on ``expire_tokens()``; a call with a missing,
  unknown or expired token is answered 41001 / 40014 / 42001 (counted: ``token_refusals``).
* ``POST /cgi-bin/message/send?access_token`` (JSON ``touser``, ``msgtype: "text"``, ``agentid``, ``text.content``)
  -> ``{"errcode": 0, "msgid", "invaliduser", ...}``; 40056 (agent id), 44004 (empty), 81013 (no such member),
  47001 (no JSON). As WeCom does, a text over 2,048 bytes of UTF-8 is cut, not refused (``truncated``), and a 31st
  message to one member within a minute is answered ok and never shown (``dropped_over_member_limit``).
* ``POST /cgi-bin/message/recall?access_token`` (``msgid``) -> ok; a msgid unknown, recalled or older than 24 h:
  ``NO_SUCH_MSGID`` (undocumented: the fake's own code).
* ``GET /cgi-bin/media/get?access_token&media_id``: the bytes (after ``media_delay`` seconds), or
  ``{"errcode": 40007}``.
* Rate limits: a scripted ``flood`` is errcode 45009 (WeCom names no wait); the member is then refused again
  until ``flood_retry_after`` has passed, and each call inside it counts as a ``retry_after_violation``.
* Callbacks (callbacks.py, crypto.py): the URL check, signed encrypted POSTs, the 5 s answer window and three
  retries, passive replies recorded.

Left out: every other message type out (image, file, markdown, cards), ``toparty``/``totag``, ``safe``,
duplicate checks (``enable_duplicate_check``), group chats (appchat), the daily and hourly quotas, the trusted-IP
list, and callback events beyond what ``inject_event`` builds.

Control API (JSON): ``GET /_control/stats``, ``POST /_control/inject {"user", "text"}``, ``GET
/_control/messages/{user}``, ``POST /_control/expire_tokens``, ``POST /_control/callback_url {"url"}``.
"""
from tests.fakes.wecom.server import (DEFAULT_AGENT_ID, DEFAULT_CALLBACK_TOKEN, DEFAULT_CORP_ID, DEFAULT_LIMITS,
                                      DEFAULT_SECRET, NO_SUCH_MSGID, FakeWeCom)

__all__ = ["FakeWeCom", "DEFAULT_AGENT_ID", "DEFAULT_CALLBACK_TOKEN", "DEFAULT_CORP_ID", "DEFAULT_LIMITS",
           "DEFAULT_SECRET", "NO_SUCH_MSGID"]
