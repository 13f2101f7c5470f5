"""Slack: one app in one workspace (README.md beside this file). Anyone in the workspace can write to the app:
strangers get a pairing code unless the table says otherwise.

Pacing: chat.postMessage ~1/s per channel (sends and edits share it here); chat.update and chat.delete are Tier 3,
~50 a minute for the whole app (kept under it: 45); 40,000 characters as sent, escapes included; bots have no typing
indicator outside the legacy RTM API; no idempotency key (a lost send is re-sent marked). Buttons: a tool approval's
question carries Approve / Deny (Block Kit); presses arrive over Socket Mode (``block_actions``) only."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=True, reactions=False, files_in=False, files_out=False,
                            voice=False, buttons=True, typing=False)


def _slack_tokens(table):
    if table["inbound"] == "socket_mode" and not table["app_token"].strip():
        return "app_token", "required with inbound = \"socket_mode\" (an app-level xapp- token)"
    if table["inbound"] == "events_api" and not table["signing_secret"].strip():
        return "signing_secret", "required with inbound = \"events_api\": without it anyone could post events"
    return None


def _slack_ping(table):
    return ("ping_interval_s", "must be at least 1 second") if table["ping_interval_s"] < 1 else None


PLATFORM = Platform(
    type="slack", actor="actors.adapters.slack.adapter.SlackAdapter",
    summary="Slack: Socket Mode or the Events API, the Web API out", intake="socket",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("slack", CAPABILITIES, 40000, "escaped", edit_interval_s=1.5, min_edit_delta_chars=50,
                 per_chat_ops_per_s=1.0, per_chat_burst=2, typing_interval_s=None,
                 app_edit_ops_per_s=45 / 60, app_edit_burst=5),
    options={
        "bot_token": Option(str, secret=True, doc="the Bot User OAuth Token (xoxb-...)"),
        "app_token": Option(str, "", secret=True, doc="the app-level token (xapp-..., scope connections:write); "
                                                      "required in Socket Mode"),
        "signing_secret": Option(str, "", secret=True, doc="the app's Signing Secret; required with the Events API"),
        "base_url": Option(str, "https://slack.com/api/", doc="Web API base URL (a fake, in tests)"),
        "inbound": Option(str, "socket_mode", allowed=("socket_mode", "events_api"), doc="how events arrive"),
        "ping_interval_s": Option(float, 20.0, doc="Socket Mode: a WebSocket ping goes after this long with nothing "
                                                   "received; no pong within half of it, the connection is taken "
                                                   "for dead"),
        "events_host": Option(str, "127.0.0.1", doc="interface the Events API server listens on (loopback: behind "
                                                    "a TLS proxy)"),
        "events_port": Option(int, 3000, doc="its port (0: any free port)"),
        "events_path": Option(str, "/slack/events", doc="its path (the Request URL's path)"),
        "require_mention": Option(bool, True, doc="in channels, answer only messages that mention the app (DMs "
                                                  "always)"),
        "per_user_in_groups": Option(bool, None, doc="one session per user in channels (unset: [sessions] decides)"),
    },
    checks=(_slack_tokens, _slack_ping),
    served=lambda table: table["inbound"] == "events_api")
