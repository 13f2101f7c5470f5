"""The session cell: one conversation, one turn at a time (G4), serialised by its own mailbox (a cell of a session
shard: supervision/cell.py).

State: the session key and current session record, the turn in flight (``Turn``) or none, whether a collect window
is open, whether intake is stopped (drain), the last turn's transcript for a minute (``RecentHistory``, timer history).

Phase (``SessionPhase``, read from that state so it cannot drift from it):
  IDLE -> COLLECTING        collect mode: the first rows wait for the window to close (timer "collect")
  IDLE | COLLECTING -> ANSWERING    a turn starts (the agent runs, or a command's reply is made)
  ANSWERING -> DELIVERING   the turn ended (TurnEnd, cancelled, failed): its consumer delivers the final text
  DELIVERING -> IDLE        ReplyDone (or the consumer failed for good): the row is done; the next one starts
Doorbells in ANSWERING and DELIVERING go to the busy mode; Passivate stops an IDLE session at once and any other
when it next comes back to IDLE with nothing left in the inbox.

Messages it takes:
  Started            open storage, recover what a crash interrupted (resumed up to [sessions] max_resumes times,
                     G8), then look at the inbox
  InboxDoorbell      new rows: start a turn if idle, else apply the busy mode (queue | interrupt | steer | collect)
  ConsumerReady      the turn's stream consumer is up: send it every event not yet sent
  ConsumerGone       the consumer died: ask for a new one and replay the turn's events (the ledger makes it idempotent)
  ReplyDone          the reply is delivered: the inbox row is done, the turn ends, the next row starts
  Passivate          stop when idle
  SessionCommand     an operator's stop (the turn answered now) or reset (now, or once the turn is delivered)
  AgentEvent, AgentFailed, AgentCancelled   from its agent run on the shard's loop (through the bridge); and
                     SessionToolCall, its start_background_task or create_watch call (what it does and the call's
                     result written at once: task_tool.py)
  TaskStop           a background task's session only (key ``<chat's key>.task-N``): its chat's /cancel N stops
                     the turn (timer task_deadline: its time bound does the same); its turn asks for its consumer
                     only once it ended, and its end is settled by tasks.py (delivered, or kept: fail closed)
Messages it sends: SpawnConsumer and ModelOutcome (to its shard), StreamBatch (to the consumer).
Tool approvals (approval_flow.py, docs/approvals.md): a run stopped before a guarded call (ApprovalNeeded, then
TurnEnd awaiting_approval) asks, and its turn ends with the question; an answer row (typed, or the deadline's own,
timer "approval_deadline") starts the turn that goes on from the paused step.

What survives kill -9, in the order it is written: the user's message in the transcript and ``begin_turn`` (before
the model is called); tool calls with their results (as they finish); the final answer (before its TurnEnd leaves);
the inbox row marked done (after the reply is delivered), then ``end_turn``. A restart reads them back in that order
(``recover``) and never answers one inbound message twice (G2). Each handler's writes are one part of its shard run's
transaction, committed before what it sent leaves the shard (supervision/cell_host.py).

Long because: the cell's whole state machine (intake, busy modes, turns, consumers, recovery) reads as one; the
parts that stand alone are apart already (operator_commands.py, session_commands.py, approval_flow.py).
"""
from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
from pathlib import Path

from actors.adapters.registry import reply_pacing
from actors.approvals.answers import parse_text_answer
from actors.agents.base import AgentRequest
from actors.memory.binding import memory_for_turn
from actors.hooks.points import hooks_for, turn_record, with_context
from actors.profiles.profiles import Profiles
from actors.media.speech import Speaker, voice_event, voice_reply
from actors.media.transcription import Transcriber, transcribe_all
from actors.messages import (AWAITING_APPROVAL, AgentCancelled, AgentEvent, AgentFailed, ApprovalNeeded, GatewayNotice,
                             InboxDoorbell, MessageEvent, ModelOutcome, ReplyFile, SessionArgs, SessionCommand,
                             SpawnConsumer, StreamBatch, ToolCallFinished, TurnEnd)
