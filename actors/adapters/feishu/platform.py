"""Feishu (飞书) and Lark, its international edition: a custom app (自建应用) with the bot ability (README.md beside
this file). Anyone in the tenant who can see the bot can write to it: strangers get a pairing code unless the
table says otherwise.

Pacing: the open platform allows a bot 5 messages a second to one user or one group (shared by the group's bots);
a text message's JSON content holds 150 KB (kept well under here: 30,000 UTF-8 bytes); a message can be edited at
most 20 times (PUT im/v1/messages/:id, 50 a second per app), so a streamed answer is edited no more often than every
2 s and only after 300 new bytes, and the adapter keeps the last edit of a message for its final text. A send
carries the ``uuid`` request field (Feishu sends one message per uuid within an hour), so a send whose answer was
lost goes again and shows once. Files go up first (images to 10 MB, files to 30 MB) and are sent as an image or a
file message."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=True, reactions=True, files_in=True, files_out=True,
                            voice=True, buttons=False, typing=False, idempotent_send="uuid")

HOSTS = {"feishu": "https://open.feishu.cn", "lark": "https://open.larksuite.com"}


def _domain_is_known(table):
    if table["domain"] not in HOSTS:
        return "domain", f"must be one of {', '.join(sorted(HOSTS))} (Feishu in China, Lark elsewhere)"
    return None


def _ping_is_sane(table):
    return ("max_ping_interval_s", "must be at least 1 second") if table["max_ping_interval_s"] < 1 else None


def _some_check_is_on(table):
    if table["inbound"] == "callback" and not table["encrypt_key"] and not table["verification_token"]:
        return ("encrypt_key", "set the app's Encrypt Key (signatures checked, bodies decrypted) or at least its "
                               "Verification Token: without either anyone could post events to the callback URL")
    return None


PLATFORM = Platform(
    type="feishu", actor="actors.adapters.feishu.adapter.FeishuAdapter",
    summary="Feishu / Lark custom app: signed event callbacks or the long connection in, the IM API out",
    intake="server",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("feishu", CAPABILITIES, 30000, "bytes", edit_interval_s=2.0, min_edit_delta_chars=300,
                 per_chat_ops_per_s=2.0, per_chat_burst=3, typing_interval_s=None),
    options={
        "app_id": Option(str, doc="the app's App ID (developer console: Credentials & Basic Info), cli_..."),
        "app_secret": Option(str, secret=True, doc="the app's App Secret (same page); the tenant access token is "
                                                   "made from the two"),
        "domain": Option(str, "feishu", doc='"feishu" (open.feishu.cn) or "lark" (open.larksuite.com)'),
        "base_url": Option(str, "", doc="the open platform's address instead of the domain's (a fake, in tests)"),
        "encrypt_key": Option(str, "", secret=True, doc="Events & Callbacks > Encryption Strategy: Encrypt Key; "
                                                        "every callback's signature is checked and its body "
                                                        "decrypted with it"),
        "verification_token": Option(str, "", secret=True, doc="same page: Verification Token; a callback whose "
                                                               "token differs is refused"),
        "inbound": Option(str, "callback", allowed=("callback", "long_connection"),
                          doc='how events arrive: "callback" (the platform POSTs them to the Request URL) or '
                              '"long_connection" (a WebSocket the gateway opens: no public URL)'),
        "max_ping_interval_s": Option(float, 120.0, doc="long_connection: pings go at the platform's PingInterval, "
                                                        "at most this far apart; with nothing received for twice "
                                                        "this (plus 15 s) the connection is taken for dead"),
        "callback_host": Option(str, "127.0.0.1", doc="interface the callback server listens on (loopback: "
                                                      "behind the HTTPS proxy the Request URL points at)"),
        "callback_port": Option(int, 8093, doc="its port (0: any free port)"),
        "callback_path": Option(str, "/feishu/events", doc="its path (the Request URL's path)"),
        "require_mention": Option(bool, True, doc="in group chats answer only a message that @mentions the bot; "
                                                  "one-to-one chats are always answered"),
        "reply_in_thread": Option(bool, False, doc="answer a group message as a reply in a thread (话题) under it "
                                                   "rather than in the chat"),
        "max_signature_age_s": Option(float, 3600.0, doc="a signed callback older than this (its "
                                                          "X-Lark-Request-Timestamp) is refused as a replay"),
        "rate_limit_wait_s": Option(float, 2.0, doc="how long a chat waits after a frequency limit (99991400) that "
                                                    "names no x-ogw-ratelimit-reset"),
    },
    checks=(_domain_is_known, _some_check_is_on, _ping_is_sane),
    served=lambda table: table["inbound"] == "callback")
