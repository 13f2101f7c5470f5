"""The embedded web chat: the gateway serves the page and its websocket itself (the default adapter)."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=False, reactions=False, files_in=True, files_out=True,
                            voice=True, buttons=True, typing=True, voice_out=True)

PLATFORM = Platform(
    type="webchat", actor="actors.adapters.webchat.adapter.WebChatAdapter",
    summary="the embedded web chat: a page and its websocket, served by the gateway", intake="server",
    capabilities=CAPABILITIES,
    pacing=paced("webchat", CAPABILITIES, 1_000_000, "chars", edit_interval_s=0.05, min_edit_delta_chars=1,
                 per_chat_ops_per_s=50.0, per_chat_burst=50, typing_interval_s=3.0),
    options={
        "host": Option(str, "127.0.0.1", doc="the one interface the chat page listens on"),
        "port": Option(int, 8765, doc="TCP port of the chat page; 0 = any free port (logged)"),
        "max_tabs": Option(int, 256, doc="open chat tabs (websockets) of every visitor together, each holding a "
                           "connection and its buffers: the bound a flood of visitors meets (503 past it)"),
        "max_tabs_per_client": Option(int, 32, doc="open chat tabs (websockets) one client address may hold, so no "
                                      "one client takes every slot; 0 = no cap (behind a reverse proxy, where every "
                                      "client has the proxy's address)"),
        "new_visitors_per_hour": Option(int, 20, doc="new visitors (chat page cookies) one client address is "
                                        "issued an hour (as many at once): each visitor has its own message limits, "
                                        "so this bounds what one address gets by making more; 0 = no cap"),
        "messages_per_minute_per_address": Option(int, 60, doc="messages one client address may send a minute "
                                                  "across all its visitors (a third of it at once); 0 = no cap"),
        "uploads_per_hour_per_address": Option(int, 60, doc="file uploads one client address may make an hour "
                                               "across all its visitors; 0 = no cap"),
        "uploads_in_flight_per_address": Option(int, 2, doc="uploads one client address may have in progress at "
                                                "once (each holds a connection and a file on disk); 0 = no cap"),
        "upload_timeout_s": Option(float, 120.0, doc="an upload must arrive whole within this many seconds of its "
                                   "start, or it is cut (a stalled or trickling sender holds nothing longer)"),
        "behind_proxy": Option(bool, False, doc="true behind a reverse proxy on this host: the per-address limits "
                               "count the address the proxy names (the last X-Forwarded-For hop, believed from a "
                               "loopback peer only); false: the connecting address, which a client cannot choose"),
        "login_token": Option(str, "", doc="a secret that opens the page for a web chat reachable beyond loopback: "
                              "a person opens http://HOST:PORT/?token=THE_TOKEN once and a cookie keeps them in; "
                              "empty = no login (then keep the default loopback host)"),
    })
