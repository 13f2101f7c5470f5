"""The checks of ``doctor`` that reach outside the configuration: the model endpoint, a platform's credentials, the
ports the gateway will listen on. Each returns one ``Check``; none raises, none waits longer than its timeout.

Network probes are one short request each (``GET {base_url}/models``, Telegram's ``getMe``); what they print is
for the operator (it names the address asked) and goes through the CLI's redacting stdout like all admin output.
"""
from __future__ import annotations

import asyncio
import errno
import socket
from dataclasses import dataclass
from typing import Iterable, Optional

import aiohttp

from common.chat_errors import failure_kind
from common.redact import redact
from actors.adapters.errors import PermanentError
from actors.adapters.registry import secret_values
from daemon.port_holder import describe_holder, listening_pid

PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Check:
    status: str                    # ok | warn | fail | skip
    name: str                      # what was checked: "agent key", "model endpoint", "port web", ...
    detail: str                    # why, in one line


# ------------------------------------------------------------------------------------------ the model endpoint

def model_answer(status: int, model: str, listed: Optional[list]) -> Check:
    """What an HTTP answer to ``GET /models`` says about the agent's next turn. Pure."""
    name = "model endpoint"
    if status == 200:
        if listed is not None and model not in listed:
            return Check("warn", name, f"reachable (HTTP 200), but model {model!r} is not among the {len(listed)} "
                                       "it lists: a turn may be refused")
        return Check("ok", name, f"reachable (HTTP 200){f', model {model!r} listed' if listed else ''}")
    if status in (401, 403):
        return Check("fail", name, f"HTTP {status}: the service refused the key (check [agent] api_key_env)")
    if status == 404:
        return Check("warn", name, "reachable, but it has no model list (HTTP 404 for GET /models): not checked "
                                   "further")
    if status == 429:
        return Check("warn", name, "reachable, but rate limited right now (HTTP 429)")
    return Check("fail" if status >= 500 else "warn", name, f"HTTP {status} for GET /models")


def unreachable(exc: BaseException, what: str, secrets: Iterable[str] = ()) -> str:
    """Why ``what`` could not be asked, for the operator: the kind, then the exception's own words."""
    words = {"dns": "its host name does not resolve", "timeout": f"no answer within {PROBE_TIMEOUT_S:g}s"}
    kind = failure_kind(exc)
    cause = redact(" ".join(f"{type(exc).__name__}: {exc}".split()), tuple(secrets))[:200]
    return f"unreachable: {what}: {words.get(kind, 'cannot connect')} ({cause})"


async def probe_model(base_url: str, model: str, api_key: Optional[str]) -> Check:
    url = base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            async with http.get(url, headers=headers) as response:
                listed = None
                if response.status == 200:
                    try:
                        body = await response.json(content_type=None)
                        listed = [m.get("id") for m in body.get("data", []) if isinstance(m, dict)]
                    except (ValueError, AttributeError, aiohttp.ClientError):
                        listed = None
                return model_answer(response.status, model, listed)
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
        return Check("fail", "model endpoint", unreachable(exc, url, [api_key or ""]))


# ------------------------------------------------------------------------------------------ platform credentials

async def _ask_platform(name: str, api, ask, refused: str, where: str):
    """One question to a platform through the adapter's own API client (closed after): its answer, or the failed
    Check that says whether the platform refused the credential or could not be asked at all (redacted)."""
    try:
        return await ask()
    except PermanentError as exc:
        return Check("fail", f"adapter {name}", f"{refused}: {api.redact(str(exc))}")
    except Exception as exc:  # noqa: BLE001 - every other failure is "could not ask", and says why
        return Check("fail", f"adapter {name}", f"cannot reach {where}: {api.redact(str(exc))}")
    finally:
        await api.close()


async def probe_telegram(name: str, settings: dict) -> Check:
    """``getMe`` through the adapter's own API client: the token and the Bot API server, in one call."""
    from actors.adapters.telegram.client import TelegramAPI   # only this probe needs this platform's client
    api = TelegramAPI(settings["token"], settings["base_url"], request_timeout=PROBE_TIMEOUT_S)
    me = await _ask_platform(name, api, api.get_me, "Telegram refused the token",
                             f"the Bot API at {settings['base_url']}")
    if isinstance(me, Check):
        return me
    username = me.get("username") if isinstance(me, dict) else None
    return Check("ok", f"adapter {name}", f"the token works (getMe: @{username or '?'})")


