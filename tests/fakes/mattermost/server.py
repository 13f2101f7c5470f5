"""FakeMattermost: one aiohttp server with the REST API v4 under ``/api/v4``, the WebSocket event stream, the
control API and the in-process inspection helpers (the package docstring lists what is served)."""
from __future__ import annotations

import base64
import json
import math
import time
from typing import Any, Optional

from aiohttp import web

from tests.fakes.harness import FakeServer, FaultScript, TokenBucket, control_route, drop_connection
from tests.fakes.mattermost import world as w
from tests.fakes.mattermost.websocket import WebSocketMethods

DEFAULT_TOKEN = "fakemattermostbottoken0000"    # 26 characters, as Mattermost's access tokens are
WRITE_METHODS = ("create_post", "patch_post", "delete_post", "typing", "upload_file", "add_reaction",
                 "remove_reaction")
DEFAULT_LIMITS = {
    "max_post_size": 16383,          # MaxPostSize, in runes (code points)
    "pending_post_ttl": 30.0,        # seconds a pending_post_id is remembered (PendingPostIDsCacheTTL)
    "rate_per_s": 10.0,              # RateLimitSettings.PerSec, per user
    "rate_burst": 100,               # RateLimitSettings.MaxBurst
    "posts_since_limit": 1000,       # the most posts one ?since= answer holds
    "ping_interval": 0.0,            # seconds between the server's WebSocket pings (0: none)
}


class ApiError(Exception):
    """Mattermost's AppError: ``{"id", "message", "detailed_error", "request_id", "status_code"}``."""

    def __init__(self, status: int, error_id: str, message: str):
        super().__init__(message)
        self.status, self.error_id, self.message = status, error_id, message

    def response(self, headers: Optional[dict] = None) -> web.Response:
        return web.json_response({"id": self.error_id, "message": self.message, "detailed_error": "",
                                  "request_id": w.new_id(), "status_code": self.status}, status=self.status,
                                 headers=headers)


