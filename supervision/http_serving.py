"""Serving HTTP from an actor's async bridge: the one way the gateway's small servers start (web chat, webhooks,
the OpenAI-compatible API, metrics)."""
from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application, host: str, port: int, *, shutdown_timeout: float = 1.0) -> tuple:
    """Listen on ``host:port`` (0 picks a free port); returns ``(runner, bound port)``, and ``runner.cleanup()``
    stops it. A failed bind cleans up and re-raises, so nothing is left half-listening.

    No access log: aiohttp would write it from the loop thread, and only an actor's own thread logs. No signal
    handlers: the actor process's signals belong to Thespian and the launcher."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, runner.addresses[0][1]
