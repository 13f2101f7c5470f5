"""The fake's ``POST /api/v1/rpc``: JSON-RPC 2.0 as signal-cli's HTTP daemon answers it (``handleRpcEndpoint``,
``SignalJsonRpcCommandHandler``), with the methods a chat bot uses.

Transport: POST only (405), ``Content-Type: application/json`` (415), the Host header pinned (421); a single
request or a batch (a list, answered by a list); a request without ``id`` is a notification (HTTP 201, no body);
every answer is HTTP 200 with ``result`` or ``error`` {code, message, data}. Codes: -32700 parse error, -32600 no
method, -32601 unknown method, -32602 bad params (a multi-account daemon without a valid ``account``), -1 user
error, -3 I/O, -4 untrusted identity, -5 rate limited, -32603 internal.

Methods: ``send`` {recipient (a string or a list: +number or ACI) | groupId, message, attachments (paths or data
URIs), voiceNote} -> {timestamp, results: [{recipientAddress: {uuid, number}, type: SUCCESS}]}; a body over 2,000
UTF-8 bytes is sent as signal-cli sends it, the first 2,000 bytes as the body and the whole text as a
``text/x-signal-plain`` attachment. ``sendTyping`` {recipient | groupId, stop?}; ``remoteDelete`` {recipient |
groupId, targetTimestamp} (marks the bot's message with that timestamp deleted); ``getAttachment`` {id, recipient |
groupId} -> {data: base64}; ``version``.

Faults (FaultScript over send, sendTyping, remoteDelete): "flood" -> -5 with ``retryAfterSeconds`` (whole seconds,
rounded up, as signal-cli gives them) and the chat banned that long (a call before counts as a violation and is
refused again); "error" -> -32603; "drop" -> the connection closed before anything happens; "drop_after" -> it
happens, the answer is lost.
"""
from __future__ import annotations

import base64
import json
import math
import re
import time
from typing import Any, Optional

from aiohttp import web

from tests.fakes.harness import drop_connection
from tests.fakes.signal.world import INLINE_BYTES, LONG_TEXT, next_timestamp, trim_utf8