async def probe_slack(name: str, settings: dict) -> Check:
    """``auth.test`` with the bot token through the adapter's own client: the token and the Web API, in one call."""
    from actors.adapters.slack.client import SlackAPI   # only this probe needs this platform's client
    api = SlackAPI(settings["bot_token"], settings["base_url"], request_timeout=PROBE_TIMEOUT_S)
    me = await _ask_platform(name, api, api.auth_test, "Slack refused the bot token",
                             f"the Web API at {settings['base_url']}")
    if isinstance(me, Check):
        return me
    return Check("ok", f"adapter {name}",
                 f"the bot token works (auth.test: {me.get('user') or '?'} in {me.get('team') or '?'})")


async def probe_mattermost(name: str, settings: dict) -> Check:
    """``GET /users/me`` with the token through the adapter's own REST client: the token and the server, in one
    call; says whether the token is a bot account's or a person's (whose posts the bot's answers then look like)."""
    from actors.adapters.mattermost.client import MattermostREST   # only this probe needs this platform's client
    api = MattermostREST(settings["base_url"], settings["token"], request_timeout=PROBE_TIMEOUT_S)
    me = await _ask_platform(name, api, api.me, "Mattermost refused the token", f"the server at {settings['base_url']}")
    if isinstance(me, Check):
        return me
    account = "a bot account" if me.get("is_bot") else "a person's account (a personal access token)"
    return Check("ok", f"adapter {name}", f"the token works (users/me: @{me.get('username') or '?'}, {account})")


MESSAGE_CONTENT_INTENT = 1 << 15
# Application flags saying the Message Content intent is enabled in the Developer Portal (GATEWAY_MESSAGE_CONTENT,
# and GATEWAY_MESSAGE_CONTENT_LIMITED for a bot in fewer than 100 servers).
MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)


async def probe_discord(name: str, settings: dict) -> Check:
    """``GET /users/@me`` (the token) and ``GET /applications/@me`` (the intents the Developer Portal grants: asking
    for Message Content without it makes the gateway close with 4014), through the adapter's own REST client."""
    from actors.adapters.discord.client import DiscordREST   # only this probe needs this platform's client
    api = DiscordREST(settings["token"], settings["api_base_url"], request_timeout=PROBE_TIMEOUT_S)

    async def both():
        return await api.get_me(), await api.application()
    answer = await _ask_platform(name, api, both, "Discord refused the token",
                                 f"Discord at {settings['api_base_url']}")
    if isinstance(answer, Check):
        return answer
    me, application = answer
    flags = application.get("flags") if isinstance(application, dict) else None
    if settings["intents"] & MESSAGE_CONTENT_INTENT and isinstance(flags, int) and not flags & MESSAGE_CONTENT_FLAGS:
        return Check("fail", f"adapter {name}", "the intents ask for Message Content, which the application does "
                                                "not have: enable it in the Developer Portal (Bot > Privileged "
                                                "Gateway Intents), or drop it from intents (actors/adapters/discord/README.md)")
    username = me.get("username") if isinstance(me, dict) else None
    return Check("ok", f"adapter {name}", f"the token works (users/@me: {username or '?'})")


async def probe_wecom(name: str, settings: dict) -> Check:
    """``gettoken`` through the adapter's own client: the corp id, the application's secret and the server API, in
    one call (the callback token and AES key are WeCom's to check, when the callback URL is saved)."""
    from actors.adapters.wecom.client import WeComAPI   # only this probe needs this platform's client
    api = WeComAPI(settings["corp_id"], settings["secret"], settings["base_url"], request_timeout=PROBE_TIMEOUT_S)
    answer = await _ask_platform(name, api, api.fetch_token, "WeCom refused the corp id or secret",
                                 f"the WeCom API at {settings['base_url']}")
    if isinstance(answer, Check):
        return answer
    return Check("ok", f"adapter {name}", f"the corp id and secret work (gettoken: a token for "
                                          f"{answer.get('expires_in', '?')} s)")


