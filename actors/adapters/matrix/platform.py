"""Matrix: one account on one homeserver, the client-server API (README.md beside this file). Anyone on the
federation can invite the bot: strangers get a pairing code unless the table says otherwise.

Pacing: the 65,536-byte limit is for the whole event: body, formatted_body (HTML, often longer) and envelope; 24,000
bytes of text leave room for both and the envelope, and the adapter drops the formatted body of a text whose JSON
would not fit (formatting.py). Synapse's default message rate is 0.2/s with a burst of 10; every edit is a new
event. A send's transaction id is its idempotency key. Voice messages (MSC3245) in are
transcribed and a voice reply goes as one; other files of a reply are named in its text."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=True, reactions=False, files_in=False, files_out=False,
                            voice=True, buttons=False, typing=True, idempotent_send="txnId", voice_out=True)


def _homeserver_is_a_url(table):
    if table["homeserver"].startswith(("http://", "https://")):
        return None
    return "homeserver", f"must be an http:// or https:// URL, got {table['homeserver']!r}"


PLATFORM = Platform(
    type="matrix", actor="actors.adapters.matrix.adapter.MatrixAdapter",
    summary="Matrix: the client-server API, /sync in, transaction ids out", intake="poll",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("matrix", CAPABILITIES, 24000, "bytes", edit_interval_s=3.0, min_edit_delta_chars=80,
                 per_chat_ops_per_s=0.2, per_chat_burst=10, typing_interval_s=20.0),
    options={
        "homeserver": Option(str, doc="the homeserver's client-server API base URL, e.g. https://matrix.example.org"),
        "access_token": Option(str, secret=True, doc="the bot account's access token (its device: keep the same "
                                                     "token, transaction ids are remembered per device)"),
        "sync_timeout_s": Option(float, 30.0, doc="long-poll wait per /sync"),
        "request_timeout_s": Option(float, 30.0, doc="seconds a request may take beyond the long-poll wait"),
        "require_mention": Option(bool, True, doc="in rooms that are not DMs answer only messages that mention the "
                                                  "bot (DMs are always answered)"),
    },
    checks=(_homeserver_is_a_url,))
