"""What the conformance suite asks of a platform's harness (tests/adapters/test_conformance.py)."""
from __future__ import annotations

from typing import Callable, Protocol

from actors.adapters.spec import Capabilities
from actors.messages import Source


class PlatformHarness(Protocol):
    adapter_type: str          # the registry type under test
    adapter_name: str          # NAME in [adapters.NAME]: the inbox platform and the tree name
    adapter_kind: str          # the actor class name shown in the tree
    text_limit: int            # the platform's limit: a longer text must fail with too_long

    def start(self) -> None: ...                          # start the fake server (port fixed from then on)
    def stop(self) -> None: ...
    def drop_connection(self) -> None: ...                # stop the server, start a new one on the same port and
                                                          # with the same history: every connection is cut
    def adapter_toml(self) -> str: ...                    # the [adapters.NAME] table pointing at the server
    def inject(self, chat: str, text: str, user: str = "alice") -> str: ...   # -> a handle of the inbound message
    def platform_message_id(self, handle: str) -> str: ...     # what the inbox dedups the message on
    def replay(self, handle: str) -> str: ...             # the platform delivers the same message again -> handle
    def inject_malformed(self) -> tuple[str, str]: ...    # -> (handle, a fragment of the reason the adapter logs)
    def acknowledged(self, handle: str) -> bool: ...      # the adapter told the platform it has this message
    def source(self, chat: str, user: str = "alice") -> Source: ...  # how the adapter should see a DM from user
    def sent(self, chat: str) -> list[dict]: ...          # the bot's messages: {"message_id", "text", "deleted"}
    def attempts(self, chat: str, op: str) -> list[dict]: ...   # every attempt of op on chat: {"at", "status"}
    def script_floods(self, count: int, retry_after: float) -> None: ...  # the next `count` sends answer 429
    def clear_faults(self) -> None: ...
    def flood_violations(self) -> int: ...                # operations the bot sent while banned by a 429
    # Where the platform's pacing says ``sends_files``: the files the bot sent, {"message_id", "kind", "sha256"}.
    def sent_files(self, chat: str) -> list[dict]: ...
    # Where the registry entry says ``receives_files``: a user's message in ``chat`` carrying ``data`` (a photo, as
    # the platform carries one) -> a handle, as ``inject`` gives.
    def inject_file(self, chat: str, data: bytes, caption: str) -> str: ...
    # Where the capabilities say ``reactions``: every reaction the bot set on the user's message ``handle``, oldest
    # first, each the list of emoji it showed ([]: taken away).
    def bot_reactions(self, chat: str, handle: str) -> list[list[str]]: ...
    # The delivery case: the bot's next text send to ``chat`` reaches the platform (it shows in ``sent``) and the
    # platform's answer to it waits until ``release_send`` (the gateway is killed meanwhile), which also drops a
    # hold not used yet; ``send_held``: an answer is waiting now.
    # Where the adapter is the platform (the web chat, the terminal chat), no outside answer exists to hold: the
    # harness arms the kit's own hold (HoldNextSend, actors/adapters/send_hold.py), [debug] fault_injection only.
    def hold_next_send(self, chat: str) -> None: ...
    def send_held(self) -> bool: ...
    def release_send(self) -> None: ...
    # Optional: the daemon was killed -9 and is running again (the delivery case's end): clients of the harness
    # attached to the daemon itself (the terminals) attach to the new one; what they showed stays in ``sent``.
    def daemon_restarted(self) -> None: ...
    # Where the platform's intake holds a connection (registry intake "poll" or "socket"), the frozen-connection
    # case (test_frozen_connections.py): ``start_relayed(relay)`` starts the platform (instead of ``start``) with its
    # timing knobs small, passes each port the adapter connects to through ``relay(port)`` (-> the port of a
    # FreezingProxy in front of it) and returns the adapter's table, reaching the platform only through the
    # relays, with ``max_silence_s = freeze_silence_s``: below the platform's own timeouts (so the kit's restart,
    # not a slow timeout, is what recovers) and safely above its proof-of-life cadence.
    freeze_silence_s: float
    def start_relayed(self, relay: Callable[[int], int]) -> str: ...
    # Optional: why a message the platform pushes into a frozen connection is lost by the platform itself (it
    # keeps no copy of what it wrote): the case then sends its message once the adapter is back.
    lost_while_frozen: str
    # A variant (harnesses/__init__.py, VARIANTS) only: its name, the names of the conformance cases its table
    # changes (the only ones it runs), and what the adapter can do under its table where that is not what the
    # platform declares (a DingTalk table with an AI card template edits): the suite's cases follow it.
    variant: str
    conformance_cases: frozenset[str]
    declared_capabilities: Capabilities
