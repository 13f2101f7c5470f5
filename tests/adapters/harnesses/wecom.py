"""The conformance harness for the WeCom adapter: the in-process fake WeCom (tests/fakes/wecom), which signs,
encrypts and POSTs callbacks to the adapter's callback server and serves the API the adapter sends through.

The suite names its chats ("ops-1a2b3c4d"); on WeCom a chat with the application is a member, so each chat name is
a member's UserID (added to the corp on first use) and the user argument plays no part. The adapter listens on port
0 (a port picked free here could be taken by the other worker's daemon first): its callback URL is read from
``status`` and checked with WeCom's echostr handshake before the first message, and read again whenever a callback
finds the port closed (a restarted adapter listens on a new one). WeCom retries a callback three times; the fake
here retries more often and longer, so a slow restart on a loaded machine does not lose the message on the fake's
side. A handle is a callback delivery's id; "acknowledged" is a 200 answer to it.
"""
from __future__ import annotations

from pathlib import Path

from actors.messages import Source
from tests.adapters.server_harness import ServerHarness
from tests.actor_system import wait_for
from tests.fakes.wecom import DEFAULT_AGENT_ID, DEFAULT_CALLBACK_TOKEN, DEFAULT_CORP_ID, DEFAULT_SECRET, FakeWeCom
from tests.fakes.wecom import crypto
from tests.fakes.wecom.callbacks import message_xml

METHODS = {"send": "message/send", "delete": "message/recall"}


class WeComHarness(ServerHarness):
    not_applicable = {
        "freeze": ("WeCom calls the adapter's callback server: no inbound connection of its own to freeze; its "
                   "loop's liveness tick is tested in tests/actors/adapters/test_liveness.py"),
    }
    adapter_type = "wecom"
    adapter_name = "wecom"
    adapter_kind = "WeComAdapter"
    text_limit = 2048            # bytes of UTF-8: 2,049 ASCII characters are one too many

    state_name = "wecom.json"
    send_method = "message/send"

    def __init__(self, workdir: Path):
        super().__init__(workdir)
        self.encoding_aes_key = crypto.new_encoding_aes_key()

    def make_server(self):
        server = FakeWeCom(port=self.port, state_file=self.state_file, encoding_aes_key=self.encoding_aes_key,
                           callback_url=self.url, retries=10, retry_delays=[0.5, 1.0, 2.0])
        server.url_source = self.served_url
        return server

    def adapter_toml(self) -> str:
        # Paced faster than WeCom's 27 a minute per member (the suite's chats send a handful each); the wait after
        # a 45009 just over the 0.4 s the flood test's fake holds the member banned.
        return (self.table_head() +
                f'corp_id = "{DEFAULT_CORP_ID}"\nagent_id = {DEFAULT_AGENT_ID}\nsecret = "{DEFAULT_SECRET}"\n'
                f'token = "{DEFAULT_CALLBACK_TOKEN}"\nencoding_aes_key = "{self.encoding_aes_key}"\n'
                f'base_url = "{self.server.base_url}"\ncallback_port = 0\nrate_limit_wait_s = 0.5\n'
                f'pacing = {{ per_chat_ops_per_s = 4.0, per_chat_burst = 3 }}\n')

    def _checked_url(self) -> None:
        if self.server.callback_url is None:
            url = wait_for(self.served_url, 60, 0.2, "the callback URL in status")
            wait_for(lambda: self.server.verify_url(url)["verified"], 30, 0.2, "the URL check to pass")

    # -- inbound
    def member(self, chat: str) -> str:
        self.server.add_member(chat)
        return chat

    def inject(self, chat: str, text: str, user: str = "alice") -> str:
        self._checked_url()
        return self.server.inject_text(self.member(chat), text)

    def inject_file(self, chat: str, data: bytes, caption: str) -> str:
        self._checked_url()
        return self.server.inject_image(self.member(chat), data)    # a WeCom image message carries no text

    def platform_message_id(self, handle: str) -> str:
        return self.server.callback(handle)["msg_id"]

    def replay(self, handle: str) -> str:
        return self.server.redeliver(handle)

    def inject_malformed(self) -> tuple[str, str]:
        self._checked_url()
        fields = self.server.message_fields(self.member("malformed"), "text", {"Content": "x"}, "")
        del fields["MsgId"]
        return self.server.deliver("text", message_xml(fields), None, "malformed"), "MsgId must be a number"

    def acknowledged(self, handle: str) -> bool:
        return self.server.callback(handle)["state"] == "acked"

    def source(self, chat: str, user: str = "alice") -> Source:
        return Source(platform=self.adapter_name, chat_id=self.member(chat), chat_type="dm", user_id=chat)

    # -- outbound
    def sent(self, chat: str) -> list[dict]:
        return [{"message_id": m["msgid"], "text": m["text"], "deleted": m["recalled"]}
                for m in self.server.messages(chat)]

    def attempts(self, chat: str, op: str) -> list[dict]:
        if op not in METHODS:
            return []
        return [{"at": o["at"], "status": o["status"]} for o in self.server.ops(chat, METHODS[op])]

    def script_floods(self, count: int, retry_after: float) -> None:
        self.server.set_faults(next=["flood"] * count, flood_retry_after=retry_after, methods=("message/send",))

    def clear_faults(self) -> None:
        self.server.set_faults()

    def flood_violations(self) -> int:
        return self.server.stats()["retry_after_violations"]


HARNESS = WeComHarness
