"""FakeLine: the Messaging API a channel calls (bot info, reply, push, loading animation, content), the webhooks it
receives (webhooks.py), a control API and in-process inspection helpers."""
from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
import urllib.error
import urllib.request
from typing import Optional
from urllib.parse import urlsplit

from aiohttp import web

from tests.fakes.harness import (FakeServer, FaultScript, FloodGate, control_route, drop_connection,
                                 json_object)
from tests.fakes.line.webhooks import WebhookMethods

DEFAULT_CHANNEL_SECRET = "0123456789abcdef0123456789abcdef"
DEFAULT_ACCESS_TOKEN = "fake-long-lived-channel-access-token-000000000000000000000000"
DEFAULT_BOT_USER = "U" + "b0" * 16
DEFAULT_LIMITS = {"reply_token_ttl": 60.0, "text_limit": 5000, "max_messages": 5, "push_quota": None,
                  "answer_timeout": 2.0, "retries": 3, "retry_delays": [0.5, 1.0, 2.0]}
SEND_METHODS = ("push", "reply")
MEDIA_URLS = {"image": ("originalContentUrl", "previewImageUrl"), "video": ("originalContentUrl", "previewImageUrl"),
              "audio": ("originalContentUrl",)}
URL_LIMIT = 2000
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
AUTH_FAILED = {"message": "Authentication failed. Confirm that the access token in the authorization header is "
                          "valid."}


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def quick_reply_problem(quick: object) -> Optional[str]:
    """What LINE refuses in a ``quickReply`` ("Quick reply" in the Messaging API reference): 1 to 13 items, each an
    ``action`` whose action is a postback (the only kind the fake takes) with a label of 1 to 20 characters, data of
    1 to 300 and a displayText of 1 to 300."""
    items = quick.get("items") if isinstance(quick, dict) else None
    if not isinstance(items, list) or not 1 <= len(items) <= 13:
        return "items: Size must be between 1 and 13"
    for item in items:
        action = item.get("action") if isinstance(item, dict) and item.get("type") == "action" else None
        if not isinstance(action, dict) or action.get("type") != "postback":
            return "the fake takes postback actions only"
        for field, limit in (("label", 20), ("data", 300), ("displayText", 300)):
            value = action.get(field)
            if not isinstance(value, str) or not 1 <= utf16_units(value) <= limit:
                return f"{field}: Length must be between 1 and {limit}"
    return None


def media_problem(message: dict) -> Optional[tuple[str, str]]:
    """What LINE refuses in an image, video or audio message ("Image message", "Video message", "Audio message"):
    each URL it names present, HTTPS and at most 2,000 characters; an audio's ``duration`` a positive number of
    milliseconds. (The file behind a URL is LINE's to fetch later: ``view`` does, as a recipient's app would.)"""
    for field in MEDIA_URLS[message["type"]]:
        url = message.get(field)
        if not isinstance(url, str) or not url:
            return field, "must be specified"
        if len(url) > URL_LIMIT:
            return field, f"Length must be between 0 and {URL_LIMIT}"
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            return field, "must be a valid HTTPS URL"
    if message["type"] == "audio":
        duration = message.get("duration")
        if isinstance(duration, bool) or not isinstance(duration, int) or duration < 1:
            return "duration", "must be a positive number"
    return None


def refusal(field: str, problem: str) -> dict:
    return {"message": "The request body has 1 error(s)", "details": [{"message": problem, "property": field}]}


def line_id(prefix: str, name: str) -> str:
    """A user, group or room id as LINE writes them (a letter and 32 hex digits), made from a test's name."""
    return prefix + hashlib.md5(name.encode()).hexdigest()


