"""Google Chat: a Chat app on an HTTP endpoint. Interaction events come to a small server of the adapter's with a
Google-signed bearer token; answers go through the Chat API under the app's service account (README.md beside this
file). Anyone in the Workspace who can find the app can DM it: strangers get a pairing code unless the table says
otherwise.

Pacing: the Chat API allows 60 writes a minute per space (creates, patches and deletes together, shared by every app
in the space) and 3,000 message writes a minute per project: a space is kept at one write a second, edits at most
every 1.5 s. A message holds at most 32,000 bytes; its text is kept to 4,096 characters (what the Chat UI shows
whole). No typing indicator for apps. A create carries ``requestId``: a repeated one is answered with the message it
created, so a send whose answer was lost goes again and shows once. Buttons: a tool approval's question (and /model's
listing) carries a ``cardsV2`` card; presses arrive as ``CARD_CLICKED`` events on the same endpoint. Files in: a
message's uploaded files, fetched with ``media.download`` (a Drive file is not: the Drive API would need the user's
authorisation). Files out: none (``media.upload`` requires user authentication; the app is its service account)."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=True, reactions=False, files_in=True, files_out=False,
                            voice=False, buttons=True, typing=False, idempotent_send="requestId")

CHAT_ISSUER = "chat@system.gserviceaccount.com"
PROJECT_NUMBER_CERTS = "https://www.googleapis.com/service_accounts/v1/metadata/x509/chat@system.gserviceaccount.com"
ID_TOKEN_CERTS = "https://www.googleapis.com/oauth2/v3/certs"


def _audience_is_named(table):
    if not table["audience"].strip():
        return "audience", ("must name the Chat app's authentication audience: the Cloud project's number, or the "
                            "HTTP endpoint URL (docs/googlechat.md)")
    return None


PLATFORM = Platform(
    type="googlechat", actor="actors.adapters.googlechat.adapter.GoogleChatAdapter",
    summary="Google Chat: a Chat app's HTTP endpoint in (Google-signed tokens), the Chat API out",
    intake="server", capabilities=CAPABILITIES, access="pairing",
    pacing=paced("googlechat", CAPABILITIES, 4096, "chars", edit_interval_s=1.5, min_edit_delta_chars=30,
                 per_chat_ops_per_s=1.0, per_chat_burst=3, typing_interval_s=None),
    options={
        "audience": Option(str, doc="the app's authentication audience (Chat API > Configuration > Connection "
                                    "settings): the Cloud project's number (tokens signed by "
                                    f"{CHAT_ISSUER}), or the HTTP endpoint URL (Google ID tokens); every event's "
                                    "token must name it"),
        "service_account_file": Option(str, doc="path of the service account's JSON key file (the "
                                                             "Chat API calls are made as the app)"),
        "certs_url": Option(str, "", doc="where the token signing keys are published (empty: Google's, chosen by "
                                         "the audience: the x509 certificates of the project-number tokens, the "
                                         "JWKS of ID tokens)"),
        "api_base_url": Option(str, "https://chat.googleapis.com", doc="the Chat API (a fake, in tests)"),
        "oauth_url": Option(str, "", doc="the OAuth token endpoint (empty: the key file's token_uri)"),
        "webhook_host": Option(str, "127.0.0.1", doc="interface the event endpoint listens on (loopback: behind the "
                                                     "TLS proxy the app's HTTPS endpoint URL points at)"),
        "webhook_port": Option(int, 8092, doc="its port (0: any free port)"),
        "webhook_path": Option(str, "/googlechat/events", doc="its path (the endpoint URL's path)"),
        "rate_limit_wait_s": Option(float, 5.0, doc="how long a space waits after a 429 (Google's name no "
                                                    "wait), doubled for each further 429 in a row, at most 64 s"),
    },
    checks=(_audience_is_named,))
