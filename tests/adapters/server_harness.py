"""What the harnesses of platforms served by one fake server object share (tests/adapters/harnesses/).

The fake starts on the port it last had (0 at first: any free one, read back from the server, never picked
beforehand: another worker's daemon could take it), keeps its history in a state file of the test's directory, and
a dropped connection is the fake restarted on the same port with the same history, which cuts every connection.
A harness names its state file and builds its fake, configured and not yet started, in ``make_server``, and names
the fake's call a text send makes (``send_method``): the one whose answer ``hold_next_send`` holds.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

from storage import StorageError, Store

ROOT = Path(__file__).resolve().parents[2]   # the project: tests/adapters/server_harness.py


class ServerHarness:
    state_name: str            # the fake's state file, in the test's directory
    send_method: str           # the fake's name of the call that sends a text (a Bot API method, a route, an RPC)
    adapter_type: str
    adapter_name: str

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.state_file = str(workdir / self.state_name)
        self.database = workdir / "state" / "gateway.db"    # tests.gateway.Gateway(workdir) keeps its state there
        self.port = 0
        self.server: Optional[Any] = None
        self.url: Optional[str] = None    # the adapter's served URL, once status showed it (served_url)

    def make_server(self):
        raise NotImplementedError

    def start(self) -> None:
        self.server = self.make_server().start()
        self.port = self.server.port

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def drop_connection(self) -> None:
        self.stop()
        self.start()

    # -- a send's answer held (the delivery case: tests/adapters/test_conformance.py)
    def hold_next_send(self, chat: str) -> None:
        self.server.hold_next_answer(self.send_method, self.source(chat).chat_id)

    def send_held(self) -> bool:
        return self.server.answer_held.is_set()

    def release_send(self) -> None:
        self.server.release_held()

    # -- a served adapter's URL (the platform calls the adapter: WeCom's callbacks, WhatsApp's webhooks)
    def served_url(self) -> Optional[str]:
        """The adapter's URL as ``status`` shows it (None while it has none); kept in ``url`` once seen."""
        env = dict(os.environ, GATEWAY_STATE_DIR=str(self.workdir / "state"), PYTHONPATH=str(ROOT))
        result = subprocess.run([sys.executable, str(ROOT / "run_gateway.py"), "--config",
                                 str(self.workdir / "gateway.toml"), "status", "--json"],
                                env=env, capture_output=True, text=True, timeout=60)
        rows = json.loads(result.stdout or "{}").get("adapters", []) if result.stdout.startswith("{") else []
        url = next((r.get("url") for r in rows if r.get("name") == self.adapter_name and r.get("url")), None)
        if url:
            self.url = url
        return url

    def committed_offset(self) -> Any:
        """The adapter's offset as its last round committed it (None while there is none, or the database is
        busy: callers poll)."""
        async def read():
            async with await Store.open(self.database) as store:
                return await store.inbox.get_offset(self.adapter_name)
        try:
            return asyncio.run(read())
        except StorageError:
            return None

    def table_head(self, access: Optional[str] = "open") -> str:
        """The first lines of the adapter's [adapters.NAME] table (``access = "open"``: strangers are answered)."""
        head = f'[adapters.{self.adapter_name}]\ntype = "{self.adapter_type}"\n'
        return head + (f'access = "{access}"\n' if access else "")