WRITE_METHODS = ("send", "sendTyping", "remoteDelete")
NUMBER = re.compile(r"\+[1-9][0-9]{6,14}")
DONE_CALL = web.RequestKey("done_call", tuple)   # (method, chat) of the call the request just made
ACI = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class RpcMethods:
    """Mixin for FakeSignalCli (uses ``mutate``, ``limits``, ``faults``, ``gate``, ``chat``)."""

    async def route_rpc(self, request: web.Request) -> web.Response:
        if not self.host_allowed(request):
            with self.mutate() as state:
                state["stats"]["host_refused"] += 1
            return web.Response(status=421)
        if not (request.headers.get("Content-Type") or "").startswith("application/json"):
            return web.Response(status=415)
        try:
            body = json.loads(await request.read())
        except ValueError:
            return web.json_response(_error(None, RpcError(-32700, "Parse error")))
        requests = body if isinstance(body, list) else [body]
        answers = []
        for item in requests:
            answer = self._one(item, request)
            if answer == "drop":
                return drop_connection(request)
            if (done := request.pop(DONE_CALL, None)) is not None:
                await self.hold_if_asked(*done, took_effect=True)
            if answer is not None:
                answers.append(answer)
        if not answers:
            return web.Response(status=201)
        return web.json_response(answers if isinstance(body, list) else answers[0])

    def _one(self, item: Any, request: web.Request):
        if not isinstance(item, dict) or not isinstance(item.get("method"), str):
            return _error(item.get("id") if isinstance(item, dict) else None,
                          RpcError(-32600, "method field must be set"))
        method, params, rid = item["method"], item.get("params") or {}, item.get("id")
        with self.mutate() as state:
            state["stats"]["rpc"][method] = state["stats"]["rpc"].get(method, 0) + 1
        try:
            if not isinstance(params, dict):
                raise RpcError(-32602, "params must be an object")
            params = self._account_checked(dict(params))
            handler = {"send": self.rpc_send, "sendTyping": self.rpc_send_typing,
                       "remoteDelete": self.rpc_remote_delete, "getAttachment": self.rpc_get_attachment,
                       "version": lambda p: {"version": self.limits["version"]}}.get(method)
            if handler is None:
                raise RpcError(-32601, "Method not implemented")
            fault = self.faults.draw(method)
            if fault == "drop":
                self._log_op(params, method, "dropped")
                return "drop"
            if fault == "error":
                self._log_op(params, method, "error")
                raise RpcError(-32603, "Failed to send message: Connection reset (IOException)")
            if fault == "flood":
                raise self._flooded(params, method)
            result = handler(params)
            if fault == "drop_after":
                return "drop"
            recipient = params.get("recipient")
            chat = recipient[0] if isinstance(recipient, list) and len(recipient) == 1 else recipient
            request[DONE_CALL] = (method, chat or params.get("groupId"))   # route_rpc: a held answer waits there
        except RpcError as exc:
            with self.mutate() as state:
                state["stats"]["rpc_errors"][str(exc.code)] = state["stats"]["rpc_errors"].get(str(exc.code), 0) + 1
            return None if rid is None else _error(rid, exc)
        return None if rid is None else {"jsonrpc": "2.0", "result": result, "id": rid}

    def _account_checked(self, params: dict) -> dict:
        account = params.pop("account", None)
        if self.limits["multi_account"] and account != self.read(lambda s: s["account"]):
            raise RpcError(-32602, "Method requires valid account parameter")
        return params

    # -- whom a call is for
    def _targets(self, state: dict, params: dict) -> tuple[str, list[str]]:
        """(the chat id, the recipients) of a call's ``recipient`` or ``groupId``."""
        groups = params.get("groupId")
        recipients = params.get("recipient")
        groups = [groups] if isinstance(groups, str) else groups or []
        recipients = [recipients] if isinstance(recipients, str) else recipients or []
        if not groups and not recipients:
            raise RpcError(-1, "No recipients given")
        if groups:
            group = state["groups"].get(groups[0])
            if group is None:
                raise RpcError(-1, f"Group not found: {groups[0]}")
            return f"group:{groups[0]}", list(group["members"]) or ["+15550009999"]
        for recipient in recipients:
            if not isinstance(recipient, str) or not (NUMBER.fullmatch(recipient) or ACI.fullmatch(recipient)):
                raise RpcError(-1, f"Invalid phone number or ACI: {recipient!r}")
        return recipients[0], recipients

    def _results(self, recipients: list[str], kind: str = "SUCCESS", **extra) -> list[dict]:
        return [dict({"recipientAddress": {"uuid": r if ACI.fullmatch(r) else None,
                                           "number": r if NUMBER.fullmatch(r) else None}, "type": kind}, **extra)
                for r in recipients]

    def _guarded(self, state: dict, params: dict, method: str) -> tuple[str, list[str]]:
        """The targets of a write, after the ban a rate limit put on its chat and the unregistered numbers."""
        chat_id, recipients = self._targets(state, params)
        now = time.monotonic()
        remaining = self.gate.ban_remaining([chat_id], now)
        if remaining > 0:
            state["stats"]["retry_after_violations"] += 1
            state["stats"]["rate_limited"] += 1
            self._log_op_locked(state, chat_id, method, "rate_limited")
            raise RpcError(-5, "Failed to send message due to rate limiting", {"response": {
                "timestamp": next_timestamp(state),
                "results": self._results(recipients, "RATE_LIMIT_FAILURE", retryAfterSeconds=math.ceil(remaining))}})
        unregistered = [r for r in recipients if r in self.limits["unregistered"]]
        if unregistered and len(unregistered) == len(recipients):
            self._log_op_locked(state, chat_id, method, "unregistered")
            raise RpcError(-1, "Failed to send message", {"response": {
                "timestamp": next_timestamp(state), "results": self._results(recipients, "UNREGISTERED_FAILURE")}})
        return chat_id, recipients

    def _flooded(self, params: dict, method: str) -> RpcError:
        seconds = max(1, math.ceil(self.faults.flood_retry_after))
        with self.mutate() as state:
            chat_id, recipients = self._targets(state, params)
            self.gate.ban(chat_id, time.monotonic(), seconds)
            state["stats"]["rate_limited"] += 1
            self._log_op_locked(state, chat_id, method, "rate_limited")
            return RpcError(-5, "Failed to send message due to rate limiting", {"response": {
                "timestamp": next_timestamp(state),
                "results": self._results(recipients, "RATE_LIMIT_FAILURE", retryAfterSeconds=seconds)}})

    def _log_op(self, params: dict, method: str, status: str) -> None:
        with self.mutate() as state:
            try:
                chat_id, _ = self._targets(state, params)
            except RpcError:
                return
            self._log_op_locked(state, chat_id, method, status)

    def _log_op_locked(self, state: dict, chat_id: str, method: str, status: str,
                       timestamp: Optional[int] = None) -> None:
        self.chat(state, chat_id)["ops"].append({"method": method, "at": time.monotonic(), "status": status,
                                                 "timestamp": timestamp})

    # -- the methods
    def rpc_send(self, params: dict) -> dict:
        text = params.get("message") if isinstance(params.get("message"), str) else ""
        attachments = params.get("attachments") or params.get("attachment") or []
        with self.mutate() as state:
            chat_id, recipients = self._guarded(state, params, "send")
            if not text and not attachments:
                raise RpcError(-1, "Sending empty message is not allowed, either a message, attachment or sticker "
                                   "must be given.")
            stamp = next_timestamp(state)
            files = []
            if len(text.encode("utf-8")) > INLINE_BYTES:
                files.append({"contentType": LONG_TEXT, "size": len(text.encode("utf-8")), "text": text})
            files += [attachment_given(a) for a in ([attachments] if isinstance(attachments, str) else attachments)]
            voice_note = params.get("voiceNote") is True
            self.chat(state, chat_id)["messages"].append({
                "timestamp": stamp, "body": trim_utf8(text), "attachments": files, "text": text, "deleted": False,
                "recipients": recipients, "at": time.time(), "voice_note": voice_note})
            self._log_op_locked(state, chat_id, "send", "ok", stamp)
            return {"timestamp": stamp, "results": self._results(recipients)}

    def rpc_send_typing(self, params: dict) -> dict:
        with self.mutate() as state:
            chat_id, recipients = self._guarded(state, params, "sendTyping")
            stamp = next_timestamp(state)
            self._log_op_locked(state, chat_id, "sendTyping", "ok", stamp)
            self.chat(state, chat_id).setdefault("typing", []).append(
                {"action": "STOP" if params.get("stop") else "START", "at": time.time()})
            return {"timestamp": stamp, "results": self._results(recipients)}

    def rpc_remote_delete(self, params: dict) -> dict:
        target = params.get("targetTimestamp")
        if type(target) is not int:
            raise RpcError(-32602, "targetTimestamp must be a number")
        with self.mutate() as state:
            chat_id, recipients = self._guarded(state, params, "remoteDelete")
            for message in self.chat(state, chat_id)["messages"]:
                if message["timestamp"] == target:
                    message["deleted"] = True
            stamp = next_timestamp(state)
            self._log_op_locked(state, chat_id, "remoteDelete", "ok", stamp)
            return {"timestamp": stamp, "results": self._results(recipients)}

    def rpc_get_attachment(self, params: dict) -> dict:
        attachment_id = params.get("id")
        if not isinstance(attachment_id, str):
            raise RpcError(-1, "Missing attachment id parameter")
        stored = self.read(lambda s: s["attachments"].get(attachment_id))
        if stored is None:
            raise RpcError(-1, f"Could not find attachment with ID: {attachment_id}")
        return {"data": stored["data"]}


