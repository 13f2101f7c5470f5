import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Property tests are judged on what they find, not on how fast one example runs: CI shares 2 cores with daemons.
from hypothesis import settings  # noqa: E402 - after the project's root is put on sys.path

settings.register_profile("gateway", deadline=None)
settings.load_profile("gateway")


# Modules whose daemon is a module-scoped fixture parametrised by platform: xdist's `loadscope` would send the whole
# module (a dozen daemons, ~10 minutes) to one worker and make it the suite's critical path. Here each parameter is a
# work unit of its own, so each platform's daemon is still started once, on whichever worker takes that platform.
SCOPED_BY_PARAMETER = ("tests/adapters/test_conformance.py", "tests/adapters/test_frozen_connections.py")


def pytest_xdist_make_scheduler(config, log):
    # Imported here: xdist's scheduler is only needed by the controller of a distributed run.
    from xdist.scheduler import LoadScopeScheduling

    class ModuleOrParameterScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            if scope in SCOPED_BY_PARAMETER and nodeid.endswith("]") and "[" in nodeid:
                return scope + nodeid[nodeid.index("["):]
            return scope

    if config.getvalue("dist") == "loadscope":
        return ModuleOrParameterScheduling(config, log)
    return None


@pytest.fixture(autouse=True)
def _the_umask_a_test_found():
    """A test that runs the gateway's CLI in this process (run_gateway.main) sets its private umask (077) for the
    process: given back after each test, so what a later test makes (a mail server's queue, a file another user must
    read) is not made private by accident."""
    before = os.umask(0o022)
    os.umask(before)
    yield
    os.umask(before)
