"""The REST face of the fake (``/api/v10``): bot-token auth, rate limits, scripted faults, and the methods a chat
adapter needs. Each method is a plain function of (state, path params, body) run under the fake's lock; it returns
(status, JSON body or None) or raises ApiError, which is answered as Discord's error body
``{"message", "code", "errors"?}``.
"""
from __future__ import annotations

import json
import time
from typing import Any, Optional

from aiohttp import web

from tests.fakes.discord import protocol as p
from tests.fakes.discord.interactions import check_components
from tests.fakes.discord.objects import message_object, new_record, parse_mentions
from tests.fakes.discord.ratelimits import RateLimited
from tests.fakes.harness import drop_connection

# (HTTP method, path under /api/v{n}, route name, needs the bot token)
ROUTES = (
    ("GET", "/gateway", "get_gateway", False), ("GET", "/gateway/bot", "get_gateway_bot", True),
    ("GET", "/users/@me", "get_me", True), ("GET", "/oauth2/applications/@me", "get_application", True),
    ("GET", "/applications/@me", "get_application", True), ("POST", "/users/@me/channels", "create_dm", True),
    ("GET", "/channels/{channel_id}", "get_channel", True),
    ("GET", "/channels/{channel_id}/messages", "get_messages", True),
    ("POST", "/channels/{channel_id}/messages", "create_message", True),
    ("GET", "/channels/{channel_id}/messages/{message_id}", "get_message", True),
    ("PATCH", "/channels/{channel_id}/messages/{message_id}", "edit_message", True),
    ("DELETE", "/channels/{channel_id}/messages/{message_id}", "delete_message", True),
    ("POST", "/channels/{channel_id}/typing", "typing", True),
    ("POST", "/interactions/{interaction_id}/{interaction_token}/callback", "interaction_callback", False),
)
WRITE_ROUTES = ("create_message", "edit_message", "delete_message", "typing")
TEXT_CHANNEL_TYPES = (p.GUILD_TEXT, p.DM, p.PUBLIC_THREAD)


class ApiError(Exception):
    def __init__(self, status: int, code: int, message: str, errors: Optional[dict] = None):
        super().__init__(message)
        self.status, self.code, self.message, self.errors = status, code, message, errors

    def body(self) -> dict:
        body: dict[str, Any] = {"message": self.message, "code": self.code}
        if self.errors is not None:
            body["errors"] = self.errors
        return body


def form_error(field: str, code: str, message: str) -> ApiError:
    """Discord's 50035 "Invalid Form Body" with the field's ``_errors``."""
    return ApiError(400, p.INVALID_FORM_BODY, "Invalid Form Body",
                    {field: {"_errors": [{"code": code, "message": message}]}})


def json_answer(payload, status: int, headers: dict) -> web.Response:
    """Content-Type exactly ``application/json``, as Discord sends it (some clients compare the whole header)."""
    return web.Response(body=json.dumps(payload).encode(), status=status,
                        headers={**headers, "Content-Type": "application/json"})


