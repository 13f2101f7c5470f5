"""FakeDiscord: one aiohttp server with the REST API under ``/api/v10``, the gateway WebSocket at ``/gateway``
(and ``/gateway/resume``, the READY's resume_gateway_url), the control API and the in-process inspection helpers."""
from __future__ import annotations

import base64
import time
from typing import Optional

from aiohttp import web

from tests.fakes.discord import protocol as p
from tests.fakes.discord.gateway import GatewayMethods
from tests.fakes.discord.interactions import InteractionMethods
from tests.fakes.discord.objects import make_user
from tests.fakes.discord.ratelimits import DEFAULT_ROUTE_LIMITS, GLOBAL_LIMIT, RateLimiter
from tests.fakes.discord.rest import WRITE_ROUTES, RestMethods
from tests.fakes.discord.world import BOT_ID, OWNER_ID, WorldMethods, initial_world
from tests.fakes.harness import FakeServer, FaultScript, control_route

# A bot token has Discord's shape: base64 of the bot's user id, a timestamp part, an HMAC part.
DEFAULT_TOKEN = base64.b64encode(str(BOT_ID).encode()).decode().rstrip("=") + ".FAKE00.fake-discord-token-0000000000"
DEFAULT_LIMITS = {
    "content_limit": 2000, "time_scale": 1.0,           # time_scale multiplies every window below (not heartbeats)
    "heartbeat_interval": 41250,                         # ms, as sent in Hello
    "heartbeat_timeout_factor": 1.5,                     # no heartbeat for interval x this: closed with 4009
    "ack_heartbeats": True,                              # False: a zombied connection (heartbeats never ACKed)
    "identify_interval": 5.0,                            # max_concurrency 1: one Identify per 5 s, else op 9
    "session_timeout": 180.0,                            # a dropped session stays resumable this long
    "resume_buffer": 1000,                               # dispatches kept per session for replay
    "reconnect_grace": 3.0,                              # after op 7 / op 9 the fake closes (4000) if still open
    "nonce_window": 300.0,                               # enforce_nonce looks back this far
    "interaction_window": 3.0,                           # seconds a press waits for its callback (not scaled)
    "gateway_send_limit": 120, "gateway_send_window": 60.0,  # payloads per connection, else 4008
    "sharding_required": False,                          # True: Identify without num_shards >= 2 gets 4011
    "privileged_intents": p.INTENTS["MESSAGE_CONTENT"],  # enabled in the "Developer Portal" (else 4014)
    "route_limits": DEFAULT_ROUTE_LIMITS,                # route -> [requests, seconds]; merged, not replaced
    "global_limit": GLOBAL_LIMIT,                        # [requests, seconds] per bot
}


