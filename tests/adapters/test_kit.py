"""The adapter kit's promise that the conformance suite is mandatory: every platform the registry finds has a
conformance harness (tests/adapters/harnesses/<type>.py), and what a harness says about its platform agrees with
what the platform declares (actors/adapters/<type>/platform.py). The suite itself: tests/adapters/test_conformance.py.
"""
from __future__ import annotations

import pytest

from actors.adapters.registry import REGISTRY
from tests.adapters.harnesses import HARNESSES

pytestmark = pytest.mark.timeout(30)

# A registered type listed here is known to have no harness yet: its case is a strict xfail, so it shows in every run
# and turns into a failure the day a harness is added (then the entry goes).
NO_HARNESS_YET: dict[str, str] = {}


def missing_harness_message(platform_type: str) -> str:
    return (f"platform {platform_type!r} is registered (actors/adapters/{platform_type}/platform.py) but has no "
            f"conformance harness: add tests/adapters/harnesses/{platform_type}.py setting HARNESS to a class with "
            "the members of tests/adapters/harnesses/protocol.py (its fake under tests/fakes/)")


def registered_types():
    return [pytest.param(t, marks=pytest.mark.xfail(reason=NO_HARNESS_YET[t], strict=True))
            if t in NO_HARNESS_YET else t for t in sorted(REGISTRY)]


@pytest.mark.parametrize("platform_type", registered_types())
def test_every_registered_platform_has_a_conformance_harness(platform_type):
    assert platform_type in HARNESSES, missing_harness_message(platform_type)


def test_the_known_gaps_are_registered_types():
    """An entry for a type that is gone would excuse nothing and hide nothing: it goes with the type."""
    assert set(NO_HARNESS_YET) <= set(REGISTRY), sorted(set(NO_HARNESS_YET) - set(REGISTRY))


def test_every_harness_drives_a_registered_platform():
    assert set(HARNESSES) <= set(REGISTRY), (f"harnesses for types no platform folder registers: "
                                             f"{sorted(set(HARNESSES) - set(REGISTRY))}")


@pytest.mark.parametrize("platform_type", sorted(HARNESSES))
def test_what_a_harness_says_of_its_platform_is_what_the_platform_declares(platform_type):
    harness, platform = HARNESSES[platform_type], REGISTRY[platform_type]
    assert harness.adapter_type == platform.type
    assert harness.adapter_kind == platform.kind, (
        f"{platform_type}: the harness expects actor {harness.adapter_kind!r} in the tree, the platform runs "
        f"{platform.actor}")
    assert harness.text_limit == platform.pacing.text_limit, (
        f"{platform_type}: the harness tests a limit of {harness.text_limit}, the pacing row declares "
        f"{platform.pacing.text_limit} {platform.pacing.length}")


@pytest.mark.parametrize("platform_type", sorted(HARNESSES))
def test_every_harness_can_hold_a_send_for_the_delivery_case(platform_type):
    """The delivery case (test_conformance.py, kill -9 between a send and its record) runs for every platform: its
    harness holds a send's answer in its fake, or (where the adapter is the platform) arms the kit's send hold."""
    harness = HARNESSES[platform_type]
    holds = all(callable(getattr(harness, m, None)) for m in ("hold_next_send", "send_held", "release_send"))
    assert holds, (
        f"{platform_type}: tests/adapters/harnesses/{platform_type}.py cannot hold a send's answer "
        "(hold_next_send, send_held, release_send: tests/adapters/harnesses/protocol.py; where the adapter is the "
        "platform, the kit's HoldNextSend: actors/adapters/send_hold.py)")
