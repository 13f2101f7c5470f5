"""The real daemon wired to the generic fake platform, for end-to-end tests of turns and delivery."""
from __future__ import annotations

import re
from pathlib import Path

from tests.actor_system import wait_for
from tests.daemon import Gateway, nodes
from tests.fakes.fakeplatform import FakePlatform

CURSOR = "▍"


def pipeline_gateway(tmp_path: Path, platform: FakePlatform, extra: str = "", **kwargs) -> Gateway:
    return Gateway(tmp_path, extra_toml=f"""
[adapters.fake]
type = "fake"
base_url = "{platform.base_url}"
poll_timeout_s = 0.5
[agent]
chunk_delay_s = 0.0
{extra}
""", **kwargs)


def visible(platform: FakePlatform, chat: str) -> list[dict]:
    return [m for m in platform.messages(chat) if not m.get("deleted")]


def settled_answers(platform: FakePlatform, chat: str, count: int = 1, timeout: float = 30) -> list[str]:
    """Wait until ``count`` bot messages exist in the chat and none shows the streaming cursor; return their texts."""
    def done():
        shown = visible(platform, chat)
        return len(shown) >= count and all(CURSOR not in m["text"] for m in shown) and shown
    return [m["text"] for m in wait_for(done, timeout, 0.05, f"{count} settled answer(s) in {chat}")]


def actor_pid(gw: Gateway, kind: str, name_part: str = "") -> int | None:
    tree = gw._tree_or_none()
    for n in nodes(tree or {}):
        if n["kind"] == kind and name_part in n["name"] and n["pid"]:
            return n["pid"]
    return None


FENCE = re.compile(r"^```", re.M)
