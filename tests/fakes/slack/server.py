"""FakeSlack: the HTTP face of the fake (Web API under /api/, Socket Mode under /link/), its control API and its
in-process inspection helpers."""
from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Optional

from aiohttp import web

from tests.fakes.harness import FakeServer, FaultScript, control_route, drop_connection, read_params
from tests.fakes.slack.channels import dm_id
from tests.fakes.slack.delivery import DeliveryMethods
from tests.fakes.slack.errors import ApiError, str_param
from tests.fakes.slack.events import ALL_SUBSCRIPTIONS, EventMethods
from tests.fakes.slack.interactive import InteractiveMethods
from tests.fakes.slack.httpevents import HttpEventMethods
from tests.fakes.slack.ratelimits import LIMIT_DEFAULTS, RateLimits
from tests.fakes.slack.socketmode import SocketModeMethods
from tests.fakes.slack.webapi import ChatMethods

DEFAULT_BOT_TOKEN = "xoxb-0000000001-0000000002-fakebottoken"
DEFAULT_APP_TOKEN = "xapp-1-A0FAKEAPP1-0000000003-fakeapptoken"
DEFAULT_IDENTITY = {"team_id": "T0FAKETEAM", "team": "Fake Workspace", "team_domain": "fake-workspace",
                    "app_id": "A0FAKEAPP1", "bot_id": "B0FAKEBOT1", "bot_user_id": "U0FAKEBOT1",
                    "bot_name": "gateway", "verification_token": "fake-verification-token",
                    "signing_secret": "fake-signing-secret-0000"}
WRITE_METHODS = ("chat.postMessage", "chat.update", "chat.delete")
DEFAULT_LIMITS = dict(LIMIT_DEFAULTS, text_limit=40000, update_text_limit=40000, over_limit="refuse",
                      echo_bot_events=True, subscriptions=list(ALL_SUBSCRIPTIONS), ack_timeout=3.0,
                      retry_delays=[0.0, 60.0, 300.0], offline_delivery="queue", max_connections=10,
                      ping_interval=10.0)
CHOICES = {"over_limit": ("refuse", "truncate"), "offline_delivery": ("queue", "spend")}


class SlackFaults(FaultScript):
    """The shared fault kinds plus ``internal_error``: HTTP 200 with ``{"ok": false, "error": "internal_error"}``,
    the way Slack reports a failure of its own that may or may not have taken effect (``next`` only)."""

    KINDS = FaultScript.KINDS + ("internal_error",)


