"""QQ's WebSocket gateway: the protocol of Discord's (the kit's actors/adapters/gateway_link.py, whose ``GatewayLink``
keeps the session: Hello op 10, Identify op 2 with intents, heartbeats op 1 / op 11 with the last ``s``, Resume op 6
with the session id and that ``s``, Reconnect op 7, Invalid Session op 9, a zombie connection closed and resumed),
with what QQ does its own way:

* the token in Identify and Resume is the app access token as ``QQBot <token>``, asked of the token cache on every
  connection (a token expires within two hours; a resume hours later carries a fresh one); Identify names
  ``shard: [0, 1]``;
* the URL is the one ``GET /gateway`` names, opened as it is (no version or encoding query);
* the close codes: 4004 (the token was refused) drops the cached token and connects again with a new one; 4006
  (the session is gone), 4007 (an invalid seq) and 4900-4913 (QQ's internal errors) forget the session and
  Identify afresh; 4008 (sending too fast) and 4009 (the connection timed out) resume; 4001 / 4002 (the gateway
  could not read what was sent), 4010-4014 (shard, version or intents refused) and 4914 / 4915 (the bot is off
  the shelf or banned) raise ``PermanentError``: the adapter reports the refused configuration and asks again
  slowly.

``position()`` / ``restore()`` are the base class's: (session id, seq) through the adapter's committed offset, so a
restarted adapter resumes the session its previous life had and QQ replays what came while it was dead.
"""
from __future__ import annotations

from typing import Awaitable, Callable, Optional

from actors.adapters.gateway_link import IDENTIFY, RESUME, GatewayLink
from actors.adapters.errors import PermanentError

NOT_RETRYABLE = {4001: "invalid opcode", 4002: "invalid payload",
                 4010: "invalid shard", 4011: "sharding required (too many guilds for one connection)",
                 4012: "invalid API version", 4013: "invalid intents",
                 4014: "intents not granted to this bot (q.qq.com: the bot's event subscriptions)",
                 4914: "the bot is offline or sandbox-only: publish it, or use the sandbox API",
                 4915: "the bot is banned"}
TOKEN_REFUSED = 4004
FORGET_SESSION = {4006, 4007} | set(range(4900, 4914))


class QQGatewayLink(GatewayLink):
    """``QQGatewayLink(bearer, drop_token, intents, url, say, name, ...)``: ``bearer()`` is the current
    ``QQBot <token>``; ``drop_token()`` is called when the gateway refuses it."""

    def __init__(self, bearer: Callable[[], Awaitable[str]], drop_token: Callable[[], None], intents: int, url: str,
                 say, name: str = "qq", **kwargs):
        super().__init__("", intents, url, say, name, **kwargs)
        self._bearer, self._drop_token = bearer, drop_token

    def address(self, base: str) -> str:
        return base

    async def _open_session(self, ws) -> None:
        token = await self._bearer()
        if self.session_id is not None:
            self.resumes += 1
            await self._send(ws, RESUME, {"token": token, "session_id": self.session_id, "seq": self.seq or 0})
            return
        self.identifies += 1
        await self._send(ws, IDENTIFY, {"token": token, "intents": self.intents, "shard": [0, 1],
                                        "properties": {"$os": "linux", "$browser": "agent-gateway",
                                                       "$device": "agent-gateway"}})

    def _closed(self, code: Optional[int]) -> str:
        if code in NOT_RETRYABLE:
            raise PermanentError(f"the gateway closed the connection with {code}: {NOT_RETRYABLE[code]}",
                                 method="gateway", status=code)
        if code == TOKEN_REFUSED:
            self._drop_token()
            return "closed with 4004: the token was refused; connecting with a new one"
        if code in FORGET_SESSION:
            self.forget()
        return f"closed with {code}" if code is not None else "dropped"
