"""The people, groups and messages of the fake signal-cli: the bot's account, the envelopes signal-cli would put on
its stream for what people send (``JsonReceiveMessageHandler``'s shape), the files it would have downloaded, and
the clock every Signal timestamp comes from (milliseconds, strictly increasing: a message is named by it)."""
from __future__ import annotations

import base64
import hashlib
import time
import uuid as uuid_mod
from typing import Optional

ACCOUNT = "+15550000001"
ACCOUNT_UUID = "0d4e8a6e-0000-4000-8000-00000000b07a"
DEFAULT_USER_UUID = "7a1c2f00-0000-4000-8000-0000000a11ce"
DEFAULT_USER_NUMBER = "+15550000100"
LONG_TEXT = "text/x-signal-plain"
INLINE_BYTES = 2000          # signal-cli's MAX_MESSAGE_SIZE_BYTES: longer bodies travel as a long-text attachment


def initial_world(account: str, account_uuid: str) -> dict:
    return {"account": account, "account_uuid": account_uuid, "clock_ms": 0, "groups": {}, "chats": {},
            "inbound": [], "queue": [], "attachments": {},
            "stats": {"rpc": {}, "rpc_errors": {}, "connections": 0, "delivered": 0, "queued": 0,
                      "lost_no_client": 0, "lost_dead_stream": 0, "rate_limited": 0, "retry_after_violations": 0,
                      "host_refused": 0}}


def next_timestamp(state: dict) -> int:
    state["clock_ms"] = max(int(time.time() * 1000), state["clock_ms"] + 1)
    return state["clock_ms"]


def group_id_for(name: str) -> str:
    """A group id as signal-cli shows one: base64 of 32 bytes (here derived from the name, so tests can name it)."""
    return base64.b64encode(hashlib.sha256(f"group/{name}".encode()).digest()).decode()


def uuid_for(name: str) -> str:
    return str(uuid_mod.UUID(hashlib.sha256(f"user/{name}".encode()).hexdigest()[:32]))


def trim_utf8(text: str, limit: int = INLINE_BYTES) -> str:
    """The longest prefix of whole characters within ``limit`` UTF-8 bytes (signal-cli's splitByByteLength)."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", "ignore")


class WorldMethods:
    """Mixin for FakeSignalCli: groups, chats, inbound envelopes (uses ``mutate``, ``read``, ``deliver``)."""

    def add_group(self, name: str, members: tuple = ()) -> str:
        group_id = group_id_for(name)
        with self.mutate() as state:
            state["groups"][group_id] = {"name": name, "members": list(members)}
        return group_id

    def chat(self, state: dict, chat_id: str) -> dict:
        return state["chats"].setdefault(chat_id, {"messages": [], "ops": []})

    def store_attachment(self, state: dict, content_type: str, data: bytes, filename: Optional[str]) -> dict:
        extension = (filename or "").rpartition(".")[2] if filename and "." in filename else "bin"
        attachment_id = f"{uuid_mod.uuid4().hex[:20]}.{extension}"
        state["attachments"][attachment_id] = {"contentType": content_type,
                                               "data": base64.b64encode(data).decode()}
        return {"contentType": content_type, "filename": filename, "id": attachment_id, "size": len(data),
                "width": None, "height": None, "caption": None, "uploadTimestamp": state["clock_ms"]}

    def inject_message(self, text: str = "", sender: str = DEFAULT_USER_UUID,
                       number: Optional[str] = DEFAULT_USER_NUMBER, name: str = "Alice",
                       group_id: Optional[str] = None, attachments: tuple = (), mentions: tuple = (),
                       quote: Optional[dict] = None, timestamp: Optional[int] = None) -> dict:
        """A person's message as signal-cli would put it on the stream; delivered to the connected streams (or
        kept on "Signal's servers", per the receive mode). ``attachments``: (content type, bytes, file name)
        triples; ``mentions``: dicts with number/uuid/start/length; ``quote``: {"id", "authorUuid"?, ...}. Returns
        the inbound record: {"handle", "event", "deliveries", "state"}."""
        with self.mutate() as state:
            stamp = timestamp if timestamp is not None else next_timestamp(state)
            data = {"timestamp": stamp, "message": text or None, "expiresInSeconds": 0, "viewOnce": False}
            files = [self.store_attachment(state, kind, blob, filename) for kind, blob, filename in attachments]
            if len(text.encode("utf-8")) > INLINE_BYTES:
                # signal-cli read the long-text attachment and put the whole text in ``message``; the attachment
                # is still listed.
                files.insert(0, self.store_attachment(state, LONG_TEXT, text.encode("utf-8"), None))
            if files:
                data["attachments"] = files
            if mentions:
                data["mentions"] = [dict({"name": m.get("number") or m.get("uuid")}, **m) for m in mentions]
            if quote is not None:
                data["quote"] = dict({"authorNumber": None, "authorUuid": None, "text": "", "attachments": []},
                                     **quote)
            if group_id is not None:
                group = state["groups"].get(group_id, {"name": None})
                data["groupInfo"] = {"groupId": group_id, "groupName": group["name"], "revision": 1,
                                     "type": "DELIVER"}
            envelope = {"source": number or sender, "sourceNumber": number, "sourceUuid": sender,
                        "sourceName": name, "sourceDevice": 1, "timestamp": stamp,
                        "serverReceivedTimestamp": next_timestamp(state), "serverDeliveredTimestamp": 0,
                        "dataMessage": data}
            return self.inject_event_locked(state, {"envelope": envelope, "account": state["account"]})

    def inject_event(self, event: dict) -> dict:
        """Any event object as it would be on the stream (a malformed one, a receipt, a sync message)."""
        with self.mutate() as state:
            return self.inject_event_locked(state, event)

    def inject_event_locked(self, state: dict, event: dict) -> dict:
        record = {"handle": str(len(state["inbound"]) + 1), "event": event, "deliveries": [], "state": "new"}
        state["inbound"].append(record)
        self.deliver(state, record)
        return dict(record)

    def redeliver(self, handle: str) -> dict:
        """The same envelope delivered again, with a new ``serverDeliveredTimestamp``: what Signal does when the
        acknowledgement of a delivery was lost, and what signal-cli does for a message it stored and had not
        finished handling when it was killed."""
        with self.mutate() as state:
            record = self._record(state, handle)
            self.deliver(state, record)
            return dict(record)

    @staticmethod
    def _record(state: dict, handle: str) -> dict:
        return state["inbound"][int(handle) - 1]
