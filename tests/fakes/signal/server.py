"""FakeSignalCli: one aiohttp server with signal-cli's three HTTP endpoints, the control API and the in-process
inspection helpers."""
from __future__ import annotations

from typing import Optional

from aiohttp import web

from tests.fakes.harness import FakeServer, FaultScript, FloodGate, control_route
from tests.fakes.signal.rpc import WRITE_METHODS, RpcMethods
from tests.fakes.signal.stream import CLOSE, StreamMethods
from tests.fakes.signal.world import ACCOUNT, ACCOUNT_UUID, WorldMethods, initial_world

DEFAULT_LIMITS = {
    "receive_mode": "on-connection",     # or "on-start" (signal-cli's default): see stream.py
    "keepalive_interval": 15.0,          # seconds between ":" comments on each stream
    "multi_account": False,              # True: every call names the account, the stream takes ?account=
    "version": "0.13.22",
    "unregistered": [],                  # recipients Signal does not know: sends to them fail
}


class FakeSignalCli(RpcMethods, StreamMethods, WorldMethods, FakeServer):
    """A local ``signal-cli daemon --http`` for one account. ``limits`` (DEFAULT_LIMITS) as keyword arguments."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, account: str = ACCOUNT,
                 account_uuid: str = ACCOUNT_UUID, **limits):
        self.account_number, self.account_uuid = account, account_uuid
        super().__init__(port=port, state_file=state_file)
        self.init_streams()
        self.faults = FaultScript(WRITE_METHODS)
        self.gate = FloodGate()
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)

    def initial_state(self) -> dict:
        return initial_world(self.account_number, self.account_uuid)

    def configure(self, **limits) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        if limits.get("receive_mode", "on-connection") not in ("on-connection", "on-start"):
            raise ValueError("receive_mode is on-connection or on-start")
        with self._lock:
            self.limits.update(limits)

    def set_faults(self, **settings) -> None:
        """FaultScript.configure; ``methods`` among send, sendTyping, remoteDelete (the default: all three)."""
        with self._lock:
            self.faults.configure(**settings)

    # -- inspection
    def messages(self, chat_id: str) -> list[dict]:
        """The bot's messages to a chat (a recipient, or ``group:<id>``), oldest first: timestamp, body (what
        travels inline), attachments (the long-text one with its ``text``; one given as a data URI with its
        ``base64``), voice_note (sent with the ``voiceNote`` flag), text (what clients show), deleted."""
        return self.read(lambda s: s["chats"].get(chat_id, {}).get("messages", []))

    def shown_texts(self, chat_id: str) -> list[str]:
        """What a Signal client shows of each message not deleted: the long text where there is one."""
        return [m["text"] for m in self.messages(chat_id) if not m["deleted"]]

    def ops(self, chat_id: str, method: Optional[str] = None) -> list[dict]:
        """Every write the bot made to the chat, refused ones too: method, at (monotonic), status, timestamp."""
        ops = self.read(lambda s: s["chats"].get(chat_id, {}).get("ops", []))
        return [o for o in ops if method is None or o["method"] == method]

    def typing(self, chat_id: str) -> list[dict]:
        return self.read(lambda s: s["chats"].get(chat_id, {}).get("typing", []))

    def inbound(self, handle: str) -> dict:
        """What became of an injected envelope: state (new, queued, delivering, delivered, lost), deliveries
        (each delivery's serverDeliveredTimestamp), written (streams it reached)."""
        return self.read(lambda s: s["inbound"][int(handle) - 1])

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    # -- HTTP
    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/api/v1/rpc", self.route_rpc)
        app.router.add_get("/api/v1/events", self.route_events)
        app.router.add_get("/api/v1/check", _check)
        control_route(app, "POST", "/_control/inject", lambda body: self.inject_message(**body))
        control_route(app, "POST", "/_control/inject_event", lambda body: self.inject_event(body))
        control_route(app, "POST", "/_control/redeliver", lambda body: self.redeliver(**body))
        control_route(app, "POST", "/_control/groups", lambda body: {"groupId": self.add_group(**body)})
        control_route(app, "POST", "/_control/streams/drop", lambda _: {"closed": self.drop_streams()})
        control_route(app, "POST", "/_control/streams/cut", lambda _: {"cut": self.cut_streams()})
        control_route(app, "GET", "/_control/chats/{chat_id}", lambda _, chat_id: {
            "messages": self.messages(chat_id), "ops": self.ops(chat_id)})
        control_route(app, "GET", "/_control/stats", lambda _: self.stats())
        control_route(app, "POST", "/_control/faults", lambda body: self.set_faults(**body))
        control_route(app, "POST", "/_control/config", lambda body: self.configure(**body))

    async def on_stopping(self) -> None:
        with self._lock:
            streams, self.streams = self.streams, []
        for stream in streams:
            stream.queue.put_nowait(CLOSE)


async def _check(request: web.Request) -> web.Response:
    """signal-cli answers 200 with no body while the daemon runs (no Host check on this one)."""
    return web.Response(status=200)
