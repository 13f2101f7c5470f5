"""OneBot v11: the open protocol QQ frameworks speak (NapCat, LLOneBot, Lagrange.OneBot), reached over its forward
WebSocket, its reverse one, or HTTP (events POSTed, signed; its HTTP API) (README.md beside this file). Anyone who
can add the QQ account can write to it: strangers get a pairing code unless the table says otherwise.

Pacing. OneBot itself has no rate limit and no 429: the account is a person's QQ account, and what QQ punishes
(a muted or banned account) is sending faster than a person does. So the adapter keeps the whole account at a human
pace (``account_pace.py``: a per-minute bound, a minimum gap with jitter, a daily bound; the options below), and
each chat at one message per 2 s with a burst of 2 (the kit's per-chat budget) under it. No edits (QQ has none):
answers go once, final. Text: OneBot names no limit; QQ clients cut long messages at about 5,000 characters, so a
message is kept to 4,500 (``chars``). No idempotent send: a send whose answer was lost is re-sent with the mark."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=False, delete=True, threads=False, reactions=False, files_in=True,
                            files_out=False, voice=False, buttons=False, typing=False)


def _pace_is_sane(table) -> tuple[str, str] | None:
    if float(table["messages_per_minute"]) <= 0:
        return "messages_per_minute", "must be above 0"
    if float(table["min_gap_s"]) < 0 or float(table["gap_jitter_s"]) < 0:
        return "min_gap_s", "the gap and its jitter must not be negative"
    if int(table["daily_limit"]) < 1:
        return "daily_limit", "must be at least 1"
    return None


def _mode_is_complete(table) -> tuple[str, str] | None:
    if table["mode"] == "forward" and not str(table["url"]).startswith(("ws://", "wss://")):
        return "url", "must be the implementation's forward WebSocket, ws://host:port or wss://..."
    if table["mode"] == "reverse" and not str(table["listen_path"]).startswith("/"):
        return "listen_path", "must start with /"
    if table["mode"] == "reverse" and not table["access_token"] and table["listen_host"] not in LOOPBACK:
        return "access_token", "a reverse WebSocket listening beyond this machine needs an access token"
    if table["mode"] == "http" and not str(table["api_url"]).startswith(("http://", "https://")):
        return "api_url", "must be the implementation's HTTP API, http://host:port"
    if table["mode"] == "http" and not str(table["post_path"]).startswith("/"):
        return "post_path", "must start with /"
    if table["mode"] == "http" and not table["secret"] and table["listen_host"] not in LOOPBACK:
        return "secret", "event POSTs taken beyond this machine need a secret (X-Signature)"
    return None


LOOPBACK = ("127.0.0.1", "::1", "localhost")


PLATFORM = Platform(
    type="onebot", actor="actors.adapters.onebot.adapter.OneBotAdapter",
    summary="QQ through OneBot v11 (NapCat, LLOneBot, Lagrange): its forward WebSocket, paced like a person",
    intake="socket", capabilities=CAPABILITIES, access="pairing",
    pacing=paced("onebot", CAPABILITIES, 4500, "chars", edit_interval_s=0.0, min_edit_delta_chars=0,
                 per_chat_ops_per_s=0.5, per_chat_burst=2, typing_interval_s=None),
    options={
        "mode": Option(str, "forward", allowed=("forward", "reverse", "http"),
                       doc="forward: the gateway connects to the implementation's WebSocket server (url); "
                           "reverse: the implementation connects to the gateway's (listen_host, listen_port); "
                           "http: the implementation POSTs events to the gateway (listen_*, post_path, secret) "
                           "and the gateway calls its HTTP API (api_url)"),
        "url": Option(str, "", doc="forward: the implementation's WebSocket server, e.g. ws://127.0.0.1:3001"),
        "listen_host": Option(str, "127.0.0.1", doc="reverse, http: the address the gateway listens on"),
        "listen_port": Option(int, 6700, doc="reverse, http: the port the gateway listens on (0: any free one, "
                                             "logged)"),
        "listen_path": Option(str, "/onebot/v11/ws", doc="reverse: the path of the WebSocket"),
        "post_path": Option(str, "/onebot/v11/post", doc="http: the path events are POSTed to"),
        "api_url": Option(str, "", doc="http: the implementation's HTTP API, e.g. http://127.0.0.1:3000"),
        "secret": Option(str, "", secret=True, doc="http: the implementation's secret: every event POST must "
                                                   "carry X-Signature (HMAC-SHA1 of the body)"),
        "access_token": Option(str, "", secret=True, doc="the implementation's access_token: sent as "
                                                         "Authorization: Bearer (forward), required of it (reverse)"),
        "self_id": Option(str, "", doc="the QQ account (its number) this table speaks for; empty: the account "
                                       "get_login_info names. Events of any other account are skipped"),
        "require_mention": Option(bool, True, doc="in groups answer only a message that @-mentions the account "
                                                  "(or replies to it); private messages are always answered"),
        "heartbeat_interval_s": Option(float, 30.0, doc="the implementation's heartbeat interval (its "
                                                        "heartInterval / heartbeat.interval setting)"),
        "messages_per_minute": Option(float, 10.0, doc="the whole account's sends and deletes per minute"),
        "min_gap_s": Option(float, 1.5, doc="at least this long between two of the account's messages"),
        "gap_jitter_s": Option(float, 1.0, doc="a random extra wait up to this long on every gap"),
        "daily_limit": Option(int, 1000, doc="at most this many messages a day (UTC); past it sends fail, saying "
                                             "so, until the day ends"),
        "action_timeout_s": Option(float, 20.0, doc="an action's answer must come within this"),
    },
    checks=(_pace_is_sane, _mode_is_complete),
    # reverse WebSocket: the implementation holds a connection to us that carries no message while idle, so a
    # gateway stopped under it is started again by its reconnect, over and over; HTTP POST wakes it per event.
    served=lambda table: table["mode"] == "http")
