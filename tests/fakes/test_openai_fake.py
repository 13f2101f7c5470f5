"""The fake OpenAI-compatible server's own controls: a reply chosen by the request, and a gate that holds the
requests it matches (recorded, unanswered) until released."""
from __future__ import annotations

import json
import threading
import urllib.request

import pytest

from tests.actor_system import wait_for
from tests.fakes.openai_server import FakeOpenAIServer, text_reply

pytestmark = pytest.mark.timeout(30)


def chat(server: FakeOpenAIServer, text: str) -> str:
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": text}]}).encode()
    request = urllib.request.Request(server.base_url + "/chat/completions", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=20) as response:
        lines = [line for line in response.read().decode().splitlines() if line.startswith("data: {")]
    return "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or "" for line in lines
                   if json.loads(line[6:]).get("choices"))


def test_a_reply_is_chosen_by_the_request_else_the_echo():
    with FakeOpenAIServer() as server:
        server.answer = lambda body: text_reply("special") if body["messages"][-1]["content"] == "x" else None
        assert chat(server, "x") == "special"
        assert chat(server, "y") == "echo: y"


def test_held_requests_are_recorded_and_wait_until_released_the_others_go_on():
    with FakeOpenAIServer() as server:
        server.hold(lambda body: body["messages"][-1]["content"].startswith("hold"))
        answers: dict = {}
        threads = [threading.Thread(target=lambda n=n: answers.__setitem__(n, chat(server, f"hold {n}")))
                   for n in range(3)]
        for thread in threads:
            thread.start()
        wait_for(lambda: server.holding == 3, 10, 0.02, "three requests at the gate")
        assert chat(server, "free") == "echo: free" and not answers
        assert len(server.requests) == 4
        server.release()
        for thread in threads:
            thread.join(10)
        assert answers == {n: f"echo: hold {n}" for n in range(3)} and server.holding == 0
