"""The world a chaos run happens in: the real daemon with its state dir on a small file system of its own (so the
disk can be filled), the fake Telegram server in its own process (so it outlives the daemon), web chat visitors,
and the load: every message of the run planned up front from the seed, then sent on schedule.

Every chat's messages carry a token (``c<chat> q<n>``) that the offline agent quotes in its answer, so a reply is
matched to its question from the platform's side alone. Chats listed as failing only ask things that make the model
fail (``#fail``): each must get one short error reply, with no secret in it.
"""
from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.actor_system import free_port
from tests.gateway import Gateway
from tests.fakes.harness import ControlClient, StandaloneFake
from tests.fakes.telegram import DEFAULT_TOKEN
from tests.webchat.client import WebChatClient

FIRST_CHAT_ID = 7_000_001
BACKGROUND_FAULTS = {"p_flood": 0.02, "flood_retry_after": 1, "methods": ["sendMessage", "editMessageText"]}


@dataclass(frozen=True)
class Plan:
    """The size of a run. ``faults`` is how many fault events are spread over the load window."""
    telegram_chats: int
    failing_chats: int
    web_visitors: int
    messages_per_chat: int
    load_s: float
    faults: int
    settle_s: float
    disk_mb: int


SHORT = Plan(telegram_chats=100, failing_chats=6, web_visitors=24, messages_per_chat=2, load_s=50.0, faults=10,
             settle_s=150.0, disk_mb=128)
LONG = Plan(telegram_chats=300, failing_chats=12, web_visitors=60, messages_per_chat=6, load_s=600.0, faults=90,
            settle_s=900.0, disk_mb=512)


@dataclass(frozen=True)
class Message:
    platform: str            # telegram | web
    chat: str                # the Telegram chat id or the web visitor's name
    n: int
    text: str
    at_s: float              # when to send it, from the start of the load
    failing: bool = False

    @property
    def token(self) -> str:
        return f"c{self.chat} q{self.n} "

    @property
    def web_id(self) -> str:
        return f"m{self.n}"


def plan_messages(plan: Plan, rng: random.Random) -> list[Message]:
    out = []
    tg_chats = [str(FIRST_CHAT_ID + c) for c in range(plan.telegram_chats)]
    failing = set(tg_chats[:plan.failing_chats])
    chats = [("telegram", c) for c in tg_chats] + [("web", f"visitor{v}") for v in range(plan.web_visitors)]
    for platform, chat in chats:
        times = sorted(rng.uniform(0, plan.load_s) for _ in range(plan.messages_per_chat))
        for n, at in enumerate(times):
            if chat in failing:
                text = f"c{chat} q{n} please fail #fail"
            else:
                hooks = " #slow 0.05" if rng.random() < 0.3 else ""
                hooks += " #tool" if rng.random() < 0.1 else ""
                text = f"c{chat} q{n} hello there{hooks}"
            out.append(Message(platform, chat, n, text, at, chat in failing))
    return sorted(out, key=lambda m: m.at_s)


@dataclass
class World:
    plan: Plan
    seed: int
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gateway-chaos-")))
    disk_mounted: bool = False
    fake: StandaloneFake | None = None
    control: ControlClient | None = None
    gw: Gateway | None = None
    web: WebChatClient | None = None
    web_port: int = 0
    messages: list[Message] = field(default_factory=list)
    sent: list[Message] = field(default_factory=list)
    sent_at: dict = field(default_factory=dict)        # Message -> wall-clock time it went to its platform
    fault_s: float = 0.0                               # wall time spent inside faults and their recovery
    load_done: threading.Event = field(default_factory=threading.Event)
    load_error: str = ""          # why the load stopped before every message was sent (the run fails saying it)
    stop_load: threading.Event = field(default_factory=threading.Event)

    @property
    def disk(self) -> Path:
        return self.root / "disk"

    # -------------------------------------------------------------------------------------------- setting up
    def __enter__(self) -> "World":
        self.disk.mkdir()
        # The state dir gets a file system of its own so the disk-full fault fills it and nothing else. Mounting
        # needs root; without it the fault is reported as not injected.
        mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.plan.disk_mb}m", "tmpfs", str(self.disk)],
                               capture_output=True)
        self.disk_mounted = mount.returncode == 0
        self.fake = StandaloneFake("tests.fakes.telegram", "").start()
        self.control = ControlClient(self.fake.base_url, timeout=60)
        self.control.post("/_control/faults", dict(BACKGROUND_FAULTS, seed=self.seed))
        self.web_port = free_port()
        self.gw = Gateway(self.disk, ping_deadline=10.0, extra_toml=f"""
[adapters.telegram]
type = "telegram"
access = "open"
token = "{DEFAULT_TOKEN}"
base_url = "{self.fake.base_url}"
poll_timeout_s = 1.0
[adapters.web]
type = "webchat"
port = {self.web_port}
# every visitor's tab comes from 127.0.0.1; a reconnect may overlap its old tab
max_tabs_per_client = {2 * self.plan.web_visitors + 8}
new_visitors_per_hour = 0
messages_per_minute_per_address = 0
uploads_per_hour_per_address = 0
[agent]
chunk_delay_s = 0.01
[sessions]
max_live = {self.plan.telegram_chats + self.plan.web_visitors + 20}
[debug]
fault_injection = true      # the crash-cell fault (run_gateway.py fault)
""")
        self.messages = plan_messages(self.plan, random.Random(self.seed))
        return self

    def start_gateway(self) -> None:
        self.gw.start()
        self.gw.wait_ready(60)
        if self.web is None:
            self.web = WebChatClient(f"http://127.0.0.1:{self.web_port}")

    def __exit__(self, *exc) -> None:
        self.stop_load.set()
        self.load_done.wait(5)
        if self.web is not None:
            self.web.close()
        if self.gw is not None:
            self.gw.cli("stop", timeout=120)
            self.gw.kill_everything()
        if self.fake is not None:
            self.fake.stop()
        if self.disk_mounted:
            subprocess.run(["umount", "-l", str(self.disk)], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    # ----------------------------------------------------------------------------------------------- the load
    def run_load(self) -> None:
        """Send every planned message at its time (in batches for Telegram); returns when all are sent."""
        try:
            self._send_planned()
        except Exception as exc:   # noqa: BLE001 - said by the run, not lost in a thread
            self.load_error = f"{type(exc).__name__}: {exc}"
        finally:
            self.load_done.set()

    def _send_planned(self) -> None:
        started = time.monotonic()
        pending = list(self.messages)
        while pending and not self.stop_load.is_set():
            now = time.monotonic() - started
            due = [m for m in pending if m.at_s <= now]
            pending = pending[len(due):]
            tg = [{"text": m.text, "chat_id": int(m.chat)} for m in due if m.platform == "telegram"]
            if tg:
                self.control.post("/_control/inject", tg)
            for m in due:
                if m.platform == "web":
                    self.web.say(m.chat, m.web_id, m.text)
            self.sent += due
            self.sent_at.update((m, time.time()) for m in due)
            self.stop_load.wait(0.05)

    def telegram_chat_ids(self) -> list[str]:
        return sorted({m.chat for m in self.messages if m.platform == "telegram"})

    def web_visitors(self) -> list[str]:
        return sorted({m.chat for m in self.messages if m.platform == "web"})
