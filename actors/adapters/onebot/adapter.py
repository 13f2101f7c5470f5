"""OneBotAdapter: one QQ account behind a OneBot v11 implementation (NapCat, LLOneBot, Lagrange.OneBot), reached
over the implementation's forward WebSocket, its reverse one (reverse.py), or HTTP (http_post.py): README.md beside
this file.

State (loop thread): the link (link.py; in http mode the POST server and the HTTP API client instead, and in
reverse mode the listener that accepts the link), ``self_id`` (the table's, or what get_login_info named), the account's
pace (account_pace.py), counters (``skipped``). What survives kill -9: the rows committed with the offset; the
offset itself holds the ids of the last messages committed (``RECENT_IDS``), which is what the conformance checks
read as "acknowledged"; and the day's count of the account's pace (``<name>#account-pace`` in the same offsets
table), committed before each message goes and restored when the adapter starts, so a restart never resets the
daily bound. The rest of the pace (the last minute's sends, the last gap) starts again: a restart takes longer
than a gap.

Intake. ``connect`` opens the link (the access token in ``Authorization: Bearer``; a refused token is a
PermanentError, which the kit shows in ``status`` and retries slowly) and asks ``get_login_info`` who the account
is. ``run_intake`` reads the pushed events: a message event that is input (inbound.skip_reason: the account's own
number, a person, in a group only when it @-mentions the account unless ``require_mention = false``) is committed
before the next event is read; ``meta_event`` heartbeats are the proof of life. OneBot acknowledges nothing and
replays nothing: an event pushed while no connection was open (the adapter down, the network cut) is lost to the
gateway. OneBot v11 has ``get_msg`` (one message by id) but no history to ask for what was missed, so nothing is
recovered after a reconnect; the README says so. A message id seen again (an implementation that pushes an event
twice, two connections) is stored once: the inbox dedups on ``<self_id>:<message_id>``.

Outbound. ``send_private_msg`` / ``send_group_msg`` by the chat's prefix, the answer quoting the user's message
(a ``reply`` segment) and its text as a ``text`` segment (never CQ code: a user's ``[CQ:...]`` in the agent's
answer stays text). ``delete_msg`` for deletes. Every send and delete waits for the account's pace first.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Optional

import aiohttp

from actors.adapters.errors import PermanentError, RetryableError, TooLongError
from actors.adapters.http_session import capped_body
from actors.adapters.intake_styles import StreamingAdapter
from actors.adapters.media_intake import AttachmentGone, AttachmentTooLarge
from actors.adapters.onebot.account_pace import AccountPace, DailyBoundReached, PaceRule
from actors.adapters.onebot.http_post import EventPostServer, HttpApi
from actors.adapters.onebot.inbound import event_from_raw, skip_reason
from actors.adapters.onebot.link import Link
from actors.adapters.onebot.reverse import ReverseListener
from actors.messages import Attachment, MessageEvent, PlatformOp
from supervision.http_serving import http_limits
from storage import StorageError

RECENT_IDS = 32            # message ids kept in the offset
PACE_KEY = "{}#account-pace"   # the offsets row that holds the day's count, beside the adapter's own (<name>)
REVERSE_WAIT_S = 30.0      # an intake attempt waits this long for the implementation to connect (reverse mode)
DOWNLOAD_TIMEOUT_S = 60.0


class OneBotAdapter(StreamingAdapter):
    def __init__(self):
        super().__init__()
        self.self_id = ""
        self.nickname = ""
        self.skipped = 0
        self._link: Optional[Link] = None
        self._listener: Optional[ReverseListener] = None
        self._post_server: Optional[EventPostServer] = None
        self._api: Optional[HttpApi] = None
        self._recent: Optional[list] = None    # the message ids the offset names (from the committed one on)
        self._pace: Optional[AccountPace] = None
        self._pace_lock: Optional[asyncio.Lock] = None
        self._pace_restored = False
        self._http: Optional[aiohttp.ClientSession] = None

    # -------------------------------------------------------------------------------------------------- intake
    def normal_silence_s(self) -> float:
        # The implementation's heartbeat is the proof of life: two missed, plus a margin, is a zombie.
        return 2 * float(self.settings["heartbeat_interval_s"]) + 15.0

    def _new_link(self) -> Link:
        return Link(self.report_progress, float(self.settings["action_timeout_s"]))

    async def connect(self) -> None:
        await self.disconnect()
        # The table's account until get_login_info names it: an event POSTed meanwhile is held to it.
        self.self_id = self.self_id or str(self.settings["self_id"]).strip()
        if self.settings["mode"] == "http":
            await self._start_post_server()
        elif self.settings["mode"] == "reverse":
            self._link = await self._reverse_link()
        else:
            self._link = await self._new_link().open_forward(self.settings["url"], self.settings["access_token"])
        info = await self._call("get_login_info", {})
        account = str(info.get("user_id", "")) if isinstance(info, dict) else ""
        if not account.isdigit():
            raise PermanentError("get_login_info named no account", method="get_login_info")
        wanted = str(self.settings["self_id"]).strip()
        if wanted and wanted != account:
            raise PermanentError(f"the implementation is logged in as {account}, not {wanted} (option self_id)",
                                 method="get_login_info")
        self.self_id, self.nickname = account, str(info.get("nickname") or "")
        await self._restored_pace()     # the day's count of an earlier life shows in `status` from the start

    async def _reverse_link(self) -> Link:
        """The implementation's connection to the adapter's server (started by the first attempt, kept after)."""
        if self._listener is None:
            s = self.settings
            self._listener = ReverseListener(
                s["listen_host"], int(s["listen_port"]), s["listen_path"], s["access_token"], str(s["self_id"]),
                self._new_link, lambda reason: self.say(logging.WARNING, "%s: %s", self.name, reason),
                http_limits(self.config))
        if self._listener.port is None:
            await self._listener.start()
            self.say(logging.INFO, "%s: listening for the implementation at %s", self.name, self._listener.url)
        try:
            return await self._listener.accepted(REVERSE_WAIT_S)
        except asyncio.TimeoutError:
            refused = self._listener.refusals.last
            raise RetryableError(f"the implementation has not connected to {self._listener.url} within "
                                 f"{REVERSE_WAIT_S:g} s" + (f" (the last attempt was refused: {refused})"
                                                             if refused else ""), method="websocket") from None

    async def disconnect(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            await link.close()
        if self.intake_stopped:
            await self._close_servers()

    async def _close_servers(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
        server, self._post_server = self._post_server, None
        if server is not None:
            await server.stop()

    async def run_intake(self, emit) -> None:
        if self.settings["mode"] == "http":
            await asyncio.get_running_loop().create_future()   # the POST server delivers; serve until cancelled
        link = self._link
        if link is None:
            raise PermanentError("the WebSocket is not open")
        while True:
            await self._take(await link.next_event(), emit)

    async def _take(self, raw: Any, emit) -> None:
        """Commit one event if it is input (row and offset in one transaction), before the next is read: a kill -9
        after this loses nothing that was pushed before it."""
        if isinstance(raw, dict) and raw.get("post_type") == "meta_event":
            return            # heartbeat, lifecycle: its arrival was the proof of life
        if skip_reason(raw, self.self_id, self.settings["require_mention"]) is not None:
            self.skipped += 1
            return
        if self._recent is None:
            self._recent = list(self.offset.get("recent", [])) if isinstance(self.offset, dict) else []
        self._recent = (self._recent + [f"{self.self_id}:{raw.get('message_id')}"])[-RECENT_IDS:]
        await emit([raw], {"recent": list(self._recent)})

    async def _start_post_server(self) -> None:
        """HTTP mode: the server the implementation POSTs events to (started by the first attempt, kept after),
        and the client of its HTTP API."""
        s = self.settings
        if self._api is None:
            self._api = HttpApi(s["api_url"], s["access_token"], float(s["action_timeout_s"]))
        if self._post_server is not None:
            return
        lock = asyncio.Lock()

        async def deliver(event: Any) -> None:
            self.report_progress()           # a signed POST (a heartbeat, or any event) is proof of life
            async with lock:                 # one transaction at a time, in the order the POSTs came
                await self._take(event, self.intake.emit)

        def on_error(reason: str) -> None:
            self.say(logging.WARNING, "%s: an event POST was not stored (the implementation does not send it "
                     "again): %s", self.name, reason)
        server = EventPostServer(s["listen_host"], int(s["listen_port"]), s["post_path"], secret=s["secret"],
                                 self_id=lambda: self.self_id or str(s["self_id"]), deliver=deliver,
                                 on_error=on_error, limits=http_limits(self.config),
                                 on_refused=lambda reason: self.say(logging.WARNING, "%s: %s", self.name, reason))
        await server.start()
        self._post_server = server
        self.say(logging.INFO, "%s: taking event POSTs at http://%s:%s%s", self.name, s["listen_host"], server.port,
                 s["post_path"])

    def normalise(self, raw: Any) -> MessageEvent:
        return event_from_raw(raw, self.name, self.profile, self.self_id)

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        if not attachment.ref.startswith(("http://", "https://")):
            raise AttachmentGone("the segment names no URL")
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S))
        async with self._http.get(attachment.ref) as resp:
            if resp.status in (403, 404, 410):
                raise AttachmentGone(f"HTTP {resp.status}")
            resp.raise_for_status()
            return await capped_body(resp, cap, lambda size: AttachmentTooLarge(size, cap))

    # ------------------------------------------------------------------------------------------------ outbound
    def _rule(self) -> PaceRule:
        s = self.settings
        return PaceRule(float(s["messages_per_minute"]), float(s["min_gap_s"]), float(s["gap_jitter_s"]),
                        int(s["daily_limit"]))

    def _account_pace(self) -> AccountPace:
        """The account's pace (loop thread: made by the first message)."""
        if self._pace is None:
            self._pace = AccountPace(self._rule())
            self._pace_lock = asyncio.Lock()
        return self._pace

    async def _restored_pace(self) -> AccountPace:
        """The account's pace, with the day's count an earlier life committed (loop; read once per life)."""
        pace = self._account_pace()
        if not self._pace_restored:
            store = await self.ready_storage()
            saved = await store.inbox.get_offset(PACE_KEY.format(self.name))
            if isinstance(saved, dict) and isinstance(saved.get("day"), int) and isinstance(saved.get("sent"), int):
                pace.restore(saved["day"], saved["sent"], time.time())
            self._pace_restored = True
        return pace

    async def _commit_day(self, pace: AccountPace) -> None:
        """The day's count committed before the message it counts goes: a kill -9 after the send cannot forget it
        (one after the commit and before the send counts a message that never went: the safe side)."""
        day, sent = pace.day()
        try:
            await (await self.ready_storage()).inbox.set_offset(PACE_KEY.format(self.name), {"day": day, "sent": sent})
        except StorageError as exc:
            raise RetryableError(f"the day's count could not be stored ({exc}); nothing was sent",
                                 method="pace") from None

    async def _paced(self, action: str, params: dict) -> Any:
        """Run an action that shows in a chat once the account's pace allows; the lock keeps the account's
        messages in one queue, so a burst across chats waits its turn rather than going at once."""
        pace = await self._restored_pace()
        async with self._pace_lock:
            loop = asyncio.get_running_loop()
            try:
                while (wait := pace.wait_s(loop.time(), time.time())) > 0:
                    pace.waited_s += wait
                    await asyncio.sleep(wait)
            except DailyBoundReached as exc:
                raise PermanentError(str(exc), method=action) from None
            pace.spend(loop.time(), time.time())
            await self._commit_day(pace)
            try:
                return await self._call(action, params)
            finally:   # failed or not, it may have reached QQ: the next one keeps its distance from now
                pace.accepted(loop.time())

    async def _call(self, action: str, params: dict) -> Any:
        link = self._api if self.settings["mode"] == "http" else self._link
        if link is None:
            raise RetryableError("not connected to the implementation", method=action)
        return await link.call(action, params)

    async def send_message(self, op: PlatformOp) -> str:
        if len(op.text) > self.pacing.text_limit:
            raise TooLongError(f"{len(op.text)} characters, over {self.pacing.text_limit}")
        kind, _, target = op.chat_id.partition(":")
        if kind not in ("private", "group") or not target.isdigit():
            raise PermanentError(f"{op.chat_id!r} is no OneBot chat (private:<qq> or group:<number>)")
        message = []
        if op.reply_to and (quoted := op.reply_to.rpartition(":")[2]).lstrip("-").isdigit():
            message.append({"type": "reply", "data": {"id": quoted}})
        message.append({"type": "text", "data": {"text": op.text}})
        action = "send_private_msg" if kind == "private" else "send_group_msg"
        params = {"user_id" if kind == "private" else "group_id": int(target), "message": message}
        data = await self._paced(action, params)
        if data is None:      # "async": accepted and queued; no id to give. Sent, so not to be sent again.
            return f"{self.self_id}:async:{op.op_id[:32]}"
        message_id = data.get("message_id") if isinstance(data, dict) else None
        if message_id is None:
            raise PermanentError("the implementation answered no message_id", method=action)
        return f"{self.self_id}:{message_id}"

    async def delete_message(self, op: PlatformOp) -> None:
        message_id = str(op.message_id or "").rpartition(":")[2]
        if not message_id.lstrip("-").isdigit():
            raise PermanentError(f"delete: {op.message_id!r} is no OneBot message id")
        await self._paced("delete_msg", {"message_id": int(message_id)})

    def status_note(self) -> str:
        where = {"http": self.settings["api_url"], "reverse": self._listener.url if self._listener else None}.get(
            self.settings["mode"]) or self.settings["url"]
        pace = self._pace       # made on the loop; read here as it stands
        shown = pace.status() if pace is not None else f"{self._rule().describe()}; 0 sent today"
        return f"account {self.self_id or '?'} via {where}; pace {shown}"

    async def close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.close()
        await self.disconnect()
        await self._close_servers()
        api, self._api = self._api, None
        if api is not None:
            await api.close()
