"""The chaos suite: the real daemon, the fake Telegram server and web chat visitors, hundreds of chats, and every
fault we know how to inject; then G1-G4 and G6-G9 checked from the platforms' side.

    python -m tests.chaos                  # the short mode (what CI runs through tests/chaos/test_chaos.py)
    python -m tests.chaos --mode long      # hundreds of chats, many more faults, minutes of load
    python -m tests.chaos --help

Modules: ``world`` (the daemon on a small file system, the fake, the visitors, the load), ``faults`` (one class per
fault kind), ``checks`` (the guarantees, each a function of what the platforms show and what the state dir holds),
``run`` (the schedule, the table, the exit code).
"""
