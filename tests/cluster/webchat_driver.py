"""Run inside a host's network namespace: ``python -m tests.cluster.webchat_driver URL PREFIX VISITORS TIMEOUT``.
Visitors PREFIX-0 .. PREFIX-(VISITORS-1) each send one message through the web chat at URL. A line of JSON is
printed as each one is first shown a final answer (``{"visitor": NAME, "after_s": seconds since it sent, "at_s":
seconds since the first message}``; every visitor connects before the first message is sent), then
once every one has one, or at the timeout, the summary: every final text each was shown, by the message it is in
(``{"finals": {NAME: {MESSAGE_ID: TEXT}}}``): two message ids for one visitor are its question answered twice."""
from __future__ import annotations

import json
import sys
import time

from tests.webchat.client import WebChatClient


def finals(client: WebChatClient, name: str) -> dict[str, str]:
    visitor = client.visitors[name]
    return {str(f.get("message_id")): f.get("text", "") for f in list(visitor.frames)
            if f.get("type") == "op" and f.get("final") and f.get("action") in ("send", "edit")}


def main(url: str, prefix: str, count: int, timeout: float) -> None:
    client = WebChatClient(url)
    names = [f"{prefix}-{i}" for i in range(count)]
    sent_at, answered = {}, set()
    try:
        for name in names:   # every visitor connected first: what is timed below is the gateway, not the connects
            client.id_of(name, timeout=timeout)
        started = time.monotonic()
        for name in names:
            client.say(name, f"{name}-m1", f"hello from {name}")
            sent_at[name] = time.monotonic()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(answered) < len(names):
            for name in names:
                if name not in answered and finals(client, name):
                    answered.add(name)
                    now = time.monotonic()
                    print(json.dumps({"visitor": name, "after_s": round(now - sent_at[name], 3),
                                      "at_s": round(now - started, 3)}), flush=True)
            time.sleep(0.05)
        print(json.dumps({"finals": {name: finals(client, name) for name in names}}), flush=True)
    finally:
        client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
