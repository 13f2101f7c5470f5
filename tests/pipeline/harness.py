"""The real daemon wired to the generic fake platform, for end-to-end tests of turns and delivery."""
from __future__ import annotations

import re
from pathlib import Path

from tests.actor_system import wait_for
from tests.gateway import Gateway, nodes
from tests.fakes.fakeplatform import FakePlatform

CURSOR = "▍"


def pipeline_gateway(tmp_path: Path, platform: FakePlatform, extra: str = "",
                     agent: str = "[agent]\nchunk_delay_s = 0.0\n", adapter_extra: str = "", **kwargs) -> Gateway:
    return Gateway(tmp_path, extra_toml=f"""
[adapters.fake]
type = "fake"
base_url = "{platform.base_url}"
poll_timeout_s = 0.5
{adapter_extra}
{agent}
{extra}
""", **kwargs)


def telegram_gateway(tmp_path: Path, base_url: str, adapter: str = "", extra: str = "", **kwargs) -> Gateway:
    """The real daemon with one open Telegram adapter on the fake Bot API at ``base_url`` (tests/fakes/telegram)."""
    from tests.fakes.telegram import DEFAULT_TOKEN
    return Gateway(tmp_path, extra_toml=f"""
[adapters.telegram]
type = "telegram"
access = "open"
token = "{DEFAULT_TOKEN}"
base_url = "{base_url}"
poll_timeout_s = 1.0
{adapter}
[agent]
chunk_delay_s = 0.0
{extra}""", **kwargs)


def visible(platform: FakePlatform, chat: str) -> list[dict]:
    return [m for m in platform.messages(chat) if not m.get("deleted")]


def settled_answers(platform: FakePlatform, chat: str, count: int = 1, timeout: float = 30,
                    gw: Gateway | None = None) -> list[str]:
    """Wait until ``count`` bot messages exist in the chat and none shows the streaming cursor; return their texts.
    On a timeout the error shows the chat and, given the gateway, the end of its log."""
    def done():
        shown = visible(platform, chat)
        return len(shown) >= count and all(CURSOR not in m["text"] for m in shown) and shown
    try:
        return [m["text"] for m in wait_for(done, timeout, 0.05, f"{count} settled answer(s) in {chat}")]
    except AssertionError as exc:
        chat_view = [(m["message_id"], m["text"][-60:], m.get("deleted")) for m in platform.messages(chat)]
        tail = [line for line in (gw.log() if gw else "").splitlines() if " INFO root" not in line][-40:]
        raise AssertionError(f"{exc}\nchat: {chat_view}\n" + "\n".join(tail)) from None


def cell_name(gw: Gateway, kind: str, name_part: str = "", timeout: float = 10) -> str:
    """The name of a live cell of ``kind`` (Session, StreamConsumer) whose name contains ``name_part``."""
    def find():
        return next((n["name"] for n in nodes(gw._tree_or_none() or {})
                     if n["kind"] == kind and name_part in n["name"] and n["state"] in ("running", "busy")), None)
    return wait_for(find, timeout, 0.05, f"a live {kind} cell")


def crash_cell(gw: Gateway, kind: str, name_part: str = "") -> str:
    """Fault injection: make a live cell's next handler raise (the gateway needs [debug] fault_injection). The cell
    crashes, its shard does not. Returns the cell's name."""
    name = cell_name(gw, kind, name_part)
    gw.cli("fault", name, "--action", "crash", check=True)
    return name


def actor_pid(gw: Gateway, kind: str, name_part: str = "", timeout: float = 10) -> int:
    def find():
        for n in nodes(gw._tree_or_none() or {}):
            if n["kind"] == kind and name_part in n["name"] and n["pid"]:
                return n["pid"]
        return None
    return wait_for(find, timeout, 0.05, f"a running {kind}")


FENCE = re.compile(r"^```", re.M)
