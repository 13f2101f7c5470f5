"""The terminal chat (``run_gateway.py chat``): always there unless an ``[adapters.cli]`` table says otherwise.
Its lines come as actor messages through the admin port; the terminal redraws every edit as it comes."""
from actors.adapters.spec import Capabilities, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=False, reactions=False, files_in=False, files_out=False,
                            voice=False, buttons=False, typing=False)

PLATFORM = Platform(
    type="cli", actor="actors.adapters.cli.adapter.CliAdapter",
    summary="the terminal chat: run_gateway.py chat, through the admin port", intake="actor",
    capabilities=CAPABILITIES,
    pacing=paced("cli", CAPABILITIES, 1_000_000, "chars", edit_interval_s=0.05, min_edit_delta_chars=1,
                 per_chat_ops_per_s=50.0, per_chat_burst=50, typing_interval_s=None))
