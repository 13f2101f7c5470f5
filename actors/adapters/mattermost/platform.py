"""Mattermost: a bot account (or a user's personal access token) on a self-hosted server (README.md beside this
file). Anyone on the server can DM the bot: strangers get a pairing code unless the table says otherwise.

Pacing: Mattermost's own rate limit (when the server enables it) is 10 requests per second per user with a burst
of 100; a chat is kept at 2 per second here. Posts hold 16,383 characters (runes: code points) by default; the
typing indicator lasts about 5 s. Files go up with ``POST /files`` (the server's MaxFileSize is 100 MB by default;
the gateway's own upload limit applies first). Status reactions by emoji name (``POST /reactions``). No idempotent send: the server forgets a ``pending_post_id`` after 30 s, so a
send whose answer was lost is looked for by the key it carries in its props (``find_lost_copy``)."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=True, reactions=True, files_in=True, files_out=True,
                            voice=False, buttons=False, typing=True)

PLATFORM = Platform(
    type="mattermost", actor="actors.adapters.mattermost.adapter.MattermostAdapter",
    summary="Mattermost: the WebSocket event stream in, REST v4 out", intake="socket",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("mattermost", CAPABILITIES, 16383, "chars", edit_interval_s=1.0, min_edit_delta_chars=30,
                 per_chat_ops_per_s=2.0, per_chat_burst=5, typing_interval_s=4.0, finds_lost_copies=True),
    options={
        "base_url": Option(str, doc="the server's address, e.g. https://chat.example.com (no /api/v4)"),
        "token": Option(str, secret=True, doc="the bot account's access token, or a personal access token"),
        "require_mention": Option(bool, True, doc="in channels and group messages answer only a post that "
                                                  "mentions the bot (@name); direct messages are always answered"),
        "ping_interval_s": Option(float, 30.0, doc="a WebSocket ping this often; a missing pong drops the "
                                                   "connection (the server sends no heartbeat of its own)"),
        "recovery_limit": Option(int, 200, doc="at most this many missed posts per channel are fetched after a "
                                               "reconnect"),
    })
