"""The conformance harness for the Signal adapter: the fake signal-cli HTTP daemon (tests/fakes/signal), in-process,
its messages, queued envelopes and files in a state file so a restart on the same port keeps them.

The suite names its chats; on Signal a direct chat is the other person's ACI. Each chat name is a person of its own
(``uuid_for(chat)``), as if they had written to the bot's number before. Signal acknowledges nothing a client
receives; what stands for "acknowledged" is the adapter's committed offset: the newest ``serverDeliveredTimestamp``
it stored has reached the delivery in question.

One accommodation, and why. signal-cli learns that a stream's client is gone only when a write to it fails (the
first write after the peer vanished is taken by TCP and lost; the fake does the same, tests/fakes/signal/stream.py).
A message signal-cli handles in that moment is lost to every client: the window actors/adapters/signal/README.md describes, tested on
its own in tests/adapters/test_signal.py. The suite's kill -9 test sends its message right after the kill, inside
that window; ``inject`` therefore waits until every open stream has had two keep-alives (0.1 s apart here, 15 s in
signal-cli), by which time a dead one is found and dropped, before the message reaches "Signal": what the suite
tests is then the adapter's part, that a message waiting on Signal's servers arrives once after the restart.
"""
from __future__ import annotations


from actors.messages import Source
from tests.adapters.freezing_proxy import through
from tests.adapters.server_harness import ServerHarness
from tests.fakes.signal import ACCOUNT, ACCOUNT_UUID, FakeSignalCli, uuid_for

KEEPALIVE_S = 0.1
STATUS = {"ok": 200, "rate_limited": 429, "error": 500, "dropped": 599, "unregistered": 400}
METHODS = {"send": "send", "typing": "sendTyping", "delete": "remoteDelete"}


class SignalHarness(ServerHarness):
    adapter_type = "signal"
    adapter_name = "signal"
    adapter_kind = "SignalAdapter"
    text_limit = 65536            # bytes of UTF-8 one message carries (actors.adapters.pacing: signal)

    state_name = "signal.json"
    send_method = "send"

    def make_server(self):
        return FakeSignalCli(port=self.port, state_file=self.state_file, keepalive_interval=KEEPALIVE_S)

    def adapter_toml(self) -> str:
        return (self.table_head() +
                f'account = "{ACCOUNT}"\naccount_uuid = "{ACCOUNT_UUID}"\nbase_url = "{self.server.base_url}"\n'
                'idle_timeout_s = 5.0\npacing = { per_chat_ops_per_s = 5.0, per_chat_burst = 5 }\n')

    # -- inbound: a handle is "inbound handle/delivery number"
    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        self.server.settle_streams()
        record = self.server.inject_message(text, sender=uuid_for(chat), number=None, name=user)
        return f"{record['handle']}/1"

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        self.server.settle_streams()
        record = self.server.inject_message(caption, sender=uuid_for(chat), number=None, name="alice",
                                            attachments=(("image/png", data, "photo.png"),))
        return f"{record['handle']}/1"

    def fate(self, handle: str) -> dict:
        """What became of an injected message on the fake's side (queued, delivered, lost, and to which streams):
        said when a test waited for it in vain."""
        record = self.server.inbound(handle.split("/")[0])
        return {k: record.get(k) for k in ("state", "deliveries", "written")}

    def _envelope(self, handle: str) -> dict:
        return self.server.inbound(handle.split("/")[0])["event"]["envelope"]

    def platform_message_id(self, handle: str) -> str:
        envelope = self._envelope(handle)
        return f"{envelope['sourceUuid']}:{envelope['timestamp']}"

    def replay(self, handle: str) -> str:
        inbound = handle.split("/")[0]
        record = self.server.redeliver(inbound)
        return f"{inbound}/{len(record['deliveries'])}"

    def inject_malformed(self) -> tuple[str, str]:
        record = self.server.inject_event({"account": ACCOUNT, "envelope": {
            "source": uuid_for("malformed"), "sourceNumber": None, "sourceUuid": uuid_for("malformed"),
            "sourceName": "mallory", "sourceDevice": 1, "timestamp": 1700000000000,
            "serverReceivedTimestamp": 1700000000001, "serverDeliveredTimestamp": 0,
            "dataMessage": {"timestamp": 1700000000000, "message": 42}}})
        return f"{record['handle']}/1", "message must be a string"

    def acknowledged(self, handle: str) -> bool:
        inbound, delivery = handle.split("/")
        deliveries = self.server.inbound(inbound)["deliveries"]
        offset = self.committed_offset()
        return (len(deliveries) >= int(delivery) and isinstance(offset, dict)
                and offset.get("delivered", 0) >= deliveries[int(delivery) - 1])

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=uuid_for(chat), chat_type="dm", user_id=uuid_for(chat),
                      user_name=user)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": str(m["timestamp"]), "text": m["text"], "deleted": m["deleted"]}
                for m in self.server.messages(uuid_for(chat))]

    def attempts(self, chat: str, op: str) -> list[dict]:
        if op not in METHODS:
            return []
        return [{"at": o["at"], "status": STATUS.get(o["status"], 0)}
                for o in self.server.ops(uuid_for(chat), METHODS[op])]

    def script_floods(self, count: int, retry_after: float) -> None:
        # signal-cli gives retryAfterSeconds in whole seconds: the fake rounds ``retry_after`` up to at least 1.
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=("send",))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]

    # -- the frozen-connection case (tests/adapters/test_frozen_connections.py)
    # A keep-alive comes every 0.1 s; the stream's own read timeout is 20 s here: the bound is far below it.
    freeze_silence_s = 2.0
    lost_while_frozen = ("signal-cli writes an envelope to every open stream and forgets it: one written into a "
                         "frozen stream is lost to every client (actors/adapters/signal/README.md)")

    def start_relayed(self, relay) -> str:
        self.server = RelayedSignalCli(port=self.port, state_file=self.state_file,
                                       keepalive_interval=KEEPALIVE_S).start()
        self.port = self.server.port
        self.server.relay_port = relay(self.port)
        relayed = through(self.server.base_url, self.server.relay_port)
        table = self.adapter_toml().replace(self.server.base_url, relayed).replace("idle_timeout_s = 5.0",
                                                                                  "idle_timeout_s = 20.0")
        return table + f"max_silence_s = {self.freeze_silence_s}\n"


class RelayedSignalCli(FakeSignalCli):
    """Takes requests addressed to the relay in front of it too (the frozen-connection case): signal-cli pins the
    Host header to its own address, which through the relay names the relay's port."""
    relay_port = 0

    def host_allowed(self, request) -> bool:
        relayed = {f"{name}:{self.relay_port}" for name in ("127.0.0.1", "localhost")}
        return super().host_allowed(request) or request.headers.get("Host", "") in relayed


HARNESS = SignalHarness
