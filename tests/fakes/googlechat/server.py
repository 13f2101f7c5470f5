"""FakeGoogleChat: the Chat API an app calls (messages create, patch, delete; a space), the OAuth token endpoint
its service account uses, the published keys of event tokens, the events Google Chat posts to the app's endpoint
(signed with its own key, delivered through the WhatsApp fake's delivery loop: one POST, retried only when the fake
is told to), a control API and in-process inspection helpers."""
from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from typing import Optional

import jwt
from aiohttp import web

from tests.fakes.googlechat.keys import (ACCOUNT_EMAIL, ACCOUNT_KID, SIGNING_KID, certificate_pem, event_token,
                                         jwk, rsa_key)
from tests.fakes.harness import FakeServer, FaultScript, FloodGate, control_route, drop_connection
from tests.fakes.whatsapp.webhooks import WebhookMethods

DEFAULT_AUDIENCE = "123456789012"        # the project number
CHAT_SCOPE = "https://www.googleapis.com/auth/chat.bot"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEFAULT_LIMITS = {"text_limit": 4096, "space_writes_per_minute": 60, "token_lifetime": 3600,
                  "certs_max_age": 3600, "answer_timeout": 30.0, "retries": 0, "retry_delays": [1.0]}
WRITE_METHODS = ("create", "patch", "delete")
BOT_USER = "users/app"


def buttons_of(message: dict) -> dict:
    """The buttons of a message's cards: label -> its ``onClick.action`` ({"function", "parameters"})."""
    return {button["text"]: button["onClick"]["action"] for card in message.get("cards") or []
            for section in card["card"].get("sections", []) for widget in section.get("widgets", [])
            for button in widget.get("buttonList", {}).get("buttons", []) if "action" in button.get("onClick", {})}


def valid_cards(cards) -> bool:
    """Enough of the cardsV2 schema to refuse what Chat would: a list of {cardId, card: {sections: [...]}} whose
    buttons each have a text and an onClick."""
    try:
        buttons = [b for c in cards for s in c["card"]["sections"] for w in s["widgets"]
                   for b in w.get("buttonList", {}).get("buttons", [])]
        return all(isinstance(c["cardId"], str) for c in cards) and all(
            isinstance(b["text"], str) and isinstance(b["onClick"], dict) for b in buttons)
    except (KeyError, TypeError):
        return False


def error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message, "status": code}}, status=status)


