"""The conformance suite's harnesses: one module per registered platform type, named by the type.

A harness is everything platform-specific the suite needs (``protocol.PlatformHarness`` lists its members): it
starts the platform's fake (or real server), writes the adapter's table, injects messages and reads what the bot
did. Each module here sets ``HARNESS`` to its class; ``HARNESSES`` is made by finding them, so a new platform adds
its harness file and edits nothing shared. The suite never touches a fake except through its harness, and a
registered type without a harness fails the suite (tests/adapters/test_kit.py), naming the type.

A variant is another table of a type whose adapter then behaves otherwise (DingTalk with an AI card template edits
its messages; without one it never does): a class of the type's module, listed in its ``VARIANTS``, naming itself
in ``variant`` and the cases its table changes in ``conformance_cases`` (the suite runs only those for it: the
others are the type's own harness's). ``VARIANTS`` holds them by ``<type>-<variant>``; only the conformance suite
runs them.
"""
from __future__ import annotations

import importlib
import pkgutil

SHARED_MODULES = {"protocol"}


def _discover() -> tuple[dict, dict]:
    found, variants = {}, {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in SHARED_MODULES or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        harness = getattr(module, "HARNESS", None)
        if harness is None:
            raise TypeError(f"{module.__name__} sets no HARNESS")
        if harness.adapter_type != info.name:
            raise ValueError(f"{module.__name__} drives type {harness.adapter_type!r}: a harness file is named by "
                             "its platform type")
        found[info.name] = harness
        for variant in getattr(module, "VARIANTS", ()):
            if variant.adapter_type != info.name or not variant.variant or not variant.conformance_cases:
                raise ValueError(f"{module.__name__}: variant {variant.__name__} must drive type {info.name!r} and "
                                 "name its variant and its conformance_cases")
            variants[f"{info.name}-{variant.variant}"] = variant
    return found, variants


HARNESSES, VARIANTS = _discover()