async def probe_whatsapp(name: str, settings: dict) -> Check:
    """``GET /{phone-number-id}`` through the adapter's own client: the access token, the phone number id and the
    Graph API, in one call (the app secret and verify token are Meta's to use, when the webhook URL is saved)."""
    from actors.adapters.whatsapp.client import GraphAPI   # only this probe needs this platform's client
    api = GraphAPI(settings["phone_number_id"], settings["access_token"], settings["base_url"],
                   settings["api_version"], request_timeout=PROBE_TIMEOUT_S)
    answer = await _ask_platform(name, api, api.phone_number, "Meta refused the access token or phone number id",
                                 f"the Graph API at {settings['base_url']}")
    if isinstance(answer, Check):
        return answer
    return Check("ok", f"adapter {name}", f"the access token works for {answer.get('display_phone_number', '?')} "
                                          f"({answer.get('verified_name', '?')})")


async def probe_line(name: str, settings: dict) -> Check:
    """``GET /v2/bot/info`` through the adapter's own client: the channel access token and the Messaging API, in one
    call (the channel secret is LINE's to check: the console's webhook Verify button)."""
    from actors.adapters.line.client import LineAPI   # only this probe needs this platform's client
    api = LineAPI(settings["channel_access_token"], settings["api_base_url"], settings["data_base_url"],
                  request_timeout=PROBE_TIMEOUT_S)
    bot = await _ask_platform(name, api, api.bot_info, "LINE refused the channel access token",
                              f"the Messaging API at {settings['api_base_url']}")
    if isinstance(bot, Check):
        return bot
    return Check("ok", f"adapter {name}", f"the channel access token works (bot info: {bot.get('displayName', '?')}, "
                                          f"{bot.get('basicId', '?')})")


async def probe_googlechat(name: str, settings: dict) -> Check:
    """An OAuth access token for the service account (its key file read, its assertion signed and exchanged at the
    token endpoint) through the adapter's own code: the key and the account, in one call. The Chat API's answer to
    the app (the app configured, the account the app's) shows only on the first send."""
    from actors.adapters.googlechat.adapter import read_key_file   # only this probe needs this platform's client
    from actors.adapters.googlechat.auth import ServiceAccountTokens
    from actors.adapters.http_session import HttpSession
    api = HttpSession(request_timeout=PROBE_TIMEOUT_S)
    api.redact = lambda text: text     # the probe's failures name no secret: the key never leaves the assertion

    async def ask():
        account = await asyncio.to_thread(read_key_file, settings["service_account_file"])
        await ServiceAccountTokens(api, account, settings["oauth_url"]).token()
        return account
    endpoint = settings["oauth_url"] or "the key file's token_uri"
    account = await _ask_platform(name, api, ask, "the service account was refused", f"the token endpoint ({endpoint})")
    if isinstance(account, Check):
        return account
    return Check("ok", f"adapter {name}", f"the service account works (an access token for {account.client_email})")


async def probe_teams(name: str, settings: dict) -> Check:
    """An OAuth access token for the bot (the client-credentials grant of its app id and secret at the tenant's token
    endpoint) through the adapter's own code: the app id, the secret and the tenant, in one call. The Connector's
    answer to the bot (the bot installed where it is asked to write) shows only on the first send."""
    from actors.adapters.http_session import HttpSession   # only this probe needs this platform's client
    from actors.adapters.teams.adapter import token_url
    from actors.adapters.teams.auth import BotTokens
    api = HttpSession(request_timeout=PROBE_TIMEOUT_S)
    api.redact = lambda text: redact(text, secret_values(settings))
    url = token_url(settings)
    tokens = BotTokens(api, settings["app_id"], settings["app_password"], url)
    answer = await _ask_platform(name, api, tokens.token, "the token endpoint refused the app id or secret",
                                 f"the token endpoint ({url})")
    if isinstance(answer, Check):
        return answer
    return Check("ok", f"adapter {name}", f"the app id and secret work (an access token for {settings['app_id']})")