class FakeDiscord(RestMethods, InteractionMethods, GatewayMethods, WorldMethods, FakeServer):
    """A local Discord for one bot. ``limits`` (DEFAULT_LIMITS) may be given as keyword arguments."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, token: str = DEFAULT_TOKEN,
                 bot_username: str = "fake-gateway-bot", **limits):
        self.token, self.bot_username = token, bot_username
        super().__init__(port=port, state_file=state_file)
        self.init_gateway()
        self.faults = FaultScript(WRITE_ROUTES)
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        now = time.time()
        for session in self.state["sessions"].values():  # a restarted fake has no connections left
            if session["connected"]:
                session["connected"], session["disconnected_at"] = False, now

    def initial_state(self) -> dict:
        return initial_world(self.bot_username)

    # -- in-process API (injection and setup come from WorldMethods, gateway controls from GatewayMethods)
    def configure(self, **limits) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        with self._lock:
            for key, value in limits.items():
                if key == "route_limits":
                    unknown_routes = set(value) - set(DEFAULT_ROUTE_LIMITS)
                    if unknown_routes:
                        raise ValueError(f"unknown routes {sorted(unknown_routes)}")
                    merged = dict(self.limits["route_limits"])
                    merged.update({r: (int(n), float(s)) for r, (n, s) in value.items()})
                    self.limits[key] = merged
                elif key == "global_limit":
                    self.limits[key] = (int(value[0]), float(value[1]))
                elif key == "privileged_intents":
                    self.limits[key] = p.intent_bits(value)
                else:
                    self.limits[key] = type(DEFAULT_LIMITS[key])(value)
            self.limiter = RateLimiter(self.limits["route_limits"], self.limits["global_limit"],
                                       self.limits["time_scale"])

    def set_faults(self, **settings) -> None:
        """Replace the fault script (FaultScript.configure; ``methods`` are route names, default the writes:
        create_message, edit_message, delete_message, typing)."""
        with self._lock:
            self.faults.configure(**settings)

    def block(self, channel_id: int, blocked: bool = True) -> None:
        """Sends to the channel answer 403: 50007 in a DM (the user blocks the bot), else 50013."""
        with self.mutate() as state:
            state["channels"][str(int(channel_id))]["blocked"] = bool(blocked)

    def reset(self) -> None:
        """Back to the initial world; faults off, limits as configured. Live gateway connections are cut."""
        self.drop_gateway()
        with self._lock:
            self.faults.configure()
            self.configure()
            self.attached.clear()
            self.reset_state()

    def app_has_content_intent(self) -> bool:
        return bool(self.limits["privileged_intents"] & p.INTENTS["MESSAGE_CONTENT"])

    def application_flags(self) -> int:
        return sum(flag for intent, flag in p.APPLICATION_INTENT_FLAGS.items()
                   if self.limits["privileged_intents"] & intent)

    def application_object(self, state: dict) -> dict:
        return {"id": str(state["bot_id"]), "name": self.bot_username, "icon": None, "description": "",
                "summary": "", "type": None, "bot_public": True, "bot_require_code_grant": False,
                "verify_key": "0" * 64, "flags": self.application_flags(), "hook": True, "team": None,
                "owner": dict(state["users"].get(str(OWNER_ID)) or make_user(OWNER_ID, "owner")),
                "bot": dict(state["users"][str(state["bot_id"])]), "redirect_uris": [],
                "interactions_endpoint_url": None, "approximate_guild_count": len(state["guilds"])}

    # -- inspection
    @property
    def bot_id(self) -> int:
        return self.read(lambda s: s["bot_id"])

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/v10"

    def messages(self, channel_id: int, incoming: bool = False) -> list[dict]:
        """Stored messages of a channel, oldest first: the bot's only, unless ``incoming``. Each record has
        ``content``, ``history`` (every version with ``at``), ``deleted``, ``nonce``, ``reference``, ``mentions``."""
        records = self.read(lambda s: list(s["channels"].get(str(int(channel_id)), {}).get("messages", {}).values()))
        return [r for r in sorted(records, key=lambda r: r["id"]) if incoming or r["outgoing"]]

    def final_texts(self, channel_id: int) -> list[str]:
        return [r["content"] for r in self.messages(channel_id) if not r["deleted"]]

    def ops(self, channel_id: int, route: Optional[str] = None) -> list[dict]:
        """Every REST call the bot made on the channel, refused ones too: route, at, status, code, message_id."""
        ops = self.read(lambda s: s["channels"].get(str(int(channel_id)), {}).get("ops", []))
        return [o for o in ops if route is None or o["route"] == route]

    def channel(self, channel_id: int) -> dict:
        return self.read(lambda s: s["channels"][str(int(channel_id))]["channel"])

    def dm_channel_id(self, user_id: int) -> Optional[int]:
        return self.read(lambda s: s["dm_by_user"].get(str(int(user_id))))

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    def gateway_log(self, event: Optional[str] = None) -> list[dict]:
        """Connections, Identify, Resume, op 7 / op 9, closes (with the code and who closed) and received ops."""
        log = self.read(lambda s: s["gateway_log"])
        return [e for e in log if event is None or e["event"] == event]

    def sessions(self) -> list[dict]:
        """Each gateway session: session_id, seq, intents, shard, connected, invalidated, resumes, events."""
        return self.read(lambda s: list(s["sessions"].values()))

    def timeline(self, channel_id: int) -> dict:
        def select(s):
            entry = s["channels"][str(int(channel_id))]
            return {"channel": entry["channel"], "messages": sorted(entry["messages"].values(), key=lambda r: r["id"]),
                    "ops": entry["ops"], "blocked": entry["blocked"]}
        return self.read(select)

    # -- HTTP
    def add_routes(self, app: web.Application) -> None:
        self.add_rest_routes(app)
        self.add_gateway_routes(app)
        control_route(app, "POST", "/_control/inject", self._control_inject)
        control_route(app, "POST", "/_control/inject_edit", lambda body: self.inject_edit(**body))
        control_route(app, "POST", "/_control/inject_delete", lambda body: self.inject_delete(**body))
        control_route(app, "POST", "/_control/channels", self._control_add_channel)
        control_route(app, "GET", "/_control/channels", lambda _: {"channels": self.read(lambda s: [
            c["channel"] for c in s["channels"].values()])})
        control_route(app, "GET", "/_control/channels/{channel_id}", lambda _, channel_id: self.timeline(
            int(channel_id)))
        control_route(app, "GET", "/_control/stats", lambda _: self.stats())
        control_route(app, "GET", "/_control/gateway", lambda _: {"sessions": self.sessions(),
                                                                  "log": self.gateway_log()})
        control_route(app, "POST", "/_control/gateway/drop", lambda body: {"closed": self.drop_gateway(**body)})
        control_route(app, "POST", "/_control/gateway/reconnect", lambda body: {"sent": self.send_reconnect(**body)})
        control_route(app, "POST", "/_control/gateway/invalid_session",
                      lambda body: {"sent": self.send_invalid_session(**body)})
        control_route(app, "POST", "/_control/gateway/heartbeat", lambda body: {"sent": self.request_heartbeat(
            **body)})
        control_route(app, "POST", "/_control/faults", lambda body: self.set_faults(**body))
        control_route(app, "POST", "/_control/config", lambda body: self.configure(**body))
        control_route(app, "POST", "/_control/block", lambda body: self.block(**body))
        control_route(app, "POST", "/_control/manage_messages", lambda body: self.set_manage_messages(**body))
        control_route(app, "POST", "/_control/reset", lambda _: self.reset())

    def _control_inject(self, body) -> dict:
        items = body if isinstance(body, list) else body.get("messages", [body])
        return {"ok": True, "messages": [self.inject_message(**item) for item in items]}

    def _control_add_channel(self, body) -> dict:
        kind = body.pop("kind", "text")
        if kind == "text":
            return self.add_text_channel(**body)
        if kind == "thread":
            return self.add_thread(**body)
        if kind == "guild":
            return self.add_guild(**body)
        raise ValueError(f"kind must be text, thread or guild, not {kind!r}")

    async def on_stopping(self) -> None:
        self.drop_gateway()
