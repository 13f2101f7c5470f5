"""Telegram's Bot API (README.md beside this file). Anyone on Telegram can write to a bot: strangers get a pairing
code unless the table says otherwise.

Pacing: ~1 op/s per chat shared by sends and edits, 20/min in groups; typing shows for 5 s; sendPhoto takes 10 MB,
sendDocument 50 MB from a bot, captions 1,024 UTF-16 units. No idempotency key, but a lost send's copy can be found
(finds_lost_copies: actors/adapters/lost_copies.py)."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=True, reactions=True, files_in=True, files_out=True,
                            voice=True, buttons=True, typing=True, voice_out=True)


def _webhook_needs_a_secret(table):
    if table["mode"] == "webhook" and not table["webhook_secret"].strip():
        return "webhook_secret", "required in webhook mode: without it anyone could post updates"
    return None


PLATFORM = Platform(
    type="telegram", actor="actors.adapters.telegram.adapter.TelegramAdapter",
    summary="Telegram's Bot API: long polling (getUpdates) or a webhook", intake="poll",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("telegram", CAPABILITIES, 4096, "utf16", edit_interval_s=1.2, min_edit_delta_chars=30,
                 per_chat_ops_per_s=1.0, per_chat_burst=3, typing_interval_s=4.5, group_ops_per_s=20 / 60,
                 finds_lost_copies=True),
    options={
        "token": Option(str, secret=True, doc="the bot token from @BotFather"),
        "base_url": Option(str, "https://api.telegram.org", doc="Bot API server (a local Bot API server, or a fake)"),
        "mode": Option(str, "polling", allowed=("polling", "webhook"), doc="how updates arrive"),
        "poll_timeout_s": Option(float, 25.0, doc="long-poll wait per getUpdates (whole seconds, at least 1)"),
        "webhook_host": Option(str, "127.0.0.1", doc="interface the webhook server listens on (loopback: behind a "
                                                     "proxy)"),
        "webhook_port": Option(int, 8443, doc="its port (0: any free port)"),
        "webhook_path": Option(str, "/telegram/webhook", doc="its path"),
        "webhook_url": Option(str, "", doc="the public https URL given to setWebhook (empty: http://host:port/path)"),
        "webhook_secret": Option(str, "", secret=True, doc="X-Telegram-Bot-Api-Secret-Token; required in webhook "
                                                           "mode"),
        "parse_mode": Option(str, "HTML", allowed=("HTML", "MarkdownV2", "none"), doc="how replies are formatted"),
        "per_user_in_groups": Option(bool, None, doc="one session per user in groups (unset: [sessions] decides)"),
        "bot_ops_per_s": Option(float, 25.0, doc="sends/edits/deletes per second for the whole bot (Telegram: ~30)"),
    },
    checks=(_webhook_needs_a_secret,),
    served=lambda table: table["mode"] == "webhook")