async def probe_feishu(name: str, settings: dict) -> Check:
    """A tenant access token and ``GET /open-apis/bot/v3/info`` through the adapter's own client: the app id, the app
    secret, the bot ability and the open platform, in one call (the Encrypt Key and Verification Token are the
    platform's to use, when the Request URL is saved); with the long connection, its endpoint too."""
    from actors.adapters.feishu.client import FeishuAPI   # only this probe needs this platform's client
    from actors.adapters.feishu.platform import HOSTS
    base_url = settings["base_url"] or HOSTS[settings["domain"]]
    api = FeishuAPI(base_url, settings["app_id"], settings["app_secret"], request_timeout=PROBE_TIMEOUT_S)
    long_connection = settings["inbound"] == "long_connection"

    async def ask():
        bot = await api.bot_info()
        if long_connection:   # the endpoint is asked, its WebSocket never opened: nothing is delivered to it
            await api.ws_endpoint()
        return bot
    bot = await _ask_platform(name, api, ask, "the open platform refused the app id or secret (or the app has no "
                              "bot ability)", f"the open platform at {base_url}")
    if isinstance(bot, Check):
        return bot
    return Check("ok", f"adapter {name}", f"the app id and secret work (bot info: {bot.get('app_name', '?')}, "
                                          f"{bot.get('open_id', '?')}" + ("; the long connection's endpoint "
                                                                          "answers)" if long_connection else ")"))


async def probe_dingtalk(name: str, settings: dict) -> Check:
    """An access token and a Stream-mode ticket through the adapter's own client: the client id, the client secret
    and the open platform, in one pair of calls (the ticket is never used: it lapses unused). The robot's own
    settings (Stream mode chosen, the app published) show when the first message comes."""
    from actors.adapters.dingtalk.client import DingTalkAPI   # only this probe needs this platform's client
    api = DingTalkAPI(settings["base_url"], settings["client_id"], settings["client_secret"],
                      request_timeout=PROBE_TIMEOUT_S)

    async def ask():
        await api.token()
        return await api.open_connection()
    opened = await _ask_platform(name, api, ask, "the open platform refused the client id or secret",
                                 f"the open platform at {settings['base_url']}")
    if isinstance(opened, Check):
        return opened
    return Check("ok", f"adapter {name}", f"the client id and secret work (an access token, and a Stream-mode "
                                          f"ticket for {opened[0][:80]})")


async def probe_onebot(name: str, settings: dict) -> Check:
    """Forward mode: connect to the implementation's WebSocket with the access token and ask ``get_login_info`` through
    the adapter's own link (the token, the implementation, and which QQ account it is logged in as, in one call);
    http mode: the same question to its HTTP API. Reverse mode: the implementation connects to the gateway, so there
    is nothing to ask before it runs (the listening port is checked with the others)."""
    if settings["mode"] == "reverse":
        return Check("skip", f"adapter {name}", "reverse WebSocket: the implementation connects to the gateway "
                                                "(status shows it once it has)")
    from actors.adapters.onebot.http_post import HttpApi   # only this probe needs this platform's clients
    from actors.adapters.onebot.link import Link
    secrets = secret_values(settings)
    http = settings["mode"] == "http"
    link = HttpApi(settings["api_url"], settings["access_token"], PROBE_TIMEOUT_S) if http else \
        Link(lambda: None, PROBE_TIMEOUT_S)
    where = settings["api_url"] if http else settings["url"]
    try:
        if not http:
            await asyncio.wait_for(link.open_forward(settings["url"], settings["access_token"]), PROBE_TIMEOUT_S)
        info = await link.call("get_login_info", {})
    except PermanentError as exc:
        return Check("fail", f"adapter {name}", f"the implementation refused: {redact(str(exc), secrets)}")
    except Exception as exc:  # noqa: BLE001 - every other failure is "could not ask", and says why
        return Check("fail", f"adapter {name}", f"cannot reach the implementation at {where}: "
                                                f"{redact(str(exc) or type(exc).__name__, secrets)}")
    finally:
        await link.close()
    account = str(info.get("user_id", "?")) if isinstance(info, dict) else "?"
    wanted = str(settings["self_id"]).strip()
    if wanted and wanted != account:
        return Check("fail", f"adapter {name}", f"the implementation is logged in as {account}, not {wanted} "
                                                "(self_id)")
    return Check("ok", f"adapter {name}", f"the implementation answers (get_login_info: {account}, "
                                          f"{info.get('nickname', '?') if isinstance(info, dict) else '?'})")


