"""Liveness of an intake (actors/adapters/liveness.py): the pure rule, and the server probe on a real socket."""
from __future__ import annotations

import asyncio

import pytest

from actors.adapters.liveness import (MIN_SILENCE_S, PROBES_BEFORE_STALLED, SERVER_PROBE_S, Liveness, probe_server,
                                      served_address, silence_bound)

pytestmark = pytest.mark.timeout(30)


def test_a_connected_intake_silent_past_its_bound_is_stalled_and_counted():
    live = Liveness(bound_s=10.0, last_progress=100.0)
    assert not live.stalled(110.0, connected=True), "at the bound: still normal"
    assert live.stalled(110.5, connected=True)
    assert live.stalls == 1


def test_progress_resets_the_silence_and_a_disconnected_intake_is_never_stalled():
    live = Liveness(bound_s=10.0, last_progress=100.0)
    live.progress(now=109.0)
    assert not live.stalled(118.0, connected=True)
    assert not live.stalled(500.0, connected=False), "reconnecting with backoff is the intake's own business"
    assert live.stalls == 0


def test_the_bound_has_a_floor_and_the_table_overrides_the_platform():
    assert Liveness(bound_s=0.01).bound_s == MIN_SILENCE_S
    assert silence_bound(declared=60.0, configured=0.0) == 60.0
    assert silence_bound(declared=60.0, configured=5.0) == 5.0
    assert Liveness(bound_s=40.0).check_every_s == 10.0


def test_a_server_is_probed_several_times_per_bound_whatever_sets_it():
    declared = Liveness(bound_s=PROBES_BEFORE_STALLED * SERVER_PROBE_S)   # what a ServingAdapter declares
    assert declared.probe_every_s == SERVER_PROBE_S
    configured = Liveness(bound_s=silence_bound(declared.bound_s, configured=2.0))   # max_silence_s = 2
    assert configured.probe_every_s * PROBES_BEFORE_STALLED == pytest.approx(2.0)


@pytest.mark.parametrize("url, address", [
    (None, None), ("http://127.0.0.1:8765/", ("127.0.0.1", 8765)), ("http://0.0.0.0:80/hook", ("127.0.0.1", 80)),
    ("http://[::]:9000/", ("::1", 9000)), ("http://localhost/", None)])
def test_where_a_server_is_probed(url, address):
    assert served_address(url) == address


def test_the_probe_reports_progress_while_the_server_accepts_and_none_once_it_is_gone():
    async def scenario():
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        seen = []
        probe = asyncio.ensure_future(probe_server(lambda: ("127.0.0.1", port), lambda: seen.append(1),
                                                   every_s=0.01, timeout_s=1.0))
        try:
            await asyncio.wait_for(_until(lambda: len(seen) >= 3), 10)
            server.close()
            await server.wait_closed()
            await asyncio.sleep(0.05)   # probes already accepted before the close may still count
            before = len(seen)
            await asyncio.sleep(0.2)    # twenty probe intervals with nothing listening
            assert len(seen) == before, "a probe of a closed port reported progress"
        finally:
            probe.cancel()
    asyncio.run(scenario())


async def _until(condition):
    while not condition():
        await asyncio.sleep(0.01)
