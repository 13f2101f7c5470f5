"""Async client for Discord's REST API (v10, aiohttp): the calls a chat adapter makes, the rate limits kept before
each request leaves (ratelimits.py), and every failure raised as one of actors.adapters.errors:

    429                                   FloodError(retry_after); the bucket (or, ``global``, the bot) is banned
    5xx, network errors, timeouts         RetryableError (``maybe_done`` unless the connection was never made)
    404 10008 Unknown Message             MessageNotFoundError (the message to edit or delete is gone)
    400 50035 content BASE_TYPE_MAX_LENGTH   TooLongError (over the 2,000-character limit: split)
    any other 4xx (401 bad token, 403 missing permissions, 404 unknown channel)   PermanentError

The token travels in the ``Authorization`` header only, never in a URL; error texts are built from the route name
and Discord's ``message``/``code`` and redacted with the token as a known secret.
"""
from __future__ import annotations

import asyncio
from typing import Any, Optional


from actors.adapters.discord.ratelimits import RateLimits
from actors.adapters.http_session import HttpSession
from actors.adapters.errors import (FloodError, MessageNotFoundError, PermanentError, PlatformError,
                                    RetryableError, TooLongError)
from common.redact import redact as redact_secrets
from common.version import VERSION

DEFAULT_API = "https://discord.com/api/v10"
UNKNOWN_MESSAGE, INVALID_FORM_BODY = 10008, 50035
# Discord asks every bot for "DiscordBot ($url, $version)"; a request without it may be refused.
USER_AGENT = f"DiscordBot (agent-gateway, {VERSION})"


class DiscordREST(HttpSession):
    """``DiscordREST(token, base_url)``; owns its aiohttp session. One instance per token: its rate-limit state is
    the bot's."""

    def __init__(self, token: str, base_url: str = DEFAULT_API, request_timeout: float = 30.0):
        super().__init__(request_timeout=request_timeout, session_headers={"User-Agent": USER_AGENT})
        self._token = token
        self.base_url = base_url.rstrip("/")
        self.limits = RateLimits()

    def __repr__(self) -> str:  # never the token
        return f"DiscordREST(base_url={self.base_url!r})"

    def redact(self, text: str) -> str:
        return redact_secrets(text, [self._token])

    # -- calls
    async def get_me(self) -> dict:
        return await self.call("GET", "/users/@me", "get_me")

    async def application(self) -> dict:
        """The bot's application: its ``flags`` say which privileged intents the Developer Portal grants."""
        return await self.call("GET", "/applications/@me", "get_application")

    async def gateway_url(self) -> str:
        return (await self.call("GET", "/gateway/bot", "get_gateway_bot"))["url"]

    async def create_message(self, channel_id: str, content: str, *, nonce: Optional[str] = None,
                             reply_to: Optional[str] = None, components: Optional[list] = None) -> dict:
        """A new message. With ``nonce`` Discord is told to enforce it: a second create with the same nonce (a send
        repeated after its answer was lost) returns the first message instead of making another one."""
        body: dict[str, Any] = {"content": content, "allowed_mentions": {"parse": [], "replied_user": True}}
        if components:
            body["components"] = components
        if nonce is not None:
            body.update(nonce=nonce, enforce_nonce=True)
        if reply_to is not None:
            body["message_reference"] = {"message_id": reply_to, "fail_if_not_exists": False}
        return await self.call("POST", f"/channels/{channel_id}/messages", "create_message", channel_id, body)

    async def edit_message(self, channel_id: str, message_id: str, content: str,
                           components: Optional[list] = None) -> dict:
        """The message's new text; ``components`` given (``[]`` too) replace its buttons, else they are kept."""
        body: dict[str, Any] = {"content": content, "allowed_mentions": {"parse": []}}
        if components is not None:
            body["components"] = components
        return await self.call("PATCH", f"/channels/{channel_id}/messages/{message_id}", "edit_message", channel_id,
                               body)

    async def answer_interaction(self, interaction_id: str, token: str, body: dict) -> None:
        """The one answer an interaction takes (within 3 s of its creation): components.py ``ack_body``. The
        token in the path authenticates it; it is redacted from errors like the bot's."""
        await self.call("POST", f"/interactions/{interaction_id}/{token}/callback", "interaction_callback",
                        interaction_id, body, secrets=(token,))

    async def delete_message(self, channel_id: str, message_id: str) -> None:
        await self.call("DELETE", f"/channels/{channel_id}/messages/{message_id}", "delete_message", channel_id)

    async def trigger_typing(self, channel_id: str) -> None:
        await self.call("POST", f"/channels/{channel_id}/typing", "typing", channel_id)

    # -- transport
    async def call(self, method: str, path: str, route: str, major: Optional[str] = None,
                   body: Optional[dict] = None, secrets: tuple = ()) -> Any:
        """One request, sent once its bucket (and the global limit) allow it; the answer's JSON or None (204)."""
        loop = asyncio.get_running_loop()
        while (wait := self.limits.acquire(route, major, loop.time())) > 0:
            await asyncio.sleep(wait)
        headers = {"Authorization": f"Bot {self._token}"}
        redact = self.redact if not secrets else (lambda text: redact_secrets(text, [self._token, *secrets]))
        status, answer_headers, payload = await self.request_json(method, self.base_url + path, op=route, json=body,
                                                                  headers=headers, redact=redact)
        now = loop.time()
        self.limits.update(route, major, answer_headers, now)
        if 200 <= status < 300:
            return payload
        error = classify_error(route, status, payload)
        if isinstance(error, FloodError):
            self.limits.limited(route, major, error.retry_after, bool((payload or {}).get("global")), now)
        raise error


def classify_error(route: str, status: int, body: Any) -> PlatformError:
    """Map a Discord error answer to the exception class that tells the caller what to do."""
    body = body if isinstance(body, dict) else {}
    code = body.get("code") if isinstance(body.get("code"), int) else None
    description = redact_secrets(f"{body.get('message') or f'HTTP {status}'}" + (f" (code {code})" if code else ""))
    if status == 429:
        retry_after = body.get("retry_after")
        retry_after = float(retry_after) if isinstance(retry_after, (int, float)) and retry_after >= 0 else 1.0
        scope = "global " if body.get("global") else ""
        return FloodError(retry_after, f"{scope}rate limited: {description}", method=route, status=status)
    if status >= 500 or status < 400:
        return RetryableError(description, method=route, status=status)
    if status == 404 and code == UNKNOWN_MESSAGE:
        return MessageNotFoundError(description, method=route, status=status)
    if code == INVALID_FORM_BODY and _field_error(body, "content") == "BASE_TYPE_MAX_LENGTH":
        return TooLongError(description, method=route, status=status)
    return PermanentError(description, method=route, status=status)


def _field_error(body: dict, field: str) -> Optional[str]:
    """The first error code Discord gives for ``field`` in a 50035 Invalid Form Body."""
    errors = ((body.get("errors") or {}).get(field) or {}).get("_errors") or []
    return errors[0].get("code") if errors and isinstance(errors[0], dict) else None