async def probe_qq(name: str, settings: dict) -> Check:
    """The app access token from the app id and secret, then ``GET /gateway`` with it, through the adapter's own
    client: the credentials, the OpenAPI and the gateway's address, in two calls."""
    from actors.adapters.qq.client import QQClient   # only this probe needs this platform's client
    api = QQClient(str(settings["app_id"]), settings["app_secret"], settings["api_base_url"], settings["auth_url"],
                   request_timeout=PROBE_TIMEOUT_S)
    url = await _ask_platform(name, api, api.gateway_url, "QQ refused the app id and secret",
                              f"the QQ OpenAPI at {settings['api_base_url']}")
    if isinstance(url, Check):
        return url
    return Check("ok", f"adapter {name}", f"the app id and secret work (an access token, and the gateway at {url})")


async def probe_matrix(name: str, settings: dict) -> Check:
    """``GET /_matrix/client/v3/account/whoami`` through the adapter's own client: the access token and the
    homeserver, in one call."""
    from actors.adapters.matrix.client import MatrixClient   # only this probe needs this platform's client
    api = MatrixClient(settings["homeserver"], settings["access_token"], request_timeout=PROBE_TIMEOUT_S)
    me = await _ask_platform(name, api, api.whoami, "the homeserver refused the access token",
                             f"the homeserver at {settings['homeserver']}")
    if isinstance(me, Check):
        return me
    user = me.get("user_id") if isinstance(me, dict) else None
    device = me.get("device_id") if isinstance(me, dict) else None
    return Check("ok", f"adapter {name}", f"the access token works (whoami: {user or '?'}, device {device or '?'})")
async def probe_signal(name: str, settings: dict) -> Check:
    """``GET /api/v1/check`` (the daemon runs), then ``version`` over JSON-RPC (the RPC endpoint takes our requests:
    its Host check, the account in multi-account mode) through the adapter's own client. signal-cli before 0.11.5
    sends a long answer as one oversized body instead of the long-text attachment: a warning."""
    from actors.adapters.signal.client import SignalRPC   # only this probe needs this platform's client
    api = SignalRPC(settings["base_url"], settings["account"] if settings["multi_account"] else None,
                    request_timeout=PROBE_TIMEOUT_S)

    async def both():
        await api.check()
        return await api.version()
    version = await _ask_platform(name, api, both, "signal-cli refused the request",
                                  f"signal-cli's HTTP daemon at {settings['base_url']}")
    if isinstance(version, Check):
        return version
    numbers = tuple(int(p) for p in version.split("-")[0].split(".")[:3] if p.isdigit())
    if numbers and numbers < (0, 11, 5):
        return Check("warn", f"adapter {name}", f"signal-cli {version} answers; 0.11.5 or later sends long answers "
                                                "as one message with a long-text attachment (actors/adapters/signal/README.md)")
    return Check("ok", f"adapter {name}", f"signal-cli {version} answers at {settings['base_url']} (/api/v1/check, "
                                          "version); run it with --receive-mode=on-connection (actors/adapters/signal/README.md)")
async def probe_irc(name: str, settings: dict) -> Check:
    """Connect and register through the adapter's own link (server password, SASL, nick collisions), then QUIT.
    The nick in use (the gateway itself holds it while it runs) is no failure: the link takes an alternate."""
    from actors.adapters.irc.link import IrcLink   # only this probe needs this platform's client
    secrets = secret_values(settings)
    where = f"{settings['host']}:{settings['port']}"
    link = IrcLink(dict(settings, connect_timeout_s=min(settings["connect_timeout_s"], PROBE_TIMEOUT_S)), name,
                   lambda *args: None)
    try:
        await link.open()
    except PermanentError as exc:
        return Check("fail", f"adapter {name}", f"{where} refused the registration: {redact(str(exc), secrets)}")
    except Exception as exc:  # noqa: BLE001 - every other failure is "could not ask", and says why
        return Check("fail", f"adapter {name}", f"cannot register at {where}: {redact(str(exc), secrets)}")
    finally:
        await link.close("doctor")
    taken = "" if link.nick == settings["nick"] else f" ({settings['nick']!r} is in use: the running gateway?)"
    return Check("ok", f"adapter {name}", f"registered at {where} as {link.nick}{taken}")