class FakeSlack(ChatMethods, InteractiveMethods, EventMethods, DeliveryMethods, SocketModeMethods, HttpEventMethods,
                FakeServer):
    """Serves ``/api/<method>`` (GET or POST; query, form or JSON parameters; the token as ``Authorization:
    Bearer`` or a ``token`` parameter) like slack.com/api/, Socket Mode WebSockets at ``/link/``, and posts events
    to a Request URL once one is set.

    ``limits`` (see DEFAULT_LIMITS) may be given as keyword arguments; ``time_scale`` < 1 shrinks rate-limit
    windows, the acknowledgement deadline and the retry delays for fast tests."""

    METHODS = {"auth.test": "method_auth_test", "chat.postMessage": "method_post_message",
               "chat.update": "method_update", "chat.delete": "method_delete",
               "conversations.info": "method_conversations_info", "users.info": "method_users_info",
               "apps.connections.open": "method_apps_connections_open",
               "chat.postEphemeral": "method_post_ephemeral"}
    APP_TOKEN_METHODS = ("apps.connections.open",)

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, bot_token: str = DEFAULT_BOT_TOKEN,
                 app_token: str = DEFAULT_APP_TOKEN, identity: Optional[dict] = None, **limits):
        if not bot_token.startswith("xoxb-") or not app_token.startswith("xapp-"):
            raise ValueError("the bot token starts with xoxb-, the app-level token with xapp-")
        self.identity = dict(DEFAULT_IDENTITY, **(identity or {}))
        super().__init__(port=port, state_file=state_file)
        self.bot_token, self.app_token = bot_token, app_token
        self.faults = SlackFaults(WRITE_METHODS)
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        self.sockets: dict[int, Any] = {}
        self._next_socket = 0
        self._delivery_task: Optional[asyncio.Task] = None
        self._http = None  # the client session posting to the Request URL, made on first use
        self._tasks: set[asyncio.Task] = set()

    def initial_state(self) -> dict:
        stats = dict.fromkeys((
            "ratelimited_served", "retry_after_violations", "truncated", "updates_unchanged", "thread_ts_unknown",
            "thread_ts_of_reply", "events_filtered", "envelopes_sent", "envelopes_acked", "retries_sent",
            "deliveries_missed", "late_acks", "unknown_acks", "duplicate_acks", "events_failed",
            "connections_opened", "connections_refused", "disconnects_sent", "pings_received", "pongs_received",
            "unknown_messages", "http_deliveries", "http_failures"), 0)
        stats.update(requests={}, errors={})
        bot = {"id": self.identity["bot_user_id"], "team_id": self.identity["team_id"],
               "name": self.identity["bot_name"], "deleted": False, "real_name": self.identity["bot_name"],
               "is_bot": True, "is_app_user": False, "updated": int(time.time()),
               "profile": {"real_name": self.identity["bot_name"], "display_name": self.identity["bot_name"],
                           "bot_id": self.identity["bot_id"], "api_app_id": self.identity["app_id"],
                           "team": self.identity["team_id"]}}
        return {"channels": {}, "users": {bot["id"]: bot}, "events": [], "next_event": 0, "tickets": {},
                "connections": [], "next_connection": 0, "request_url": None, "url_verifications": [],
                "stats": stats}

    @property
    def api_url(self) -> str:
        """The Web API's base URL, as slack-sdk's ``base_url`` wants it (with the trailing slash)."""
        return f"{self.base_url}/api/"

    # -- configuration
    def configure(self, **limits) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        for key, value in limits.items():
            if key in CHOICES and value not in CHOICES[key]:
                raise ValueError(f"{key} must be one of {CHOICES[key]}, not {value!r}")
        if not set(limits.get("subscriptions", ALL_SUBSCRIPTIONS)) <= set(ALL_SUBSCRIPTIONS):
            raise ValueError(f"subscriptions are among {ALL_SUBSCRIPTIONS}")
        with self._lock:
            for key, value in limits.items():
                kind = type(DEFAULT_LIMITS[key])
                self.limits[key] = [float(v) for v in value] if key == "retry_delays" else kind(value)
            self.rate_limits = RateLimits(self.limits)

    def set_faults(self, **settings) -> None:
        """Replace the fault script (FaultScript.configure; ``methods`` are Web API method names)."""
        with self._lock:
            self.faults.configure(**settings)

    def add_channel(self, channel: str, name: Optional[str] = None, member: bool = True,
                    user: Optional[str] = None, archived: bool = False) -> dict:
        """Create a conversation before anyone writes in it (``member=False``: the bot is not in it; posting
        answers not_in_channel; ``archived``: is_archived)."""
        with self.mutate() as state:
            if user is not None:
                self.ensure_user(state, user)
            rec = self.ensure_channel(state, channel, name=name, member=member, user=user)
            if not rec["channel"].get("is_im"):
                rec["channel"]["is_archived"] = bool(archived)
            return rec["channel"]

    def reset(self) -> None:
        """Forget channels, messages and events, and turn faults off; limits stay as configured."""
        with self._lock:
            self.faults.configure()
            self.rate_limits = RateLimits(self.limits)
            self.reset_state()

    # -- socket control from any thread (test threads wait; the server loop schedules)
    def disconnect(self, reason: str = "refresh_requested", connection: Optional[int] = None,
                   close_after: Optional[float] = None) -> Optional[list[int]]:
        return self._in_loop(lambda: self.disconnect_sockets(reason, connection, close_after))

    def drop(self, connection: Optional[int] = None) -> Optional[list[int]]:
        return self._in_loop(lambda: self.drop_sockets(connection))

    def silence(self, connection: Optional[int] = None) -> Optional[list[int]]:
        return self._in_loop(lambda: self.silence_sockets(connection))

    def set_request_url(self, url: Optional[str]) -> Optional[dict]:
        """Verify ``url`` (url_verification) and deliver events there from now on; None: back to Socket Mode."""
        return self._in_loop(lambda: self.verify_request_url(url))

    def _in_loop(self, make_coro):
        loop = self._loop
        if loop is None:
            raise RuntimeError("the fake is not running")
        with contextlib.suppress(RuntimeError):
            if asyncio.get_running_loop() is loop:
                loop.create_task(make_coro())
                return None
        return asyncio.run_coroutine_threadsafe(make_coro(), loop).result(timeout=10)

    # -- inspection
    def messages(self, channel: str, incoming: bool = False) -> list[dict]:
        """Stored messages of a conversation, oldest first: the bot's only, unless ``incoming``. Each has
        ``text`` (as sent), ``displayed``, ``markup_problems``, ``thread_ts``, ``history`` (every version),
        ``edited`` and ``deleted``."""
        stored = self.read(lambda s: list(s["channels"].get(channel, {}).get("messages", {}).values()))
        return [m for m in stored if incoming or m["outgoing"]]

    def final_texts(self, channel: str) -> list[str]:
        return [m["text"] for m in self.messages(channel) if not m["deleted"]]

    def ops(self, channel: str, method: Optional[str] = None) -> list[dict]:
        """Every call the bot made for the conversation, refused ones too: method, at, ts, status, error."""
        ops = self.read(lambda s: s["channels"].get(channel, {}).get("ops", []))
        return [o for o in ops if method is None or o["method"] == method]

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    def events(self, status: Optional[str] = None) -> list[dict]:
        """Queued events: event_id, payload, status (pending / acked / failed), attempts, acked."""
        return [e for e in self.read(lambda s: s["events"]) if status is None or e["status"] == status]

    def envelopes(self) -> list[dict]:
        """Every delivery attempt in order sent: envelope_id, event_id, retry_attempt, retry_reason, sent_at,
        connection (None: missed while no socket was open) and acked_at."""
        attempts = [dict(a, event_id=e["event_id"]) for e in self.events() for a in e["attempts"]]
        return sorted(attempts, key=lambda a: a["sent_at"])

    def connections(self) -> list[dict]:
        return self.read(lambda s: s["connections"])

    def open_connections(self) -> list[int]:
        return [c["id"] for c in self.connections() if c["closed_at"] is None]

    def timeline(self, channel: str) -> dict:
        def select(s):
            rec = s["channels"][channel]
            return {"channel": rec["channel"], "member": rec["member"], "messages": list(rec["messages"].values()),
                    "ops": rec["ops"]}
        return self.read(select)

    # -- HTTP
    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/api/{method}", self._dispatch)
        app.router.add_get("/link/", self.handle_link)
        app.router.add_get("/link", self.handle_link)
        control_route(app, "POST", "/_control/inject", self._control_inject)
        control_route(app, "POST", "/_control/inject_edit", lambda body: self.inject_edit(**body))
        control_route(app, "POST", "/_control/inject_delete", lambda body: self.inject_delete(**body))
        control_route(app, "POST", "/_control/channels", lambda body: self.add_channel(**body))
        control_route(app, "GET", "/_control/channels",
                      lambda _: {"channels": self.read(lambda s: list(s["channels"]))})
        control_route(app, "GET", "/_control/channels/{channel}", lambda _, channel: self.timeline(channel))
        control_route(app, "GET", "/_control/stats", lambda _: self.stats())
        control_route(app, "GET", "/_control/events", lambda _: {"events": self.events()})
        control_route(app, "GET", "/_control/envelopes", lambda _: {"envelopes": self.envelopes()})
        control_route(app, "GET", "/_control/connections", lambda _: {"connections": self.connections()})
        control_route(app, "POST", "/_control/faults", lambda body: self.set_faults(**body))
        control_route(app, "POST", "/_control/config", lambda body: self.configure(**body))
        control_route(app, "POST", "/_control/reset", lambda _: self.reset())
        self._async_route(app, "/_control/disconnect", lambda body: self.disconnect_sockets(
            body.get("reason", "refresh_requested"), body.get("connection"), body.get("close_after")))
        self._async_route(app, "/_control/drop", lambda body: self.drop_sockets(body.get("connection")))
        self._async_route(app, "/_control/silence", lambda body: self.silence_sockets(body.get("connection")))
        self._async_route(app, "/_control/request_url", lambda body: self.verify_request_url(body["url"]))

    @staticmethod
    def _async_route(app: web.Application, path: str, make_coro) -> None:
        """Like control_route for the operations that run in the server loop; a list result is the sockets hit."""
        async def handler(request: web.Request) -> web.Response:
            body = await request.json() if request.can_read_body else {}
            try:
                result = await make_coro(body)
            except (TypeError, ValueError, KeyError) as exc:
                return web.json_response({"ok": False, "error": f"{type(exc).__name__}: {exc}"}, status=400)
            return web.json_response({"ok": True, **(result if isinstance(result, dict) else
                                                     {"connections": result})})
        app.router.add_post(path, handler)

    def _control_inject(self, body) -> dict:
        items = body if isinstance(body, list) else body.get("messages", [body])
        return {"ok": True, "messages": [self.inject_message(**item) for item in items]}

    async def on_started(self) -> None:
        self._delivery_task = asyncio.get_running_loop().create_task(self.deliver_events())

    async def on_stopping(self) -> None:
        if self._delivery_task is not None:
            self._delivery_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._delivery_task
        await self.close_all_sockets()
        await self.close_http()

    async def _dispatch(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        try:
            params = await read_params(request)
        except ValueError:
            return self._answer(ApiError("invalid_form_data"))
        header = request.headers.get("Authorization", "")
        token = header[len("Bearer "):].strip() if header.startswith("Bearer ") else str_param(params, "token")
        params.pop("token", None)
        with self._lock:  # set_faults may run in a test thread meanwhile
            fault = self.faults.draw(method)
        with self.mutate() as state:
            outcome = self._call(state, request.method, method, token, params, fault)
        await self.hold_if_asked(method, params.get("channel"), fault is None and not isinstance(outcome, ApiError))
        if fault in ("drop", "drop_after"):
            return drop_connection(request)
        return self._answer(outcome)

    def _call(self, state: dict, http_method: str, method: str, token: Optional[str], params: dict,
              fault: Optional[str]) -> Any:
        """Run one method under the lock and log it in its conversation's ops; the result or the ApiError."""
        stats = state["stats"]
        stats["requests"][method] = stats["requests"].get(method, 0) + 1
        try:
            if method not in self.METHODS:
                raise ApiError("unknown_method", req_method=method)
            self._authenticate(method, token)
            if method in self.APP_TOKEN_METHODS and http_method != "POST":
                raise ApiError("insecure_request")
            if fault is not None and fault != "drop_after":
                raise self._fault_error(fault, method, str_param(params, "channel"))
            self.rate_limits.check(stats, method, self._channel_key(state, str_param(params, "channel")))
            outcome = getattr(self, self.METHODS[method])(state, params)
        except ApiError as exc:
            outcome = exc
            stats["errors"][exc.error] = stats["errors"].get(exc.error, 0) + 1
            if exc.status == 429:
                stats["ratelimited_served"] += 1
        self._log_op(state, method, params, outcome)
        return outcome

    @staticmethod
    def _channel_key(state: dict, value: Optional[str]) -> Optional[str]:
        """The conversation id a channel argument names (an id, a name, or a user id for the DM), so that every
        way of naming a channel spends from its one posting budget; looks up without creating anything."""
        if not value or value in state["channels"]:
            return value
        if value[:1] in "UW":
            return dm_id(value)
        name = value.lstrip("#")
        return next((cid for cid, rec in state["channels"].items() if rec["channel"].get("name") == name), value)

    def _authenticate(self, method: str, token: Optional[str]) -> None:
        if not token:
            raise ApiError("not_authed")
        if token not in (self.bot_token, self.app_token):
            raise ApiError("invalid_auth")
        wanted = self.app_token if method in self.APP_TOKEN_METHODS else self.bot_token
        if token != wanted:
            raise ApiError("not_allowed_token_type")

    def _fault_error(self, fault: str, method: str, channel: Optional[str]) -> ApiError:
        if fault == "error":
            return ApiError("internal_error", status=500)
        if fault == "internal_error":
            return ApiError("internal_error")
        if fault == "drop":  # never sent: the connection is closed instead
            return ApiError("connection_dropped", status=599)
        return self.rate_limits.scripted_flood(method, channel, self.faults.flood_retry_after)

    def _log_op(self, state: dict, method: str, params: dict, outcome: Any) -> None:
        channel = outcome.get("channel") if isinstance(outcome, dict) else None
        rec = state["channels"].get(channel if isinstance(channel, str) else str_param(params, "channel") or "")
        if rec is None:
            return
        ts = outcome.get("ts") if isinstance(outcome, dict) else str_param(params, "ts")
        failed = isinstance(outcome, ApiError)
        rec["ops"].append({"method": method, "at": time.time(), "ts": ts,
                           "status": outcome.status if failed else 200, "error": outcome.error if failed else None})

    @staticmethod
    def _answer(outcome: Any) -> web.Response:
        if isinstance(outcome, ApiError):
            return web.json_response(outcome.body(), status=outcome.status, headers=outcome.headers())
        return web.json_response({"ok": True, **outcome})
