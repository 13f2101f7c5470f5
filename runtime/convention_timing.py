"""The failure-detection periods of a Thespian convention, set in a convention module that is loaded already.

Thespian reads ``CONVENTION_REREGISTRATION_PERIOD``, ``CONVENTION_RESTART_PERIOD`` and
``CONVENTION_REGISTRATION_MISS_MAX`` from the environment when its convention module is first imported, into
module constants (daemon/convention.py sets the environment). Where that module is loaded already, ``apply`` sets
its constants too, so the settings hold whatever imported Thespian first.

Thespian internals relied on (checked against Thespian 4.0.1: runtime/versions.py): those three module globals of
``thespian.system.admin.convention`` (two ``timedelta``, one ``int``), read where they are used.
"""
from __future__ import annotations

import sys
from datetime import timedelta

from runtime.shapes import module, need

CONVENTION_MODULE = "thespian.system.admin.convention"


def apply(period_s: int, misses: int) -> None:
    loaded = sys.modules.get(CONVENTION_MODULE)
    if loaded is not None:
        loaded.CONVENTION_REREGISTRATION_PERIOD = timedelta(seconds=period_s)
        loaded.CONVENTION_RESTART_PERIOD = timedelta(seconds=period_s)
        loaded.CONVENTION_REGISTRATION_MISS_MAX = misses


def missing() -> list[str]:
    problems: list[str] = []
    convention = module(CONVENTION_MODULE, problems)
    need(convention, CONVENTION_MODULE, "CONVENTION_REREGISTRATION_PERIOD", problems, kind=timedelta)
    need(convention, CONVENTION_MODULE, "CONVENTION_RESTART_PERIOD", problems, kind=timedelta)
    need(convention, CONVENTION_MODULE, "CONVENTION_REGISTRATION_MISS_MAX", problems, kind=int)
    return problems