async def probe_email(name: str, settings: dict) -> Check:
    """Log in to the IMAP server and select the mailbox, then log in to the SMTP server (and QUIT): nothing is read
    or sent."""
    from actors.adapters.email.client import ImapMailbox, check_submission   # only this probe needs them
    secrets = secret_values(settings)
    quick = dict(settings, connect_timeout_s=min(settings["connect_timeout_s"], PROBE_TIMEOUT_S))
    imap = f"{settings['imap_host']}:{settings['imap_port']}"
    smtp = f"{settings['smtp_host']}:{settings['smtp_port']}"
    box = ImapMailbox(quick, alive=lambda: None)
    try:
        await box.open()
    except PermanentError as exc:
        return Check("fail", f"adapter {name}", f"IMAP {imap} refused: {redact(str(exc), secrets)}")
    except Exception as exc:  # noqa: BLE001 - every other failure is "could not ask", and says why
        return Check("fail", f"adapter {name}", f"cannot reach IMAP {imap}: {redact(str(exc), secrets)}")
    finally:
        await box.close()
    try:
        await check_submission(quick)
    except PermanentError as exc:
        return Check("fail", f"adapter {name}", f"SMTP {smtp} refused: {redact(str(exc), secrets)}")
    except Exception as exc:  # noqa: BLE001 - every other failure is "could not ask", and says why
        return Check("fail", f"adapter {name}", f"cannot reach SMTP {smtp}: {redact(str(exc), secrets)}")
    return Check("ok", f"adapter {name}", f"IMAP {imap} ({settings['mailbox']} selected) and SMTP {smtp} take "
                                          f"the login of {settings['username']}")


async def probe_xmpp(name: str, settings: dict) -> Check:
    """Log in through the adapter's own link (STARTTLS with the certificate verified, SASL, a session), then end
    the stream. Under a resource of its own and without presence: the running gateway's session is not cut off and
    none of the messages the server keeps for the bot is delivered to the probe."""
    from actors.adapters.xmpp.client import XmppLink   # only this probe needs this platform's client
    secrets = secret_values(settings)
    where = f"{settings['host'] or settings['jid'].split('@', 1)[-1]}:{settings['port']}"
    link = XmppLink(dict(settings, connect_timeout_s=min(settings["connect_timeout_s"], PROBE_TIMEOUT_S)), name,
                    lambda *args: None, resource="gateway-doctor", presence=False)
    try:
        await link.open()
        resumable = link.client.plugin["xep_0198"].enabled_out
    except PermanentError as exc:
        return Check("fail", f"adapter {name}", f"{where} refused the login: {redact(str(exc), secrets)}")
    except Exception as exc:  # noqa: BLE001 - every other failure is "could not ask", and says why
        return Check("fail", f"adapter {name}", f"cannot log in at {where}: {redact(str(exc), secrets)}")
    finally:
        await link.close()
    sm = "stream management on" if resumable else "no stream management (what is in flight when a connection drops " \
                                                   "may be lost)"
    return Check("ok", f"adapter {name}", f"logged in at {where} as {settings['jid']} over TLS; {sm}")


# -------------------------------------------------------------------------------------------------- ports

def port_check(label: str, host: str, port: int, gateway_pids: set[int]) -> Check:
    """Whether the gateway can listen on ``host:port``: free, held by this gateway (it runs), or taken."""
    name = f"port {label}"
    if port == 0:
        return Check("ok", name, f"{host}: any free port (chosen at start)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as the gateway's servers bind
            probe.bind((host, port))
        return Check("ok", name, f"{host}:{port} is free")
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            return Check("fail", name, f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    holder = listening_pid(port)
    if holder is not None and holder in gateway_pids:
        return Check("ok", name, f"{host}:{port} is held by this gateway (pid {holder})")
    return Check("fail", name, f"{host}:{port} is {describe_holder(holder)}: the gateway could not listen "
                               "there (stop that program or choose another port)")
