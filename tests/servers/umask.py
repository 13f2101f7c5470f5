"""The umask a real server's files are made under, whatever the test process's is.

A server started by a test (Postfix, Dovecot, Prosody) drops to its own user, which must read the configuration and
enter the directories the test made for it. The test process's umask is not the operator's: a test that ran the
gateway's CLI in this process leaves its private umask (077, run_gateway.py) behind, and a queue directory made under
it is closed to the server's own user ("postsuper: open directory defer: Permission denied").
"""
from __future__ import annotations

import contextlib
import os

SERVER_UMASK = 0o022


@contextlib.contextmanager
def server_umask():
    """Files and directories made inside (by this process and by what it starts) are readable by a server's user."""
    before = os.umask(SERVER_UMASK)
    try:
        yield
    finally:
        os.umask(before)

