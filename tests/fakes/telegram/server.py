"""FakeTelegram: the HTTP face of the fake Bot API, its control API and its in-process inspection helpers."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Optional

from aiohttp import web

from tests.fakes.harness import FakeServer, FaultScript, FloodGate, control_route, drop_connection, read_params
from tests.fakes.telegram.botapi import ApiError, BotMethods, flood_error
from tests.fakes.telegram.files import FileMethods
from tests.fakes.telegram.updates import Described, UpdateMethods, pending_updates

DEFAULT_TOKEN = "123456789:TEST-fake-token-AAAAAAAAAAAAAAAAAAAAAAA"
WRITE_METHODS = ("sendMessage", "editMessageText", "deleteMessage", "sendChatAction", "sendPhoto", "sendDocument",
                 "sendVoice", "setMessageReaction")
UPLOAD_METHODS = ("sendPhoto", "sendDocument", "sendVoice")
DEFAULT_LIMITS = {"text_limit": 4096, "per_chat_interval": 1.0, "per_chat_burst": 3, "group_per_minute": 20,
                  "global_per_second": 30, "time_scale": 1.0, "webhook_retry_delay": 0.2}


class FakeTelegram(BotMethods, UpdateMethods, FileMethods, FakeServer):
    """Serves ``/bot<token>/<method>`` (GET or POST; JSON, form or query parameters) like api.telegram.org.

    ``limits`` (see DEFAULT_LIMITS) may be given as keyword arguments; ``time_scale`` < 1 shrinks every flood
    window for fast tests, while retry_after stays a whole number of seconds (at least 1), as the API promises.
    """

    METHODS = {"getMe": "method_get_me", "sendMessage": "method_send_message",
               "editMessageText": "method_edit_message_text", "deleteMessage": "method_delete_message",
               "sendChatAction": "method_send_chat_action", "setWebhook": "method_set_webhook",
               "deleteWebhook": "method_delete_webhook", "getWebhookInfo": "method_get_webhook_info",
               "getUpdates": "get_updates", "getFile": "method_get_file", "sendPhoto": "method_send_photo",
               "sendDocument": "method_send_document", "sendVoice": "method_send_voice",
               "setMessageReaction": "method_set_message_reaction",
               "answerCallbackQuery": "method_answer_callback_query"}
    # the Bot API matches method names case-insensitively
    CANONICAL_NAMES = {name.lower(): name for name in METHODS}

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, token: str = DEFAULT_TOKEN,
                 bot_username: str = "fake_gateway_bot", **limits):
        super().__init__(port=port, state_file=state_file)
        self.token = token
        self.bot_user = {"id": int(token.split(":")[0]), "is_bot": True, "first_name": "Fake Gateway Bot",
                         "username": bot_username}
        self.faults = FaultScript(WRITE_METHODS)
        self.poll_generation = 0  # bumped by every getUpdates; an older poll still waiting then gets 409
        self.newest_poll: Optional[dict] = None   # the record of the getUpdates that bumped it last
        self.polls_pending = 0    # getUpdates being served now (their records: state["polls"])
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        self._webhook_task: Optional[asyncio.Task] = None
        self.held_answers: set = set()
        self.init_files()

    def initial_state(self) -> dict:
        return {"next_update_id": 100001, "confirmed_offset": 0, "updates": [], "allowed_updates": None,
                "webhook": None, "webhook_log": [], "chats": {}, "callback_queries": {},
                "polls": [], "next_poll_id": 1,
                "stats": {"requests": {}, "errors": {}, "floods_served": 0, "retry_after_violations": 0,
                          "updates_filtered": 0, "webhook_deliveries": 0, "webhook_failures": 0,
                          "poll_conflicts": 0, "max_polls_pending": 0}}

    # -- in-process API (inject_message, inject_edit, add_topic come from UpdateMethods)
    def configure(self, **limits) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        with self._lock:
            self.limits.update({k: type(DEFAULT_LIMITS[k])(v) for k, v in limits.items()})
            self.flood = FloodGate()

    def set_faults(self, **settings) -> None:
        """Replace the fault script (FaultScript.configure; ``methods`` are Bot API method names)."""
        with self._lock:
            self.faults.configure(**settings)

    def hold_answers(self, *methods: str) -> None:
        """Calls of these methods take effect but get no answer until ``release_answers``."""
        self.held_answers = set(methods)

    def release_answers(self) -> None:
        self.held_answers = set()

    def block(self, chat_id: int, blocked: bool = True) -> None:
        """Every call for this chat answers 403 "Forbidden: bot was blocked by the user"."""
        with self.mutate() as state:
            state["chats"][str(int(chat_id))]["blocked"] = bool(blocked)

    def reset(self) -> None:
        """Forget all chats and updates and turn faults off; limits stay as configured."""
        with self._lock:
            self.faults.configure()
            self.flood = FloodGate()
            self.reset_state()

    def messages(self, chat_id: int, incoming: bool = False) -> list[dict]:
        """Stored messages of a chat, oldest first: the bot's only, unless ``incoming``. Each has ``text``
        (as shown), ``history`` (every version with raw_text, parse_mode and ``at``), ``deleted``."""
        all_messages = self.read(lambda s: list(s["chats"].get(str(chat_id), {}).get("messages", {}).values()))
        return [m for m in all_messages if incoming or m["outgoing"]]

    def final_texts(self, chat_id: int) -> list[str]:
        return [m["text"] for m in self.messages(chat_id) if not m["deleted"]]

    def ops(self, chat_id: int, method: Optional[str] = None) -> list[dict]:
        """Every call the bot made for the chat, refused ones too: method, at (wall clock), status, description."""
        ops = self.read(lambda s: s["chats"].get(str(chat_id), {}).get("ops", []))
        return [o for o in ops if method is None or o["method"] == method]

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    def polls(self) -> list[dict]:
        """Every getUpdates served (the last POLLS_KEPT), oldest first: ``id``, ``peer`` (the caller's address),
        ``at`` (wall clock, as it arrived), ``offset``, ``timeout``, then as it ended ``ended_at``, ``status`` (200,
        409, or None: the caller left unanswered), ``updates`` (how many it returned) and ``ended_by`` (``id`` and
        ``peer`` of the newer poll that cut it with 409, else None)."""
        return self.read(lambda s: s.get("polls", []))

    def pending_updates(self) -> list[dict]:
        """Updates not yet confirmed (by a higher getUpdates offset, or a 2xx from the webhook)."""
        return self.read(pending_updates)

    def callback_answer(self, query_id: str) -> Optional[dict]:
        """How the bot answered a button press (answerCallbackQuery: ``text``, ``show_alert``, ``at``), or None
        while it has not."""
        return self.read(lambda s: (s["callback_queries"].get(str(query_id)) or {}).get("answer"))

    def webhook_log(self) -> list[dict]:
        return self.read(lambda s: s["webhook_log"])

    def timeline(self, chat_id: int) -> dict:
        def select(s):
            rec = s["chats"][str(int(chat_id))]
            return {"chat": rec["chat"], "messages": list(rec["messages"].values()), "ops": rec["ops"],
                    "topics": rec["topics"], "blocked": rec["blocked"]}
        return self.read(select)

    # -- HTTP
    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        app.router.add_get("/file/bot{token}/{path:.+}", self.serve_file)
        control_route(app, "POST", "/_control/inject", self._control_inject)
        control_route(app, "POST", "/_control/inject_edit", lambda body: self.inject_edit(**body))
        control_route(app, "POST", "/_control/press", lambda body: self.press_button(**body))
        control_route(app, "GET", "/_control/chats", lambda _: {"chats": self.read(lambda s: list(s["chats"]))})
        control_route(app, "GET", "/_control/chats/{chat_id}", lambda _, chat_id: self.timeline(int(chat_id)))
        control_route(app, "GET", "/_control/stats", lambda _: self.stats())
        control_route(app, "GET", "/_control/polls", lambda _: {"polls": self.polls(),
                                                                 "pending": self.polls_pending})
        control_route(app, "GET", "/_control/updates", lambda _: {
            "pending": self.pending_updates(), "webhook_log": self.webhook_log(),
            "confirmed_offset": self.read(lambda s: s["confirmed_offset"])})
        control_route(app, "POST", "/_control/faults", lambda body: self.set_faults(**body))
        control_route(app, "POST", "/_control/config", lambda body: self.configure(**body))
        control_route(app, "POST", "/_control/block", lambda body: self.block(**body))
        control_route(app, "POST", "/_control/topics", lambda body: self.add_topic(**body))
        control_route(app, "POST", "/_control/reset", lambda _: self.reset())

    def _control_inject(self, body) -> dict:
        items = body if isinstance(body, list) else body.get("updates", [body])
        return {"ok": True, "updates": [self.inject_message(**item) for item in items]}

    async def on_started(self) -> None:
        self._webhook_task = asyncio.get_running_loop().create_task(self.deliver_webhooks())

    async def on_stopping(self) -> None:
        await self.stop_webhook_delivery(self._webhook_task)

    async def _dispatch(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return self._answer(ApiError(401, "Unauthorized"))
        method = self.CANONICAL_NAMES.get(request.match_info["method"].lower())
        if method is None:
            return self._answer(ApiError(404, "Not Found"))
        try:
            params = await read_params(request)
            if method in UPLOAD_METHODS and request.content_type == "multipart/form-data":
                params["_upload"] = await read_upload(request)
        except ValueError:
            return self._answer(ApiError(400, "Bad Request: can't parse request body"))
        with self._lock:  # set_faults may run in a test thread meanwhile
            fault = self.faults.draw(method)
        if method == "getUpdates":
            return await self._dispatch_get_updates(request, params, fault)
        with self.mutate() as state:
            outcome = self._call(state, method, params, fault)
        while method in self.held_answers:   # done, not yet answered: a test may kill the gateway now
            await asyncio.sleep(0.02)
        await self.hold_if_asked(method, params.get("chat_id"), fault is None and not isinstance(outcome, ApiError))
        if fault in ("drop", "drop_after"):
            return drop_connection(request)
        return self._answer(outcome)

    def _call(self, state: dict, method: str, params: dict, fault: Optional[str]) -> Any:
        """Run one method under the lock and log it in its chat's ops; returns the result or the ApiError."""
        stats = state["stats"]
        stats["requests"][method] = stats["requests"].get(method, 0) + 1
        chat = self.find_chat(state, params)
        try:
            if fault in ("error", "flood", "drop"):
                raise self._fault_error(fault, chat)
            outcome = getattr(self, self.METHODS[method])(state, params)
        except ApiError as exc:
            outcome = exc
            stats["errors"][exc.description] = stats["errors"].get(exc.description, 0) + 1
            if exc.code == 429:
                stats["floods_served"] += 1
        if chat is not None:
            result = outcome.result if isinstance(outcome, Described) else outcome
            message_id = result.get("message_id") if isinstance(result, dict) else params.get("message_id")
            chat["ops"].append({"method": method, "at": time.time(), "message_id": message_id,
                                "status": outcome.code if isinstance(outcome, ApiError) else 200,
                                "description": outcome.description if isinstance(outcome, ApiError) else None})
        return outcome

    def _fault_error(self, fault: str, chat: Optional[dict]) -> ApiError:
        if fault == "error":
            return ApiError(500, "Internal Server Error")
        if fault == "drop":  # never sent: the connection is closed instead
            return ApiError(599, "connection dropped")
        error = flood_error(self.faults.flood_retry_after)
        if chat is not None:  # a scripted 429 binds like a real one
            self.flood.ban(("chat", chat["chat"]["id"]), time.monotonic(), error.retry_after)
        return error

    async def _dispatch_get_updates(self, request, params, fault) -> web.Response:
        with self.mutate() as state:
            state["stats"]["requests"]["getUpdates"] = state["stats"]["requests"].get("getUpdates", 0) + 1
        if fault == "drop":
            return drop_connection(request)
        try:
            if fault in ("error", "flood"):
                raise self._fault_error(fault, None)
            answer = self._answer(await self.get_updates(params, peer=request.remote))
        except ApiError as exc:
            answer = self._answer(exc)
        # drop_after: the offset was applied but the batch is lost; unconfirmed updates come again next poll
        return drop_connection(request) if fault == "drop_after" else answer

    @staticmethod
    def _answer(outcome: Any) -> web.Response:
        if isinstance(outcome, ApiError):
            return web.json_response(outcome.body(), status=outcome.code)
        if isinstance(outcome, Described):
            return web.json_response({"ok": True, "result": outcome.result, "description": outcome.description})
        return web.json_response({"ok": True, "result": outcome})


async def read_upload(request: web.Request) -> Optional[dict]:
    """The file field (``photo``, ``document`` or ``voice``) of a multipart upload, with its bytes; None without
    one."""
    form = await request.post()   # read once by read_params already: aiohttp keeps it
    for field in ("photo", "document", "voice"):
        item = form.get(field)
        if isinstance(item, web.FileField):
            return {"field": field, "data": item.file.read(), "filename": item.filename,
                    "content_type": item.content_type}
    return None
