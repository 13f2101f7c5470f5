"""FakeWhatsApp: the Graph API calls of the Cloud API a business number makes (the number, /messages, media), the
webhooks Meta sends (webhooks.py), a control API and in-process inspection helpers."""
from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from typing import Optional

from aiohttp import web

from tests.fakes.harness import FakeServer, FaultScript, FloodGate, control_route, drop_connection
from tests.fakes.whatsapp.webhooks import WebhookMethods, envelope

DEFAULT_PHONE_NUMBER_ID = "106540352242922"
DEFAULT_DISPLAY_NUMBER = "15550783881"
DEFAULT_WABA_ID = "102290129340398"
DEFAULT_TOKEN = "EAAfake0000000000000000000000000000000000permanent"
DEFAULT_APP_SECRET = "fake0app0secret00000000000000000"
DEFAULT_VERIFY_TOKEN = "fake-verify-token"
DEFAULT_LIMITS = {"text_limit": 4096, "window_s": 86400.0, "window_errors": "sync", "pair_interval_s": 6.0,
                  "pair_burst": 4, "enforce_pair_rate": False, "throughput_per_s": 80, "answer_timeout": 10.0,
                  "retries": 5, "retry_delays": [1.0, 2.0, 4.0]}
SEND_METHOD = "messages"
FREE_FORM = ("text", "image", "document", "audio", "video")   # what the 24-hour window governs
PLACEHOLDER = re.compile(r"\{\{(\d+)\}\}")
REFUSED_IN_PARAMETER = re.compile(r"[\r\n\t]| {5,}")   # what 132018 names: new-lines, tabs, 5 spaces in a row
PARAMETER_LIMITS = (32768, 1024)   # a body parameter's characters: the template has a body only / other parts too
CODES = {130429: "Rate limit hit", 131056: "(Business Account, Consumer Account) pair rate limit hit",
         131047: "Re-engagement message", 190: "Error validating access token: Session has expired",
         131000: "Something went wrong", 100: "Invalid parameter", 131026: "Message undeliverable",
         132000: "Number of parameters does not match the expected number of params",
         132001: "Template name does not exist in the translation", 132005: "Translated text too long",
         132018: "There was an issue with the parameters in your template."}


def graph_error(code: int, details: str = "", status: int = 400) -> web.Response:
    error = {"message": f"({code}) {CODES.get(code, 'error')}", "type": "OAuthException", "code": code,
             "error_data": {"messaging_product": "whatsapp", "details": details or CODES.get(code, "")},
             "fbtrace_id": "A" + secrets.token_hex(10)}
    return web.json_response({"error": error}, status=status)


