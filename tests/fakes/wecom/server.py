"""FakeWeCom: the server API an application calls (gettoken, message/send, message/recall, media/get), the
callbacks it receives (callbacks.py), a control API and in-process inspection helpers."""
from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
from typing import Optional

from aiohttp import web

from tests.fakes.harness import FakeServer, FaultScript, FloodGate, control_route, drop_connection
from tests.fakes.wecom import crypto
from tests.fakes.wecom.callbacks import CallbackMethods, message_xml

DEFAULT_CORP_ID = "ww0fakecorp0000001"
DEFAULT_AGENT_ID = 1000002
DEFAULT_SECRET = "fake-app-secret-0000000000000000000000000"
DEFAULT_CALLBACK_TOKEN = "fakecallbacktoken"
DEFAULT_LIMITS = {"text_limit": 2048, "member_per_minute": 30, "token_ttl": 7200, "answer_timeout": 5.0,
                  "retries": 3, "retry_delays": [1.0, 2.0, 4.0], "recall_window": 86400.0, "media_delay": 0.0}
WRITE_METHODS = ("message/send", "message/recall")
NO_SUCH_MSGID = 40099   # the documentation names no code for a msgid that cannot be recalled: the fake's own


class FakeWeCom(CallbackMethods, FakeServer):
    """``limits`` (DEFAULT_LIMITS keys) as keyword arguments; faults through ``set_faults`` (kinds flood: 45009,
    error: errcode -1 "system busy", drop, drop_after)."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, corp_id: str = DEFAULT_CORP_ID,
                 agent_id: int = DEFAULT_AGENT_ID, secret: str = DEFAULT_SECRET,
                 callback_token: str = DEFAULT_CALLBACK_TOKEN, encoding_aes_key: Optional[str] = None,
                 callback_url: Optional[str] = None, **limits):
        self.corp_id, self.agent_id, self.secret, self.callback_token = corp_id, agent_id, secret, callback_token
        self.encoding_aes_key = encoding_aes_key or crypto.new_encoding_aes_key()
        super().__init__(port=port, state_file=state_file)
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        self.callback_url = callback_url
        self.faults = FaultScript(WRITE_METHODS)
        self.gates = FloodGate()
        self._http = None
        self._tasks: set = set()

    def initial_state(self) -> dict:
        stats = dict.fromkeys(("tokens_issued", "token_refusals", "sends", "recalls", "truncated",
                               "dropped_over_member_limit", "retry_after_violations", "flood_served",
                               "media_served", "callback_attempts", "callback_retries", "url_verifications"), 0)
        return {"members": {}, "tokens": {}, "ops": [], "callbacks": [], "passive_replies": [], "media": {},
                "next_msg_id": 7300000000000000001, "next_sent": 1, "next_callback": 1, "stats": stats}

    def configure(self, **limits) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        with self._lock:
            self.limits.update(limits)

    def set_faults(self, **settings) -> None:
        with self._lock:
            self.faults.configure(**settings)

    async def on_stopping(self) -> None:
        await self.close_callbacks()

    # -- members, tokens and injected input
    def add_member(self, user: str) -> None:
        with self.mutate() as state:
            state["members"].setdefault(user, {"messages": []})

    def expire_tokens(self) -> None:
        """Every access token issued so far expires now (the next call with one is answered 42001)."""
        with self.mutate() as state:
            for token in state["tokens"].values():
                token["expires_at"] = 0.0

    def inject_text(self, user: str, text: str, msg_id: Optional[str] = None) -> str:
        """A member writes ``text`` to the application: its callback is delivered; returns the callback id."""
        return self._inject(user, "text", {"Content": text}, msg_id)

    def inject_image(self, user: str, data: bytes, mime: str = "image/png") -> str:
        media_id = "3" + secrets.token_hex(16)
        with self.mutate() as state:
            state["media"][media_id] = {"data": base64.b64encode(data).decode(), "mime": mime}
        return self._inject(user, "image", {"PicUrl": f"{self.base_url}/_media/{media_id}", "MediaId": media_id},
                            None)

    def inject_event(self, user: str, event: str = "enter_agent") -> str:
        fields = {"ToUserName": self.corp_id, "FromUserName": user, "CreateTime": int(time.time()),
                  "MsgType": "event", "Event": event, "EventKey": "", "AgentID": self.agent_id}
        return self.deliver("event", message_xml(fields), None, user)

    def message_fields(self, user: str, kind: str, extra: dict, msg_id: str) -> dict:
        return {"ToUserName": self.corp_id, "FromUserName": user, "CreateTime": int(time.time()), "MsgType": kind,
                **extra, "MsgId": msg_id, "AgentID": self.agent_id}

    def _inject(self, user: str, kind: str, extra: dict, msg_id: Optional[str]) -> str:
        self.add_member(user)
        with self.mutate() as state:
            if msg_id is None:
                msg_id = str(state["next_msg_id"])
                state["next_msg_id"] += 1
        return self.deliver(kind, message_xml(self.message_fields(user, kind, extra, msg_id)), msg_id, user)

    # -- inspection
    def messages(self, user: str) -> list[dict]:
        """What the member sees from the application, in order (recalled ones marked; dropped ones never shown)."""
        return self.read(lambda s: [m for m in s["members"].get(user, {"messages": []})["messages"]
                                    if not m["dropped"]])

    def ops(self, user: str, method: str) -> list[dict]:
        return self.read(lambda s: [o for o in s["ops"] if o["user"] == user and o["method"] == method])

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    def callbacks(self) -> list[dict]:
        return self.read(lambda s: s["callbacks"])

    # -- routes
    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/cgi-bin/gettoken", self.gettoken)
        app.router.add_post("/cgi-bin/message/send", self.api(self.message_send))
        app.router.add_post("/cgi-bin/message/recall", self.api(self.message_recall))
        app.router.add_get("/cgi-bin/media/get", self.media_get)
        control_route(app, "GET", "/_control/stats", lambda body: self.stats())
        control_route(app, "POST", "/_control/inject", lambda body: {"callback": self.inject_text(
            str(body["user"]), str(body["text"]))})
        control_route(app, "GET", "/_control/messages/{user}", lambda body, user: {"messages": self.messages(user)})
        control_route(app, "POST", "/_control/expire_tokens", lambda body: self.expire_tokens())
        control_route(app, "POST", "/_control/callback_url", lambda body: setattr(self, "callback_url",
                                                                               body.get("url")))

    async def gettoken(self, request: web.Request) -> web.Response:
        if request.query.get("corpid") != self.corp_id:
            return web.json_response({"errcode": 40013, "errmsg": "invalid corpid"})
        if request.query.get("corpsecret") != self.secret:
            return web.json_response({"errcode": 40001, "errmsg": "invalid credential"})
        token = secrets.token_urlsafe(48)
        with self.mutate() as state:
            state["tokens"][token] = {"expires_at": time.time() + self.limits["token_ttl"]}
            state["stats"]["tokens_issued"] += 1
        return web.json_response({"errcode": 0, "errmsg": "ok", "access_token": token,
                                  "expires_in": self.limits["token_ttl"]})

    def token_refusal(self, state: dict, token: Optional[str]) -> Optional[dict]:
        if not token:
            return {"errcode": 41001, "errmsg": "access_token missing"}
        known = state["tokens"].get(token)
        if known is None:
            return {"errcode": 40014, "errmsg": "invalid access_token"}
        if known["expires_at"] <= time.time():
            return {"errcode": 42001, "errmsg": "access_token expired"}
        return None

    def api(self, method_fn):
        method = method_fn.__name__.replace("message_", "message/")

        async def handler(request: web.Request) -> web.Response:
            try:
                params = json.loads(await request.read() or b"null")
            except ValueError:
                params = None
            user = str(params.get("touser", "")) if isinstance(params, dict) else ""
            with self.mutate() as state:
                refusal = self.token_refusal(state, request.query.get("access_token"))
                if refusal is not None:
                    state["stats"]["token_refusals"] += 1
                    return web.json_response(refusal)
                fault = self.faults.draw(method)
                now = time.time()
                if fault == "drop":
                    self._log_op(state, method, user, 599, None)
                    return drop_connection(request)
                if fault == "flood" or (fault is None and self.gates.ban_remaining([user], now) > 0):
                    if fault is None:
                        state["stats"]["retry_after_violations"] += 1
                    else:
                        self.gates.ban(user, now, self.faults.flood_retry_after)
                    state["stats"]["flood_served"] += 1
                    self._log_op(state, method, user, 200, 45009)
                    return web.json_response({"errcode": 45009, "errmsg": "api freq out of limit"})
                if fault == "error":
                    self._log_op(state, method, user, 200, -1)
                    return web.json_response({"errcode": -1, "errmsg": "system busy"})
                if not isinstance(params, dict):
                    return web.json_response({"errcode": 47001, "errmsg": "data format error"})
                answer = method_fn(state, params, now)
                self._log_op(state, method, user, 200, answer["errcode"])
            await self.hold_if_asked(method, user, fault is None and answer["errcode"] == 0)
            if fault == "drop_after":
                return drop_connection(request)
            return web.json_response(answer)
        return handler

    def _log_op(self, state: dict, method: str, user: str, status: int, errcode: Optional[int]) -> None:
        state["ops"].append({"method": method, "user": user, "at": time.time(), "status": 200 if errcode == 0 else
                             (429 if errcode == 45009 else status if errcode is None else 400), "errcode": errcode})

    def message_send(self, state: dict, params: dict, now: float) -> dict:
        if params.get("agentid") != self.agent_id:
            return {"errcode": 40056, "errmsg": "invalid agentid"}
        if params.get("msgtype") != "text":
            return {"errcode": 40008, "errmsg": "invalid message type (the fake sends text only)"}
        content = (params.get("text") or {}).get("content") if isinstance(params.get("text"), dict) else None
        if not isinstance(content, str) or not content:
            return {"errcode": 44004, "errmsg": "empty content"}
        user = str(params.get("touser", ""))
        member = state["members"].get(user)
        if member is None:
            return {"errcode": 81013, "errmsg": "user & party & tag all invalid"}
        raw = content.encode()
        truncated = len(raw) > self.limits["text_limit"]
        if truncated:   # as WeCom does: cut, not refused
            content = raw[:self.limits["text_limit"]].decode("utf-8", "ignore")
            state["stats"]["truncated"] += 1
        recent = [m for m in member["messages"] if now - m["at"] < 60 and not m["dropped"]]
        dropped = len(recent) >= self.limits["member_per_minute"]
        if dropped:
            state["stats"]["dropped_over_member_limit"] += 1
        msgid = f"fake-msgid-{state['next_sent']}"
        state["next_sent"] += 1
        member["messages"].append({"msgid": msgid, "text": content, "at": now, "recalled": False,
                                   "truncated": truncated, "dropped": dropped})
        state["stats"]["sends"] += 1
        return {"errcode": 0, "errmsg": "ok", "invaliduser": "", "invalidparty": "", "invalidtag": "",
                "unlicenseduser": "", "msgid": msgid, "response_code": ""}

    def message_recall(self, state: dict, params: dict, now: float) -> dict:
        msgid = params.get("msgid")
        found = next((m for member in state["members"].values() for m in member["messages"]
                      if m["msgid"] == msgid), None)
        if found is None or found["recalled"] or now - found["at"] > self.limits["recall_window"]:
            return {"errcode": NO_SUCH_MSGID, "errmsg": "invalid msgid"}
        found["recalled"] = True
        state["stats"]["recalls"] += 1
        return {"errcode": 0, "errmsg": "ok"}

    async def media_get(self, request: web.Request) -> web.Response:
        with self.mutate() as state:
            refusal = self.token_refusal(state, request.query.get("access_token"))
            media = state["media"].get(request.query.get("media_id", ""))
            if refusal is None and media is not None:
                state["stats"]["media_served"] += 1
        if refusal is not None:
            return web.json_response(refusal)
        if media is None:
            return web.json_response({"errcode": 40007, "errmsg": "invalid media_id"})
        if self.limits["media_delay"]:   # a slow download: what holds a callback's answer past WeCom's window
            await asyncio.sleep(self.limits["media_delay"])
        return web.Response(body=base64.b64decode(media["data"]), content_type=media["mime"],
                            headers={"Content-Disposition": 'attachment; filename="image"'})

    def __repr__(self) -> str:
        return f"FakeWeCom(port={self.port})"
