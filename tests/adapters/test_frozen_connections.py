"""The zombie connection on every platform (actors/adapters/liveness.py), in the real daemon: each adapter whose
intake holds a connection to its platform (registry intake "poll" or "socket") reaches its fake (or real server)
only through FreezingProxy relays. The test freezes every connection the adapter has (no byte either way, nothing
closed): the adapter believes itself connected; past its bound it is restarted by its supervisor (a new process,
the restart counted in the tree, the silence in the log), the message sent meanwhile is answered once, and nothing
acknowledged before is lost or answered again.

Each harness's ``start_relayed`` (harnesses/protocol.py) sets the platform's timing knobs small and a
``max_silence_s`` below the platform's own timeouts, so what recovers is the kit's restart: without the liveness
rule every case here fails (no restart comes within the deadline). Where the platform itself loses what it pushes
into a dead connection (``lost_while_frozen``: signal-cli, an IRC server), the message is sent once the adapter is
back, and what the case shows is that it answers again.

Server intakes (the web chat, the HTTP API, WeCom) have no connection of ours to freeze: the platform connects to
the adapter. Their proof of life is the kit's probe of their own server, and the last test shows it keeps a web
chat with a short bound up.

One daemon per platform (module scope); the cases run in parallel per platform under xdist.
"""
from __future__ import annotations

import time
import uuid

import pytest

from actors.adapters.pacing import DEFAULT_RESENT_MARKER
from actors.adapters.registry import REGISTRY
from tests.actor_system import wait_for
from tests.adapters.freezing_proxy import FreezingProxy
from tests.adapters.harnesses import HARNESSES
from tests.adapters.test_conformance import session_rows
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(150)
FROZEN_INTAKES = ("poll", "socket")
# Beyond the bound, what a restart may take on a loaded 2-core machine: the liveness check's interval (a quarter of
# the bound), the supervisor's restart of a process, its start and its first connection through a new relay path,
# and the walk of the tree that shows it.
RESTART_MARGIN_S = 20.0
ANSWER_S = 60.0


@pytest.fixture(scope="module", params=sorted(HARNESSES))
def frozen(request, tmp_path_factory):
    kind = request.param
    intake = REGISTRY[kind].intake
    if intake not in FROZEN_INTAKES:
        pytest.skip(f"{kind}: intake {intake!r}: the platform connects to the adapter's server, so there is no "
                    "connection of ours to freeze (its liveness is the kit's probe of that server: "
                    "test_the_kit_s_probe_keeps_a_serving_adapter_up)")
    workdir = tmp_path_factory.mktemp(f"frozen-{kind}")
    harness = HARNESSES[kind](workdir)
    assert hasattr(harness, "start_relayed"), (
        f"{kind}: its intake holds a connection ({intake!r}) but its harness has no start_relayed: every such "
        "platform must show a frozen connection restarted (harnesses/protocol.py)")
    relays: list[FreezingProxy] = []

    def relay(port: int) -> int:
        relays.append(FreezingProxy("127.0.0.1", port).start())
        return relays[-1].port
    gateway = None
    try:
        gateway = Gateway(workdir, extra_toml=harness.start_relayed(relay), watchdog_interval=30.0)
        gateway.start()
        gateway.wait_ready(timeout=60)
        yield Frozen(harness, gateway, relays)
    finally:
        if gateway is not None:
            gateway.cli("stop")
            gateway.kill_everything()
        for proxy in relays:
            proxy.stop()
        harness.stop()


class Frozen:
    def __init__(self, harness, gateway: Gateway, relays: list[FreezingProxy]):
        self.harness, self.gateway, self.relays = harness, gateway, relays

    def node(self) -> dict:
        return self.gateway.node(self.harness.adapter_name)

    def rows(self, chat: str):
        return session_rows(self.gateway, self.harness.source(chat))

    def answered(self, chat: str, handle: str, what: str) -> list[dict]:
        """The bot's messages in ``chat`` once the message ``handle`` is acknowledged, its one row's turn is done
        (what it sends is on the platform by then) and an answer is there."""
        wait_for(lambda: self.harness.acknowledged(handle), ANSWER_S, 0.1, f"{what} acknowledged")
        wait_for(lambda: (rows := self.rows(chat)) and all(r.state == "done" for r in rows), ANSWER_S, 0.1,
                 f"the turn of {what} done (rows: {self.rows(chat)})")
        return wait_for(lambda: self.harness.sent(chat), ANSWER_S, 0.1, f"the answer to {what}")


