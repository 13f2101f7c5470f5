"""The floor the gateway is measured against: a minimal single-process asyncio relay.

    python bench/baseline_relay.py --base-url http://127.0.0.1:PORT [--poll-timeout 0.5]

It long-polls the generic fake platform through the same client the gateway's adapter uses
(actors/adapters/fake/client.py, aiohttp), runs the same offline agent in-process (with ``chunk_delay_s = 0``
it takes ~0 ms), and sends the final reply as one message. Turns of different chats run concurrently, turns of one
chat one at a time, and each chat keeps its history in memory so the agent sees the same conversation it would see
through the gateway.

What it leaves out is exactly what the gateway adds: no durable inbox, no delivery ledger, no streaming edits, no
supervision, no process per session. An update is acknowledged (the next poll's offset) as soon as it is read, so a
crash loses it; that is the point of a floor.

It prints one JSON line ``{"ready": true, "pid": ...}`` once its first poll has been answered, and runs until
SIGTERM or SIGINT.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.adapters.errors import FloodError, RetryableError
from actors.adapters.fake.client import FakePlatformAPI
from actors.agents.base import AgentError, AgentRequest
from actors.agents.offline import OfflineAgent
from actors.messages import TurnEnd

SEND_ATTEMPTS = 5


class BaselineRelay:
    def __init__(self, base_url: str, poll_timeout: float = 0.5, chunk_delay_s: float = 0.0):
        self.api = FakePlatformAPI(base_url)
        self.agent = OfflineAgent(chunk_delay_s=chunk_delay_s)
        self.poll_timeout = poll_timeout
        self.history: dict[str, list[dict]] = defaultdict(list)
        self.locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.turns: set[asyncio.Task] = set()
        self.answered = 0

    async def run(self, stop: asyncio.Event, on_ready=None) -> None:
        offset = 0
        try:
            while not stop.is_set():
                try:
                    updates = await self.api.poll_updates(offset, timeout=0 if on_ready else self.poll_timeout)
                except (RetryableError, FloodError):
                    await asyncio.sleep(0.1)
                    continue
                if on_ready is not None:
                    on_ready()
                    on_ready = None
                for update in updates:
                    offset = max(offset, update["id"] + 1)
                    task = asyncio.create_task(self.turn(update))
                    self.turns.add(task)
                    task.add_done_callback(self.turns.discard)
        finally:
            for task in list(self.turns):
                task.cancel()
            await self.api.close()

    async def turn(self, update: dict) -> None:
        chat = update["chat"]
        async with self.locks[chat]:
            history = self.history[chat]
            history.append({"role": "user", "content": update["text"]})
            request = AgentRequest(messages=tuple(history), turn_id=f"{chat}:{update['message_id']}")
            final = ""
            try:
                async for event in self.agent.run(request):
                    if isinstance(event, TurnEnd):
                        final = event.final_text
            except AgentError as exc:
                final = f"The agent failed: {exc.message}"
            history.append({"role": "assistant", "content": final})
            await self.send(chat, final, update["message_id"], update.get("thread"))
            self.answered += 1

    async def send(self, chat: str, text: str, reply_to: str, thread) -> None:
        for attempt in range(SEND_ATTEMPTS):
            try:
                await self.api.send(chat, text, reply_to=reply_to, thread=thread)
                return
            except FloodError as exc:
                await asyncio.sleep(exc.retry_after)
            except RetryableError:
                await asyncio.sleep(0.05 * (attempt + 1))


async def main_async(args) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    relay = BaselineRelay(args.base_url, args.poll_timeout, args.chunk_delay)

    def ready():
        print(json.dumps({"ready": True, "pid": os.getpid()}), flush=True)
    await relay.run(stop, on_ready=ready)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True, help="the fake platform, e.g. http://127.0.0.1:8081")
    parser.add_argument("--poll-timeout", type=float, default=0.5, help="long-poll timeout (the gateway's default "
                                                                        "in the pipeline harness)")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="the offline agent's pause between chunks")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
