"""The embedded web chat: the gateway serves the page and its websocket itself (the default adapter)."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=False, reactions=False, files_in=True, files_out=True,
                            voice=False, buttons=False, typing=True)

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
        "login_token": Option(str, "", doc="a secret that opens the page for a web chat reachable beyond loopback: "
                              "a person opens http://HOST:PORT/?token=THE_TOKEN once and a cookie keeps them in; "
                              "empty = no login (then keep the default loopback host)"),
    })