class FakeMattermost(WebSocketMethods, FakeServer):
    """A local Mattermost server for one bot account. ``limits`` (DEFAULT_LIMITS) may be given as keywords."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, token: str = DEFAULT_TOKEN, **limits):
        self.token = token
        super().__init__(port=port, state_file=state_file)
        self.init_websockets()
        self.faults = FaultScript(WRITE_METHODS)
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        self.banned_until: dict[str, float] = {}     # scope ("user" or a channel id) -> monotonic time

    def initial_state(self) -> dict:
        return w.initial_world()

    def configure(self, **limits) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        with self._lock:
            self.limits.update({k: type(DEFAULT_LIMITS[k])(v) for k, v in limits.items()})
            rate = self.limits["rate_per_s"]
            self.bucket = TokenBucket(1.0 / rate if rate > 0 else 0.0, self.limits["rate_burst"])

    def set_faults(self, **settings) -> None:
        """Replace the fault script (FaultScript.configure; ``methods`` default to the writes: create_post,
        patch_post, delete_post, typing). "flood" binds the channel it hit for ``flood_retry_after`` seconds,
        rounded up to whole seconds as Mattermost's ``Retry-After`` is."""
        with self._lock:
            self.faults.configure(**settings)

    # -- the people and places
    @property
    def bot_id(self) -> str:
        return self.read(lambda s: s["bot_id"])

    def ensure_user(self, username: str) -> str:
        with self.mutate() as state:
            return self._ensure_user(state, username)

    def _ensure_user(self, state: dict, username: str) -> str:
        user_id = w.stable_id("user:" + username)
        if user_id not in state["users"]:
            state["users"][user_id] = w.make_user(user_id, username)
        return user_id

    def direct_channel(self, username: str) -> str:
        """The direct channel between the bot and ``username`` (made on first use, as opening a DM does)."""
        with self.mutate() as state:
            user_id = self._ensure_user(state, username)
            if user_id not in state["direct"]:
                channel_id = w.stable_id("direct:" + user_id)
                state["channels"][channel_id] = w.make_channel(channel_id, "D", w.direct_name(state["bot_id"],
                                                                                               user_id),
                                                               [state["bot_id"], user_id])
                state["direct"][user_id] = channel_id
            return state["direct"][user_id]

    def add_channel(self, name: str, kind: str = "O", members: tuple[str, ...] = ()) -> str:
        """A channel of the team with the bot and ``members`` (usernames) in it."""
        with self.mutate() as state:
            channel_id = w.stable_id("channel:" + name)
            ids = [state["bot_id"]] + [self._ensure_user(state, m) for m in members]
            state["channels"][channel_id] = w.make_channel(channel_id, kind, name, ids, state["team_id"])
            return channel_id

    # -- injection
    def inject_post(self, channel_id: str, username: str, message: Any, root_id: str = "",
                    props: Optional[dict] = None, files: tuple = ()) -> dict:
        """A user's post arrives (``posted`` to the members' connections); returns the post. ``files``: (name,
        MIME type, bytes) each, uploaded by the user first."""
        with self.mutate() as state:
            user_id = self._ensure_user(state, username)
            entry = state["channels"][channel_id]
            if user_id not in entry["members"]:
                entry["members"].append(user_id)
            file_ids = [self._add_file(state, channel_id, user_id, name, mime, data)["id"]
                        for name, mime, data in files]
            post = w.make_post(state, channel_id, user_id, message, root_id=root_id, props=props)
            self._attach(state, post, file_ids)
            self._store_and_announce(state, entry, post, username)
            return dict(post)

    def _add_file(self, state: dict, channel_id: str, user_id: str, name: str, mime: str, data: bytes) -> dict:
        info = w.file_info(w.new_id(), user_id, channel_id, name, mime, len(data))
        state["files"][info["id"]] = {"info": info, "data": base64.b64encode(data).decode()}
        return info

    def _attach(self, state: dict, post: dict, file_ids: list) -> None:
        if file_ids:
            post["file_ids"] = list(file_ids)
            post["metadata"] = {"files": [state["files"][f]["info"] for f in file_ids]}
            for file_id in file_ids:
                state["files"][file_id]["info"]["post_id"] = post["id"]

    def file_bytes(self, file_id: str) -> bytes:
        return base64.b64decode(self.read(lambda s: s["files"][file_id]["data"]))

    def repost_event(self, post_id: str) -> None:
        """The same ``posted`` event again (what a client sees when the server re-sends after a reconnect)."""
        with self.mutate() as state:
            entry, post = self._find_post(state, post_id)
            username = state["users"].get(post["user_id"], {}).get("username", "")
            self._announce(state, entry, post, username)

    def _store_and_announce(self, state: dict, entry: dict, post: dict, username: str) -> None:
        entry["posts"][post["id"]] = w.stored_post(post)
        entry["channel"]["last_post_at"] = post["create_at"]
        entry["channel"]["total_msg_count"] += 1
        self._announce(state, entry, post, username)

    def _announce(self, state: dict, entry: dict, post: dict, username: str) -> None:
        channel = entry["channel"]
        data = {"channel_display_name": channel["display_name"], "channel_name": channel["name"],
                "channel_type": channel["type"], "post": json.dumps(post), "sender_name": "@" + username,
                "set_online": True, "team_id": channel["team_id"]}
        message = post.get("message")
        mentions = w.mentioned_ids(state, message) if isinstance(message, str) else []
        if mentions:
            data["mentions"] = json.dumps(mentions)
        self.broadcast(state, channel["id"], "posted", data)

    # -- REST
    def add_routes(self, app: web.Application) -> None:
        routes = (("GET", "/users/me", "get_me"), ("GET", "/users/{user_id}/channels", "get_channels"),
                  ("GET", "/channels/{channel_id}/posts", "get_posts"), ("POST", "/posts", "create_post"),
                  ("GET", "/posts/{post_id}", "get_post"), ("PUT", "/posts/{post_id}/patch", "patch_post"),
                  ("DELETE", "/posts/{post_id}", "delete_post"), ("POST", "/users/{user_id}/typing", "typing"),
                  ("POST", "/files", "upload_file"), ("GET", "/files/{file_id}", "get_file"),
                  ("POST", "/reactions", "add_reaction"), ("GET", "/posts/{post_id}/reactions", "get_reactions"),
                  ("DELETE", "/users/{user_id}/posts/{post_id}/reactions/{emoji_name}", "remove_reaction"))
        for method, path, name in routes:
            app.router.add_route(method, "/api/v4" + path, self._handler(name))
        self.add_websocket_route(app)
        control_route(app, "POST", "/_control/inject", lambda body: self.inject_post(**body))
        control_route(app, "POST", "/_control/direct", lambda body: {"channel_id": self.direct_channel(**body)})
        control_route(app, "POST", "/_control/faults", lambda body: self.set_faults(**body))
        control_route(app, "POST", "/_control/config", lambda body: self.configure(**body))
        control_route(app, "POST", "/_control/websocket/drop", lambda _: {"dropped": self.drop_websockets()})
        control_route(app, "POST", "/_control/websocket/skip", lambda body: self.skip_events(**body))
        control_route(app, "POST", "/_control/websocket/refuse", lambda body: self.refuse_websockets(**body))
        control_route(app, "POST", "/_control/websocket/freeze", lambda body: self.freeze_websockets(**body))
        control_route(app, "GET", "/_control/channels/{channel_id}", lambda _, channel_id: {
            "posts": self.posts(channel_id), "ops": self.ops(channel_id)})
        control_route(app, "GET", "/_control/stats", lambda _: self.stats())

    def _handler(self, name: str):
        async def handler(request: web.Request) -> web.Response:
            return await self._serve(request, name)
        return handler

    async def _serve(self, request: web.Request, name: str) -> web.Response:
        auth = request.headers.get("Authorization", "")
        if auth not in (f"Bearer {self.token}", f"Token {self.token}"):
            with self.mutate() as state:
                state["stats"]["unauthorized"] += 1
            return ApiError(401, "api.context.session_expired.app_error",
                            "Invalid or expired session, please login again.").response()
        body: Any = None
        if name == "upload_file":
            body = await self._read_upload(request)
            if isinstance(body, ApiError):
                return body.response()
        elif request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                return ApiError(400, "api.context.invalid_body_param.app_error", "Invalid or missing body").response()
        params = {**request.match_info, "query": dict(request.query), "body": body if isinstance(body, dict) else {}}
        with self.mutate() as state:
            state["stats"]["requests"][name] = state["stats"]["requests"].get(name, 0) + 1
            channel_id = self._channel_of(state, name, params)
            fault, outcome = self._call(state, name, params, channel_id)
        # Outside the lock: a held answer (the delivery case) waits here with the call already in the state.
        await self.hold_if_asked(name, channel_id, fault is None and isinstance(outcome, tuple) and outcome[0] < 300)
        if fault in ("drop", "drop_after"):
            return drop_connection(request)
        if isinstance(outcome, web.Response):
            return outcome
        status, payload = outcome
        return web.json_response(payload, status=status)

    async def _read_upload(self, request: web.Request):
        """A multipart upload: ``channel_id`` and one ``files`` part (the fake takes one file per request)."""
        try:
            form = await request.post()
        except ValueError:
            return ApiError(400, "api.file.upload_file.incorrect_number_of_files.app_error", "Bad multipart body")
        upload = form.get("files")
        if not hasattr(upload, "file"):
            return ApiError(400, "api.file.upload_file.incorrect_number_of_files.app_error",
                            "Unable to upload files. Incorrect number of files specified.")
        return {"channel_id": form.get("channel_id"), "name": upload.filename or "file",
                "mime_type": upload.content_type or "application/octet-stream", "data": upload.file.read()}

    def _channel_of(self, state: dict, name: str, params: dict) -> Optional[str]:
        if "channel_id" in params:
            return params["channel_id"]
        if name in ("create_post", "typing", "upload_file"):
            value = params["body"].get("channel_id")
            return value if isinstance(value, str) else None
        post_id = params.get("post_id") or params["body"].get("post_id")
        if isinstance(post_id, str):
            found = self._find_post(state, post_id, missing_ok=True)
            return found[0]["channel"]["id"] if found else None
        return None

    def _call(self, state: dict, name: str, params: dict, channel_id: Optional[str]):
        """The rate limit, then the fault script, then the method; a write is logged in its channel's ops."""
        now = time.monotonic()
        banned = max(self.banned_until.get("user", 0.0), self.banned_until.get(channel_id or "", 0.0)) - now
        if banned > 0:
            state["stats"]["retry_after_violations"] += 1
            return None, self._limited(state, name, channel_id, banned, ban=False)
        if self.bucket.wait_needed(now) > 0:
            return None, self._limited(state, name, channel_id, self.bucket.wait_needed(now), scope="user")
        self.bucket.take()
        fault = self.faults.draw(name)
        if fault == "flood":
            return fault, self._limited(state, name, channel_id, self.faults.flood_retry_after, scope=channel_id)
        if fault == "error":
            self.log_op(state, channel_id, name, 500)
            return fault, ApiError(500, "fake.internal", "Internal Server Error").response()
        if fault == "drop":
            self.log_op(state, channel_id, name, 0)
            return fault, None
        try:
            status, payload = getattr(self, "_rest_" + name)(state, params)
        except ApiError as error:
            self.log_op(state, channel_id, name, error.status)
            return fault, error.response()
        self.log_op(state, channel_id, name, status)
        if isinstance(payload, bytes):
            return fault, web.Response(body=payload, status=status, content_type="application/octet-stream")
        return fault, (status, payload)

    def _limited(self, state: dict, name: str, channel_id: Optional[str], seconds: float, scope: Optional[str] = None,
                 ban: bool = True) -> web.Response:
        """429 as Mattermost's limiter answers it: plain text, ``X-RateLimit-*`` and a whole-second Retry-After."""
        wait = max(1, math.ceil(seconds))
        if ban and scope:
            self.banned_until[scope] = max(self.banned_until.get(scope, 0.0), time.monotonic() + wait - 0.05)
        state["stats"]["rate_limited"] += 1
        self.log_op(state, channel_id, name, 429)
        return web.Response(status=429, text="limit exceeded\n", headers={
            "X-RateLimit-Limit": str(int(self.limits["rate_per_s"])), "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(wait), "Retry-After": str(wait)})

    def log_op(self, state: dict, channel_id: Optional[str], name: str, status: int, post_id: str = "") -> None:
        entry = state["channels"].get(channel_id or "")
        if entry is not None and name in WRITE_METHODS:
            entry["ops"].append({"op": name, "at": time.monotonic(), "status": status})

    def _find_post(self, state: dict, post_id: str, missing_ok: bool = False):
        for entry in state["channels"].values():
            if post_id in entry["posts"]:
                return entry, entry["posts"][post_id]
        if missing_ok:
            return None
        raise ApiError(404, "app.post.get.app_error", "Unable to get the post.")

    def _member_channel(self, state: dict, channel_id: Any) -> dict:
        entry = state["channels"].get(channel_id) if isinstance(channel_id, str) else None
        if entry is None or state["bot_id"] not in entry["members"]:
            raise ApiError(403, "api.context.permissions.app_error",
                           "You do not have the appropriate permissions.")
        return entry

    # -- the methods
    def _rest_get_me(self, state: dict, params: dict):
        return 200, state["users"][state["bot_id"]]

    def _rest_get_channels(self, state: dict, params: dict):
        if params["user_id"] not in ("me", state["bot_id"]):
            raise ApiError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
        return 200, [dict(e["channel"]) for e in state["channels"].values() if state["bot_id"] in e["members"]]

    def _rest_get_posts(self, state: dict, params: dict):
        entry = self._member_channel(state, params["channel_id"])
        try:
            since = int(params["query"].get("since", "0"))
        except ValueError:
            raise ApiError(400, "api.context.invalid_url_param.app_error", "Invalid since parameter") from None
        state["stats"]["posts_since_calls"] += 1
        posts = sorted((p for p in entry["posts"].values() if p["update_at"] > since),
                       key=lambda p: p["create_at"])[-self.limits["posts_since_limit"]:]
        return 200, {"order": [p["id"] for p in reversed(posts)], "posts": {p["id"]: p for p in posts},
                     "next_post_id": "", "prev_post_id": "", "has_next": False}

    def _rest_get_post(self, state: dict, params: dict):
        _entry, post = self._find_post(state, params["post_id"])
        if post["delete_at"]:
            raise ApiError(404, "app.post.get.app_error", "Unable to get the post.")
        return 200, post

    def _rest_create_post(self, state: dict, params: dict):
        body = params["body"]
        entry = self._member_channel(state, body.get("channel_id"))
        message = body.get("message", "")
        if not isinstance(message, str):
            raise ApiError(400, "api.context.invalid_body_param.app_error", "Invalid or missing post in request body.")
        if len(message) > self.limits["max_post_size"]:
            raise ApiError(400, "model.post.is_valid.message_length.app_error", "Invalid Message property.")
        root_id = body.get("root_id") or ""
        if root_id:
            root = entry["posts"].get(root_id)
            if root is None or root["root_id"] or root["delete_at"]:
                raise ApiError(400, "api.post.create_post.root_id.app_error", "Invalid RootId parameter.")
        pending = body.get("pending_post_id") or ""
        now = time.monotonic()
        seen = state["pending_posts"].get(pending) if pending else None
        if seen is not None and now - seen["at"] < self.limits["pending_post_ttl"]:
            # Mattermost answers a repeated create with the post the first one made (deduplicateCreatePost).
            state["stats"]["pending_deduplicated"] += 1
            return 201, {**entry["posts"][seen["post_id"]], "pending_post_id": pending}
        props = body.get("props") if isinstance(body.get("props"), dict) else {}
        file_ids = body.get("file_ids") if isinstance(body.get("file_ids"), list) else []
        for file_id in file_ids:
            stored = state["files"].get(file_id) if isinstance(file_id, str) else None
            if stored is None or stored["info"]["channel_id"] != entry["channel"]["id"] or stored["info"]["post_id"]:
                raise ApiError(400, "api.post.create_post.attach_files.error", "Unable to attach files to post.")
        if not message and not file_ids:
            raise ApiError(400, "api.context.invalid_body_param.app_error", "Invalid or missing post in request body.")
        post = w.make_post(state, entry["channel"]["id"], state["bot_id"], message, root_id=root_id,
                           pending_post_id=pending, props=props)
        self._attach(state, post, file_ids)
        if pending:
            state["pending_posts"][pending] = {"post_id": post["id"], "at": now}
        self._store_and_announce(state, entry, post, w.BOT_USERNAME)
        return 201, post

    def _own_post(self, state: dict, post_id: str) -> tuple[dict, dict]:
        entry, post = self._find_post(state, post_id)
        if post["delete_at"]:
            raise ApiError(404, "app.post.get.app_error", "Unable to get the post.")
        if post["user_id"] != state["bot_id"]:
            raise ApiError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
        return entry, post

    def _rest_patch_post(self, state: dict, params: dict):
        entry, post = self._own_post(state, params["post_id"])
        message = params["body"].get("message")
        if message is not None:
            if not isinstance(message, str):
                raise ApiError(400, "api.context.invalid_body_param.app_error", "Invalid or missing patch.")
            if len(message) > self.limits["max_post_size"]:
                raise ApiError(400, "model.post.is_valid.message_length.app_error", "Invalid Message property.")
            if message != post["message"]:
                post["message"], post["edit_at"] = message, w.now_ms()
        post["update_at"] = w.next_create_at(state)
        self.broadcast(state, entry["channel"]["id"], "post_edited", {"post": json.dumps(post)})
        return 200, post

    def _rest_delete_post(self, state: dict, params: dict):
        entry, post = self._own_post(state, params["post_id"])
        post["delete_at"] = post["update_at"] = w.next_create_at(state)
        self.broadcast(state, entry["channel"]["id"], "post_deleted", {"post": json.dumps(post)})
        return 200, {"status": "OK"}

    def _rest_upload_file(self, state: dict, params: dict):
        body = params["body"]
        self._member_channel(state, body.get("channel_id"))
        info = self._add_file(state, body["channel_id"], state["bot_id"], body["name"], body["mime_type"],
                              body["data"])
        return 201, {"file_infos": [info], "client_ids": []}

    def _rest_get_file(self, state: dict, params: dict):
        stored = state["files"].get(params["file_id"])
        if stored is None:
            raise ApiError(404, "app.file_info.get.app_error", "Unable to get the file info.")
        self._member_channel(state, stored["info"]["channel_id"])
        return 200, base64.b64decode(stored["data"])

    def _reacted_post(self, state: dict, post_id, user_id) -> dict:
        if user_id != state["bot_id"]:
            raise ApiError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
        found = self._find_post(state, post_id, missing_ok=True) if isinstance(post_id, str) else None
        if found is None or found[1]["delete_at"]:
            raise ApiError(404, "app.post.get.app_error", "Unable to get the post.")
        self._member_channel(state, found[0]["channel"]["id"])
        return found[0]

    def _rest_add_reaction(self, state: dict, params: dict):
        body = params["body"]
        entry = self._reacted_post(state, body.get("post_id"), body.get("user_id"))
        name = body.get("emoji_name")
        if not isinstance(name, str) or not w.EMOJI_NAME.fullmatch(name):
            raise ApiError(400, "model.reaction.is_valid.emoji_name.app_error", "Invalid emoji name.")
        reactions = state["reactions"].setdefault(body["post_id"], [])
        reaction = {"user_id": body["user_id"], "post_id": body["post_id"], "emoji_name": name,
                    "create_at": w.now_ms()}
        if not any(r["user_id"] == body["user_id"] and r["emoji_name"] == name for r in reactions):
            reactions.append(reaction)
            self._log_reactions(state, body["post_id"], body["user_id"])
            self.broadcast(state, entry["channel"]["id"], "reaction_added", {"reaction": json.dumps(reaction)})
        return 201, reaction

    def _rest_get_reactions(self, state: dict, params: dict):
        _entry, post = self._find_post(state, params["post_id"])
        self._member_channel(state, post["channel_id"])
        return 200, list(state["reactions"].get(params["post_id"], []))

    def _rest_remove_reaction(self, state: dict, params: dict):
        entry = self._reacted_post(state, params["post_id"], params["user_id"])
        reactions = state["reactions"].get(params["post_id"], [])
        kept = [r for r in reactions if not (r["user_id"] == params["user_id"]
                                             and r["emoji_name"] == params["emoji_name"])]
        if len(kept) != len(reactions):
            state["reactions"][params["post_id"]] = kept
            self._log_reactions(state, params["post_id"], params["user_id"])
            self.broadcast(state, entry["channel"]["id"], "reaction_removed", {"reaction": json.dumps(
                {"user_id": params["user_id"], "post_id": params["post_id"], "emoji_name": params["emoji_name"]})})
        return 200, {"status": "OK"}

    def reactions(self, post_id: str) -> list[dict]:
        return self.read(lambda s: s["reactions"].get(post_id, []))

    def _log_reactions(self, state: dict, post_id: str, user_id: str) -> None:
        """What ``user_id``'s reactions on the post show after a change (``reaction_history``)."""
        shown = [r["emoji_name"] for r in state["reactions"].get(post_id, []) if r["user_id"] == user_id]
        state["reaction_log"].setdefault(post_id, []).append({"user_id": user_id, "emoji_names": shown})

    def reaction_history(self, post_id: str, user_id: str) -> list[list[str]]:
        """The emoji names ``user_id``'s reactions on the post showed after each change, oldest first."""
        return [e["emoji_names"] for e in self.read(lambda s: s["reaction_log"].get(post_id, []))
                if e["user_id"] == user_id]

    def _rest_typing(self, state: dict, params: dict):
        if params["user_id"] != state["bot_id"]:
            raise ApiError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
        self._member_channel(state, params["body"].get("channel_id"))
        return 200, {"status": "OK"}

    # -- inspection (any thread)
    def posts(self, channel_id: str) -> list[dict]:
        """The channel's posts, oldest first, deleted ones included."""
        return self.read(lambda s: sorted(s["channels"].get(channel_id, {"posts": {}})["posts"].values(),
                                          key=lambda p: p["create_at"]))

    def bot_posts(self, channel_id: str) -> list[dict]:
        bot = self.bot_id
        return [p for p in self.posts(channel_id) if p["user_id"] == bot]

    def ops(self, channel_id: str, name: Optional[str] = None) -> list[dict]:
        ops = self.read(lambda s: s["channels"].get(channel_id, {"ops": []})["ops"])
        return [o for o in ops if name is None or o["op"] == name]

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    async def on_stopping(self) -> None:
        for conn in list(self.connections):
            if conn.request.transport is not None:
                conn.request.transport.close()
        self.connections.clear()
