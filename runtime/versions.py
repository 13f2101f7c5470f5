"""The Python and Thespian releases the runtime seam was read and run against: the one table of checked versions.

Every module of runtime/ relies on internals of these releases (each names its own); ``runtime/selftest.py`` checks
at start that those internals are still there with the shape the seam expects, whatever the version. setup.cfg caps
both to this table (``python_requires``, the ``thespian`` pin) and CI runs the suite on the oldest Python and a fast
subset on the newest (README.md, "Supported versions").

To add a release: run the self-test and the suite on it (``.ci/run``), read the internals each module names
against its source, then add it here and widen setup.cfg.
"""
from __future__ import annotations

import platform
from importlib import metadata

# Python minor versions the seam was checked against: CPython 3.11.7 (the whole suite), 3.13.0 (CI's subset: the
# self-test and runtime/'s tests, the start, the terminal chat, the adapter kit's checks, the short chaos run) and
# 3.12.1 (the self-test).
CHECKED_PYTHON = ((3, 11), (3, 12), (3, 13))
# Thespian releases whose source each patch was read against (runtime/frame_mac.py refuses any other).
CHECKED_THESPIAN = ("4.0.1",)


def thespian_version() -> str:
    try:
        return metadata.version("thespian")
    except metadata.PackageNotFoundError:
        return "not installed"


def this_runtime() -> str:
    """``Python 3.11.7 (CPython), Thespian 4.0.1``: what a refusal and ``doctor`` name."""
    return f"Python {platform.python_version()} ({platform.python_implementation()}), Thespian {thespian_version()}"


def checked() -> str:
    """``Python 3.11-3.13, Thespian 4.0.1``: the table, as a refusal states it."""
    low, high = CHECKED_PYTHON[0], CHECKED_PYTHON[-1]
    return f"Python {low[0]}.{low[1]}-{high[0]}.{high[1]}, Thespian {', '.join(CHECKED_THESPIAN)}"


class RuntimeIncompatible(RuntimeError):
    """This Python or Thespian lacks an internal the seam relies on: the gateway refuses to start (selftest.py)."""
