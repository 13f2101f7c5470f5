"""SlackAdapter: one Slack app in one workspace, Web API over HTTPS, events by Socket Mode or HTTP (actors/adapters/slack/README.md).

Why not slack-sdk: its Socket Mode clients own the connection's life (their own reconnect loop, monitor task and
backoff), which would run beside the base's intake loop (reconnect with backoff, "refused" on a bad token, status)
instead of inside it; and its Web API client adds retry handlers of its own, where a repeated chat.postMessage is a
second message. What the adapter needs of either is two HTTP calls, a WebSocket and four JSON frames, spoken here
with aiohttp (already a dependency), so every send is attempted exactly as the base decides.

Intake. Socket Mode (``inbound = "socket_mode"``, the default; socketmode.py): each envelope is acknowledged only
after its inbox row is committed, so one a kill -9 cut short is delivered again by Slack; a ``disconnect`` warning
moves to a new connection before the old one closes. Events API (``inbound = "events_api"``, events_http.py): each
signed request answered 200 only after its row is committed. Either way, a retry of an event already committed in
this life is skipped by its ``event_id`` before any write; the inbox's (channel, ts) dedup covers the rest (a retry
after a restart, the message/app_mention pair of one message).

Outbound. chat.postMessage (in ``thread_id``'s thread when the message answered was in one), chat.update,
chat.delete; the text escaped and bold rewritten as mrkdwn (mrkdwn.py). The base paces each channel (~1 op/s) and
waits out 429 ``Retry-After``; on top of that an app-wide budget keeps chat.update and chat.delete under their
Tier 3 limit (pacing ``app_edit_ops_per_s``), which no channel's lane can see alone. Slack has no idempotency key
for chat.postMessage and no way here to find a message whose answer was lost: such a send answers "ambiguous", and
the reply is sent again with the re-sent marker (the ledger records each send's intent and id, as everywhere).
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import time
from typing import Any, Optional

from actors.adapters.intake_styles import StreamingAdapter
from actors.adapters.liveness import SERVED_SILENCE_S
from actors.adapters.errors import PermanentError
from actors.adapters.presses import SETTLED, STORED, ButtonPresses, JudgedPress, press_outcome
from actors.adapters.slack.blocks import (ANSWER_FIELD, Press, event_from_press, mention, press_of, question_blocks,
                                          sections)
from actors.adapters.slack.client import SlackAPI
from actors.adapters.slack.inbound import event_from_callback, skip_reason
from actors.adapters.slack.events_http import EventsServer
from actors.adapters.slack.formatting import to_mrkdwn
from actors.adapters.slack.socketmode import SocketModeLink
from actors.approvals.answers import Answerer
from actors.messages import MessageEvent, PlatformOp
from supervision.http_serving import http_limits

REMEMBERED_EVENTS = 4096     # event ids committed in this life, for skipping retries without a write


class SlackAdapter(ButtonPresses, StreamingAdapter):
    def __init__(self):
        super().__init__()
        self.init_presses()
        self.bot_user_id = ""
        self.skipped = 0               # events acknowledged without becoming input (own posts, edits, no mention)
        self.retries_skipped = 0       # re-deliveries of events committed in this life
        self._intake_api: Optional[SlackAPI] = None
        self._app_api: Optional[SlackAPI] = None
        self._sender: Optional[SlackAPI] = None
        self._link: Optional[SocketModeLink] = None
        self._server: Optional[EventsServer] = None
        self._emit_lock: Optional[asyncio.Lock] = None
        self._committed: collections.OrderedDict = collections.OrderedDict()

    def on_start(self, args) -> None:
        super().on_start(args)
        if self.settings.get("per_user_in_groups") is not None:  # this app's own choice beats [sessions]
            self.per_user_in_groups = bool(self.settings["per_user_in_groups"])

    # -------------------------------------------------------------------------------------------------- intake
    def normal_silence_s(self) -> float:
        if self.settings["inbound"] == "events_api":
            return SERVED_SILENCE_S   # the kit probes the events server (liveness.py)
        # A ping goes after ping_interval_s with nothing received and its pong is progress (Slack's own pings too).
        return 2 * self.settings["ping_interval_s"] + 15.0

    def _client(self, token: str) -> SlackAPI:
        return SlackAPI(token, self.settings["base_url"])

    async def connect(self) -> None:
        self._intake_api = self._client(self.settings["bot_token"])
        me = await self._intake_api.auth_test()  # a revoked token fails here: PermanentError (intake._refused)
        self.bot_user_id = str(me.get("user_id") or "")
        if self.settings["inbound"] == "socket_mode":
            self._app_api = self._client(self.settings["app_token"])
            self._link = SocketModeLink(self._app_api, self._say_line, alive=self.report_progress,
                                        ping_interval_s=self.settings["ping_interval_s"])
            await self._link.open()

    async def disconnect(self) -> None:
        link, self._link = self._link, None
        server, self._server = self._server, None
        if link is not None:
            await link.close()
        if server is not None:
            await server.stop()
        for api in (self._app_api, self._intake_api):
            if api is not None:
                await api.close()
        self._app_api = self._intake_api = None

    def served_url(self) -> Optional[str]:
        server = self._server
        if server is None or server.port is None:
            return None
        return f"http://{self.settings['events_host']}:{server.port}{self.settings['events_path']}"

    async def run_intake(self, emit) -> None:
        self._emit_lock = asyncio.Lock()
        deliver = functools.partial(self._deliver, emit)
        if self.settings["inbound"] == "events_api":
            await self._serve_events(deliver)      # never returns
        else:
            await self._link.serve(deliver)        # returns only by raising: the intake reconnects

    async def _deliver(self, emit, payload: Any) -> None:
        """Store one event (or skip it); the platform is acknowledged when this returns."""
        if isinstance(payload, dict) and payload.get("type") == "block_actions":
            await self._take_press(emit, payload)
            return
        reason = skip_reason(payload, self.bot_user_id, self.settings["require_mention"])
        if reason is not None:
            self.skipped += 1
            return
        event_id = payload.get("event_id") if isinstance(payload, dict) else None
        if isinstance(event_id, str) and event_id in self._committed:
            self.retries_skipped += 1
            return
        async with self._emit_lock:  # one transaction at a time on the adapter's store
            await emit([payload], None)
        if isinstance(event_id, str):
            self._committed[event_id] = True
            while len(self._committed) > REMEMBERED_EVENTS:
                self._committed.popitem(last=False)

    async def _serve_events(self, deliver) -> None:
        if not self.settings["signing_secret"].strip():
            raise PermanentError("the Events API needs signing_secret: without it anyone could post events")
        def on_error(text: str) -> None:
            self.say(logging.WARNING, "%s: an event was not stored (%s); Slack will send it again", self.name,
                      self.clean_error(text))

        def on_refused(reason: str) -> None:
            self.intake.reject(f"Events API request refused: {reason}")

        self._server = EventsServer(self.settings["events_host"], self.settings["events_port"],
                                    self.settings["events_path"], self.settings["signing_secret"], deliver, on_error,
                                    on_refused, limits=http_limits(self.config))
        port = await self._server.start()
        self.say(logging.INFO, "%s: Events API listening on %s:%d%s", self.name, self.settings["events_host"], port,
                  self.settings["events_path"])
        await asyncio.get_running_loop().create_future()  # serve until the intake is cancelled: never returns

    def normalise(self, raw: Any) -> MessageEvent:
        if isinstance(raw, dict) and ANSWER_FIELD in raw:
            return event_from_press(raw, self.name, self.profile)
        return event_from_callback(raw, self.name, self.profile, self.bot_user_id)

    # ------------------------------------------------------------------------------------------- button presses
    async def _take_press(self, emit, payload: dict) -> None:
        """A press that may answer its question is stored before its envelope is acknowledged: one a kill -9 cut
        short is delivered again by Slack and is the same row (``action:<user>:<action_ts>``, the inbox's
        duplicate). Every press is then answered, off the intake."""
        press = press_of(payload)
        if press is None:
            self.skipped += 1   # another interaction (a shortcut, a select menu): none of ours
            return
        judged = await self.judge_press(payload, Answerer(self.name, press.channel_id, press.user_id), press.value,
                                        ANSWER_FIELD)
        if judged.kept:
            async with self._emit_lock:
                await emit([judged.raw], None)
        self.acknowledge_press(press.press_id, lambda: self._answer_press(press, judged))

    async def _answer_press(self, press: Press, judged: JudgedPress) -> None:
        """A stored press: the question updated once the session has decided; a press on a settled question: the
        message updated to what became of it (buttons gone); any other: told why, to the presser only."""
        kind, text = press_outcome(judged, Answerer(self.name, press.channel_id, press.user_id), press.message_text,
                                   time.time(), mention)

        async def settle(settled: str) -> None:
            await self._budgets.app_turn(self.pacing)   # chat.update and chat.delete: per app
            await self._api().update(press.channel_id, press.message_ts, settled, blocks=sections(settled))
        if kind == STORED and judged.approval is not None:   # (a /model button's: the session's reply says)
            self.edit_when_settled(judged.approval.approval_id, press.message_text, settle, mention)
        elif kind == SETTLED:
            await settle(text)
        else:
            await self._api().post_ephemeral(press.channel_id, press.user_id, text, thread_ts=press.thread_ts)

    def _say_line(self, level: int, text: str) -> None:
        self.say(level, "%s: %s", self.name, self.clean_error(text))

    # ------------------------------------------------------------------------------------------------ outbound
    def _api(self) -> SlackAPI:
        if self._sender is None:
            self._sender = self._client(self.settings["bot_token"])
        return self._sender

    async def _buttons(self, op: PlatformOp) -> tuple:
        """The question's buttons over Socket Mode only: with the Events API, Slack posts presses to an
        Interactivity URL the gateway does not serve, so a button there would do nothing; the question's words say
        how to answer by typing."""
        return await self.question_buttons(op) if self.settings["inbound"] == "socket_mode" else ()

    async def send_message(self, op: PlatformOp) -> str:
        text = to_mrkdwn(op.text)
        return await self._api().post_message(op.chat_id, text, thread_ts=op.thread_id,
                                              blocks=question_blocks(text, await self._buttons(op)))

    async def edit_message(self, op: PlatformOp) -> None:
        text = to_mrkdwn(op.text)
        blocks = question_blocks(text, await self._buttons(op))   # a preview edited into the question
        await self._budgets.app_turn(self.pacing)   # chat.update and chat.delete: per app
        await self._api().update(op.chat_id, _ts(op), text, blocks=blocks)

    async def delete_message(self, op: PlatformOp) -> None:
        await self._budgets.app_turn(self.pacing)   # chat.update and chat.delete: per app
        await self._api().delete(op.chat_id, _ts(op))

    async def close(self) -> None:
        sender, self._sender = self._sender, None
        if sender is not None:
            await sender.close()


def _ts(op: PlatformOp) -> str:
    if not op.message_id:
        raise PermanentError(f"{op.action}: no message ts")
    return str(op.message_id)
