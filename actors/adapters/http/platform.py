"""The HTTP adapter: a signed generic webhook and an OpenAI-compatible API (README.md beside this file). The client
reads every edit as it comes (webhook callbacks, streamed completions)."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=False, reactions=False, files_in=True, files_out=True,
                            voice=False, buttons=False, typing=False)

PLATFORM = Platform(
    type="http", actor="actors.adapters.http.adapter.HttpApiAdapter",
    summary="a signed generic webhook and an OpenAI-compatible /v1 API", intake="server",
    capabilities=CAPABILITIES,
    pacing=paced("http", CAPABILITIES, 1_000_000, "chars", edit_interval_s=0.05, min_edit_delta_chars=1,
                 per_chat_ops_per_s=50.0, per_chat_burst=50, typing_interval_s=None),
    options={
        "host": Option(str, "127.0.0.1", doc="interface the HTTP server listens on (loopback by default)"),
        "port": Option(int, 8088, doc="its TCP port; 0 = any free port (logged)"),
        "hmac_secret": Option(str, "", secret=True, doc="signs /webhook bodies and reply callbacks (empty: no "
                                                        "/webhook)"),
        "callback_url": Option(str, "", doc="where replies to webhook conversations are POSTed"),
        "api_tokens": Option(list, [], secret=True, doc="bearer tokens accepted by /v1 (empty: no /v1)"),
        "max_body_bytes": Option(int, 1_048_576, doc="larger request bodies are refused with 413"),
        "reply_timeout_s": Option(float, 300.0, doc="how long /v1/chat/completions waits for its reply (then 504)"),
        "profiles": Option(list, [], doc="profiles a /v1 request may pick with its model (empty: its own and every "
                                         "[profiles.NAME])"),
        "models": Option(dict, {}, doc="model names mapped to profiles for /v1 ('*': any other name)"),
    })