class FakeLine(WebhookMethods, FakeServer):
    """``limits`` (DEFAULT_LIMITS keys) as keyword arguments; faults through ``set_faults`` (kinds flood: 429,
    error: 500, drop, drop_after) for ``push`` and ``reply``."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None,
                 channel_secret: str = DEFAULT_CHANNEL_SECRET, access_token: str = DEFAULT_ACCESS_TOKEN,
                 bot_user: str = DEFAULT_BOT_USER, webhook_url: Optional[str] = None, **limits):
        self.channel_secret, self.access_token, self.bot_user = channel_secret, access_token, bot_user
        super().__init__(port=port, state_file=state_file)
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        self.webhook_url = webhook_url
        self.faults = FaultScript(SEND_METHODS)
        self.gates = FloodGate()
        self._http = None
        self._tasks: set = set()

    def initial_state(self) -> dict:
        stats = dict.fromkeys(("replies", "pushes", "retry_key_repeats", "reply_token_refusals", "auth_failures",
                               "quota_refusals", "retry_after_violations", "flood_served", "loading_shown", "loading_refused",
                               "content_served", "webhook_attempts", "media_fetches"), 0)
        return {"chats": {}, "reply_tokens": {}, "retry_keys": {}, "ops": [], "webhooks": [], "content": {},
                "loading": [], "next_message": 500000000000000001, "next_event": 1, "next_webhook": 1,
                "stats": stats}

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
        await self.close_deliveries()

    # -- injected input
    @staticmethod
    def user(name: str) -> str:
        return line_id("U", name)

    @staticmethod
    def group(name: str) -> str:
        return line_id("C", name)

    @staticmethod
    def room(name: str) -> str:
        return line_id("R", name)

    def event(self, chat: str, user: Optional[str], kind: str = "message", body: Optional[dict] = None) -> dict:
        """One webhook event from ``chat`` (a user, group or room id, by its first letter), with a fresh
        webhookEventId and reply token (recorded: the reply API knows it)."""
        source = {"U": {"type": "user", "userId": chat}, "C": {"type": "group", "groupId": chat},
                  "R": {"type": "room", "roomId": chat}}[chat[0]]
        if chat[0] != "U" and user:
            source["userId"] = user
        token = secrets.token_hex(16)
        with self.mutate() as state:
            event_id = f"01FAKE{state['next_event']:020d}"
            state["next_event"] += 1
            state["reply_tokens"][token] = {"chat": chat, "issued_at": time.time(), "used": False}
        event = {"type": kind, "mode": "active", "timestamp": int(time.time() * 1000), "source": source,
                 "webhookEventId": event_id, "replyToken": token}
        event.update(body or {})
        return event

    def new_message_id(self) -> str:
        with self.mutate() as state:
            value = state["next_message"]
            state["next_message"] += 1
        return str(value)

    def message_event(self, chat: str, message: dict, user: Optional[str] = None) -> dict:
        message = {"id": self.new_message_id(), "quoteToken": secrets.token_hex(8), **message}
        with self.mutate() as state:   # a user who writes makes the quick replies under the last message vanish
            for shown in state["chats"].get(chat, {"messages": []})["messages"][-1:]:
                shown["quick_replies"] = []
        return self.event(chat, user, "message", {"message": message})

    def inject_text(self, chat: str, text: str, user: Optional[str] = None) -> str:
        """A user writes ``text`` in ``chat``: its webhook is delivered; returns the delivery id."""
        return self.deliver([self.message_event(chat, {"type": "text", "text": text}, user)])

    def inject_file(self, chat: str, data: bytes, kind: str = "image", name: str = "") -> str:
        """An image, audio or file message whose bytes the content endpoint serves."""
        message = {"type": kind}
        if kind == "file":
            message.update(fileName=name or "file.bin", fileSize=len(data))
        elif kind in ("image", "audio"):
            message["contentProvider"] = {"type": "line"}
        event = self.message_event(chat, message)
        with self.mutate() as state:
            state["content"][event["message"]["id"]] = base64.b64encode(data).decode()
        return self.deliver([event])

    def press_quick_reply(self, chat: str, label: str, user: Optional[str] = None) -> str:
        """The user presses the quick reply button ``label`` under the chat's last message (LINE shows them there
        only, and removes them once one is pressed or the user writes): a postback event is delivered, ``displayText`` shown as the
        user's words; returns the delivery id. ValueError when no such button is shown."""
        with self.mutate() as state:
            shown = state["chats"].get(chat, {"messages": []})["messages"]
            actions = shown[-1]["quick_replies"] if shown else []
            action = next((a for a in actions if a["label"] == label), None)
            if action is None:
                raise ValueError(f"no quick reply {label!r} shown in {chat}: {[a['label'] for a in actions]}")
            shown[-1]["quick_replies"] = []
            state["chats"][chat].setdefault("user_words", []).append(action.get("displayText"))
        return self.deliver([self.event(chat, user, "postback", {"postback": {"data": action["data"]}})])

    # -- inspection
    def messages(self, chat: str) -> list[dict]:
        """What the chat shows from the bot, in order: {"id", "text", "via": "reply" | "push", "at", "quick_replies":
        the postback actions still shown under it}."""
        return self.read(lambda s: s["chats"].get(chat, {"messages": []})["messages"])

    def view(self, chat: str) -> list[dict]:
        """The chat's image, video and audio messages, each URL fetched once as the recipient's app loads it when
        the chat is shown: ``fetched`` maps each URL field to {"status", "sha256", "size", "type"}.

        Test-only difference: LINE fetches the HTTPS URL itself, through the TLS proxy the operator puts in front of
        the webhook server; here nothing listens at the URL's https origin, so the fake fetches its path over HTTP
        from the origin of the webhook URL it delivers to, the same server the proxy would reach."""
        with self.mutate() as state:
            media = [m for m in state["chats"].get(chat, {"messages": []})["messages"] if m["type"] in MEDIA_URLS]
            pending = [(m["id"], field, url) for m in media for field, url in m["urls"].items()
                       if field not in m["fetched"]]
        for message_id, field, url in pending:
            fetched = self.fetch(url)
            with self.mutate() as state:
                state["stats"]["media_fetches"] += 1
                for shown in state["chats"][chat]["messages"]:
                    if shown["id"] == message_id:
                        shown["fetched"][field] = fetched
        return [m for m in self.messages(chat) if m["type"] in MEDIA_URLS]

    def fetch(self, url: str) -> dict:
        origin = urlsplit(self.webhook_url or "")
        reachable = f"{origin.scheme}://{origin.netloc}{urlsplit(url).path}"
        try:
            with urllib.request.urlopen(reachable, timeout=30) as answer:
                data = answer.read()
                return {"status": answer.status, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                        "type": answer.headers.get("Content-Type", "")}
        except urllib.error.HTTPError as exc:
            return {"status": exc.code, "sha256": None, "size": 0, "type": ""}
        except (urllib.error.URLError, ValueError, OSError) as exc:   # no server there (or no webhook URL yet)
            return {"status": 0, "sha256": None, "size": 0, "type": f"unreachable: {exc}"}

    def ops(self, chat: str, method: str) -> list[dict]:
        return self.read(lambda s: [o for o in s["ops"] if o["chat"] == chat and o["method"] == method])

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    def loading(self, chat: str) -> list[dict]:
        return self.read(lambda s: [entry for entry in s["loading"] if entry["chatId"] == chat])

    def expire_reply_tokens(self) -> None:
        with self.mutate() as state:
            for token in state["reply_tokens"].values():
                token["issued_at"] = 0.0

    # -- routes
    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/v2/bot/info", self.bot_info)
        app.router.add_post("/v2/bot/message/reply", self.sender("reply"))
        app.router.add_post("/v2/bot/message/push", self.sender("push"))
        app.router.add_post("/v2/bot/chat/loading/start", self.loading_start)
        app.router.add_get("/v2/bot/message/{message_id}/content", self.content)
        control_route(app, "GET", "/_control/stats", lambda body: self.stats())
        control_route(app, "POST", "/_control/inject", lambda body: {"webhook": self.inject_text(
            self.user(str(body["user"])), str(body["text"]))})
        control_route(app, "GET", "/_control/messages/{chat}", lambda body, chat: {"messages": self.messages(chat)})
        control_route(app, "POST", "/_control/webhook_url", lambda body: setattr(self, "webhook_url",
                                                                              body.get("url")))

    def authorised(self, request: web.Request) -> bool:
        if request.headers.get("Authorization") == f"Bearer {self.access_token}":
            return True
        with self.mutate() as state:
            state["stats"]["auth_failures"] += 1
        return False

    async def bot_info(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(AUTH_FAILED, status=401)
        return web.json_response({"userId": self.bot_user, "basicId": "@000fake", "displayName": "Fake LINE bot",
                                  "chatMode": "bot", "markAsReadMode": "auto"})

    def messages_problem(self, messages) -> Optional[dict]:
        if not isinstance(messages, list) or not 1 <= len(messages) <= self.limits["max_messages"]:
            return refusal("messages", f"Size must be between 1 and {self.limits['max_messages']}")
        for i, message in enumerate(messages):
            kind = message.get("type") if isinstance(message, dict) else None
            if kind not in ("text",) + tuple(MEDIA_URLS):
                return refusal(f"messages[{i}].type", "the fake takes text, image, video and audio messages only")
            if kind == "text":
                text = message.get("text")
                if not isinstance(text, str) or not 1 <= utf16_units(text) <= self.limits["text_limit"]:
                    return refusal(f"messages[{i}].text", f"Length must be between 1 and {self.limits['text_limit']}")
            elif (problem := media_problem(message)) is not None:
                return refusal(f"messages[{i}].{problem[0]}", problem[1])
            if "quickReply" in message and (problem := quick_reply_problem(message["quickReply"])) is not None:
                return refusal(f"messages[{i}].quickReply", problem)
        return None

    def sender(self, method: str):
        async def handler(request: web.Request) -> web.Response:
            if not self.authorised(request):
                return web.json_response(AUTH_FAILED, status=401)
            params = await json_object(request)
            key = request.headers.get("X-Line-Retry-Key")
            now = time.time()
            with self.mutate() as state:
                chat = self._chat_of(state, method, params)
                fault = self.faults.draw(method)
                if fault == "drop":
                    self._log_op(state, method, chat, 599)
                    return drop_connection(request)
                if fault == "flood" or (fault is None and self.gates.ban_remaining([chat], now) > 0):
                    if fault is None:
                        state["stats"]["retry_after_violations"] += 1
                    else:
                        self.gates.ban(chat, now, self.faults.flood_retry_after)
                    state["stats"]["flood_served"] += 1
                    self._log_op(state, method, chat, 429)
                    return web.json_response({"message": "Too Many Requests"}, status=429)
                if fault == "error":
                    self._log_op(state, method, chat, 500)
                    return web.json_response({"message": "An error occurred in the server"}, status=500)
                status, answer, headers = (self._push if method == "push" else self._reply)(state, params, key, now)
                self._log_op(state, method, chat, status)
            await self.hold_if_asked(method, chat, fault is None and status == 200)
            if fault == "drop_after":
                return drop_connection(request)
            return web.json_response(answer, status=status, headers=headers)
        return handler

    @staticmethod
    def _chat_of(state: dict, method: str, params: dict) -> str:
        if method == "push":
            return str(params.get("to", ""))
        token = state["reply_tokens"].get(str(params.get("replyToken", "")))
        return token["chat"] if token else ""

    def _sent(self, state: dict, chat: str, messages: list, via: str, now: float) -> list[dict]:
        shown = state["chats"].setdefault(chat, {"messages": []})["messages"]
        sent = []
        for message in messages:
            message_id = str(state["next_message"])
            state["next_message"] += 1
            items = message.get("quickReply", {}).get("items", [])
            entry = {"id": message_id, "type": message["type"], "text": message.get("text"), "via": via, "at": now,
                     "quick_replies": [item["action"] for item in items]}
            if message["type"] in MEDIA_URLS:
                entry.update(urls={field: message[field] for field in MEDIA_URLS[message["type"]]},
                             duration=message.get("duration"), fetched={})
            shown.append(entry)
            sent.append({"id": message_id, "quoteToken": secrets.token_hex(8)})
        return sent

    def _reply(self, state: dict, params: dict, key: Optional[str], now: float) -> tuple:
        if key is not None:
            return 400, {"message": "The retry key cannot be used with this API"}, {}
        token = state["reply_tokens"].get(str(params.get("replyToken", "")))
        if token is None or token["used"] or now - token["issued_at"] > self.limits["reply_token_ttl"]:
            state["stats"]["reply_token_refusals"] += 1
            return 400, {"message": "Invalid reply token"}, {}
        if (problem := self.messages_problem(params.get("messages"))) is not None:
            return 400, problem, {}
        token["used"] = True
        state["stats"]["replies"] += 1
        return 200, {"sentMessages": self._sent(state, token["chat"], params["messages"], "reply", now)}, {}

    def _push(self, state: dict, params: dict, key: Optional[str], now: float) -> tuple:
        if key is not None and not UUID.match(key):
            return 400, {"message": "The value for the 'X-Line-Retry-Key' header is invalid"}, {}
        if key is not None and key in state["retry_keys"]:
            state["stats"]["retry_key_repeats"] += 1
            accepted = state["retry_keys"][key]
            return 409, {"message": "The retry key is already accepted", "sentMessages": accepted["sent"]}, {
                "x-line-accepted-request-id": accepted["request_id"]}
        to = params.get("to")
        if not isinstance(to, str) or to[:1] not in ("U", "C", "R"):
            return 400, {"message": "The property, 'to', in the request body is invalid (line: -, column: -)"}, {}
        if (problem := self.messages_problem(params.get("messages"))) is not None:
            return 400, problem, {}
        quota = self.limits["push_quota"]
        if quota is not None and state["stats"]["pushes"] >= quota:
            state["stats"]["quota_refusals"] += 1
            return 429, {"message": "You have reached your monthly limit."}, {}
        state["stats"]["pushes"] += 1
        sent = self._sent(state, to, params["messages"], "push", now)
        if key is not None:
            state["retry_keys"][key] = {"request_id": secrets.token_hex(16), "sent": sent}
        return 200, {"sentMessages": sent}, {"x-line-request-id": secrets.token_hex(16)}

    def _log_op(self, state: dict, method: str, chat: str, status: int) -> None:
        state["ops"].append({"method": method, "chat": chat, "at": time.time(), "status": status})

    async def loading_start(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(AUTH_FAILED, status=401)
        params = await json_object(request)
        chat, seconds = params.get("chatId"), params.get("loadingSeconds", 20)
        problem = ("chatId" if not isinstance(chat, str) or not chat.startswith("U") else
                   "loadingSeconds" if not isinstance(seconds, int) or not 5 <= seconds <= 60 or seconds % 5 else None)
        if problem is not None:
            with self.mutate() as state:
                state["stats"]["loading_refused"] += 1
            return web.json_response({"message": f"The property, '{problem}', in the request body is invalid"},
                                     status=400)
        with self.mutate() as state:
            state["loading"].append({"chatId": chat, "loadingSeconds": seconds, "at": time.time()})
            state["stats"]["loading_shown"] += 1
        return web.json_response({}, status=202)

    async def content(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response(AUTH_FAILED, status=401)
        with self.mutate() as state:
            data = state["content"].get(request.match_info["message_id"])
            if data is not None:
                state["stats"]["content_served"] += 1
        if data is None:
            return web.json_response({"message": "Not found"}, status=404)
        return web.Response(body=base64.b64decode(data), content_type="application/octet-stream")

    def __repr__(self) -> str:
        return f"FakeLine(port={self.port})"
