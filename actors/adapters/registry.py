"""The adapter registry: which platforms exist, which actor runs each, and what its ``[adapters.NAME]`` table holds.

Adding a platform = its own module (a ``PlatformAdapter`` subclass) + one ``register(AdapterType(...))`` call below.
Everything else (child specs, config validation, secret redaction, pacing) follows from the entry.

    [adapters.support_bot]       NAME: the adapter's name in the tree, its inbox platform and its offset key
    type = "telegram"            picks the AdapterType
    profile = "default"          every adapter takes these common keys
    pacing = { edit_interval_s = 2.0 }
    token = "123:abc"            then the keys of its type

Errors are ``ConfigError(file, "[adapters.NAME] key", reason)``, like every other configuration error.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from actors.adapters.access import MODES, pairing_problems
from actors.adapters.pacing import PlatformPacing, pacing_for
from actors.adapters.sender_limits import limit_problems
from actors.profiles.profiles import profile_streams
from common.config import TYPE_NAMES, ConfigError

REQUIRED = object()
ADAPTER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")  # also a session-key and log-friendly platform name
PACING_FIELDS = {f.name: f.type for f in dataclasses.fields(PlatformPacing) if f.name != "platform"}


@dataclass(frozen=True)
class Option:
    """One key of an adapter table. ``secret`` values are redacted from every error string and admin view."""
    kind: type
    default: Any = REQUIRED
    secret: bool = False
    allowed: Optional[tuple] = None
    doc: str = ""


@dataclass(frozen=True)
class AdapterType:
    type: str                      # the value of ``type = "..."``
    actor: str                     # dotted path of the PlatformAdapter subclass
    pacing: str                    # key of actors.adapters.pacing.PACING
    options: Mapping[str, Option] = field(default_factory=dict)
    access: str = "open"           # the access policy when the table names none (actors/adapters/access.py)
    # Checks across keys, on the filled-in table: each returns (key, problem) or None (a config error, exit 78).
    checks: tuple = ()
    # A user's files reach the agent (docs/media.md): checked by the conformance suite's inbound file case.
    receives_files: bool = False

    @property
    def kind(self) -> str:
        return self.actor.rsplit(".", 1)[-1]


COMMON_OPTIONS: dict[str, Option] = {
    "type": Option(str, doc="which platform (a key of REGISTRY)"),
    "profile": Option(str, "default", doc="the profile whose sessions this adapter's chats belong to"),
    "pacing": Option(dict, {}, doc="overrides of this platform's PlatformPacing fields"),
    "access": Option(str, "", allowed=("",) + MODES, doc="who may talk to the agent: open | allowlist | pairing "
                                                         "(empty: the platform's default; docs/access.md)"),
    "allow": Option(list, [], doc="platform user ids always admitted"),
    "pairing": Option(dict, {}, doc="{ ttl_s, max_codes, lockout_s } of pairing codes"),
    "limits": Option(dict, {}, doc="{ per_minute, burst, max_queued_turns } per sender (default 30, 10, 10; "
                                   "per_minute = 0: no limit)"),
}

REGISTRY: dict[str, AdapterType] = {}


def register(entry: AdapterType) -> AdapterType:
    clash = set(entry.options) & set(COMMON_OPTIONS)
    if clash:
        raise ValueError(f"adapter type {entry.type!r} redefines common options {sorted(clash)}")
    REGISTRY[entry.type] = entry
    return entry


register(AdapterType("fake", "actors.adapters.fake.FakePlatformAdapter", pacing="fake", options={
    "base_url": Option(str, doc="http://host:port of the fake platform (tests/fakes/fakeplatform.py)"),
    "poll_timeout_s": Option(float, 1.0, doc="long-poll wait per round"),
}))

# The terminal (``run_gateway.py chat``) is always there unless a [adapters.cli] table says otherwise.
register(AdapterType("cli", "actors.adapters.cli.CliAdapter", pacing="cli"))
IMPLICIT_ADAPTERS = {"cli": {"type": "cli"}}
# With no [adapters] at all, the embedded default: the web chat on http://127.0.0.1:8765/.
DEFAULT_ADAPTERS = {"web": {"type": "webchat"}}


# ------------------------------------------------------------------------------------------------- validation

def config_file(config: Mapping) -> str:
    return config.get("_source") or "(configuration)"


def lookup(name: str, table: Mapping, file: str = "(configuration)") -> AdapterType:
    kind = table.get("type")
    if kind is None:
        raise ConfigError(file, f"[adapters.{name}] type", f"missing (known types: {', '.join(sorted(REGISTRY))})")
    if not isinstance(kind, str) or kind not in REGISTRY:
        raise ConfigError(file, f"[adapters.{name}] type",
                          f"unknown adapter type {kind!r} (known types: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[kind]


def validate_adapter(name: str, table: Mapping, file: str = "(configuration)") -> dict:
    """The table with every key checked and defaults filled in; raises ConfigError naming the first bad key."""
    if not isinstance(name, str) or not ADAPTER_NAME.fullmatch(name):
        raise ConfigError(file, f"[adapters.{name}]",
                          "adapter names must be 1-32 of a-z, 0-9, '_' or '-', starting with a letter or digit")
    if not isinstance(table, Mapping):
        raise ConfigError(file, f"[adapters.{name}]", "must be a table")
    entry = lookup(name, table, file)
    options = {**COMMON_OPTIONS, **entry.options}
    for key in table:
        if key not in options:
            raise ConfigError(file, f"[adapters.{name}] {key}",
                              f"unknown key for type {entry.type!r} (known keys: {', '.join(sorted(options))})")
    out = {}
    for key, option in options.items():
        where = f"[adapters.{name}] {key}"
        if key not in table:
            if option.default is REQUIRED:
                raise ConfigError(file, where, f"missing (required for type {entry.type!r})")
            out[key] = option.default
            continue
        out[key] = _checked(file, where, table[key], option)
    _check_pacing(file, name, out["pacing"])
    _check_access(file, name, out)
    for check in entry.checks:
        if (problem := check(out)) is not None:
            raise ConfigError(file, f"[adapters.{name}] {problem[0]}", problem[1])
    return out


def _check_access(file: str, name: str, args: Mapping) -> None:
    for user in args["allow"]:
        if isinstance(user, bool) or not isinstance(user, (str, int)) or not str(user).strip():
            raise ConfigError(file, f"[adapters.{name}] allow", f"user ids are strings or integers, got {user!r}")
    for problem in pairing_problems(args["pairing"]):
        raise ConfigError(file, f"[adapters.{name}] pairing", problem)
    for problem in limit_problems(args["limits"]):
        raise ConfigError(file, f"[adapters.{name}] limits", problem)


def _checked(file: str, where: str, value: Any, option: Option) -> Any:
    kind = option.kind
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
        shown = "[redacted]" if option.secret else repr(value)
        raise ConfigError(file, where, f"expected {TYPE_NAMES.get(kind, 'a table')}, got {shown}")
    if option.allowed is not None and value not in option.allowed:
        raise ConfigError(file, where, f"must be one of {', '.join(map(repr, option.allowed))}")
    if kind in (int, float) and value < 0:
        raise ConfigError(file, where, f"must not be negative, got {value!r}")
    if kind is str and option.default is REQUIRED and not value.strip():
        raise ConfigError(file, where, "must not be empty")
    return value


def _check_pacing(file: str, name: str, overrides: Mapping) -> None:
    for key, value in overrides.items():
        where = f"[adapters.{name}] pacing.{key}"
        if key not in PACING_FIELDS:
            raise ConfigError(file, where, f"unknown pacing field (known: {', '.join(sorted(PACING_FIELDS))})")
        declared = PACING_FIELDS[key]  # annotations are strings here: "int", "Optional[float]", ...
        wanted = bool if declared == "bool" else str if declared == "str" else int if declared == "int" else float
        ok = isinstance(value, wanted) or (wanted is float and isinstance(value, int))
        if not ok or (wanted is not bool and isinstance(value, bool)):
            raise ConfigError(file, where, f"expected {TYPE_NAMES[wanted]}, got {value!r}")


def validate_all(config: Mapping) -> dict:
    """Every [adapters.NAME] table, validated: {name: args}. Meant for config loading too (exit 78 early)."""
    file = config_file(config)
    tables = {**IMPLICIT_ADAPTERS, **(config.get("adapters") or DEFAULT_ADAPTERS)}
    return {name: validate_adapter(name, table, file) for name, table in tables.items()}


# ------------------------------------------------------------------------------------- what an adapter reads

def entry_of(args: Mapping) -> AdapterType:
    return REGISTRY[args["type"]]


def secret_values(args: Mapping) -> list[str]:
    """The configured secret values of an adapter (tokens, signing keys), for ``common.redact.redact``."""
    options = entry_of(args).options
    values = []
    for key, opt in options.items():
        value = args.get(key) if opt.secret else None
        if value:
            values.extend(str(v) for v in value) if isinstance(value, (list, tuple)) else values.append(str(value))
    return values


def pacing_of(args: Mapping) -> PlatformPacing:
    return pacing_for(entry_of(args).pacing, args.get("pacing") or None)


def reply_pacing(config: dict, args: dict):
    """The adapter's pacing: its registry entry's table with the [adapters.NAME] pacing overrides applied; for a
    reply of a profile with ``stream = false``, paced as on a platform without edits: sent once, complete."""
    pacing = _configured_pacing(config, args["adapter"], args["platform"])
    streams = args["stream"] if "stream" in args else (not args.get("profile") or
                                                       profile_streams(config, args["profile"]))
    if not streams:   # as the turn's start had it (actors/sessions/turn.py consumer_args), else as configured
        pacing = dataclasses.replace(pacing, supports_edit=False)
    return pacing


_PACING_SEEN: dict[tuple[int, str], tuple[dict, PlatformPacing]] = {}   # (id(config), adapter) -> (config, pacing)


def _configured_pacing(config: dict, adapter: str, platform: str) -> PlatformPacing:
    """The adapter's pacing under ``config``, worked out once per configuration (every reply asks; validating every
    adapter table for it cost a reply more than cutting its text). A reload brings a new config object."""
    seen = _PACING_SEEN.get((id(config), adapter))
    if seen is not None and seen[0] is config:
        return seen[1]
    table = validate_all(config).get(adapter)
    pacing = pacing_of(table) if table is not None else pacing_for(platform)
    if len(_PACING_SEEN) >= 64:
        _PACING_SEEN.clear()
    _PACING_SEEN[(id(config), adapter)] = (config, pacing)
    return pacing


register(AdapterType("webchat", "actors.adapters.webchat.adapter.WebChatAdapter", pacing="webchat",
                     receives_files=True, options={
    "host": Option(str, "127.0.0.1", doc="the one interface the chat page listens on"),
    "port": Option(int, 8765, doc="TCP port of the chat page; 0 = any free port (logged)"),
    "max_tabs": Option(int, 256, doc="open chat tabs (websockets) of every visitor together, each holding a "
                       "connection and its buffers: the bound a flood of visitors meets (503 past it)"),
    "max_tabs_per_client": Option(int, 32, doc="open chat tabs (websockets) one client address may hold, so no one "
                                  "client takes every slot; 0 = no cap (behind a reverse proxy, where every client "
                                  "has the proxy's address)"),
    "login_token": Option(str, "", doc="a secret that opens the page for a web chat reachable beyond loopback: a "
                          "person opens http://HOST:PORT/?token=THE_TOKEN once and a cookie keeps them in; empty = "
                          "no login (then keep the default loopback host)"),
}))


# Telegram Bot API (actors/adapters/telegram/, docs/telegram.md).
# Anyone on Telegram can write to a bot: strangers get a pairing code unless the table says otherwise.
register(AdapterType("telegram", "actors.adapters.telegram.adapter.TelegramAdapter", pacing="telegram",
                     receives_files=True,
                     access="pairing", options={
    "token": Option(str, secret=True, doc="the bot token from @BotFather"),
    "base_url": Option(str, "https://api.telegram.org", doc="Bot API server (a local Bot API server, or a fake)"),
    "mode": Option(str, "polling", allowed=("polling", "webhook"), doc="how updates arrive"),
    "poll_timeout_s": Option(float, 25.0, doc="long-poll wait per getUpdates (whole seconds, at least 1)"),
    "webhook_host": Option(str, "127.0.0.1", doc="interface the webhook server listens on (loopback: behind a proxy)"),
    "webhook_port": Option(int, 8443, doc="its port (0: any free port)"),
    "webhook_path": Option(str, "/telegram/webhook", doc="its path"),
    "webhook_url": Option(str, "", doc="the public https URL given to setWebhook (empty: http://host:port/path)"),
    "webhook_secret": Option(str, "", secret=True, doc="X-Telegram-Bot-Api-Secret-Token; required in webhook mode"),
    "parse_mode": Option(str, "HTML", allowed=("HTML", "MarkdownV2", "none"), doc="how replies are formatted"),
    "per_user_in_groups": Option(bool, None, doc="one session per user in groups (unset: [sessions] decides)"),
    "bot_ops_per_s": Option(float, 25.0, doc="sends/edits/deletes per second for the whole bot (Telegram: ~30)"),
}, checks=(lambda t: ("webhook_secret", "required in webhook mode: without it anyone could post updates")
           if t["mode"] == "webhook" and not t["webhook_secret"].strip() else None,)))


# Generic signed webhook + OpenAI-compatible API (actors/adapters/http_api/, docs/http_api.md).
register(AdapterType("http", "actors.adapters.http_api.adapter.HttpApiAdapter", pacing="http",
                     receives_files=True, options={
    "host": Option(str, "127.0.0.1", doc="interface the HTTP server listens on (loopback by default)"),
    "port": Option(int, 8088, doc="its TCP port; 0 = any free port (logged)"),
    "hmac_secret": Option(str, "", secret=True, doc="signs /webhook bodies and reply callbacks (empty: no /webhook)"),
    "callback_url": Option(str, "", doc="where replies to webhook conversations are POSTed"),
    "api_tokens": Option(list, [], secret=True, doc="bearer tokens accepted by /v1 (empty: no /v1)"),
    "max_body_bytes": Option(int, 1_048_576, doc="larger request bodies are refused with 413"),
    "reply_timeout_s": Option(float, 300.0, doc="how long /v1/chat/completions waits for its reply (then 504)"),
    "profiles": Option(list, [], doc="profiles a /v1 request may pick with its model (empty: its own and every "
                                     "[profiles.NAME])"),
    "models": Option(dict, {}, doc="model names mapped to profiles for /v1 ('*': any other name)"),
}))



# Slack: one app in one workspace (actors/adapters/slack/, docs/slack.md). Anyone in the workspace can write to the
# app: strangers get a pairing code unless the table says otherwise.
def _slack_tokens(table: Mapping) -> Optional[tuple[str, str]]:
    if table["inbound"] == "socket_mode" and not table["app_token"].strip():
        return "app_token", "required with inbound = \"socket_mode\" (an app-level xapp- token)"
    if table["inbound"] == "events_api" and not table["signing_secret"].strip():
        return "signing_secret", "required with inbound = \"events_api\": without it anyone could post events"
    return None


register(AdapterType("slack", "actors.adapters.slack.adapter.SlackAdapter", pacing="slack", access="pairing",
                     options={
    "bot_token": Option(str, secret=True, doc="the Bot User OAuth Token (xoxb-...)"),
    "app_token": Option(str, "", secret=True, doc="the app-level token (xapp-..., scope connections:write); "
                                                  "required in Socket Mode"),
    "signing_secret": Option(str, "", secret=True, doc="the app's Signing Secret; required with the Events API"),
    "base_url": Option(str, "https://slack.com/api/", doc="Web API base URL (a fake, in tests)"),
    "inbound": Option(str, "socket_mode", allowed=("socket_mode", "events_api"), doc="how events arrive"),
    "events_host": Option(str, "127.0.0.1", doc="interface the Events API server listens on (loopback: behind a "
                                                "TLS proxy)"),
    "events_port": Option(int, 3000, doc="its port (0: any free port)"),
    "events_path": Option(str, "/slack/events", doc="its path (the Request URL's path)"),
    "require_mention": Option(bool, True, doc="in channels, answer only messages that mention the app (DMs always)"),
    "per_user_in_groups": Option(bool, None, doc="one session per user in channels (unset: [sessions] decides)"),
}, checks=(_slack_tokens,)))


# Discord: the gateway WebSocket and REST (actors/adapters/discord/, docs/discord.md). Anyone sharing a server with
# the bot can DM it: strangers get a pairing code unless the table says otherwise.
# GUILDS, GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT (privileged: enabled in the Developer Portal)
DISCORD_INTENTS = (1 << 0) | (1 << 9) | (1 << 12) | (1 << 15)
register(AdapterType("discord", "actors.adapters.discord.adapter.DiscordAdapter", pacing="discord",
                     access="pairing", options={
    "token": Option(str, secret=True, doc="the bot token (Developer Portal: Bot > Reset Token)"),
    "api_base_url": Option(str, "https://discord.com/api/v10", doc="REST base (a fake in tests)"),
    "gateway_url": Option(str, "", doc="the gateway to open (empty: the one GET /gateway/bot names)"),
    "intents": Option(int, DISCORD_INTENTS, doc="gateway intents bit field (default: guilds, guild and direct "
                                                "messages, message content)"),
    "require_mention": Option(bool, True, doc="in guild channels and threads answer only a message that mentions "
                                              "the bot or replies to it (DMs are always answered)"),
}))


# WeChat through WeCom (企业微信): one application of one corp; callbacks in over HTTP, the active message API out
# (actors/adapters/wecom/, docs/wechat.md). Any member in the application's visible range can write to it:
# strangers get a pairing code unless the table says otherwise.
def _wecom_key(table: Mapping) -> Optional[tuple[str, str]]:
    from actors.adapters.wecom.crypto import aes_key
    try:
        aes_key(table["encoding_aes_key"])
    except ValueError as exc:
        return "encoding_aes_key", str(exc)
    return None


register(AdapterType("wecom", "actors.adapters.wecom.adapter.WeComAdapter", pacing="wechat",
                     receives_files=True, access="pairing",
                     options={
    "corp_id": Option(str, doc="the corp id (企业ID: My Company > Company Information); also the callbacks' "
                               "ReceiveId"),
    "agent_id": Option(int, doc="the application's AgentId"),
    "secret": Option(str, secret=True, doc="the application's Secret (for gettoken)"),
    "token": Option(str, secret=True, doc="the callback Token (Receive Messages > Set API Receiving)"),
    "encoding_aes_key": Option(str, secret=True, doc="the callback EncodingAESKey (43 characters)"),
    "base_url": Option(str, "https://qyapi.weixin.qq.com", doc="the server API (a fake, in tests)"),
    "callback_host": Option(str, "127.0.0.1", doc="interface the callback server listens on (loopback: behind a "
                                                  "TLS proxy)"),
    "callback_port": Option(int, 8090, doc="its port (0: any free port)"),
    "callback_path": Option(str, "/wecom/callback", doc="its path (the callback URL's path)"),
    "max_timestamp_skew_s": Option(float, 600.0, doc="callbacks whose timestamp is further from our clock are "
                                                     "refused as replays (0: not checked)"),
    "rate_limit_wait_s": Option(float, 10.0, doc="how long a chat waits after WeCom's 'api freq out of limit' "
                                                 "(45009), which names no wait"),
}, checks=(_wecom_key,)))
# Matrix: one account on one homeserver, the client-server API (actors/adapters/matrix/, docs/matrix.md).
# Anyone on the federation can invite the bot: strangers get a pairing code unless the table says otherwise.
register(AdapterType("matrix", "actors.adapters.matrix.adapter.MatrixAdapter", pacing="matrix", access="pairing",
                     options={
    "homeserver": Option(str, doc="the homeserver's client-server API base URL, e.g. https://matrix.example.org"),
    "access_token": Option(str, secret=True, doc="the bot account's access token (its device: keep the same token, "
                                                 "transaction ids are remembered per device)"),
    "sync_timeout_s": Option(float, 30.0, doc="long-poll wait per /sync"),
    "request_timeout_s": Option(float, 30.0, doc="seconds a request may take beyond the long-poll wait"),
    "require_mention": Option(bool, True, doc="in rooms that are not DMs answer only messages that mention the "
                                              "bot (DMs are always answered)"),
}, checks=(lambda t: None if t["homeserver"].startswith(("http://", "https://")) else
           ("homeserver", f"must be an http:// or https:// URL, got {t['homeserver']!r}"),)))
# Signal through signal-cli's HTTP daemon (actors/adapters/signal/, docs/signal.md). Anyone who knows the number can
# write to it: strangers get a pairing code unless the table says otherwise. The daemon has no authentication of its
# own, so there is no secret to configure: keep it on loopback.
register(AdapterType("signal", "actors.adapters.signal.adapter.SignalAdapter", pacing="signal",
                     receives_files=True, access="pairing",
                     options={
    "account": Option(str, doc="the bot's Signal number, as registered with signal-cli (+15551234567)"),
    "account_uuid": Option(str, "", doc="the bot's ACI (signal-cli listAccounts / the first event's account), to "
                                        "recognise mentions of the bot when Signal hides its number"),
    "base_url": Option(str, "http://127.0.0.1:8080", doc="signal-cli daemon --http address"),
    "multi_account": Option(bool, False, doc="the daemon serves several accounts (started without -a): name ours "
                                             "in every call"),
    "require_mention": Option(bool, True, doc="in groups answer only a message that mentions the bot or quotes it "
                                              "(direct chats are always answered)"),
    "idle_timeout_s": Option(float, 45.0, doc="a stream silent this long is opened again (signal-cli writes a "
                                              "keep-alive every 15 s)"),
}, checks=(lambda t: ("idle_timeout_s", "must be at least 1 second") if t["idle_timeout_s"] < 1 else None,)))
# IRC: one nick on one server, RFC 1459 / 2812 over asyncio streams (actors/adapters/irc/, docs/irc.md). Anyone on
# the network can write to the nick, and a nick is only as much of an identity as the network's services make it:
# strangers get a pairing code unless the table says otherwise.
def _irc_problems(table: Mapping) -> Optional[tuple[str, str]]:
    for key in ("nick", *(("alt_nicks",) if table["alt_nicks"] else ())):
        for nick in ([table[key]] if key == "nick" else table[key]):
            if not isinstance(nick, str) or not nick or any(c in nick for c in " ,:!@*?#&\r\n\0"):
                return key, f"{nick!r} is no IRC nick"
    for channel in table["channels"]:
        if not isinstance(channel, str) or channel[:1] not in "#&+!" or any(c in channel for c in ",\r\n\0\a"):
            return "channels", f"{channel!r} is no channel name (\"#name\" or \"#name key\")"
    if table["sasl_username"] and not table["sasl_password"]:
        return "sasl_password", "required with sasl_username"
    if table["flood_lines_per_s"] <= 0 or table["flood_burst"] < 1:
        return "flood_lines_per_s", "the flood bucket needs a positive rate and a burst of at least 1"
    if table["ping_timeout_s"] <= table["ping_interval_s"]:
        return "ping_timeout_s", "must be longer than ping_interval_s (the ping goes first, then the wait)"
    return None


register(AdapterType("irc", "actors.adapters.irc.adapter.IrcAdapter", pacing="irc", access="pairing", options={
    "host": Option(str, doc="the IRC server's host name or address"),
    "port": Option(int, 6667, doc="its port (6697 is the usual one for TLS)"),
    "tls": Option(bool, False, doc="connect with TLS"),
    "tls_verify": Option(bool, True, doc="check the server's certificate (false only for a server of your own)"),
    "nick": Option(str, doc="the nick to register"),
    "alt_nicks": Option(list, [], doc="nicks to try when it is taken (then the nick with _ appended)"),
    "username": Option(str, "", doc="the user (ident) name (empty: the nick)"),
    "realname": Option(str, "agent gateway", doc="the real name shown by WHOIS"),
    "server_password": Option(str, "", secret=True, doc="the server's connection password (PASS), if it has one"),
    "sasl_username": Option(str, "", doc="the account for SASL PLAIN (empty: no SASL)"),
    "sasl_password": Option(str, "", secret=True, doc="its password"),
    "channels": Option(list, [], doc="channels to join (\"#name\" or \"#name key\"); answered when addressed "
                                     "by nick"),
    "flood_lines_per_s": Option(float, 0.5, doc="lines per second for the whole connection, after the burst"),
    "flood_burst": Option(int, 4, doc="lines that may go at once"),
    "connect_timeout_s": Option(float, 20.0, doc="connecting and registering, at most"),
    "ping_interval_s": Option(float, 60.0, doc="ping the server after this much silence"),
    "ping_timeout_s": Option(float, 120.0, doc="no data at all for this long: the connection is taken for dead"),
    "send_wait_s": Option(float, 30.0, doc="a reply waits this long for the connection (and the channel) to be "
                                           "back before the attempt counts as failed"),
    "max_queued_lines": Option(int, 1000, doc="received lines waiting for the inbox at most (a flood beyond is "
                                              "dropped)"),
    "quit_message": Option(str, "gateway stopping", doc="the QUIT message at a stop"),
}, checks=(_irc_problems,)))