def snowflake_param(value, field: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise form_error(field, "NUMBER_TYPE_COERCE", f"Value \"{value}\" is not snowflake.") from None


class RestMethods:
    """Mixin for FakeDiscord: needs ``state`` helpers, ``limits``, ``limiter``, ``faults``, ``dispatch_event``."""

    # -- HTTP plumbing
    def add_rest_routes(self, app: web.Application) -> None:
        for method, path, name, needs_auth in ROUTES:
            app.router.add_route(method, "/api/v{version:\\d+}" + path, self._rest_handler(name, needs_auth))

    def _rest_handler(self, name: str, needs_auth: bool):
        async def handler(request: web.Request) -> web.Response:
            return await self._serve(request, name, needs_auth)
        return handler

    async def _serve(self, request: web.Request, name: str, needs_auth: bool) -> web.Response:
        if int(request.match_info["version"]) not in p.API_VERSIONS:
            return self._error_response(ApiError(400, p.GENERAL_ERROR, "Invalid API version"))
        if needs_auth and request.headers.get("Authorization") != f"Bot {self.token}":
            with self.mutate() as state:
                state["stats"]["unauthorized"] += 1
            return self._error_response(ApiError(401, p.GENERAL_ERROR, "401: Unauthorized"))
        params = dict(request.match_info)
        params.pop("version")
        params["query"] = dict(request.query)
        try:
            body = await self._read_body(request)
        except ApiError as exc:
            return self._error_response(exc)
        with self.mutate() as state:
            state["stats"]["requests"][name] = state["stats"]["requests"].get(name, 0) + 1
            headers, outcome, fault = self._call(state, name, params, body)
        await self.hold_if_asked(name, params.get("channel_id"),
                                 fault is None and not isinstance(outcome, (ApiError, RateLimited)))
        if fault in ("drop", "drop_after"):
            return drop_connection(request)
        if isinstance(outcome, RateLimited):
            return json_answer(outcome.body(), 429, {**headers, **outcome.headers})
        if isinstance(outcome, ApiError):
            return self._error_response(outcome, headers)
        status, payload = outcome
        if payload is None:
            return web.Response(status=status, headers=headers)
        return json_answer(payload, status, headers)

    def _call(self, state: dict, name: str, params: dict, body: Optional[dict]):
        """Rate limits, then the fault script, then the method; logs the call in its channel's ops."""
        major = params.get("channel_id")
        headers: dict = {}
        fault = None
        try:
            headers = self.limiter.take(name, major, state["stats"])
            fault = self.faults.draw(name)
            if fault == "flood":
                seconds = self.faults.flood_retry_after
                state["stats"]["rate_limited"] += 1
                raise RateLimited(seconds, self.limiter.ban(name, major, seconds), is_global=False, scope="user")
            if fault == "error":
                raise ApiError(500, p.GENERAL_ERROR, "500: Internal Server Error")
            if fault == "drop":  # never answered: the connection is closed before the method runs
                raise ApiError(599, p.GENERAL_ERROR, "connection dropped")
            try:
                outcome = getattr(self, "route_" + name)(state, params, body or {})
            except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong shape
                raise ApiError(400, p.INVALID_FORM_BODY, "Invalid Form Body",
                               {"_errors": [{"code": "BASE_TYPE_BAD", "message": f"{type(exc).__name__}: {exc}"}]})
        except (ApiError, RateLimited) as exc:
            outcome = exc
            if isinstance(exc, ApiError):
                key = str(exc.code) if exc.code else str(exc.status)
                state["stats"]["errors"][key] = state["stats"]["errors"].get(key, 0) + 1
        self._log_op(state, name, params, body, outcome)
        return headers, outcome, fault

    def _log_op(self, state: dict, name: str, params: dict, body: Optional[dict], outcome) -> None:
        channel = state["channels"].get(str(params.get("channel_id")))
        if channel is None:
            return
        entry = {"route": name, "at": time.time(), "message_id": params.get("message_id"),
                 "nonce": (body or {}).get("nonce") if name == "create_message" else None}
        if isinstance(outcome, RateLimited):
            entry.update(status=429, code=None, retry_after=round(outcome.retry_after, 3))
        elif isinstance(outcome, ApiError):
            entry.update(status=outcome.status, code=outcome.code)
        else:
            status, payload = outcome
            entry.update(status=status, code=None)
            if isinstance(payload, dict) and "id" in payload and name == "create_message":
                entry["message_id"] = payload["id"]
                entry["deduplicated"] = payload.pop("_deduplicated", False)
        channel["ops"].append(entry)

    @staticmethod
    async def _read_body(request: web.Request) -> Optional[dict]:
        if not request.can_read_body:
            return None
        if request.content_type == "application/json":
            try:
                body = json.loads(await request.text())
            except ValueError:
                raise ApiError(400, p.INVALID_JSON, "The request body contains invalid JSON.") from None
        elif request.content_type == "multipart/form-data":  # files are not modelled; payload_json is read
            form = await request.post()
            try:
                body = json.loads(form.get("payload_json") or "{}")
            except ValueError:
                raise ApiError(400, p.INVALID_JSON, "The request body contains invalid JSON.") from None
        else:
            raise ApiError(400, p.INVALID_FORM_BODY, "Invalid Form Body")
        if not isinstance(body, dict):
            raise ApiError(400, p.INVALID_FORM_BODY, "Invalid Form Body")
        return body

    @staticmethod
    def _error_response(error: ApiError, headers: Optional[dict] = None) -> web.Response:
        return json_answer(error.body(), error.status, headers or {})

    # -- shared pieces
    def require_channel(self, state: dict, channel_id) -> dict:
        channel = state["channels"].get(str(snowflake_param(channel_id, "channel_id")))
        if channel is None:
            raise ApiError(404, p.UNKNOWN_CHANNEL, "Unknown Channel")
        return channel

    def require_message(self, channel: dict, message_id) -> dict:
        record = channel["messages"].get(str(snowflake_param(message_id, "message_id")))
        if record is None or record["deleted"]:
            raise ApiError(404, p.UNKNOWN_MESSAGE, "Unknown Message")
        return record

    @staticmethod
    def check_can_send(channel: dict) -> None:
        if channel["channel"]["type"] not in TEXT_CHANNEL_TYPES:
            raise ApiError(400, p.NON_TEXT_CHANNEL, "Cannot send messages in a non-text channel")
        if channel["blocked"]:
            if channel["channel"]["type"] == p.DM:
                raise ApiError(403, p.CANNOT_MESSAGE_USER, "Cannot send messages to this user")
            raise ApiError(403, p.MISSING_PERMISSIONS, "Missing Permissions")

    def _checked_content(self, value) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise form_error("content", "BASE_TYPE_STRING", "Could not interpret the value as string.")
        limit = self.limits["content_limit"]
        if len(value) > limit:
            raise form_error("content", "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")
        return value

    def _rest_message(self, state: dict, record: dict) -> dict:
        """REST answers follow the app's Developer Portal setting, not the intents of any gateway session."""
        return message_object(state, record, has_content_intent=self.app_has_content_intent())

    # -- routes
    def route_get_gateway(self, state, params, body):
        return 200, {"url": self.gateway_url}

    def route_get_gateway_bot(self, state, params, body):
        return 200, {"url": self.gateway_url, "shards": 2 if self.limits["sharding_required"] else 1,
                     "session_start_limit": {
            "total": 1000, "remaining": max(0, 1000 - state["stats"]["identifies"]), "reset_after": 86400000,
            "max_concurrency": 1}}

    def route_get_me(self, state, params, body):
        return 200, dict(state["users"][str(state["bot_id"])])

    def route_get_application(self, state, params, body):
        return 200, self.application_object(state)

    def route_create_dm(self, state, params, body):
        user_id = snowflake_param(body.get("recipient_id"), "recipient_id")
        if str(user_id) not in state["users"]:
            raise ApiError(404, p.UNKNOWN_USER, "Unknown User")
        return 200, self.ensure_dm(state, user_id)["channel"]

    def route_get_channel(self, state, params, body):
        return 200, self.require_channel(state, params["channel_id"])["channel"]

    def route_get_messages(self, state, params, body):
        channel = self.require_channel(state, params["channel_id"])
        query = params["query"]
        limit = min(max(int(query.get("limit", 50)), 1), 100)
        records = sorted((r for r in channel["messages"].values() if not r["deleted"]), key=lambda r: -r["id"])
        if "before" in query:
            records = [r for r in records if r["id"] < int(query["before"])]
        if "after" in query:
            records = [r for r in records if r["id"] > int(query["after"])][-limit:]
        return 200, [self._rest_message(state, r) for r in records[:limit]]

    def route_get_message(self, state, params, body):
        channel = self.require_channel(state, params["channel_id"])
        return 200, self._rest_message(state, self.require_message(channel, params["message_id"]))

    def route_create_message(self, state, params, body):
        channel = self.require_channel(state, params["channel_id"])
        self.check_can_send(channel)
        content = self._checked_content(body.get("content"))
        nonce = body.get("nonce")
        if nonce is not None:
            if isinstance(nonce, bool) or not isinstance(nonce, (int, str)):
                raise form_error("nonce", "BASE_TYPE_STRING", "Could not interpret the value as string.")
            if isinstance(nonce, str) and len(nonce) > 25:
                raise form_error("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
        embeds, components = body.get("embeds") or [], check_components(body.get("components"))
        if not content.strip() and not embeds and not components and not body.get("sticker_ids"):
            raise ApiError(400, p.EMPTY_MESSAGE, "Cannot send an empty message")
        if nonce is not None and body.get("enforce_nonce"):
            earlier = self._earlier_by_nonce(state, nonce)
            if earlier is not None:
                state["stats"]["nonce_deduplicated"] += 1
                return 200, dict(self._rest_message(state, earlier), _deduplicated=True)
        reference = self._reply_target(channel, body.get("message_reference"))
        mentions = parse_mentions(state, content, body.get("allowed_mentions"))
        if reference and (body.get("allowed_mentions") or {}).get("replied_user"):
            author = channel["messages"][str(reference["message_id"])]["author_id"]
            mentions += [author] if author not in mentions else []
        record = new_record(message_id=p.next_snowflake(state), channel=channel, author_id=state["bot_id"],
                            content=content, outgoing=True, mentions=mentions, nonce=nonce, reference=reference,
                            embeds=embeds, components=components, tts=body.get("tts", False),
                            flags=body.get("flags") or 0)
        channel["messages"][str(record["id"])] = record
        if nonce is not None:
            state["nonces"][str(nonce)] = {"channel_id": record["channel_id"], "message_id": record["id"],
                                           "at": time.time()}
        self.dispatch_message(state, "MESSAGE_CREATE", record)
        return 200, self._rest_message(state, record)

    def _earlier_by_nonce(self, state: dict, nonce) -> Optional[dict]:
        seen = state["nonces"].get(str(nonce))
        if seen is None or time.time() - seen["at"] > self.limits["nonce_window"] * self.limits["time_scale"]:
            return None
        record = state["channels"][str(seen["channel_id"])]["messages"].get(str(seen["message_id"]))
        return record if record is not None and not record["deleted"] else None

    def _reply_target(self, channel: dict, reference) -> Optional[dict]:
        if reference is None:
            return None
        if not isinstance(reference, dict) or reference.get("type", 0) != 0:
            raise form_error("message_reference", "MESSAGE_REFERENCE_INVALID", "Only replies are modelled.")
        target = channel["messages"].get(str(reference.get("message_id")))
        same_channel = str(reference.get("channel_id", channel["channel"]["id"])) == channel["channel"]["id"]
        if target is None or target["deleted"] or not same_channel:
            if reference.get("fail_if_not_exists", True):
                raise form_error("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
            return None
        return {"message_id": target["id"], "channel_id": target["channel_id"]}

    def route_edit_message(self, state, params, body):
        channel = self.require_channel(state, params["channel_id"])
        record = self.require_message(channel, params["message_id"])
        if record["author_id"] != state["bot_id"]:
            raise ApiError(403, p.CANNOT_EDIT_OTHERS_MESSAGE, "Cannot edit a message authored by another user")
        content = self._checked_content(body["content"]) if "content" in body else record["content"]
        embeds = (body["embeds"] or []) if "embeds" in body else record["embeds"]
        components = check_components(body["components"]) if "components" in body else record["components"]
        if not content.strip() and not embeds and not components:
            raise ApiError(400, p.EMPTY_MESSAGE, "Cannot send an empty message")
        now = time.time()
        if "content" in body:
            record["mentions"] = parse_mentions(state, content, body.get("allowed_mentions"))
        record.update(content=content, embeds=embeds, components=components, edited_at=now)
        if "flags" in body and body["flags"] is not None:
            record["flags"] = int(body["flags"])
        record["history"].append({"content": content, "at": now})
        self.dispatch_message(state, "MESSAGE_UPDATE", record)
        return 200, self._rest_message(state, record)

    def route_delete_message(self, state, params, body):
        channel = self.require_channel(state, params["channel_id"])
        record = self.require_message(channel, params["message_id"])
        if record["author_id"] != state["bot_id"]:
            if record["guild_id"] is None:
                raise ApiError(403, p.CANNOT_ACT_ON_DM, "Cannot execute action on a DM channel")
            if not state["guilds"][str(record["guild_id"])]["manage_messages"]:
                raise ApiError(403, p.MISSING_PERMISSIONS, "Missing Permissions")
        record["deleted"], record["deleted_at"] = True, time.time()
        self.dispatch_deletion(state, record)
        return 204, None

    def route_typing(self, state, params, body):
        self.check_can_send(self.require_channel(state, params["channel_id"]))
        return 204, None
