"""Discord: the gateway WebSocket and REST (README.md beside this file). Anyone sharing a server with the bot can DM
it: strangers get a pairing code unless the table says otherwise.

Pacing: 5 per 5 s per channel; typing shows for 10 s; 2,000 characters; a send carries a ``nonce`` with
``enforce_nonce``, so a send whose answer was lost goes again and shows once. Buttons: a tool approval's question
carries Approve / Deny (message components; presses arrive as ``INTERACTION_CREATE``, which needs no intent)."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

# GUILDS, GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT (privileged: enabled in the Developer Portal)
DISCORD_INTENTS = (1 << 0) | (1 << 9) | (1 << 12) | (1 << 15)

CAPABILITIES = Capabilities(edit=True, delete=True, threads=True, reactions=False, files_in=False, files_out=False,
                            voice=False, buttons=True, typing=True, idempotent_send="nonce")

PLATFORM = Platform(
    type="discord", actor="actors.adapters.discord.adapter.DiscordAdapter",
    summary="Discord: the gateway WebSocket in, REST out", intake="socket",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("discord", CAPABILITIES, 2000, "chars", edit_interval_s=1.0, min_edit_delta_chars=30,
                 per_chat_ops_per_s=1.0, per_chat_burst=5, typing_interval_s=8.0),
    options={
        "token": Option(str, secret=True, doc="the bot token (Developer Portal: Bot > Reset Token)"),
        "api_base_url": Option(str, "https://discord.com/api/v10", doc="REST base (a fake in tests)"),
        "gateway_url": Option(str, "", doc="the gateway to open (empty: the one GET /gateway/bot names)"),
        "intents": Option(int, DISCORD_INTENTS, doc="gateway intents bit field (default: guilds, guild and direct "
                                                    "messages, message content)"),
        "require_mention": Option(bool, True, doc="in guild channels and threads answer only a message that "
                                                  "mentions the bot or replies to it (DMs are always answered)"),
    })
