"""Run inside a host's network namespace:
``python -m tests.cluster.webchat_driver URL PREFIX VISITORS TIMEOUT [ROUNDS]``. Visitors PREFIX-0 ..
PREFIX-(VISITORS-1) each send one message through the web chat at URL. A line of JSON is printed as each one is first shown a final answer (``{"visitor": NAME, "after_s": seconds since it sent, "at_s":
seconds since the first message}``; every visitor connects before the first message is sent), then
once every one has one, or at the timeout, the summary: every final text each was shown, by the message it is in
(``{"finals": {NAME: {MESSAGE_ID: TEXT}}}``): two message ids for one visitor are its question answered twice.
``ROUNDS`` (optional, default 1): each visitor sends that many messages, one per round; a round after the first goes
when a line comes on stdin, and each line and summary names its ``round`` (a round's finals are those not shown
before it). ``history`` after ROUNDS: once every round is over, what each visitor's page shows when reloaded,
as one last line (``{"histories": {NAME: history frame}}``)."""
from __future__ import annotations

import json
import sys
import time

from tests.webchat.client import WebChatClient


def finals(client: WebChatClient, name: str) -> dict[str, str]:
    visitor = client.visitors[name]
    return {str(f.get("message_id")): f.get("text", "") for f in list(visitor.frames)
            if f.get("type") == "op" and f.get("final") and f.get("action") in ("send", "edit")}


def main(url: str, prefix: str, count: int, timeout: float, rounds: int = 1, with_history: bool = False) -> None:
    client = WebChatClient(url)
    names = [f"{prefix}-{i}" for i in range(count)]
    try:
        for name in names:   # every visitor connected first: what is timed below is the gateway, not the connects
            client.id_of(name, timeout=timeout)
        seen: dict[str, set] = {name: set() for name in names}   # final message ids of the rounds before
        for number in range(1, rounds + 1):
            if number > 1:
                sys.stdin.readline()   # the test says when the next round goes
            sent_at, answered = {}, set()
            started = time.monotonic()
            for name in names:
                client.say(name, f"{name}-m{number}", f"hello from {name}")
                sent_at[name] = time.monotonic()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and len(answered) < len(names):
                for name in names:
                    if name not in answered and set(finals(client, name)) - seen[name]:
                        answered.add(name)
                        now = time.monotonic()
                        print(json.dumps({"visitor": name, "after_s": round(now - sent_at[name], 3),
                                          "at_s": round(now - started, 3), "round": number}), flush=True)
                time.sleep(0.05)
            shown = {name: {i: t for i, t in finals(client, name).items() if i not in seen[name]} for name in names}
            for name in names:
                seen[name] |= set(shown[name])
            print(json.dumps({"finals": shown, "round": number}), flush=True)
        if with_history:   # what each visitor's page shows when reloaded now
            print(json.dumps({"histories": {name: client.request(name, {"type": "history"}) for name in names}}),
                  flush=True)
    finally:
        client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 1,
         len(sys.argv) > 6 and sys.argv[6] == "history")