class FakeGoogleChat(WebhookMethods, FakeServer):
    """``limits`` (DEFAULT_LIMITS keys) as keyword arguments; faults through ``set_faults`` (kinds flood: 429,
    error: 500, drop, drop_after) for ``create``, ``patch`` and ``delete``."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, audience: str = DEFAULT_AUDIENCE,
                 webhook_url: Optional[str] = None, **limits):
        self.audience = audience
        super().__init__(port=port, state_file=state_file)
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        self.webhook_url = webhook_url
        self.faults = FaultScript(WRITE_METHODS)
        self.gates = FloodGate()
        self._http = None
        self._tasks: set = set()

    def initial_state(self) -> dict:
        stats = dict.fromkeys(("creates", "patches", "deletes", "request_id_repeats", "auth_failures",
                               "tokens_granted", "tokens_refused", "certs_served", "retry_after_violations",
                               "pace_violations", "flood_served", "webhook_attempts", "webhook_retries",
                               "media_downloads"), 0)
        return {"spaces": {}, "messages": {}, "tokens": {}, "request_ids": {}, "ops": [], "writes": {},
                "deliveries": [], "next_message": 1, "next_delivery": 1, "stats": stats, "media": {}}

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
        await self.close_webhooks()

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    # -- spaces and injected events
    @staticmethod
    def user(name: str) -> str:
        return "users/" + str(int(hashlib.md5(name.encode()).hexdigest()[:15], 16))

    def dm(self, name: str) -> str:
        """The DM space of the user ``name`` with the app (made on first use, as a user opening one does)."""
        return self._space("dm-" + name, "DIRECT_MESSAGE", threaded=False)

    def space(self, name: str, threaded: bool = True) -> str:
        """A named space (threaded, as new spaces are) or a group chat, the app a member."""
        return self._space(("sp-" if threaded else "gc-") + name, "SPACE" if threaded else "GROUP_CHAT", threaded)

    def _space(self, key: str, space_type: str, threaded: bool) -> str:
        name = "spaces/" + hashlib.md5(key.encode()).hexdigest()[:11].upper()
        with self.mutate() as state:
            state["spaces"].setdefault(name, {"spaceType": space_type, "threaded": threaded})
        return name

    def space_json(self, space: str) -> dict:
        kind = self.read(lambda s: s["spaces"][space])
        body = {"name": space, "spaceType": kind["spaceType"], "type": "DM" if kind["spaceType"] ==
                "DIRECT_MESSAGE" else "ROOM", "singleUserBotDm": kind["spaceType"] == "DIRECT_MESSAGE",
                "spaceThreadingState": "THREADED_MESSAGES" if kind["threaded"] else "UNTHREADED_MESSAGES"}
        if kind["spaceType"] != "DIRECT_MESSAGE":
            body["displayName"] = "Team " + space[-4:]
        return body

    def new_name(self, space: str, kind: str = "messages") -> str:
        with self.mutate() as state:
            number = state["next_message"]
            state["next_message"] += 1
        return f"{space}/{kind}/{secrets.token_hex(5)}.{number:08d}"

    def message_event(self, space: str, text: str, user: str = "alice", thread: Optional[str] = None,
                      kind: str = "MESSAGE") -> dict:
        """A user's message as Chat posts it: in a space the text starts with the app's @-mention (Chat posts a
        space's message only then) and ``argumentText`` is the rest."""
        name = self.new_name(space)
        sender = {"name": self.user(user), "displayName": user.title(), "type": "HUMAN"}
        body = self.space_json(space)
        dm = body["spaceType"] == "DIRECT_MESSAGE"
        full = text if dm else "@Gateway " + text
        thread_name = thread or f"{space}/threads/{name.rsplit('/', 1)[1].split('.')[0]}"
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}123Z"
        message = {"name": name, "sender": sender, "createTime": stamp, "text": full,
                   "argumentText": text if dm else " " + text, "thread": {"name": thread_name},
                   "threadReply": thread is not None, "space": body}
        if not dm:
            message["annotations"] = [{"type": "USER_MENTION", "startIndex": 0, "length": 8, "userMention": {
                "user": {"name": BOT_USER, "displayName": "Gateway", "type": "BOT"}, "type": "MENTION"}}]
        return {"type": kind, "eventTime": stamp, "space": body, "message": message, "user": sender}

    def deliver_event(self, event: dict, token: Optional[str] = None, headers: Optional[dict] = None) -> str:
        """POST ``event`` to the app's endpoint under a fresh token (or ``token``, or exactly ``headers``)."""
        if headers is None:
            headers = {"Authorization": f"Bearer {token or event_token(self.audience)}",
                       "User-Agent": "Google-Dynamite"}
        message = event.get("message") if isinstance(event.get("message"), dict) else {}
        return self.deliver(event.get("type", ""), event, message.get("name"), str(message.get("space", {})
                                                                                    .get("name", "")), headers)

    def inject_text(self, space: str, text: str, user: str = "alice", thread: Optional[str] = None) -> str:
        return self.deliver_event(self.message_event(space, text, user, thread))

    def inject_file(self, space: str, data: bytes, caption: str = "", user: str = "alice",
                    content_type: str = "image/png", name: str = "photo.png") -> str:
        """A user uploads a file with a message (its text the caption): the message's ``attachment`` names it by
        ``attachmentDataRef.resourceName``, which ``media.download`` serves to the app."""
        event = self.message_event(space, caption, user)
        event["message"]["attachment"] = [self.uploaded(event["message"]["name"], data, content_type, name)]
        return self.deliver_event(event)

    def uploaded(self, message: str, data: bytes, content_type: str, name: str) -> dict:
        """An Attachment of uploaded content on ``message``, its bytes kept for ``media.download``."""
        resource = base64.urlsafe_b64encode(secrets.token_bytes(30)).decode()
        with self.mutate() as state:
            state["media"][resource] = {"type": content_type, "data": base64.b64encode(data).decode()}
        return {"name": f"{message}/attachments/{secrets.token_hex(6)}", "contentName": name,
                "contentType": content_type, "source": "UPLOADED_CONTENT",
                "attachmentDataRef": {"resourceName": resource},
                "thumbnailUri": f"https://chat.google.com/api/get_attachment_url?url_type=THUMBNAIL_URL&{resource}",
                "downloadUri": f"https://chat.google.com/api/get_attachment_url?url_type=DOWNLOAD_URL&{resource}"}

    @staticmethod
    def drive_file(message: str, name: str, content_type: str = "application/pdf") -> dict:
        """An Attachment of a Google Drive file: ``driveDataRef`` (the Drive API's, not the Chat app's)."""
        return {"name": f"{message}/attachments/{secrets.token_hex(6)}", "contentName": name,
                "contentType": content_type, "source": "DRIVE_FILE",
                "driveDataRef": {"driveFileId": secrets.token_urlsafe(24)}}

    def click_event(self, space: str, message_name: str, label: str, user: str = "alice") -> dict:
        """A click on the button ``label`` of the app's message, as Chat posts it (``CARD_CLICKED``: the presser,
        the message with its cards, the button's action both as ``common`` and as the older ``action``); ValueError
        if the message has no such button (gone once its card is)."""
        message = next((m for m in self.messages(space) if m["name"] == message_name and not m["deleted"]), None)
        if message is None:
            raise ValueError(f"no message {message_name} in {space}")
        action = buttons_of(message).get(label)
        if action is None:
            raise ValueError(f"no button {label!r} on {message_name}: {sorted(buttons_of(message))}")
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
        presser = {"name": self.user(user), "displayName": user.title(), "type": "HUMAN"}
        parameters = action.get("parameters", [])
        return {"type": "CARD_CLICKED", "eventTime": stamp, "space": self.space_json(space), "user": presser,
                "message": self._message_json(message, space),
                "action": {"actionMethodName": action["function"], "parameters": parameters},
                "common": {"invokedFunction": action["function"],
                           "parameters": {p["key"]: p["value"] for p in parameters}}}

    def press_button(self, space: str, message_name: str, label: str, user: str = "alice") -> str:
        """Click ``label`` on the app's message (signed, POSTed once, as any event): the delivery's id."""
        return self.deliver_event(self.click_event(space, message_name, label, user))

    def event_of(self, delivery_id: str) -> dict:
        return json.loads(self.delivery(delivery_id)["body"])

    # -- inspection
    def messages(self, space: str) -> list[dict]:
        """The app's messages everyone in the space sees, in order: {"name", "text", "thread", "deleted", "edits",
        "cards"}."""
        return self.read(lambda s: [m for m in s["messages"].get(space, []) if not m.get("private_viewer")])

    def private_messages(self, space: str) -> list[dict]:
        """The app's private messages in the space (each seen by its ``private_viewer`` alone)."""
        return self.read(lambda s: [m for m in s["messages"].get(space, []) if m.get("private_viewer")])

    def ops(self, space: str, method: str) -> list[dict]:
        return self.read(lambda s: [o for o in s["ops"] if o["space"] == space and o["method"] == method])

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    # -- routes
    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/certs/x509", self.certs_x509)
        app.router.add_get("/certs/jwks", self.certs_jwks)
        app.router.add_post("/token", self.token)
        app.router.add_get("/v1/spaces/{space}", self.get_space)
        app.router.add_get("/v1/media/{resource:.+}", self.media_download)
        app.router.add_post("/v1/spaces/{space}/messages", self.writer("create"))
        app.router.add_patch("/v1/spaces/{space}/messages/{message}", self.writer("patch"))
        app.router.add_delete("/v1/spaces/{space}/messages/{message}", self.writer("delete"))
        control_route(app, "GET", "/_control/stats", lambda body: self.stats())
        control_route(app, "POST", "/_control/inject", lambda body: {"delivery": self.inject_text(
            self.dm(str(body["user"])), str(body["text"]), str(body["user"]))})
        control_route(app, "POST", "/_control/webhook_url", lambda body: setattr(self, "webhook_url",
                                                                              body.get("url")))

    async def certs_x509(self, request: web.Request) -> web.Response:
        with self.mutate() as state:
            state["stats"]["certs_served"] += 1
        return web.json_response({SIGNING_KID: certificate_pem()},
                                 headers={"Cache-Control": f"public, max-age={self.limits['certs_max_age']}"})

    async def certs_jwks(self, request: web.Request) -> web.Response:
        with self.mutate() as state:
            state["stats"]["certs_served"] += 1
        return web.json_response({"keys": [jwk()]},
                                 headers={"Cache-Control": f"public, max-age={self.limits['certs_max_age']}"})

    async def token(self, request: web.Request) -> web.Response:
        """The jwt-bearer grant: the assertion signed by the service account's key, for the chat.bot scope."""
        form = await request.post()
        problem = None
        if form.get("grant_type") != JWT_BEARER:
            problem = ("unsupported_grant_type", "Invalid grant_type")
        else:
            try:
                if jwt.get_unverified_header(str(form.get("assertion", ""))).get("kid") != ACCOUNT_KID:
                    raise jwt.InvalidTokenError("unknown key id")
                claims = jwt.decode(str(form.get("assertion", "")), rsa_key("account").public_key(),
                                    algorithms=["RS256"], audience=self.token_url, issuer=ACCOUNT_EMAIL,
                                    options={"require": ["exp", "iat"]})
                if claims["exp"] - claims["iat"] > 3600:
                    problem = ("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes)")
                elif CHAT_SCOPE not in str(claims.get("scope", "")).split():
                    problem = ("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
            except jwt.PyJWTError as exc:
                problem = ("invalid_grant", f"Invalid JWT Signature. ({type(exc).__name__})")
        with self.mutate() as state:
            if problem is not None:
                state["stats"]["tokens_refused"] += 1
                return web.json_response({"error": problem[0], "error_description": problem[1]}, status=400)
            token = "ya29.fake-" + secrets.token_urlsafe(24)
            state["tokens"][token] = time.time() + self.limits["token_lifetime"]
            state["stats"]["tokens_granted"] += 1
        return web.json_response({"access_token": token, "expires_in": self.limits["token_lifetime"],
                                  "token_type": "Bearer"})

    def authorised(self, state: dict, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        expires = state["tokens"].get(header[len("Bearer "):]) if header.startswith("Bearer ") else None
        if expires is not None and expires > time.time():
            return True
        state["stats"]["auth_failures"] += 1
        return False

    async def get_space(self, request: web.Request) -> web.Response:
        space = "spaces/" + request.match_info["space"]
        with self.mutate() as state:
            if not self.authorised(state, request):
                return error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
            known = space in state["spaces"]
        return web.json_response(self.space_json(space)) if known else error(404, "NOT_FOUND", "Space not found")

    async def media_download(self, request: web.Request) -> web.Response:
        """``media.download``: the uploaded bytes, to the app's token, with ``alt=media`` (without it, the Media
        resource's metadata)."""
        resource = request.match_info["resource"]
        with self.mutate() as state:
            if not self.authorised(state, request):
                return error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
            found = state["media"].get(resource)
            if found is not None and request.query.get("alt") == "media":
                state["stats"]["media_downloads"] += 1
        if found is None:
            return error(404, "NOT_FOUND", "Media not found")
        if request.query.get("alt") != "media":
            return web.json_response({"resourceName": resource})
        return web.Response(body=base64.b64decode(found["data"]), content_type=found["type"])

    def writer(self, method: str):
        async def handler(request: web.Request) -> web.Response:
            space = "spaces/" + request.match_info["space"]
            body = {}
            if method != "delete":
                try:
                    body = await request.json()
                except ValueError:
                    body = None
            now = time.time()
            with self.mutate() as state:
                if not self.authorised(state, request):
                    self._log(state, method, space, 401, now)
                    return error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
                fault = self.faults.draw(method)
                if fault == "drop":
                    self._log(state, method, space, 599, now)
                    return drop_connection(request)
                if fault == "flood" or (fault is None and self.gates.ban_remaining([space], now) > 0):
                    if fault is None:
                        state["stats"]["retry_after_violations"] += 1
                    else:
                        self.gates.ban(space, now, self.faults.flood_retry_after)
                    return self._flooded(state, method, space, now)
                if fault is None and self._over_pace(state, space, now):
                    state["stats"]["pace_violations"] += 1
                    return self._flooded(state, method, space, now)
                if fault == "error":
                    self._log(state, method, space, 500, now)
                    return error(500, "INTERNAL", "Internal error encountered.")
                status, answer = self._write(state, method, space, request, body, now)
                self._log(state, method, space, status, now)
            await self.hold_if_asked(method, space, fault is None and status == 200)
            if fault == "drop_after":
                return drop_connection(request)
            if status != 200:
                return error(status, answer[0], answer[1])
            return web.json_response(answer)
        return handler

    def _flooded(self, state: dict, method: str, space: str, now: float) -> web.Response:
        state["stats"]["flood_served"] += 1
        self._log(state, method, space, 429, now)
        return error(429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Write requests' and limit "
                                                 "'Write requests per minute per space'")

    def _over_pace(self, state: dict, space: str, now: float) -> bool:
        """Chat's per-space quota: more writes in the last 60 s than the limit is a 429."""
        recent = [t for t in state["writes"].get(space, []) if now - t < 60.0]
        state["writes"][space] = recent
        return len(recent) >= self.limits["space_writes_per_minute"]

    def _write(self, state: dict, method: str, space: str, request: web.Request, body, now: float) -> tuple:
        if space not in state["spaces"]:
            return 404, ("NOT_FOUND", f"Space {space} not found, or the app is not a member")
        shown = state["messages"].setdefault(space, [])
        if method == "create":
            return self._create(state, space, shown, request, body, now)
        name = f"{space}/messages/{request.match_info['message']}"
        message = next((m for m in shown if m["name"] == name and not m["deleted"]), None)
        if message is None:
            return 404, ("NOT_FOUND", "Message not found")
        state["writes"].setdefault(space, []).append(now)
        if method == "delete":
            message["deleted"] = True
            state["stats"]["deletes"] += 1
            return 200, {}
        fields = set(request.query.get("updateMask", "").split(","))
        if "text" not in fields or not fields <= {"text", "cardsV2"}:
            return 400, ("INVALID_ARGUMENT", "updateMask must name the fields to update (the fake takes text and "
                                             "cardsV2)")
        problem = self._text_problem(body)
        if problem:
            return 400, ("INVALID_ARGUMENT", problem)
        if "cardsV2" in fields:
            cards = body.get("cardsV2") or []
            if not valid_cards(cards):
                return 400, ("INVALID_ARGUMENT", "Invalid JSON payload: cardsV2")
            message["cards"] = cards
        message["text"], message["edits"] = body["text"], message["edits"] + 1
        state["stats"]["patches"] += 1
        return 200, self._message_json(message, space)

    def _create(self, state: dict, space: str, shown: list, request: web.Request, body, now: float) -> tuple:
        request_id = request.query.get("requestId")
        known = state["request_ids"].get(f"{space}\n{request_id}") if request_id else None
        if known is not None:   # "Specifying an existing request ID returns the message created with that ID"
            state["stats"]["request_id_repeats"] += 1
            return 200, self._message_json(next(m for m in shown if m["name"] == known), space)
        problem = self._text_problem(body)
        if problem:
            return 400, ("INVALID_ARGUMENT", problem)
        thread = body.get("thread", {}).get("name") if isinstance(body.get("thread"), dict) else None
        option = request.query.get("messageReplyOption", "MESSAGE_REPLY_OPTION_UNSPECIFIED")
        if thread and not thread.startswith(space + "/threads/"):
            return 400, ("INVALID_ARGUMENT", "thread.name is not a thread of the space")
        name = f"{space}/messages/{secrets.token_hex(5)}.{state['next_message']:08d}"
        state["next_message"] += 1
        if option == "MESSAGE_REPLY_OPTION_UNSPECIFIED" or not thread:
            thread = f"{space}/threads/{name.rsplit('/', 1)[1].split('.')[0]}"
        cards = body.get("cardsV2") or []
        if not valid_cards(cards):
            return 400, ("INVALID_ARGUMENT", "Invalid JSON payload: cardsV2")
        viewer = body.get("privateMessageViewer")
        viewer = viewer.get("name") if isinstance(viewer, dict) else None
        message = {"name": name, "text": body["text"], "thread": thread, "reply_option": option, "deleted": False,
                   "edits": 0, "at": now, "request_id": request_id, "cards": cards, "private_viewer": viewer}
        shown.append(message)
        if request_id:
            state["request_ids"][f"{space}\n{request_id}"] = name
        state["writes"].setdefault(space, []).append(now)
        state["stats"]["creates"] += 1
        return 200, self._message_json(message, space)

    def _text_problem(self, body) -> Optional[str]:
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text:
            return "Message cannot be empty. Discarded message must have text or cards."
        if len(text) > self.limits["text_limit"]:
            return f"Message text length exceeds the limit of {self.limits['text_limit']} characters"
        return None

    @staticmethod
    def _message_json(message: dict, space: str) -> dict:
        return {"name": message["name"], "sender": {"name": BOT_USER, "type": "BOT"}, "text": message["text"],
                "thread": {"name": message["thread"]}, "space": {"name": space}, "cardsV2": message.get("cards", []),
                "createTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(message["at"]))}

    def _log(self, state: dict, method: str, space: str, status: int, now: float) -> None:
        state["ops"].append({"method": method, "space": space, "at": now, "status": status})

    def __repr__(self) -> str:
        return f"FakeGoogleChat(port={self.port})"
