"""DiscordAdapter: one bot token; the gateway WebSocket for intake, REST for replies (actors/adapters/discord/README.md).

Why no client library: hikari can be pointed at another REST base (``rest_url``) and discord.py only by overwriting
class attributes (``Route.BASE``, ``DiscordWebSocket.DEFAULT_GATEWAY``), the monkey-patching of internals the project
does not do. Neither fits the intake's promise either: both advance the sequence number as a dispatch arrives,
hand the message to a listener and move on, and keep the session in memory only, so a process killed -9 starts a
fresh session and whatever Discord sent meanwhile is gone. Here the session id and the sequence number are the
adapter's committed offset, advanced only once a message is durable, and every send carries a ``nonce`` taken
from the ledger. The protocol is small (gateway.py, rest.py), so it is spoken directly with aiohttp.

Intake. ``GatewayLink`` keeps the session across connections (heartbeats, zombie detection, resume, op 7 / op 9,
the close codes that refuse the configuration). Each MESSAGE_CREATE that is input (events.is_input: a person's
message, in a guild channel only when it mentions or replies to the bot unless ``require_mention = false``) is
committed with the session's position (session id, seq, resume URL) as the adapter's offset, in one transaction;
a restarted adapter resumes from that position, and Discord replays whatever came after it: nothing that reached
the gateway while the adapter was dead is lost, and a replayed message is deduplicated by its id.

Outbound. Every send of a reply's part carries the key the sender derives from the ledger's obligation
(``PlatformOp.idempotency_key``) as its ``nonce`` with ``enforce_nonce``: a send repeated after a crash, or after
a lost answer, returns the message the first one made instead of a second one (pacing ``idempotent_send``), so a
reply never needs the re-sent mark here. Rate-limit buckets are kept by the REST client before a request leaves.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Optional

import aiohttp

from actors.adapters.intake_styles import StreamingAdapter
from actors.adapters.discord.components import (ANSWER_FIELD, Press, ack_body, action_rows, event_from_press,
                                                mention, press_of)
from actors.adapters.discord.inbound import event_from_message, is_input
from actors.adapters.presses import STORED, ButtonPresses, JudgedPress, press_outcome
from actors.approvals.answers import Answerer
from actors.adapters.gateway_link import GatewayLink
from actors.adapters.discord.client import DiscordREST
from actors.adapters.errors import PermanentError, PlatformError
from actors.messages import MessageEvent, PlatformOp
from actors.profiles.routes import wants_everything

CHANNEL_EVENTS = ("CHANNEL_CREATE", "THREAD_CREATE", "CHANNEL_UPDATE", "THREAD_UPDATE")


DISCORD_HEARTBEAT_S = 45.0   # Discord's heartbeat_interval is 41.25 s; a little more


class DiscordAdapter(ButtonPresses, StreamingAdapter):
    def __init__(self):
        super().__init__()
        self.init_presses()
        self.bot_id = ""
        self.skipped = 0                 # dispatches handled without becoming input
        self.link: Optional[GatewayLink] = None
        self.channel_types: dict[str, int] = {}   # from GUILD_CREATE and channel events, for dispatches without it
        self._rest: Optional[DiscordREST] = None
        self._ws_http: Optional[aiohttp.ClientSession] = None

    @property
    def routes_want_all(self) -> bool:
        """Some [[routes]] entry answers every message in its channels (``respond = "all"``)."""
        return wants_everything(self.intake.addressing.routes, self.name, self.settings.get("type", "discord"))

    # -------------------------------------------------------------------------------------------------- intake
    def normal_silence_s(self) -> float:
        # A connected gateway sends at least a heartbeat's ACK every heartbeat_interval (Discord: 41.25 s); the
        # link itself reconnects after one unacknowledged beat, so this bound is the last wall behind it.
        return 2 * DISCORD_HEARTBEAT_S + 15.0

    async def connect(self) -> None:
        me = await self._api().get_me()   # a wrong token fails here: 401, PermanentError (intake._refused)
        if not isinstance(me, dict) or not isinstance(me.get("id"), str):
            raise PermanentError("GET /users/@me answered no user", method="get_me")
        self.bot_id = me["id"]
        if self.link is None:
            url = self.settings["gateway_url"] or await self._api().gateway_url()
            self.link = GatewayLink(self.settings["token"], self.settings["intents"], url, self.say, self.name,
                                    report=self.intake.link_changed, alive=self.report_progress)
            self.link.restore(self.offset)   # the session of the previous life, resumed if Discord still has it

    async def disconnect(self) -> None:
        http, self._ws_http = self._ws_http, None
        if http is not None:
            await http.close()

    async def run_intake(self, emit) -> None:
        await self.disconnect()
        self._ws_http = aiohttp.ClientSession()
        link = self.link

        async def deliver(name: str, data: Any, seq: int) -> None:
            position = dict(link.position() or {}, seq=seq)
            if name == "READY":
                user = data.get("user") if isinstance(data, dict) else None
                self.bot_id = user["id"] if isinstance(user, dict) and isinstance(user.get("id"), str) else self.bot_id
                await emit([], position)   # a new session: the position to resume from after a restart
                return
            if name == "INTERACTION_CREATE":
                await self._take_press(data, position, emit)
                return
            self._learn_channels(name, data)
            if isinstance(data, dict) and "channel_type" not in data and data.get("channel_id") in self.channel_types:
                data = dict(data, channel_type=self.channel_types[data["channel_id"]])
            # A route answering everything in some channel needs the un-addressed messages too: it decides then.
            if is_input(name, data, self.bot_id, self.settings["require_mention"] and not self.routes_want_all):
                await emit([data], position)   # committed with the position that covers it, before seq moves
            else:
                self.skipped += 1
        await link.serve(self._ws_http, deliver)

    def _learn_channels(self, name: str, data: Any) -> None:
        if not isinstance(data, dict):
            return
        found = []
        if name == "GUILD_CREATE":
            found = [c for key in ("channels", "threads") for c in data.get(key) or [] if isinstance(c, dict)]
        elif name in CHANNEL_EVENTS:
            found = [data]
        for channel in found:
            if isinstance(channel.get("id"), str) and isinstance(channel.get("type"), int):
                self.channel_types[channel["id"]] = channel["type"]

    def normalise(self, raw: Any) -> MessageEvent:
        if isinstance(raw, dict) and ANSWER_FIELD in raw:
            return event_from_press(raw, self.name, self.profile)
        return event_from_message(raw, self.name, self.profile, self.bot_id)

    # ------------------------------------------------------------------------------------------- button presses
    async def _take_press(self, interaction: Any, position: dict, emit) -> None:
        """A press that may answer its question is stored with the gateway position that covers it (one
        transaction): a replay after a kill -9 is either before that commit (nothing stored: stored now) or the
        same row (``interaction:<id>``, the inbox's duplicate). Every press is then answered, off the intake."""
        press = press_of(interaction)
        if press is None:
            self.skipped += 1   # a slash command or a modal: none of ours
            return
        judged = await self.judge_press(interaction, Answerer(self.name, press.channel_id, press.user_id),
                                        press.custom_id, ANSWER_FIELD)
        if judged.kept:
            await emit([judged.raw], position)
        self.acknowledge_press(press.interaction_id, lambda: self._answer_press(press, judged))

    async def _answer_press(self, press: Press, judged: JudgedPress) -> None:
        """Within Discord's 3 s: a stored press is acknowledged (type 6) and the question edited once the session
        has decided; a press on a settled question turns the message into what became of it (type 7, buttons
        gone); any other press is told why, to the presser only (ephemeral)."""
        api = self._api()
        kind, text = press_outcome(judged, Answerer(self.name, press.channel_id, press.user_id), press.message_text,
                                   time.time(), mention)
        if kind != STORED:
            await api.answer_interaction(press.interaction_id, press.token, ack_body(kind, text))
            return
        try:
            await api.answer_interaction(press.interaction_id, press.token, ack_body(kind))
        except PlatformError as exc:   # past the 3 s (a press replayed after a restart): the edit still goes
            self.say(logging.INFO, "%s: a button press was not acknowledged (%s)", self.name, self.clean_error(exc))
        if judged.approval is None:   # a /model button: the session's reply says what it did
            return
        self.edit_when_settled(judged.approval.approval_id, press.message_text, lambda settled: api.edit_message(
            press.channel_id, press.message_id, settled, components=[]), mention)

    # ------------------------------------------------------------------------------------------------ outbound
    def _api(self) -> DiscordREST:
        if self._rest is None:
            self._rest = DiscordREST(self.settings["token"], self.settings["api_base_url"])
        return self._rest

    async def send_message(self, op: PlatformOp) -> str:
        components = action_rows(await self.question_buttons(op))
        message = await self._api().create_message(op.chat_id, op.text, nonce=op.idempotency_key,
                                                   reply_to=op.reply_to, components=components)
        return str(message["id"])

    async def edit_message(self, op: PlatformOp) -> None:
        components = action_rows(await self.question_buttons(op))   # a preview edited into the question
        await self._api().edit_message(op.chat_id, _message_id(op), op.text, components=components or None)

    async def delete_message(self, op: PlatformOp) -> None:
        await self._api().delete_message(op.chat_id, _message_id(op))

    async def send_typing(self, op: PlatformOp) -> None:
        await self._api().trigger_typing(op.chat_id)

    async def close(self) -> None:
        rest, self._rest = self._rest, None
        if rest is not None:
            await rest.close()


def _message_id(op: PlatformOp) -> str:
    if not (isinstance(op.message_id, str) and op.message_id.isascii() and op.message_id.isdigit()):
        raise PermanentError(f"{op.action}: {op.message_id!r} is no Discord message id")
    return op.message_id
