"""Run inside a host's network namespace: ``python -m tests.cluster.webchat_driver URL VISITORS TIMEOUT``. Each
visitor sends one message through the web chat at URL and waits for the final answers; prints, as JSON, every
final text each visitor was shown, by the message it is in (``{"visitor-0": {"m-1": "..."}, ...}``), once each has
one, or at the timeout."""
from __future__ import annotations

import json
import sys
import time

from tests.webchat.client import WebChatClient


def finals(client: WebChatClient, name: str) -> dict[str, str]:
    visitor = client.visitors[name]
    return {str(f.get("message_id")): f.get("text", "") for f in list(visitor.frames)
            if f.get("type") == "op" and f.get("final") and f.get("action") in ("send", "edit")}


def main(url: str, count: int, timeout: float) -> None:
    client = WebChatClient(url)
    names = [f"visitor-{i}" for i in range(count)]
    try:
        for name in names:
            client.id_of(name, timeout=timeout)
            client.say(name, f"{name}-m1", f"hello from {name}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(finals(client, n) for n in names):
            time.sleep(0.05)
        print(json.dumps({name: finals(client, name) for name in names}))
    finally:
        client.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
