"""Signal through signal-cli's HTTP daemon (README.md beside this file). Anyone who knows the number can write to
it: strangers get a pairing code unless the table says otherwise. The daemon has no authentication of its own, so
there is no secret to configure: keep it on loopback.

Pacing: no edits (the final answer goes once, complete; typing shows meanwhile: Signal clients show it 15 s). One
message carries 64 KiB of UTF-8, as Signal Desktop sends: signal-cli puts the first 2,000 bytes in the body and the
whole text in a text/x-signal-plain attachment, shown as one message (adapter.py). No idempotency key: a lost send
is re-sent marked. A voice note in (an audio attachment without a file name: signal-cli does not pass on Signal's
voice-message flag, and clients name a shared audio file but not a recording) is transcribed, and a voice reply goes
as a voice note; other files of a reply are named in its text."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=False, delete=True, threads=False, reactions=False, files_in=True, files_out=False,
                            voice=True, buttons=False, typing=True, voice_out=True)


def _idle_timeout_is_sane(table):
    return ("idle_timeout_s", "must be at least 1 second") if table["idle_timeout_s"] < 1 else None


PLATFORM = Platform(
    type="signal", actor="actors.adapters.signal.adapter.SignalAdapter",
    summary="Signal through signal-cli's HTTP daemon: its event stream in, JSON-RPC out", intake="socket",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("signal", CAPABILITIES, 65536, "bytes", edit_interval_s=0.0, min_edit_delta_chars=0,
                 per_chat_ops_per_s=1.0, per_chat_burst=3, typing_interval_s=10.0),
    options={
        "account": Option(str, doc="the bot's Signal number, as registered with signal-cli (+15551234567)"),
        "account_uuid": Option(str, "", doc="the bot's ACI (signal-cli listAccounts / the first event's account), "
                                            "to recognise mentions of the bot when Signal hides its number"),
        "base_url": Option(str, "http://127.0.0.1:8080", doc="signal-cli daemon --http address"),
        "multi_account": Option(bool, False, doc="the daemon serves several accounts (started without -a): name "
                                                 "ours in every call"),
        "require_mention": Option(bool, True, doc="in groups answer only a message that mentions the bot or quotes "
                                                  "it (direct chats are always answered)"),
        "idle_timeout_s": Option(float, 45.0, doc="a stream silent this long is opened again (signal-cli writes a "
                                                  "keep-alive every 15 s)"),
    },
    checks=(_idle_timeout_is_sane,))
