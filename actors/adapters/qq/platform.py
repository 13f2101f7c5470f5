"""QQ through the official bot API of the QQ open platform (q.qq.com): the WebSocket gateway in (group @-messages,
C2C messages, guild channel @-messages and guild DMs), REST out as passive replies (README.md beside this file).
Anyone who can add the bot can write to it: strangers get a pairing code unless the table says otherwise.

Files: a user's images, videos, voice and files are fetched from the URLs their message names; the agent's go as
QQ's rich media (an upload, then a msg_type 7 message) to users and groups, as an image in the send to guild
channels and DMs (media.py).

Pacing: QQ has no edits and no typing indicator for these chats, so an answer goes once, final. A passive reply
carries the user's ``msg_id`` and a ``msg_seq``; QQ refuses a second message with the same pair as a duplicate,
and the adapter derives the ``msg_seq`` from the send's idempotency key, so a send repeated after its answer was
lost (or after a kill -9) shows once (``idempotent_send``) in C2C and groups; guild channels and DMs have no such
key (below). QQ publishes no text limit for these endpoints: 2,000
characters keeps a reply inside what the clients show whole and within the few replies a message may have. The
per-chat speed stays under QQ's frequency limits (a burst of 5, one a second)."""
from actors.adapters.qq.media import UPLOAD_LIMIT
from actors.adapters.spec import Capabilities, Option, Platform, paced

# GROUP_AND_C2C_EVENT (1 << 25): group @-messages and C2C messages; PUBLIC_GUILD_MESSAGES (1 << 30): guild channel
# @-messages; DIRECT_MESSAGE (1 << 12): guild DMs. GUILD_MESSAGES (1 << 9: every channel message) is for
# private-domain bots only: add it to `intents` where the bot has it.
QQ_INTENTS = (1 << 25) | (1 << 30) | (1 << 12)

# Exactly-once, where it holds: QQ refuses a second message with the same msg_id + msg_seq (code 40054005) on the
# C2C and group endpoints, and the adapter derives msg_seq from the send's key, so a reply's part re-sent after its
# answer was lost shows once there. Guild channels and DMs document no such key: a send there names the user's
# message (msg_id) or an event (event_id) only to be a passive reply, and QQ refuses no repeat of it (api-v2
# "发送消息", 文字子频道: msg_id / event_id make a send passive, nothing more). There a part repeated after its answer
# was lost, or of a reply the ledger holds ambiguous, carries the re-sent mark the adapter puts on it (the pacing
# row is the platform's, so the consumer marks nothing): at least once, marked. The field says where each holds.
CAPABILITIES = Capabilities(edit=False, delete=False, threads=False, reactions=False, files_in=True,
                            files_out=True, voice=False, buttons=False, typing=False,
                            idempotent_send="msg_seq (C2C and groups; guild channels: none)")


def _urls_are_urls(table) -> tuple[str, str] | None:
    for key in ("api_base_url", "auth_url"):
        if not str(table[key]).startswith(("https://", "http://")):
            return key, "must be an http(s) URL"
    if table["mode"] == "webhook" and not str(table["callback_path"]).startswith("/"):
        return "callback_path", "must start with /"
    if table["gateway_url"] and not str(table["gateway_url"]).startswith(("wss://", "ws://")):
        return "gateway_url", "must be a ws(s) URL, or empty to ask GET /gateway"
    return None


PLATFORM = Platform(
    type="qq", actor="actors.adapters.qq.adapter.QQAdapter",
    summary="QQ official bot API: the WebSocket gateway or signed webhooks in, passive replies (msg_id + msg_seq) "
            "out",
    intake="socket", capabilities=CAPABILITIES, access="pairing",
    pacing=paced("qq", CAPABILITIES, 2000, "chars", edit_interval_s=0.0, min_edit_delta_chars=0,
                 per_chat_ops_per_s=1.0, per_chat_burst=5, typing_interval_s=None,
                 upload_limit_bytes=UPLOAD_LIMIT, photo_limit_bytes=UPLOAD_LIMIT, caption_limit=2000),
    options={
        "app_id": Option(str, doc="the bot's AppID (q.qq.com: the bot's page, 开发 > 开发设置)"),
        "app_secret": Option(str, secret=True, doc="the bot's AppSecret (same page); exchanged for an access "
                                                   "token at auth_url, refreshed before it expires"),
        "api_base_url": Option(str, "https://api.sgroup.qq.com",
                               doc="the OpenAPI base (https://sandbox.api.sgroup.qq.com for the sandbox; a fake in "
                                   "tests)"),
        "auth_url": Option(str, "https://bots.qq.com/app/getAppAccessToken",
                           doc="where app_id and app_secret are exchanged for an access token"),
        "mode": Option(str, "websocket", allowed=("websocket", "webhook"),
                       doc="websocket: the gateway connects to QQ's WebSocket gateway; webhook: QQ POSTs events to the "
                           "gateway's callback server (listen_host, listen_port, callback_path), signed with Ed25519"),
        "listen_host": Option(str, "127.0.0.1", doc="webhook: the address the callback server listens on (QQ calls "
                                                    "an https:// URL: a TLS proxy in front forwards to it)"),
        "listen_port": Option(int, 8090, doc="webhook: the port it listens on (0: any free one, logged)"),
        "callback_path": Option(str, "/qq/callback", doc="webhook: the path QQ POSTs events to"),
        "gateway_url": Option(str, "", doc="the WebSocket gateway (empty: the one GET /gateway names)"),
        "intents": Option(int, QQ_INTENTS, doc="gateway intents bit field (default: group and C2C messages, guild "
                                               "channel @-messages, guild DMs)"),
        "require_mention": Option(bool, True, doc="private-domain bots (intent GUILD_MESSAGES): in a channel "
                                                  "answer only a message that @-mentions the bot"),
        "markdown": Option(bool, False, doc="send answers as QQ markdown (msg_type 2), for a bot QQ granted "
                                            "native markdown; where QQ refuses it (codes 50056, 304036) that "
                                            "kind of chat gets plain text from then on"),
    },
    checks=(_urls_are_urls,),
    served=lambda table: table["mode"] == "webhook")
