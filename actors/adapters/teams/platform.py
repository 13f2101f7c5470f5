"""Microsoft Teams: a bot of the Azure Bot Service. The Bot Connector POSTs activities to the bot's messaging
endpoint (a small server of the adapter's) under a JWT it signs; answers go through the Connector REST API at the
activity's ``serviceUrl`` with an OAuth token of the bot's app id and secret (README.md beside this file). Anyone in
a tenant that installed the app can write to it: strangers get a pairing code unless the table says otherwise.

Pacing: Teams allows a bot, per conversation, 7 operations a second, 8 in 2 s, 60 in 30 s and 1,800 an hour (sends,
updates and deletes together), and answers a 429 past them: a conversation is kept at one write a second with a
burst of 3, updates of a streamed reply at most every 1.5 s. A message holds about 28 KB; its text is kept to 20,000
characters. Typing indicators are activities of their own. No idempotency key: a send whose answer was lost goes
again under the re-sent mark. Buttons: a tool approval's question (and /model's listing) carries an Adaptive Card of
Action.Submit buttons (presses arrive as message activities with a ``value``: cards.py). Files out: small images
(PNG, JPEG, GIF up to 20,000 bytes) inline as base64 attachments in every conversation; any other file in a personal
chat with a file consent card, uploaded to the user's OneDrive once they allow it (files.py); in a group chat or a
channel refused (it would need SharePoint through Graph). Files in: images pasted into a message, fetched from the
Connector with the bot's token, and files shared from OneDrive or SharePoint, by their download link."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=True, reactions=False, files_in=True, files_out=True,
                            voice=False, buttons=True, typing=True)

CHANNEL_ISSUER = "https://api.botframework.com"
OPENID_METADATA = "https://login.botframework.com/v1/.well-known/openidconfiguration"
TOKEN_URL = "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"
DEFAULT_SERVICE_URL = "https://smba.trafficmanager.net/teams/"


def _app_is_named(table):
    if not table["app_id"].strip() or not table["app_password"].strip():
        return "app_id", ("must name the bot's Microsoft App ID and a client secret of it (app_password): Azure "
                          "Bot > Configuration (docs/teams.md)")
    bad = [url for url in table["allowed_service_urls"] if not url.startswith(("http://", "https://"))]
    if bad:
        return "allowed_service_urls", f"{bad[0]!r} is no http(s) URL prefix"
    return None


PLATFORM = Platform(
    type="teams", actor="actors.adapters.teams.adapter.TeamsAdapter",
    summary="Microsoft Teams: Bot Framework activities in (Connector-signed JWTs), the Connector REST API out",
    intake="server", capabilities=CAPABILITIES, access="pairing",
    pacing=paced("teams", CAPABILITIES, 20000, "chars", edit_interval_s=1.5, min_edit_delta_chars=30,
                 per_chat_ops_per_s=1.0, per_chat_burst=3, typing_interval_s=5.0),
    options={
        "app_id": Option(str, doc="the bot's Microsoft App ID: every activity's token must be for it"),
        "app_password": Option(str, secret=True, doc="a client secret of the app (Certificates & secrets)"),
        "tenant_id": Option(str, "botframework.com", doc="the app's tenant for the token endpoint: "
                                                         "botframework.com for a multi-tenant bot, the tenant id "
                                                         "of a single-tenant one"),
        "oauth_url": Option(str, "", doc="the OAuth token endpoint (empty: Microsoft's, of tenant_id)"),
        "openid_metadata_url": Option(str, OPENID_METADATA, doc="the Bot Connector's OpenID metadata (it names "
                                                                "the signing keys)"),
        "issuer": Option(str, CHANNEL_ISSUER, doc="the issuer every activity's token must name"),
        "service_url": Option(str, DEFAULT_SERVICE_URL, doc="the Connector used for a conversation no activity "
                                                            "has named one for yet (Teams' global endpoint)"),
        "allowed_service_urls": Option(list, [], doc="URL prefixes a non-https serviceUrl may start with (a "
                                                     "local fake); https ones are taken when the token signs them"),
        "webhook_host": Option(str, "127.0.0.1", doc="interface the messaging endpoint listens on (loopback: "
                                                     "behind the TLS proxy the bot's endpoint URL points at)"),
        "webhook_port": Option(int, 3978, doc="its port (0: any free port)"),
        "webhook_path": Option(str, "/api/messages", doc="its path (the messaging endpoint URL's path)"),
        "file_hosts": Option(list, ["sharepoint.com"], doc="hosts (and their subdomains) the bot fetches users' "
                                                           "shared files from and uploads consented files to: "
                                                           "OneDrive and SharePoint (a sovereign cloud's: add it)"),
        "file_consent_ttl_s": Option(float, 86400.0, doc="how long a file offered with a consent card can be "
                                                         "accepted; a later Allow is answered that it expired"),
        "rate_limit_wait_s": Option(float, 2.0, doc="how long a conversation waits after a 429 or 412 that names "
                                                    "no Retry-After, doubled for each further one in a row, at "
                                                    "most 64 s"),
    },
    checks=(_app_is_named,))