from common.chat_errors import user_facing_error
from common.redact import configured_secrets, redact
from actors.sessions import approval_flow, operator_commands, task_tool, tasks, turn as turns
from actors.sessions.commands import parse_command
from actors.sessions.history import RecentHistory
from actors.sessions.model_health import outcome_of_failure
from actors.sessions.session_commands import chosen_model, run_command
from storage import MediaCache, obligation_id
from storage.inbox import FINISHED_STATES, InboxState
from storage.sessions import SessionState
from supervision.storage_access import CellStoreUser
from supervision.cell import Cell
from common.logging_setup import key_hash
from common.config import setting

BATCH_INTERVAL_S = 0.05
MAX_CONSUMER_RESTARTS = 3
CONSUMER_WAIT_OUT_S = 2.0   # a consumer stopped by unavailable storage is asked for again after this


class SessionPhase(enum.Enum):
    IDLE = "idle"
    COLLECTING = "collecting"
    ANSWERING = "answering"
    DELIVERING = "delivering"


BUSY = (SessionPhase.ANSWERING, SessionPhase.DELIVERING)


class Session(CellStoreUser, Cell):
    uses_bridge = True

    def __init__(self):
        super().__init__()
        self.key, self.info = "", None
        self.turn: turns.Turn | None = None
        self.collect_until, self.passivate_when_idle = 0.0, False
        self.reset_wanted = False   # an operator's reset asked while a turn ran (operator_commands.py)
        self.agent, self.secrets = None, []   # the turn's agent; what no answer or transcript may hold (configured)
        self.history = RecentHistory(turns.HISTORY_EVENTS)   # the last turn's transcript, for a minute (history.py)
        self.model_choice: tuple = (None, None)   # (session id, the model /model chose there): chosen_model
        self.approval_due: float | None = None    # when the deadline timer set fires (approval_flow.arm)

    @property
    def phase(self) -> SessionPhase:
        if self.turn is None:
            return SessionPhase.COLLECTING if self.collect_until else SessionPhase.IDLE
        return SessionPhase.DELIVERING if self.turn.ended else SessionPhase.ANSWERING

    # ------------------------------------------------------------------------------------------------- start
    def on_start(self, args: SessionArgs) -> None:
        self.key = args.session_key
        self.resume_window_s = setting(self.config, "sessions", "resume_window_s")
        self.max_resumes = setting(self.config, "sessions", "max_resumes")
        self.on_config_changed(self.config)
        self.open_store()
        self.info = self.db(self.store.sessions.current(self.key))
        self.recover()
        self.pump()
        approval_flow.arm(self)   # questions waiting from an earlier life: their deadlines, as stored

    def on_config_changed(self, old: dict) -> None:
        """At start and on a reload: the next turn's profiles; a turn in flight keeps its agent, request and secrets."""
        self.collect_window_s = setting(self.config, "sessions", "collect_window_s")
        self.profiles = Profiles(self.config, test_hooks=self.debug_enabled())   # its agents are built on first use
        self.transcriber = Transcriber.from_config(self.config)   # voice notes as text, if configured
        self.speaker = Speaker.from_config(self.config)           # answers as voice notes, if configured
        self.secrets = list(dict.fromkeys(self.secrets + configured_secrets(self.config)))

    def on_stop(self) -> None:
        if self.turn is not None and self.turn.future is not None:
            self.turn.future.cancel()
        self.close_store()

    def recover(self) -> None:
        self.db(self.store.inbox.requeue_taken(self.key))
        if self.info is None:
            return
        rt = self.db(self.store.sessions.runtime(self.info.session_id))
        if not rt.resume_pending:
            return
        row = self.db(self.store.inbox.get(rt.resume_inbox_seq)) if rt.resume_inbox_seq else None
        transcript = self.db(self.store.sessions.load(self.info.session_id, last_n=turns.HISTORY_EVENTS * 2))
        if row is None or row.state in FINISHED_STATES:
            self.db(self.store.sessions.end_turn(self.info.session_id, rt.turn_token))
            return
        answer = turns.final_answer(transcript, rt.turn_token)
        if answer is not None:
            # The answer was written before the crash, but maybe not yet into the ledger: deliver it again through
            # the same obligation. Its consumer edits what is already on the platform and sends only the rest;
            # if the reply was delivered already, it finds the obligation done and says so.
            self.db(self.store.inbox.take(row.seq))
            files = turns.turn_files(transcript, rt.turn_token)
            if tasks.is_task_key(self.key):   # a task's: what its end decided (delivered, or kept: tasks.py)
                answer, files = tasks.delivery(self, answer, "complete", files)
            self.reply_turn([row.seq], MessageEvent.from_payload(row.payload), answer, turn_id=rt.turn_token,
                            files=files)
            return
        # A resume stopped by a full disk was not the turn's fault: it does not use up a resume.
        claimed = self.db(self.store.sessions.claim_resume(self.info.session_id, self.max_resumes,
                                                           again=self.after_outside_cause))
        fresh = rt.resume_started_at is not None and time.time() - rt.resume_started_at < self.resume_window_s
        self.db(self.store.inbox.take(row.seq))
        event = MessageEvent.from_payload(row.payload)
        if claimed is not None and fresh:
            self.log.warning("resuming the turn interrupted by a restart (inbox #%d, resume %d of %d)", row.seq,
                             claimed.resume_attempts, self.max_resumes, extra=self.log_fields(turn=rt.turn_token))
            self.db(self.store.sessions.count_recovery(self.info.session_id, resumed=True))
            if not approval_flow.resume(self, [row.seq], event, rt.turn_token, transcript):
                self.start_agent_turn([row.seq], event, turn_id=rt.turn_token, resumed=True)
        else:
            why = (f"it was cut {self.max_resumes + 1} times" if claimed is None else
                   "it is older than the resume window")
            self.log.error("not resuming inbox #%d: %s", row.seq, why, extra=self.log_fields(turn=rt.turn_token))
            # Quoted: in a busy chat "this message" would not say which one. Written to the transcript first, as an
            # answer is: the history shows it, and a crash before it is delivered delivers it then (above).
            notice = (turns.GAVE_UP_TEXT if claimed is None else turns.RESTARTED_TEXT).format(
                quote=turns.quote(event.text), times=turns.times(self.max_resumes + 1))
            self.db(self.store.sessions.append(self.info.session_id,
                                               [turns.assistant_event(rt.turn_token, notice, "gave_up", notice)]))
            self.db(self.store.sessions.count_recovery(self.info.session_id, resumed=False))
            files = ()
            if tasks.is_task_key(self.key):   # a task given up on: failed, said in its chat if still its own
                notice, files = tasks.delivery(self, notice, "gave_up", ())
            self.reply_turn([row.seq], event, notice, turn_id=rt.turn_token, files=files)

    # ------------------------------------------------------------------------------------------------ intake
    def on_InboxDoorbell(self, message: InboxDoorbell, sender) -> None:
        if self.phase not in BUSY:
            self.pump()
        else:
            self.while_busy()

    def on_SessionCommand(self, message: SessionCommand, sender) -> None:
        """An operator's stop or reset (`sessions stop|reset ID`, the console): as /stop and /new do it."""
        self.send(sender, operator_commands.in_cell(self, message, self.phase is SessionPhase.ANSWERING,
                                                    self.phase in BUSY))
        self.pump()   # an idle session reset now: nothing changes; rows that waited for nothing start

    def busy_mode(self, event: MessageEvent | None = None) -> str:
        if event is not None and event.internal:
            return "queue"   # a scheduled run never interrupts, steers or joins a user's turn: it waits its own
        return self.profiles.get(event.source.profile if event is not None else None).busy_mode

    def pump(self) -> None:
        """Start the next turn if nothing runs: the inbox, not the doorbell, says what there is to do."""
        if self.phase in BUSY or self.intake_stopped or self._exiting:
            return
        if self.reset_wanted:
            operator_commands.reset_now(self)
        rows = self.db(self.store.inbox.rows_in_state(self.key, (InboxState.RECEIVED,)))
        if not rows:
            if self.passivate_when_idle:
                self.stop_self(clean=True)
            return
        first = MessageEvent.from_payload(rows[0].payload)
        if self.busy_mode(first) == "collect" and turns.collectable(first):
            now = time.time()
            if not self.collect_until:
                self.collect_until = now + self.collect_window_s
            if now < self.collect_until:
                self.after(self.collect_until - now, "collect")
                return
            self.collect_until = 0.0
            rows = [r for r in rows if turns.collectable(MessageEvent.from_payload(r.payload))] or rows[:1]
        else:
            rows = rows[:1]
        for row in rows:
            self.db(self.store.inbox.take(row.seq))
        events = [MessageEvent.from_payload(r.payload) for r in rows]
        self.start_from_rows([r.seq for r in rows], events)

    def on_timer_collect(self, _data) -> None:
        self.pump()

    def start_from_rows(self, seqs: list, events: list) -> None:
        event = events[-1]
        # Read each turn, not kept: the operator may have suspended (or resumed) the session since the last one.
        current = self.db(self.store.sessions.current(self.key))
        if current is not None and current.state == SessionState.SUSPENDED:
            self.reply_turn(seqs, event, "This conversation is suspended by the gateway operator; "
                                         "messages are not answered until it is resumed.")
            return
        self.info = current or self.db(self.store.sessions.get_or_create(self.key, dict(vars(event.source))))
        if tasks.is_task_key(self.key):   # a background task's prompt: never a command (tasks.py)
            tasks.run(self, seqs, event)
            return
        if len(events) == 1 and approval_flow.take_answer(self, seqs, event):
            return
        command = parse_command(event.text) if len(events) == 1 else None
        if command is not None:
            run_command(self, command, seqs, event)
            return
        if len(events) > 1:
            merged = "\n".join(e.text for e in events)
            event = MessageEvent(event.source, merged, event.platform_message_id, event.received_at)
        self.start_agent_turn(seqs, event, user_events=list(zip(seqs, events)))

    def while_busy(self) -> None:
        """A message arrived while a turn runs. /stop and /new act at once, wherever they are among the waiting rows
        (a message queued before them keeps its turn); the busy mode decides for the first other rows, and once a
        row waits for the next turn everything after it waits too, in order."""
        rows = self.db(self.store.inbox.rows_in_state(self.key, (InboxState.RECEIVED,)))
        waiting = False
        for row in rows:
            event = MessageEvent.from_payload(row.payload)
            command = parse_command(event.text)
            if command is not None and command.name in ("stop", "new"):
                if command.name == "stop":
                    self.db(self.store.inbox.take(row.seq))
                    self.db(self.store.inbox.done(row.seq))
                    self.interrupt("stopped")
                else:
                    self.interrupt("interrupted")   # the /new itself runs after the turn, in order
                return
            if waiting or command is not None or parse_text_answer(event.text) is not None:
                waiting = True   # other commands, and answers to a tool's approval, wait for the turn, in order
                continue
            mode = self.busy_mode(event)
            if mode == "interrupt":
                self.interrupt("interrupted")
                return
            if mode == "steer" and getattr(self.agent, "supports_steer", False) and self.turn.steer is not None:
                self.db(self.store.inbox.take(row.seq))
                self.db(self.store.sessions.append(self.info.session_id,
                                                   [turns.user_event(self.turn.turn_id, event, row.seq)]))
                self.bridge.call(self.turn.steer.put_nowait, turns.steer_item(event))
                self.db(self.store.inbox.done(row.seq))
                continue
            waiting = True   # queue and collect: it waits for the next turn

    def interrupt(self, reason: str) -> None:
        turn = self.turn
        if self.phase is SessionPhase.ANSWERING and turn.future is not None and not turn.interrupted:
            turn.interrupted = reason
            turn.future.cancel()

    # ------------------------------------------------------------------------------------------------- turns
    def start_agent_turn(self, seqs: list, event: MessageEvent, turn_id: str | None = None, resumed: bool = False,
                         user_events: list | None = None, continuation=None) -> None:
        turn = self.turn = turns.Turn(turn_id or turns.new_turn_id(), seqs, event, continuation=continuation,
                                      background=tasks.is_task_key(self.key))
        sid = self.info.session_id
        transcript = self.history.read(sid, lambda since: self.db(self.store.sessions.load(
            sid, last_n=turns.HISTORY_EVENTS, since_seq=since)), time.monotonic())
        if continuation is not None and not resumed:   # its answer is in the transcript: no user message
            self.db(self.store.sessions.begin_turn(sid, turn.turn_id, seqs[-1]))
        elif not resumed:
            # A crash between this append and begin_turn requeues the row: it must not be written twice.
            fresh = turns.unrecorded_user_events(transcript, turn.turn_id, user_events or [(seqs[-1], event)])
            if fresh:
                transcript = turns.with_appended(transcript, fresh, self.db(self.store.sessions.append(sid, fresh)))
            for seq in seqs[:-1]:  # merged rows: their text is in the transcript, the last row carries the turn
                self.db(self.store.inbox.done(seq))
            self.db(self.store.sessions.begin_turn(sid, turn.turn_id, seqs[-1]))
        if self.history.keep(sid, transcript, time.monotonic()):
            self.after(self.history.keep_s, "history")
        # The turn's profile decides its persona, its agent (model, tools) and its memory: actors/profiles, memory.
        profile = self.profiles.get(event.source.profile)
        self.agent = self.profiles.agent(profile.name, chosen_model(self))   # /model's choice: model_choice.py
        prompt, memory = memory_for_turn(self, profile, event.source)   # the persona, then what it remembers
        request, with_media = turns.agent_request(transcript, turn, event, prompt, memory,
                                                  MediaCache(Path(self.config["gateway"]["state_dir"]) / "media"))
        request = dataclasses.replace(request, session_tools=task_tool.binding(self, turn),
                                      **tasks.bounds(profile, turn),
                                      **approval_flow.request_fields(profile, continuation, transcript))
        self.db(self.store.sessions.put_request(sid, turn.turn_id,
                                                turns.request_record(transcript, prompt, event.source.profile)))
        if not turn.background:
            self.ask_consumer(turn)
        else:   # a task's reply is asked for once it ended (nothing shows before); its time is bounded (tasks.py)
            tasks.arm_deadline(self, turn)
        pacing = reply_pacing(self.config, event.source.platform, turns.platform_type(self.config, event.source))
        speaker = turns.turn_speaker(self.speaker, profile, transcript, turn, pacing.sends_voice)
        turn.future = self.bridge.submit(self._run_agent(self.agent, turn.turn_id, request, with_media, speaker))

    def on_timer_approval_deadline(self, _data) -> None:
        approval_flow.deadline(self)

    def on_timer_task_deadline(self, turn_id) -> None:
        tasks.deadline(self, turn_id)

    def on_TaskStop(self, message, sender) -> None:
        """``/cancel N`` in the task's chat: its turn stops as /stop stops one (tasks.py)."""
        self.interrupt("stopped")

    def on_timer_history(self, _data) -> None:
        if (left := self.history.expire(time.monotonic())) is not None:
            self.after(left, "history")

    def reply_turn(self, seqs: list, event: MessageEvent, text: str, turn_id: str | None = None,
                   files: tuple = ()) -> None:
        """A reply that needs no model (commands, notices, an answer written before a crash, with the files its
        tools made), delivered through the same ledger path."""
        turn = self.turn = turns.Turn(turn_id or turns.new_turn_id(), seqs, event, kind="command")
        for file in files:
            self.push(turn, ReplyFile(file))
        self.push(turn, TurnEnd("complete", text))
        turn.ended, turn.final_text = True, text
        self.ask_consumer(turn)

    async def _run_agent(self, agent, turn_id: str, request: AgentRequest, with_media: tuple | None = None,
                         speaker: Speaker | None = None) -> None:
        try:
            if with_media is not None:   # Pillow and file reads in a thread: the shard's other cells keep running
                transcript, _prompt, media, turn = with_media
                notes = (await transcribe_all(self.transcriber, turns.turn_attachments(transcript, turn), media)
                         if self.transcriber is not None else None)
                messages = await asyncio.to_thread(turns.model_messages, *with_media, notes)
                request = dataclasses.replace(request, messages=messages)
            request = await with_context(hooks_for(self.config), self.key, request, self.bridge.post)  # plugins
            async for event in agent.run(request):
                if isinstance(event, TurnEnd) and speaker is not None:   # spoken before the end: a part after the text
                    voice = await voice_reply(speaker, redact(event.final_text or "", self.secrets), request.media,
                                              self.log)
                    if voice is not None:
                        self.bridge.post(AgentEvent(turn_id, ReplyFile(voice)))
                self.bridge.post(AgentEvent(turn_id, event))
        except asyncio.CancelledError:
            self.bridge.post(AgentCancelled(turn_id))
            raise
        except Exception as exc:  # noqa: BLE001 - shown to the chat, redacted, and logged in full
            self.bridge.post(AgentFailed(turn_id, exc))

    # The agent run's items, back from the loop: each is for the turn it names, taken only while that turn
    # is ANSWERING (an item of an earlier turn, or one that comes after the turn ended, is dropped).
    def answering(self, item) -> turns.Turn | None:
        turn = self.turn
        return turn if self.phase is SessionPhase.ANSWERING and turn.turn_id == item.turn_id else None

    def on_loop_AgentEvent(self, item: AgentEvent) -> None:
        if (turn := self.answering(item)) is None:
            return
        event = item.event
        if isinstance(event, ApprovalNeeded):
            approval_flow.needed(turn, event)
            return
        if isinstance(event, TurnEnd):
            turn.tokens = event.tokens
            self.tell_model(lambda endpoint: ModelOutcome(endpoint, True, at=time.time()))
            if event.reason == AWAITING_APPROVAL and turn.question is not None:
                approval_flow.paused(self, turn, event.final_text or turn.answer_text())
                return
            self.end_turn(event.final_text if event.final_text is not None else turn.answer_text(),
                          tasks.end_reason(event.reason), canned=event.canned)
            return
        if isinstance(event, ReplyFile) and event.file.kind == "voice":   # in the transcript before the answer is
            self.db(self.store.sessions.append(self.info.session_id, [voice_event(item.turn_id, event.file)]))
        if isinstance(event, ToolCallFinished):
            event = turns.redacted_tool_call(event, self.secrets)
            if event.call_id not in turn.recorded_calls:   # written already with what it made (task_tool.py)
                self.db(self.store.sessions.append(self.info.session_id, turns.tool_events(item.turn_id, event)))
            approval_flow.ran(self, turn, event)
        self.push(turn, event)
        for file in getattr(event, "files", ()):   # a tool's files: parts of the reply, after its text
            self.push(turn, ReplyFile(file))

    def on_loop_SessionToolCall(self, item) -> None:
        task_tool.on_call(self, item)   # start_background_task, create_watch: done and recorded at once

    def on_loop_AgentCancelled(self, item: AgentCancelled) -> None:
        if (turn := self.answering(item)) is not None:
            note = "(stopped)" if turn.interrupted == "stopped" else "(interrupted)"
            self.end_turn(turns.with_note(turn.answer_text(), note), turn.interrupted or "interrupted")

    def on_loop_AgentFailed(self, item: AgentFailed) -> None:
        if (turn := self.answering(item)) is not None:
            self.log.error("agent failed: %r", item.error, extra=self.log_fields(turn=turn.turn_id))
            notice = user_facing_error(item.error, self.secrets)
            self.tell_model(lambda endpoint: outcome_of_failure(endpoint, item.error, self.secrets))
            self.push(turn, GatewayNotice(notice, "error"))
            self.end_turn(turns.with_note(turn.answer_text(), notice), "error", error=notice)

    def tell_model(self, outcome_for) -> None:
        """Tell the shard how the turn's model service did (status shows it: model_health.py), when the turn's agent
        has one (the offline agent has none) and the outcome says something about it."""
        endpoint = getattr(self.agent, "endpoint", None)
        outcome = outcome_for(endpoint) if endpoint else None
        if outcome is not None:
            self.send(self.parent, outcome)

    def end_turn(self, final_text: str, reason: str, error: str | None = None, canned: bool = False) -> None:
        turn = self.turn
        final_text = redact(final_text, self.secrets)   # a model may repeat a key it saw: never to the chat
        turn.ended, turn.final_text = True, final_text
        # The answer is in the transcript before its TurnEnd leaves: after a crash, recover() sees the turn done.
        self.db(self.store.sessions.append(self.info.session_id,
                                           [turns.assistant_event(turn.turn_id, final_text, reason, error,
                                                                  canned)]))
        if turn.background:   # a task's result: delivered to its chat, or kept (tasks.py)
            tasks.deliver(self, turn, final_text, reason)
            return
        self.push(turn, TurnEnd(reason, final_text))
        self.send_batch()

    def push(self, turn: turns.Turn, event) -> None:
        turn.events.append(event)
        turn.unsent.append(event)
        if len(turn.unsent) == 1:
            self.after(BATCH_INTERVAL_S, "batch", turn.turn_id)

    def on_timer_batch(self, turn_id) -> None:
        if self.turn is not None and self.turn.turn_id == turn_id:
            self.send_batch()

    def send_batch(self) -> None:
        turn = self.turn
        if turn is None or turn.consumer is None or not turn.unsent:
            return
        self.send(turn.consumer, StreamBatch(turn.turn_id, turn.batch_seq, tuple(turn.unsent)))
        turn.batch_seq += 1
        turn.unsent = []

    # -------------------------------------------------------------------------------------------- consumers
    def ask_consumer(self, turn: turns.Turn) -> None:
        args = turns.consumer_args(turn, self.key, self.config)
        self.send(self.parent, SpawnConsumer(turns.consumer_id(turn, self.myAddress.epoch), args))

    def on_ConsumerReady(self, message, sender) -> None:
        turn = self.turn
        if turn is not None and message.turn_id == turns.consumer_id(turn, self.myAddress.epoch):
            turn.consumer = message.address
            self.send_batch()

    def on_ConsumerGone(self, message, sender) -> None:
        turn = self.turn
        if turn is None or message.turn_id != turns.consumer_id(turn, self.myAddress.epoch):
            return
        turn.consumer, turn.batch_seq, turn.unsent = None, 0, list(turn.events)  # the new one replays it all
        turn.consumer_attempts += 1
        if message.outside_cause:
            # Storage is unavailable (a full disk): not the reply's fault, and counting it would hand a reply that
            # cannot be recorded to the sweeper, which cannot record it either. Ask again later.
            self.after(CONSUMER_WAIT_OUT_S, "ask_consumer", (turn.turn_id, turn.consumer_attempts))
            return
        turn.consumer_restarts += 1
        if turn.consumer_restarts > MAX_CONSUMER_RESTARTS:
            self.log.error("the reply failed %d times; the sweeper keeps it", turn.consumer_restarts,
                           extra=self.log_fields(turn=turn.turn_id))
            # The last consumer died holding the reply's claim in this very process, which lives on: released,
            # the sweep takes it at its next pass (it never takes a live owner's claim).
            self.db(self.store.ledger.release(
                obligation_id(self.key, turns.inbound_ref(turn.event), turns.REPLY_SLOT), "its consumer died"))
            self.finish_turn(delivered=False)
            return
        self.ask_consumer(turn)

    def on_timer_ask_consumer(self, data) -> None:
        turn_id, attempt = data
        turn = self.turn
        if turn is not None and turn.turn_id == turn_id and turn.consumer_attempts == attempt and turn.consumer is None:
            self.ask_consumer(turn)

    def on_ReplyDone(self, message, sender) -> None:
        turn = self.turn
        if self.phase is SessionPhase.DELIVERING and message.turn_id == turn.turn_id:
            if not message.ok:
                self.log.error("reply not delivered: %s", message.detail, extra=self.log_fields(turn=turn.turn_id))
            self.finish_turn(delivered=message.ok)

    def log_fields(self, **more) -> dict:
        """Structured log fields: the session by its hash only (a raw key never reaches the log)."""
        return {"session": key_hash(self.key), "platform": self.key.split(".")[1] if self.key.count(".") else None,
                **more}

    def finish_turn(self, delivered: bool = True) -> None:
        turn, self.turn = self.turn, None
        # Done before end_turn: a crash between the two finds the row done and does not answer it again.
        self.db(self.store.inbox.done(turn.seqs[-1]))
        if self.info is not None:
            self.db(self.store.sessions.end_turn(self.info.session_id, turn.turn_id))
        fact = turns.turn_finished(turn.event, turn.events, delivered)
        self.report(fact)
        # One INFO line per turn, for an operator following the log (the metrics count the same facts).
        counted = {"tokens_in": turn.tokens[0], "tokens_out": turn.tokens[1]} if turn.tokens else {}
        self.log.info("turn %s in %.2fs%s", fact.outcome, fact.seconds, turns.tokens_shown(turn.tokens),
                      extra=self.log_fields(turn=turn.turn_id, outcome=fact.outcome, seconds=round(fact.seconds, 3),
                                            **counted))
        hooks_for(self.config).fire(self.bridge, "after_turn", turn_record(self.key, turn, delivered))
        self.pump()

    # ------------------------------------------------------------------------------------------- lifecycle
    def on_Passivate(self, message, sender) -> None:
        """Stop once idle: now if nothing runs, else when the inbox has nothing left after the running turn (the
        supervisor asks each session once, so a busy one must remember)."""
        if self.phase is SessionPhase.IDLE:
            self.stop_self(clean=True)
        else:
            self.passivate_when_idle = True

    def pending_work(self) -> int:
        return 1 if self.phase in BUSY else 0

    def state_name(self) -> str:
        return "busy" if self.phase in BUSY else "running"
