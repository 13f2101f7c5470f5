"""The web chat's screenshots in docs/, taken in Debian's headless Chromium against the real daemon and a local fake
model server (tests/fakes/openai_server.py), so they show what the page shows, offline:

    python -m tests.webchat.screenshots                 # every shot, into docs/
    python -m tests.webchat.screenshots --only dark     # the shots whose file name holds "dark"
    python -m tests.webchat.screenshots --out /tmp/shots

A shot is a file name, a scene, a viewport and a colour scheme (SHOTS). A scene is a function that brings a fresh
page (a new visitor: its own conversation) to the state to be shown, using the model's scripted answers (SCENES). To
add one, e.g. an error with its Retry button or a stopped code block: write the scene, register it with @scene, add
its line to SHOTS.

Run from the checkout's root (the daemon runs this checkout). The daemon and the model server are started for the
run and stopped after it; each scene gets its own browser profile.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tests.fakes.openai_server import FakeOpenAIServer, text_reply
from tests.webchat.browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, send, url_of, wait_answers, wait_connected
from tests.webchat.helpers import served_port, webchat_gateway
from tests.actor_system import free_port

DOCS = Path(__file__).resolve().parents[2] / "docs"
MODEL_NAME = "gpt-4o-mini"     # what the welcome line names (the README's sample model); the fake answers for it

ANSWER_WITH_CODE = """Here is a small **retry** helper. It waits a little longer after each failure:

```python
import time


def retry(call, attempts=3, first_wait_s=0.5):
    \"\"\"Call `call` until it succeeds, at most `attempts` times.\"\"\"
    for attempt in range(attempts):
        try:
            return call()
        except ConnectionError as error:  # only the failures worth retrying
            if attempt == attempts - 1:
                raise
            time.sleep(first_wait_s * 2 ** attempt)
```

Use it as `retry(lambda: fetch(url))`. The waits grow as 0.5 s, 1 s, 2 s."""

ANSWER_WITH_LIST = """Three things to check first:

1. the gateway is running: `run_gateway.py status`
2. the model answers: `run_gateway.py doctor`
3. the log: `~/.local/state/agent-gateway/gateway.log`

```bash
run_gateway.py status && run_gateway.py doctor
```"""


@dataclass(frozen=True)
class Shot:
    file: str
    scene: str
    width: int
    height: int
    scheme: str          # "light" | "dark": the system's prefers-color-scheme, as the page sees it
    scroll: str = "end"  # "top": the conversation from its welcome line; "end": its newest messages


SHOTS = [
    Shot("webchat-desktop.png", "conversation", 1280, 800, "light", "top"),
    Shot("webchat-phone.png", "conversation", 390, 844, "light"),
    Shot("webchat-dark.png", "conversation", 1280, 800, "dark", "top"),
    Shot("webchat-earlier.png", "earlier", 1280, 800, "light"),
]

SCENES: dict[str, Callable] = {}


def scene(name: str):
    def register(function: Callable) -> Callable:
        SCENES[name] = function
        return function
    return register


@scene("conversation")
def conversation(page, gw, model: FakeOpenAIServer) -> None:
    """Two questions and their answers: markdown, highlighted code, a list, inline code; scrolled to the end."""
    model.script(text_reply(ANSWER_WITH_CODE, pieces=6), text_reply(ANSWER_WITH_LIST, pieces=4))
    page.goto(url_of(gw))
    wait_connected(page)
    send(page, "Can you write me a retry helper in Python?")
    wait_answers(page, 1)
    send(page, "And if the chat does not answer at all?")
    wait_answers(page, 2)


@scene("earlier")
def earlier(page, gw, model: FakeOpenAIServer) -> None:
    """A conversation left with New chat, listed under Earlier chats."""
    model.script(text_reply(ANSWER_WITH_CODE, pieces=3), text_reply("Sure: what would you like to know?"))
    page.goto(url_of(gw))
    wait_connected(page)
    send(page, "Can you write me a retry helper in Python?")
    wait_answers(page, 1)
    page.click("#new-chat")
    page.wait_for_function("() => !document.querySelector('#status').textContent.startsWith('Starting')")
    send(page, "Something else now")
    wait_answers(page, 2)
    page.click("#earlier-chats")
    page.wait_for_function("() => document.querySelectorAll('#earlier-list li').length > 0")


def gateway_config(model: FakeOpenAIServer) -> str:
    return f"""
[agent]
kind = "openai"
base_url = "{model.base_url}"
model = "{MODEL_NAME}"
api_key = "sk-local-fake-model"
"""


def take(shots: list[Shot], out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright
    written = []
    with tempfile.TemporaryDirectory(prefix="webchat-shots-") as scratch, FakeOpenAIServer() as model:
        gw = webchat_gateway(Path(scratch), port=free_port(), extra=gateway_config(model))
        gw.start()
        try:
            gw.wait_ready()
            served_port(gw)
            with sync_playwright() as playwright:
                for number, shot in enumerate(shots):
                    context = playwright.chromium.launch_persistent_context(
                        str(Path(scratch) / f"profile-{number}"), executable_path=CHROMIUM, headless=True,
                        args=CHROMIUM_ARGS, viewport={"width": shot.width, "height": shot.height},
                        color_scheme=shot.scheme, device_scale_factor=1)
                    try:
                        context.set_default_timeout(WAIT_MS)
                        page = context.pages[0] if context.pages else context.new_page()
                        SCENES[shot.scene](page, gw, model)
                        page.evaluate("top => { const m = document.querySelector('main');"
                                      " m.scrollTop = top ? 0 : m.scrollHeight; }", shot.scroll == "top")
                        page.evaluate("() => document.fonts.ready")
                        target = out / shot.file
                        page.screenshot(path=str(target))
                        written.append(target)
                    finally:
                        context.close()
        finally:
            gw.cli("stop")
            gw.kill_everything()
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="take only the shots whose file name contains this")
    parser.add_argument("--out", type=Path, default=DOCS, help="where to write them (default: docs/)")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"Debian's chromium is not installed at {CHROMIUM} (apt-get install chromium)", file=sys.stderr)
        return 1
    shots = [s for s in SHOTS if args.only in s.file]
    if not shots:
        print(f"no shot's file name contains {args.only!r}: {', '.join(s.file for s in SHOTS)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for path in take(shots, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
