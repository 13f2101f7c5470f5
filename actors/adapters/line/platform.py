"""LINE through the Messaging API: signed webhooks in, the reply and push APIs out (README.md beside this file).
Anyone who adds the bot as a friend can write to it: strangers get a pairing code unless the table says otherwise.

Pacing: no edits (LINE cannot change a sent message), so answers go out final; 5,000 characters per text (counted
here in UTF-16 units, never fewer than LINE's count); the loading animation (1:1 chats) as the typing indicator;
a push carries ``X-Line-Retry-Key``, so a push whose answer was lost goes again and shows once. LINE's own limit on
the push API is 2,000 requests a second per channel, far above one chat's pace. Buttons: a tool approval's question
and ``/model``'s listing carry quick replies (postback actions); a press is a ``postback`` webhook event
(quick_replies.py). LINE cannot edit, so a settled question is not shown changed: its quick replies vanish by
themselves once the user presses or writes.

Files out: images (JPEG, PNG up to 10 MB), mp4 videos and m4a audio, as messages naming HTTPS URLs that LINE
fetches from the webhook server (media.py), so only where the table names the server's ``public_url``; without it
the table's pacing says ``sends_files = false`` and a reply names its files in its text. Any other file (a PDF) has
no message type a bot may send: the reply names it in a line in its place."""
from urllib.parse import urlsplit

from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=False, delete=False, threads=False, reactions=False, files_in=True, files_out=True,
                            voice=True, buttons=True, typing=True, idempotent_send="X-Line-Retry-Key")

LOADING_SECONDS = 20          # the loading animation's length (5..60 in steps of 5); a message sent ends it early


def _reply_token_ttl_is_sane(table):
    if not 0 < table["reply_token_ttl_s"] <= 600:
        return "reply_token_ttl_s", "must be over 0 and at most 600 s (LINE's reply tokens live about a minute)"
    return None


def _public_url_is_https(table):
    url = table["public_url"]
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment or "@" in parts.netloc:
        return "public_url", (f"must be an https:// URL with a host and no query (LINE fetches files over HTTPS "
                              f"only), got {url!r}")
    if len(url) > 1000:
        return "public_url", "must be at most 1,000 characters (a file's URL is at most 2,000)"
    return None


def _media_path_is_its_own(table):
    path = table["media_path"].rstrip("/")
    if not path.startswith("/") or any(c in path for c in "{}?#% "):
        return "media_path", f"must be a path beginning with / (no {{}}?#% or spaces), got {table['media_path']!r}"
    if table["webhook_path"].rstrip("/") == path or table["webhook_path"].startswith(path + "/"):
        return "media_path", "must not be the webhook path or hold it"
    if not 60 <= table["media_ttl_s"] <= 7 * 86400:
        return "media_ttl_s", "must be 60 s to 7 days"
    return None


def _files_need_a_public_url(table):
    """No public URL, no file LINE could fetch: the table's replies name their files in text."""
    return {} if table["public_url"] else {"sends_files": False}


PLATFORM = Platform(
    type="line", actor="actors.adapters.line.adapter.LineAdapter",
    summary="LINE (Messaging API): signed webhooks in, reply and push messages out", intake="server",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("line", CAPABILITIES, 5000, "utf16", edit_interval_s=0.0, min_edit_delta_chars=0,
                 per_chat_ops_per_s=2.0, per_chat_burst=5, typing_interval_s=float(LOADING_SECONDS - 5),
                 upload_limit_bytes=200 * 1024 * 1024, photo_limit_bytes=10 * 1024 * 1024, caption_limit=5000),
    options={
        "channel_secret": Option(str, secret=True, doc="the channel secret (LINE Developers console: the channel's "
                                                       "Basic settings); signs every webhook"),
        "channel_access_token": Option(str, secret=True, doc="a long-lived channel access token (Messaging API tab: "
                                                             "Channel access token > Issue)"),
        "api_base_url": Option(str, "https://api.line.me", doc="the Messaging API (a fake, in tests)"),
        "data_base_url": Option(str, "https://api-data.line.me", doc="the content API users' files come from"),
        "webhook_host": Option(str, "127.0.0.1", doc="interface the webhook server listens on (loopback: behind "
                                                     "the TLS proxy LINE's HTTPS webhook URL points at)"),
        "webhook_port": Option(int, 8091, doc="its port (0: any free port)"),
        "webhook_path": Option(str, "/line/webhook", doc="its path (the webhook URL's path)"),
        "use_reply_tokens": Option(bool, False, doc="answer with the event's reply token while it is valid (free of "
                                                    "the monthly push quota); a reply token carries no retry key, "
                                                    "so a kill -9 between a reply leaving and its id being recorded "
                                                    "can show that part twice, the second time marked as re-sent "
                                                    "(README.md). Off: every answer is a push under its retry key"),
        "reply_token_ttl_s": Option(float, 50.0, doc="how long after its webhook a reply token is still used (LINE "
                                                     "names about a minute; an expired one falls back to a push)"),
        "rate_limit_wait_s": Option(float, 10.0, doc="how long a chat waits after a 429 that names no wait"),
        "public_url": Option(str, "", doc="the https:// URL LINE reaches the webhook server at (the TLS proxy's "
                                          "origin, e.g. https://bot.example.com): files go as URLs under it. Empty: "
                                          "no files out, a reply names them in text"),
        "media_path": Option(str, "/line/media", doc="the path the webhook server serves files under (the proxy "
                                                     "forwards it as it forwards webhook_path)"),
        "media_ttl_s": Option(float, 86400.0, doc="how long a sent file stays fetchable (LINE loads it when the "
                                                  "recipient's app shows it, maybe hours later); 60 s to 7 days"),
    },
    checks=(_reply_token_ttl_is_sane, _public_url_is_https, _media_path_is_its_own),
    table_pacing=_files_need_a_public_url)