DATA_URI = re.compile(r"data:(?P<mime>[^;,]+);filename=(?P<name>[^;,]*);base64,(?P<data>[A-Za-z0-9+/=]*)")


def attachment_given(given: Any) -> dict:
    """An attachment of a ``send``: a data URI (``data:MIME;filename=NAME;base64,DATA``, as signal-cli's
    ``--attachment`` documents it) decoded to its bytes; a path is kept as given (this fake reads no files)."""
    found = DATA_URI.fullmatch(given) if isinstance(given, str) else None
    if found is None:
        if isinstance(given, str) and given.startswith("data:"):
            raise RpcError(-1, "Invalid data URI attachment")
        return {"contentType": "application/octet-stream", "given": str(given)[:80]}
    try:
        size = len(base64.b64decode(found["data"], validate=True))
    except ValueError:   # binascii.Error: bad padding
        raise RpcError(-1, "Invalid data URI attachment: its base64 does not decode") from None
    # base64 kept, not bytes: the fake's state is JSON (its state file)
    return {"contentType": found["mime"], "filename": found["name"], "size": size, "base64": found["data"]}


def _error(rid: Any, exc: RpcError) -> dict:
    return {"jsonrpc": "2.0", "error": {"code": exc.code, "message": exc.message, "data": exc.data}, "id": rid}