class FakeWhatsApp(WebhookMethods, FakeServer):
    """``limits`` (DEFAULT_LIMITS keys) as keyword arguments. ``window_errors``: "sync" answers a free-form
    message outside the 24-hour window with error 131047; "status" accepts it and sends a ``failed`` status
    webhook with 131047, as the Cloud API may. Faults through ``set_faults`` (kinds flood: 130429, error: 131000
    with HTTP 500, drop, drop_after) and ``fail_next(code, ...)`` for any Graph error code."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None,
                 phone_number_id: str = DEFAULT_PHONE_NUMBER_ID, access_token: str = DEFAULT_TOKEN,
                 app_secret: str = DEFAULT_APP_SECRET, verify_token: str = DEFAULT_VERIFY_TOKEN,
                 webhook_url: Optional[str] = None, **limits):
        self.phone_number_id, self.access_token = phone_number_id, access_token
        self.app_secret, self.verify_token = app_secret, verify_token
        super().__init__(port=port, state_file=state_file)
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        self.webhook_url = webhook_url
        self.faults = FaultScript((SEND_METHOD,))
        self.gates = FloodGate()
        self.next_codes: list[tuple[int, Optional[str]]] = []   # (Graph error code, the user it is for or None)
        self._http = None
        self._tasks: set = set()

    def initial_state(self) -> dict:
        stats = dict.fromkeys(("sends", "token_refusals", "retry_after_violations", "flood_served",
                               "window_refusals", "pair_rate_violations", "throughput_violations", "media_served",
                               "reads", "typing", "uploads", "webhook_attempts", "webhook_retries"), 0)
        return {"users": {}, "ops": [], "deliveries": [], "media": {}, "templates": {}, "next_wamid": 1,
                "next_delivery": 1, "stats": stats}

    def configure(self, **limits) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        with self._lock:
            self.limits.update(limits)

    def set_faults(self, **settings) -> None:
        with self._lock:
            self.faults.configure(**settings)

    def fail_next(self, *codes: int, to: Optional[str] = None) -> None:
        """The next text sends (one per code) are answered with these Graph error codes; with ``to``, the next
        ones to that user only (a send to another chat, of an earlier test's reply, takes none of them)."""
        with self._lock:
            self.next_codes.extend((code, to) for code in codes)

    def _next_code(self, user: str) -> Optional[int]:
        for index, (code, to) in enumerate(self.next_codes):
            if to is None or to == user:
                del self.next_codes[index]
                return code
        return None

    async def on_stopping(self) -> None:
        await self.close_webhooks()

    # -- users and injected input
    def add_user(self, wa_id: str, last_inbound: Optional[float] = None) -> None:
        """A WhatsApp user; ``last_inbound`` (their last message, our clock) opens or closes their window."""
        with self.mutate() as state:
            user = state["users"].setdefault(wa_id, {"last_inbound": None, "messages": [], "reactions": {},
                                                     "stamps": []})
            if last_inbound is not None:
                user["last_inbound"] = last_inbound

    def approve_template(self, name: str, language: str, body: str, body_only: bool = True) -> None:
        """An approved template the number may send: its body with {{1}}... placeholders; ``body_only`` False when
        it has a header, footer or buttons too (its body parameters then hold 1,024 characters, not 32,768)."""
        with self.mutate() as state:
            state.setdefault("templates", {}).setdefault(name, {})[language] = {"body": body, "body_only": body_only}

    def new_wamid(self) -> str:
        with self.mutate() as state:
            number = state["next_wamid"]
            state["next_wamid"] += 1
        raw = f"{DEFAULT_DISPLAY_NUMBER}{number:012d}{secrets.token_hex(4)}".encode()
        return "wamid." + base64.b64encode(raw).decode().rstrip("=")

    def inject_message(self, user: str, kind: str, content: Optional[dict] = None, *, name: str = "Alice",
                       timestamp: Optional[float] = None, wamid: Optional[str] = None,
                       context: Optional[str] = None) -> str:
        """The user sends a message of ``kind`` (its object ``content``): its webhook is delivered; returns the
        delivery id."""
        at = time.time() if timestamp is None else timestamp
        self.add_user(user)
        with self.mutate() as state:
            known = state["users"][user]
            known["last_inbound"] = max(known["last_inbound"] or 0.0, at)
        wamid = wamid or self.new_wamid()
        message = {"from": user, "id": wamid, "timestamp": str(int(at)), "type": kind}
        if content is not None:
            message[kind] = content
        if context:
            message["context"] = {"from": DEFAULT_DISPLAY_NUMBER, "id": context}
        body = envelope(DEFAULT_WABA_ID, self.phone_number_id, DEFAULT_DISPLAY_NUMBER,
                        {"contacts": [{"profile": {"name": name}, "wa_id": user}], "messages": [message]})
        return self.deliver(kind, body, wamid, user)

    def inject_text(self, user: str, text: str, **kwargs) -> str:
        return self.inject_message(user, "text", {"body": text}, **kwargs)

    def add_media(self, data: bytes, mime: str) -> str:
        media_id = str(10 ** 15 + secrets.randbelow(10 ** 15))
        with self.mutate() as state:
            state["media"][media_id] = {"data": base64.b64encode(data).decode(), "mime": mime}
        return media_id

    def inject_media(self, user: str, kind: str, data: bytes, mime: str, caption: str = "", **extra) -> str:
        media_id = self.add_media(data, mime)
        content = {"id": media_id, "mime_type": mime, "sha256": hashlib.sha256(data).hexdigest(), **extra}
        if caption:
            content["caption"] = caption
        return self.inject_message(user, kind, content)

    def send_status(self, user: str, wamid: str, status: str, errors: Optional[list] = None) -> str:
        entry = {"id": wamid, "status": status, "timestamp": str(int(time.time())), "recipient_id": user}
        if errors:
            entry["errors"] = errors
        body = envelope(DEFAULT_WABA_ID, self.phone_number_id, DEFAULT_DISPLAY_NUMBER, {"statuses": [entry]})
        return self.deliver("status", body, None, user)

    # -- inspection
    def messages(self, user: str) -> list[dict]:
        """What the user sees from the business, in order (texts and reactions the fake took)."""
        return self.read(lambda s: [m for m in s["users"].get(user, {"messages": []})["messages"]])

    def reactions(self, user: str, wamid: str) -> list[list[str]]:
        return self.read(lambda s: s["users"].get(user, {"reactions": {}})["reactions"].get(wamid, []))

    def ops(self, user: str, method: str = SEND_METHOD) -> list[dict]:
        return self.read(lambda s: [o for o in s["ops"] if o["user"] == user and o["method"] == method])

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    def deliveries(self) -> list[dict]:
        return self.read(lambda s: s["deliveries"])

    # -- routes
    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/{version}/{phone}/messages", self.messages_route)
        app.router.add_post("/{version}/{phone}/media", self.upload_route)
        app.router.add_get("/{version}/{node}", self.node_route)
        app.router.add_get("/_download/{media_id}", self.download_route)
        control_route(app, "GET", "/_control/stats", lambda body: self.stats())
        control_route(app, "POST", "/_control/inject", lambda body: {"delivery": self.inject_text(
            str(body["user"]), str(body["text"]))})
        control_route(app, "GET", "/_control/messages/{user}", lambda body, user: {"messages": self.messages(user)})
        control_route(app, "POST", "/_control/webhook_url", lambda body: setattr(self, "webhook_url",
                                                                              body.get("url")))

    def _authorised(self, request: web.Request) -> bool:
        return request.headers.get("Authorization", "") == f"Bearer {self.access_token}"

    def _refused_token(self) -> web.Response:
        with self.mutate() as state:
            state["stats"]["token_refusals"] += 1
        return graph_error(190, "Invalid OAuth access token", status=401)

    async def node_route(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return self._refused_token()
        node = request.match_info["node"]
        if node == self.phone_number_id:
            return web.json_response({"display_phone_number": DEFAULT_DISPLAY_NUMBER, "verified_name": "Fake Shop",
                                      "id": node})
        media = self.read(lambda s: s["media"].get(node))
        if media is None:
            return graph_error(100, f"Unsupported get request. Object with ID '{node}' does not exist")
        data = base64.b64decode(media["data"])
        return web.json_response({"messaging_product": "whatsapp", "url": f"{self.base_url}/_download/{node}",
                                  "mime_type": media["mime"], "sha256": hashlib.sha256(data).hexdigest(),
                                  "file_size": len(data), "id": node})

    async def download_route(self, request: web.Request) -> web.Response:
        if not self._authorised(request):   # the media URL needs the bearer too
            return web.Response(status=401, text="unauthorised")
        media = self.read(lambda s: s["media"].get(request.match_info["media_id"]))
        if media is None:
            return web.Response(status=404, text="not found")
        with self.mutate() as state:
            state["stats"]["media_served"] += 1
        return web.Response(body=base64.b64decode(media["data"]), content_type=media["mime"])

    async def messages_route(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return self._refused_token()
        if request.match_info["phone"] != self.phone_number_id:
            return graph_error(100, "Unsupported post request: no such phone number id")
        try:
            params = json.loads(await request.read() or b"null")
        except ValueError:
            params = None
        if not isinstance(params, dict) or params.get("messaging_product") != "whatsapp":
            return graph_error(100, "messaging_product must be whatsapp")
        if params.get("status") == "read":
            return self._read_receipt(params)
        user, kind = str(params.get("to", "")), params.get("type")
        now = time.time()
        failed_status = None
        with self.mutate() as state:
            fault = self.faults.draw(SEND_METHOD)
            code = self._next_code(user) if fault is None and kind == "text" else None
            if fault == "drop":
                self._log(state, user, now, 599, None)
                return drop_connection(request)
            banned = self.gates.ban_remaining([user], now) > 0
            if fault == "flood" or (fault is None and banned):
                if fault is None:
                    state["stats"]["retry_after_violations"] += 1
                else:
                    self.gates.ban(user, now, self.faults.flood_retry_after)
                state["stats"]["flood_served"] += 1
                self._log(state, user, now, 429, 130429)
                return graph_error(130429, "Cloud API message throughput has been reached")
            if fault == "error":
                self._log(state, user, now, 500, 131000)
                return graph_error(131000, status=500)
            if code is not None:
                self._log(state, user, now, 429 if code in (130429, 131056) else 400, code)
                return graph_error(code)
            known = state["users"].get(user)
            if known is None or kind not in FREE_FORM + ("reaction", "template") or \
                    not isinstance(params.get(kind), dict):
                self._log(state, user, now, 400, 100)
                return graph_error(131026 if known is None else 100, "no such user, or a type the fake does not "
                                   "take (text, image, document, audio, video, reaction, template)")
            answer, failed_status = self._take(state, known, user, kind, params, now)
            if isinstance(answer, web.Response):
                return answer
        await self.hold_if_asked(SEND_METHOD, user, fault is None and kind in FREE_FORM)
        if failed_status is not None:
            self.send_status(user, failed_status, "failed", [{"code": 131047, "title": "Re-engagement message",
                                                              "message": "Re-engagement message"}])
        if fault == "drop_after":
            return drop_connection(request)
        return web.json_response(answer)

    def _take(self, state: dict, known: dict, user: str, kind: str, params: dict, now: float):
        """A send that passed the faults: the window rule, the pacing counts, then the message shown."""
        content = params[kind]
        outside = known["last_inbound"] is None or now - known["last_inbound"] > self.limits["window_s"]
        if kind == "text":
            body = content.get("body")
            if not isinstance(body, str) or not body or len(body) > self.limits["text_limit"]:
                self._log(state, user, now, 400, 100)
                return graph_error(100, "text.body is empty or over 4096 characters"), None
        elif kind == "template":
            refused, parameters, rendered = self._hydrated(state, content)
            if refused is not None:
                self._log(state, user, now, 400, refused[0])
                return graph_error(*refused), None
        elif kind != "reaction" and content.get("id") not in state["media"]:
            self._log(state, user, now, 400, 100)
            return graph_error(100, f"{kind}.id names no uploaded media"), None
        if kind in FREE_FORM:
            if outside and self.limits["window_errors"] == "sync":
                state["stats"]["window_refusals"] += 1
                self._log(state, user, now, 400, 131047)
                return graph_error(131047, "Message failed to send because more than 24 hours have passed since "
                                   "the customer last replied to this number."), None
        recent = [t for t in known["stamps"] if now - t < self.limits["pair_interval_s"] * self.limits["pair_burst"]]
        if len(recent) >= self.limits["pair_burst"]:
            state["stats"]["pair_rate_violations"] += 1
            if self.limits["enforce_pair_rate"]:
                self._log(state, user, now, 429, 131056)
                return graph_error(131056), None
        if sum(1 for o in state["ops"] if now - o["at"] < 1.0 and o["status"] == 200) >= \
                self.limits["throughput_per_s"]:
            state["stats"]["throughput_violations"] += 1
        known["stamps"] = recent + [now]
        wamid = self.new_wamid()
        if kind == "reaction":
            target = str(content.get("message_id", ""))
            emoji = str(content.get("emoji") or "")
            known["reactions"].setdefault(target, []).append([emoji] if emoji else [])
        else:
            context = params.get("context") if isinstance(params.get("context"), dict) else {}
            shown = {"wamid": wamid, "kind": kind, "text": content.get("body", content.get("caption", "")),
                     "at": now, "reply_to": context.get("message_id"), "delivered": not outside}
            if kind == "template":
                shown.update(text=rendered, template=content["name"], language=content["language"]["code"],
                             parameters=parameters, delivered=True)
            elif kind != "text":
                media = state["media"][content["id"]]
                shown.update(media_id=content["id"], filename=content.get("filename"),
                             sha256=hashlib.sha256(base64.b64decode(media["data"])).hexdigest())
            known["messages"].append(shown)
            state["stats"]["sends"] += 1
        self._log(state, user, now, 200, None)
        return ({"messaging_product": "whatsapp", "contacts": [{"input": user, "wa_id": user}],
                 "messages": [{"id": wamid}]}, wamid if outside and kind in FREE_FORM else None)

    @staticmethod
    def _hydrated(state: dict, content: dict) -> tuple:
        """A template send checked as the Cloud API checks one: ((code, details) or None, its body parameters'
        texts, the body as the user sees it)."""
        name, language = content.get("name"), content.get("language")
        code = language.get("code") if isinstance(language, dict) else None
        approved = state.get("templates", {}).get(name, {}).get(code) if isinstance(name, str) else None
        if approved is None:
            return (132001, f"template name ({name}) does not exist in {code}"), [], ""
        components = content.get("components", [])
        if not isinstance(components, list) or not all(isinstance(c, dict) for c in components):
            return (100, "template.components must be an array of objects"), [], ""
        given = [p for c in components if c.get("type") == "body" for p in (c.get("parameters") or [])]
        expected = len(set(PLACEHOLDER.findall(approved["body"])))
        if len(given) != expected:
            return (132000, f"body: number of localizable_params ({len(given)}) does not match the expected number "
                            f"of params ({expected})"), [], ""
        limit = PARAMETER_LIMITS[0] if approved["body_only"] else PARAMETER_LIMITS[1]
        texts = []
        for parameter in given:
            text = parameter.get("text") if isinstance(parameter, dict) and parameter.get("type") == "text" else None
            if not isinstance(text, str) or not text.strip():
                return (100, "a body parameter needs type text and a non-empty text"), [], ""
            if REFUSED_IN_PARAMETER.search(text):
                return (132018, "Param text cannot have new-line/tab characters or more than 4 consecutive "
                                "spaces"), [], ""
            if len(text) > limit:
                return (132005, f"a body parameter of {len(text)} characters, over {limit}"), [], ""
            texts.append(text)
        return None, texts, PLACEHOLDER.sub(lambda m: texts[int(m.group(1)) - 1], approved["body"])

    async def upload_route(self, request: web.Request) -> web.Response:
        """POST /media, multipart: ``messaging_product``, ``type`` (MIME) and ``file`` -> {"id"}."""
        if not self._authorised(request):
            return self._refused_token()
        fields: dict = {}
        try:
            async for part in await request.multipart():
                fields[part.name] = (await part.read(), part.headers.get("Content-Type", ""))
        except (ValueError, AssertionError, KeyError):
            return graph_error(100, "the body is no multipart form")
        data, _ = fields.get("file", (None, ""))
        mime = (fields.get("type") or (b"", ""))[0].decode(errors="replace")
        if fields.get("messaging_product", (b"",))[0] != b"whatsapp" or not data or not mime:
            return graph_error(100, "messaging_product, type and file are required")
        media_id = self.add_media(bytes(data), mime)
        with self.mutate() as state:
            state["stats"]["uploads"] += 1
        return web.json_response({"id": media_id})

    def _read_receipt(self, params: dict) -> web.Response:
        wamid = params.get("message_id")
        with self.mutate() as state:
            state["stats"]["reads"] += 1
            if isinstance(params.get("typing_indicator"), dict):
                state["stats"]["typing"] += 1
            state["ops"].append({"method": "read", "user": "", "wamid": wamid, "at": time.time(), "status": 200,
                                 "code": None})
        return web.json_response({"success": True})

    def _log(self, state: dict, user: str, now: float, status: int, code: Optional[int]) -> None:
        state["ops"].append({"method": SEND_METHOD, "user": user, "at": now, "status": status, "code": code})

    def __repr__(self) -> str:
        return f"FakeWhatsApp(port={self.port})"
