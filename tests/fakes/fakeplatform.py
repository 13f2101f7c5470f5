"""A generic fake chat platform (the machinery every fake shares is in tests/fakes/harness.py).

Wire format (JSON everywhere; errors are ``{"ok": false, "error": <code>}`` with the HTTP status shown):

    GET  /bot/updates?offset=N&timeout=S
         -> {"ok": true, "updates": [{"id": int, "chat": str, "user": str, "text": str, "message_id": str,
                                      "thread": str|null, "chat_type": "dm"|"group"}]}
            ids increase; only ids >= offset are returned; waits up to S seconds while there are none.
            The highest offset seen is reported as ``acked_offset`` in the stats.
    POST /bot/send    {"chat", "text", "reply_to"?, "thread"?}  -> {"ok": true, "message_id": str}
    POST /bot/edit    {"chat", "message_id", "text"}           -> {"ok": true}
                      same text -> 400 "not_modified"; unknown or deleted message -> 400 "not_found"
    POST /bot/delete  {"chat", "message_id"}                   -> {"ok": true}; unknown -> 400 "not_found"
    POST /bot/typing  {"chat"}                                 -> {"ok": true}
    POST /bot/send_file {"chat", "kind": "photo"|"document", "name", "caption"?, "data": base64, "reply_to"?,
                      "thread"?}                               -> {"ok": true, "message_id": str}
                      the message keeps {"file": {"kind", "name", "size", "sha256"}} and the caption as its text;
                      bad base64 or kind -> 400 "bad_request"; over ``file_limit`` bytes (50 MB) -> 400 "too_large"
    Limits: text over ``text_limit`` chars (default 4000) -> 400 "too_long"; empty text -> 400 "empty".
    Pacing: send/edit/delete share a per-chat token bucket (one op per ``op_interval`` s, ``op_burst`` at once;
    off when op_interval is 0). Over budget -> 429 {"error": "flood", "retry_after": float}; until that time
    passes every op on the chat is refused again and counted in stats as ``retry_after_violations``.
    Scripted faults (see FaultScript): 429 storms, 500 {"error": "internal"}, connections dropped before
    ("drop") or after ("drop_after") the operation took effect.

Control API (for tests, also from another process):

    POST /_control/inject   one message {"chat", "text", "user"?, "chat_type"?, "thread"?, "mentioned"?}, a list
                            of them, or {"messages": [...]}              -> {"ok": true, "ids": [...]}
    GET  /_control/chats    -> {"chats": [...]}
    GET  /_control/chats/{chat} -> {"chat", "messages": [{"message_id", "text", "history": [{"text", "at"}],
                            "deleted", "deleted_at", "reply_to", "thread", "sent_at"}], "ops": [{"op", "at",
                            "message_id", "status", "error"}], "inbound": [updates]}
    GET  /_control/stats    POST /_control/faults {FaultScript fields}   POST /_control/config {text_limit,
                            op_interval, op_burst}   POST /_control/reset

Run standalone with ``python -m tests.fakes.fakeplatform --port P --state FILE``; it prints one JSON line
``{"ready": true, "port": P, "base_url": ...}`` when listening. With ``--state`` every change is written
atomically to FILE and reloaded at start, so a restarted fake keeps its history. Configuration and faults are
not persisted: pass them again (``--config JSON``) on restart.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import time
from typing import Optional

from aiohttp import web

from tests.fakes.harness import (ControlClient, FakeServer, FaultScript, FloodGate, StandaloneFake,  # noqa: F401 - re-exported
                                 _failure, control_route, drop_connection, standalone_main)

WRITE_OPS = ("send", "edit", "delete", "typing", "send_file")
PACED_OPS = ("send", "edit", "delete", "send_file")  # typing shows a hint and costs no budget, as on Telegram


class FakePlatform(FakeServer):
    """The generic fake; see the module docstring for its wire format. ``reset()`` keeps the configuration."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, text_limit: int = 4000,
                 op_interval: float = 0.0, op_burst: int = 1):
        super().__init__(port=port, state_file=state_file)
        self.faults = FaultScript(WRITE_OPS)
        self.file_limit = 50 * 1024 * 1024
        self.configure(text_limit=text_limit, op_interval=op_interval, op_burst=op_burst)

    def initial_state(self) -> dict:
        return {"next_update_id": 1, "next_message_id": 1, "updates": [], "chats": {},
                "stats": {"requests": {}, "errors": {}, "floods_served": 0, "retry_after_violations": 0,
                          "acked_offset": 0}}

    # -- in-process API
    def configure(self, text_limit=None, op_interval=None, op_burst=None) -> None:
        with self._lock:
            self.text_limit = int(text_limit) if text_limit is not None else self.text_limit
            self.op_interval = float(op_interval) if op_interval is not None else self.op_interval
            self.op_burst = int(op_burst) if op_burst is not None else self.op_burst
            self.flood = FloodGate()

    def set_faults(self, **settings) -> None:
        """Replace the fault script (see FaultScript.configure); no arguments turns faults off."""
        with self._lock:
            self.faults.configure(**settings)

    def reset(self) -> None:
        with self._lock:
            self.faults.configure()
            self.flood = FloodGate()
            self.reset_state()

    def inject(self, chat, text: str, user="user", chat_type: str = "dm", thread=None,
               date: Optional[float] = None, mentioned: Optional[bool] = None) -> int:
        """Queue an inbound message; returns its update id. ``date`` is when the platform says it was sent (now by
        default), as Telegram's servers stamp every message. ``mentioned``: whether it mentions the bot (left out of
        the update when None, as for a platform that does not say)."""
        if chat_type not in ("dm", "group"):
            raise ValueError(f"chat_type must be dm or group, not {chat_type!r}")
        with self.mutate() as state:
            update = {"id": state["next_update_id"], "chat": str(chat), "user": str(user), "text": str(text),
                      "message_id": str(state["next_message_id"]),
                      "thread": None if thread is None else str(thread), "chat_type": chat_type,
                      "date": time.time() if date is None else float(date)}
            if mentioned is not None:
                update["mentioned"] = bool(mentioned)
            state["next_update_id"] += 1
            state["next_message_id"] += 1
            state["updates"].append(update)
            self._chat(state, chat)
        return update["id"]

    def messages(self, chat) -> list[dict]:
        """The bot's messages in ``chat``, oldest first, deleted ones included (``deleted`` flag)."""
        return self.read(lambda s: list(s["chats"].get(str(chat), {}).get("messages", {}).values()))

    def final_texts(self, chat) -> list[str]:
        return [m["text"] for m in self.messages(chat) if not m["deleted"]]

    def ops(self, chat, op: Optional[str] = None) -> list[dict]:
        """Every operation the bot attempted on ``chat`` (refused ones too), with wall-clock ``at``."""
        ops = self.read(lambda s: s["chats"].get(str(chat), {}).get("ops", []))
        return [o for o in ops if op is None or o["op"] == op]

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    def timeline(self, chat) -> dict:
        def select(s):
            rec = s["chats"].get(str(chat), {"messages": {}, "ops": []})
            return {"chat": str(chat), "messages": list(rec["messages"].values()), "ops": rec["ops"],
                    "inbound": [u for u in s["updates"] if u["chat"] == str(chat)]}
        return self.read(select)

    # -- HTTP
    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/bot/updates", self._handle_updates)
        for op in WRITE_OPS:
            app.router.add_post(f"/bot/{op}", self._op_handler(op))
        control_route(app, "POST", "/_control/inject", self._control_inject)
        control_route(app, "GET", "/_control/chats", lambda _: {"chats": self.read(lambda s: list(s["chats"]))})
        control_route(app, "GET", "/_control/chats/{chat}", lambda _, chat: self.timeline(chat))
        control_route(app, "GET", "/_control/stats", lambda _: self.stats())
        control_route(app, "POST", "/_control/faults", lambda body: self.set_faults(**body))
        control_route(app, "POST", "/_control/config", lambda body: self.configure(**body))
        control_route(app, "POST", "/_control/reset", lambda _: self.reset())

    def _control_inject(self, body) -> dict:
        items = body if isinstance(body, list) else body.get("messages", [body])
        return {"ok": True, "ids": [self.inject(**item) for item in items]}

    async def _handle_updates(self, request: web.Request) -> web.Response:
        try:
            offset = int(request.query.get("offset", 0))
            timeout = min(float(request.query.get("timeout", 0)), 60.0)
        except ValueError:
            return web.json_response({"ok": False, "error": "bad_request"}, status=400)
        with self._lock:  # set_faults may run in a test thread meanwhile
            fault = self.faults.draw("poll")
        if fault == "drop":
            return drop_connection(request)
        if fault in ("error", "flood"):
            status, payload = self._fault_failure(fault, None)
            return web.json_response(payload, status=status)
        with self.mutate() as state:
            state["stats"]["requests"]["poll"] = state["stats"]["requests"].get("poll", 0) + 1
            state["stats"]["acked_offset"] = max(state["stats"]["acked_offset"], offset)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            updates = self.read(lambda s: [u for u in s["updates"] if u["id"] >= offset])
            if updates or loop.time() >= deadline:
                answer = web.json_response({"ok": True, "updates": updates})
                return drop_connection(request) if fault == "drop_after" else answer
            await self.wait_for_change(deadline - loop.time())

    def _op_handler(self, op: str):
        async def handler(request: web.Request) -> web.Response:
            try:
                body = await request.json()
                chat = str(body["chat"])
            except (ValueError, KeyError, TypeError):
                return web.json_response({"ok": False, "error": "bad_request"}, status=400)
            with self.mutate() as state:
                fault = self.faults.draw(op)
                status, payload = self._apply(state, op, chat, body, fault)
            await self.hold_if_asked(op, chat, fault is None and status == 200)
            if fault in ("drop", "drop_after"):
                return drop_connection(request)
            return web.json_response(payload, status=status)
        return handler

    def _chat(self, state: dict, chat) -> dict:
        return state["chats"].setdefault(str(chat), {"messages": {}, "ops": []})

    def _fault_failure(self, fault: str, chat: Optional[str]) -> tuple[int, dict]:
        if fault == "error":
            return _failure(500, "internal")
        retry_after = self.faults.flood_retry_after
        if chat is not None:
            self.flood.ban(chat, time.monotonic(), retry_after)
        return _failure(429, "flood", retry_after=retry_after)

    def _apply(self, state: dict, op: str, chat: str, body: dict, fault: Optional[str]) -> tuple[int, dict]:
        """Decide and perform one bot operation; every attempt lands in the chat's ops log."""
        stats = state["stats"]
        stats["requests"][op] = stats["requests"].get(op, 0) + 1
        if fault == "drop":  # the request never reached the platform's logic
            status, payload = _failure(599, "dropped")
        elif fault in ("error", "flood"):
            status, payload = self._fault_failure(fault, chat)
        else:
            status, payload = self._perform(state, op, chat, body)
        if status == 429:
            stats["floods_served"] += 1
        if status != 200:
            stats["errors"][payload["error"]] = stats["errors"].get(payload["error"], 0) + 1
        message_id = payload.get("message_id", body.get("message_id"))
        self._chat(state, chat)["ops"].append({"op": op, "at": time.time(), "status": status,
                                               "message_id": None if message_id is None else str(message_id),
                                               "error": payload.get("error")})
        return status, payload

    def _perform(self, state: dict, op: str, chat: str, body: dict) -> tuple[int, dict]:
        now, messages = time.monotonic(), self._chat(state, chat)["messages"]
        paced = op in PACED_OPS
        if paced and (banned_for := self.flood.ban_remaining([chat], now)) > 0:
            state["stats"]["retry_after_violations"] += 1
            return _failure(429, "flood", retry_after=round(banned_for, 3))
        text = body.get("text")
        if op == "send_file":
            file, failure = self._uploaded(body)
            if failure is not None:
                return failure
            text = body.get("caption") or ""
        if op in ("send", "edit") or (op == "send_file" and text):
            if not isinstance(text, str) or not text:
                return _failure(400, "empty")
            if len(text) > self.text_limit:
                return _failure(400, "too_long")
        message = messages.get(str(body.get("message_id")))
        if op in ("edit", "delete") and (message is None or message["deleted"]):
            return _failure(400, "not_found")
        if op == "edit" and message["text"] == text:
            return _failure(400, "not_modified")
        if paced:
            bucket = self.flood.bucket(chat, self.op_interval, self.op_burst)
            if (wait := bucket.wait_needed(now)) > 0:
                self.flood.ban(chat, now, wait)
                return _failure(429, "flood", retry_after=round(wait, 3))
            bucket.take()
        at = time.time()
        if op in ("send", "send_file"):
            message_id = str(state["next_message_id"])
            state["next_message_id"] += 1
            messages[message_id] = {"message_id": message_id, "text": text, "history": [{"text": text, "at": at}],
                                    "deleted": False, "deleted_at": None, "sent_at": at,
                                    "reply_to": body.get("reply_to"), "thread": body.get("thread"),
                                    **({"file": file} if op == "send_file" else {})}
            return 200, {"ok": True, "message_id": message_id}
        if op == "edit":
            message["text"] = text
            message["history"].append({"text": text, "at": at})
        elif op == "delete":
            message["deleted"], message["deleted_at"] = True, at
        return 200, {"ok": True}

    def _uploaded(self, body: dict) -> tuple[Optional[dict], Optional[tuple[int, dict]]]:
        """(what the chat keeps of an uploaded file, None) or (None, the failure to answer)."""
        try:
            data = base64.b64decode(str(body["data"]), validate=True)
        except (KeyError, ValueError, binascii.Error):
            return None, _failure(400, "bad_request")
        if body.get("kind") not in ("photo", "document") or not data:
            return None, _failure(400, "bad_request")
        if len(data) > self.file_limit:
            return None, _failure(400, "too_large")
        return {"kind": body["kind"], "name": str(body.get("name") or ""), "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest()}, None


if __name__ == "__main__":
    standalone_main(FakePlatform)
