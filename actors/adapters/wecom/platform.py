"""WeChat through WeCom (企业微信): one application of one corp; callbacks in over HTTP, the active message API out
(README.md beside this file). Any member in the application's visible range can write to it: strangers get a
pairing code unless the table says otherwise.

Pacing: no edits, no typing indicator; 2,048 bytes of UTF-8 per text (longer ones are cut by WeCom); a 31st message
to one member within a minute is dropped unannounced: 27 a minute, burst 3."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=False, delete=True, threads=False, reactions=False, files_in=True, files_out=False,
                            voice=True, buttons=False, typing=False)


def _wecom_key(table):
    from actors.adapters.wecom.crypto import aes_key   # cryptography, imported only where a WeCom table is checked
    try:
        aes_key(table["encoding_aes_key"])
    except ValueError as exc:
        return "encoding_aes_key", str(exc)
    return None


PLATFORM = Platform(
    type="wecom", actor="actors.adapters.wecom.adapter.WeComAdapter",
    summary="WeChat through WeCom (企业微信): encrypted callbacks in, the message API out", intake="server",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("wecom", CAPABILITIES, 2048, "bytes", edit_interval_s=0.0, min_edit_delta_chars=0,
                 per_chat_ops_per_s=0.45, per_chat_burst=3, typing_interval_s=None),
    options={
        "corp_id": Option(str, doc="the corp id (企业ID: My Company > Company Information); also the callbacks' "
                                   "ReceiveId"),
        "agent_id": Option(int, doc="the application's AgentId"),
        "secret": Option(str, secret=True, doc="the application's Secret (for gettoken)"),
        "token": Option(str, secret=True, doc="the callback Token (Receive Messages > Set API Receiving)"),
        "encoding_aes_key": Option(str, secret=True, doc="the callback EncodingAESKey (43 characters)"),
        "base_url": Option(str, "https://qyapi.weixin.qq.com", doc="the server API (a fake, in tests)"),
        "callback_host": Option(str, "127.0.0.1", doc="interface the callback server listens on (loopback: behind "
                                                      "a TLS proxy)"),
        "callback_port": Option(int, 8090, doc="its port (0: any free port)"),
        "callback_path": Option(str, "/wecom/callback", doc="its path (the callback URL's path)"),
        "max_timestamp_skew_s": Option(float, 600.0, doc="callbacks whose timestamp is further from our clock are "
                                                         "refused as replays (0: not checked)"),
        "rate_limit_wait_s": Option(float, 10.0, doc="how long a chat waits after WeCom's 'api freq out of limit' "
                                                     "(45009), which names no wait"),
    },
    checks=(_wecom_key,))