def new_chat(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


def test_a_frozen_connection_restarts_the_adapter_within_its_bound_and_nothing_is_lost(frozen):
    harness, bound = frozen.harness, frozen.harness.freeze_silence_s
    lost_while_frozen = getattr(harness, "lost_while_frozen", "")
    before = new_chat("before")
    first = harness.inject(before, "hello before the freeze")
    answer_before = frozen.answered(before, first, "the message before the freeze")
    during = new_chat("during")
    harness.source(during)    # the chat exists before the freeze (a Matrix DM waits for the bot to join it)
    old = frozen.node()

    assert sum(proxy.freeze() for proxy in frozen.relays) >= 1, "the adapter holds no connection through a relay"
    frozen_at = time.monotonic()
    handle = None if lost_while_frozen else harness.inject(during, "hello during the freeze")

    def restarted():
        node = frozen.node()
        return node if node["pid"] and node["pid"] != old["pid"] and node["state"] == "running" else None
    new = wait_for(restarted, bound + RESTART_MARGIN_S, 0.2,
                   f"{harness.adapter_type}: the adapter restarted within its bound ({bound}s) + "
                   f"{RESTART_MARGIN_S}s of the freeze (was {old}, now {frozen.node()})")
    took = time.monotonic() - frozen_at
    assert new["restarts"] >= old["restarts"] + 1, (old, new)
    log = frozen.gateway.wait_log("intake is connected but silent")
    assert f"(normal: at most {bound:.1f}s)" in log, "the restart was not the liveness rule's, with the bound set"
    assert took <= bound + RESTART_MARGIN_S, took

    if lost_while_frozen:    # the platform kept no copy of a line pushed into the frozen connection (docstring)
        handle = harness.inject(during, "hello after the freeze")
    answers = frozen.answered(during, handle, "the message of the freeze")
    # Exactly once: one echo of it, no part re-sent, and as many messages as the same answer took before the
    # freeze (a platform with short lines splits it: IRC).
    echoes = [m for m in answers if "the freeze" in m["text"]]
    assert len(echoes) == 1 and len(answers) == len(answer_before), \
        f"the message of the freeze was answered {len(echoes)} times: {answers}"
    assert not any(DEFAULT_RESENT_MARKER in m["text"] for m in answers), answers
    assert len(frozen.rows(during)) == 1
    # What was acknowledged before the freeze: still one row, answered once, the answer untouched.
    assert len(frozen.rows(before)) == 1
    assert harness.sent(before) == answer_before


# ------------------------------------------------------------------------------------------ a server intake

PROBED_SILENCE_S = 2.0    # the kit probes the server every PROBED_SILENCE_S / PROBES_BEFORE_STALLED


def test_the_kit_s_probe_keeps_a_serving_adapter_up(tmp_path):
    """A web chat nobody visits, with a bound of 2 s: the kit's probe of its own port (three per bound) is its
    progress, so it is not restarted over several bounds, and it answers the first visitor."""
    harness = HARNESSES["webchat"](tmp_path)
    harness.start()
    gateway = Gateway(tmp_path, watchdog_interval=30.0, extra_toml=(
        f'[adapters.{harness.adapter_name}]\ntype = "{harness.adapter_type}"\nport = {harness.port}\n'
        f'max_silence_s = {PROBED_SILENCE_S}\n'))
    try:
        gateway.start()
        gateway.wait_ready(timeout=60)
        first = gateway.node(harness.adapter_name)
        watched_until = time.monotonic() + 4 * PROBED_SILENCE_S
        while time.monotonic() < watched_until:   # the subject is time passing: each walk must find the same life
            node = gateway.node(harness.adapter_name)
            assert (node["pid"], node["restarts"]) == (first["pid"], first["restarts"]), \
                f"the serving adapter was restarted: {first} -> {node}\n{gateway.log()[-2000:]}"
        assert "intake is connected but silent" not in gateway.log()
        chat = new_chat("visitor")
        harness.inject(chat, "hello after a quiet while")
        answers = wait_for(lambda: harness.sent(chat), ANSWER_S, 0.1, "the web chat's answer")
        assert any("a quiet while" in m["text"] for m in answers), answers
        assert gateway.node(harness.adapter_name)["pid"] == first["pid"]
    finally:
        gateway.cli("stop")
        gateway.kill_everything()
        harness.stop()
