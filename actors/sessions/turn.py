"""One turn of a session, as plain data, and the pure functions around it (no actor needed to test them).

A turn answers one or more inbox rows (several when the collect mode merged them). It owns the stream events the
agent produced so far: if the turn's stream consumer dies, a new one is sent the whole list and, the delivery ledger
telling it which messages already exist, edits them into place instead of sending them again.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from actors.agents.base import AgentRequest
from actors.media.parts import user_content
from actors.media.speech import VOICE_EVENT, wants_voice_reply
from actors.sessions.chunking import close_open_fence
from actors.sessions.commands import parse_command
from actors.profiles.profiles import profile_stream_without_edits, profile_streams, profile_tool_progress
from actors.sessions.reply_status import status_reactions
from actors.approvals.answers import parse_text_answer
from actors.messages import (AWAITING_APPROVAL, ConsumerArgs, MessageEvent, OutgoingFile, TextDelta, ToolCallFinished,
                             TurnEnd, TurnFinished)
from common.redact import redact
from storage import MediaCache
from storage.sessions import TranscriptEvent

HISTORY_EVENTS = 60      # transcript events given to the model (most recent)
# What a chat is told when a message is not answered after restarts (``Session.recover``).
GAVE_UP_TEXT = ("I was interrupted {times} while answering your message \u201c{quote}\u201d and stopped trying, so "
                "as not to loop. Please send it again.")
GAVE_UP_PREFIX = GAVE_UP_TEXT.split("{times}")[0]
RESTARTED_TEXT = "I was restarted while answering your message \u201c{quote}\u201d. Please send it again."
REPLY_SLOT = "reply"     # the obligation slot of a turn's answer: id = hash(session key, inbound ref, slot)
# A turn's last TurnEnd reason -> the outcome /metrics counts it under.
OUTCOMES = {"complete": "done", "error": "failed", "interrupted": "interrupted", "stopped": "cancelled",
            AWAITING_APPROVAL: "done"}


def quote(text: str, limit: int = 60) -> str:
    """A message as one line of at most ``limit`` characters, for a notice that names it."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "\u2026"


def times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def new_turn_id() -> str:
    return uuid.uuid4().hex[:16]


def inbound_ref(event: MessageEvent) -> str:
    return f"{event.source.platform}:{event.platform_message_id}"


@dataclass
class Turn:
    turn_id: str
    seqs: list                       # inbox rows this turn answers (done together when the reply is delivered)
    event: MessageEvent              # the (last) inbound message: where the reply goes
    kind: str = "agent"              # agent | command
    started: float = field(default_factory=time.time)
    events: list = field(default_factory=list)     # every stream event so far, in order
    unsent: list = field(default_factory=list)     # events not yet batched to the consumer
    batch_seq: int = 0
    consumer: Any = None
    future: Any = None               # the agent task on the bridge loop
    steer: Any = None                # asyncio.Queue for steer mode
    ended: bool = False
    final_text: Optional[str] = None
    interrupted: bool = False
    consumer_restarts: int = 0      # consumers that crashed: past MAX_CONSUMER_RESTARTS the sweeper takes over
    consumer_attempts: int = 0      # every consumer asked for (names them uniquely)
    consumer_args: Optional[ConsumerArgs] = None   # made at the first ask for a consumer; every later one the same
    tokens: Optional[tuple] = None  # (prompt, completion) tokens the model service counted (TurnEnd.tokens)
    question: Any = None            # the ApprovalNeeded its run stopped at (approval_flow.py), asked at its TurnEnd
    continuation: Any = None        # what it goes on from after an answer (approval_flow.Continuation), if it does
    background: bool = False        # a background task's turn: its reply is its result, sent once (tasks.py)
    recorded_calls: set = field(default_factory=set)   # tool calls written with what they did (task_tool.py)

    def answer_text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))


def collectable(event: MessageEvent) -> bool:
    """Whether a waiting message joins the collect window's turn: a user's plain message. A command runs on its
    own, and so do a scheduled run's prompt (``internal``: never merged into what a user wrote) and an answer to a
    tool's approval (actors/sessions/approval_flow.py)."""
    return not event.internal and parse_command(event.text) is None and parse_text_answer(event.text) is None


def consumer_args(turn: Turn, session_key: str, config: dict) -> ConsumerArgs:
    """The turn's reply consumer's args, made once: a consumer started again after a crash gets the same."""
    if turn.consumer_args is None:
        turn.consumer_args = _consumer_args(turn, session_key, config)
    return turn.consumer_args


def consumer_id(turn: Turn, epoch: int) -> str:
    """Unique per shard process, session incarnation (its cell's epoch) and attempt: a consumer left from before a
    crash is never mistaken for ours."""
    return f"{turn.turn_id}.{os.getpid()}.{epoch}.{turn.consumer_attempts}"


def platform_type(config: dict, source) -> str:
    """The platform type of the adapter a message came from (``source.platform`` names the adapter)."""
    return config.get("adapters", {}).get(source.platform, {}).get("type", source.platform)


def _consumer_args(turn: Turn, session_key: str, config: dict) -> ConsumerArgs:
    source = turn.event.source
    adapter = source.platform
    return ConsumerArgs(
        turn_id=turn.turn_id, session_key=session_key, inbound_ref=inbound_ref(turn.event), adapter=adapter,
        platform=platform_type(config, source), chat_id=source.chat_id, thread_id=source.thread_id,
        chat_type=source.chat_type,
        profile=source.profile,
        # The profile's reply settings as the turn starts: a reload during the turn does not change how its reply
        # goes, even for a consumer started again after a crash.
        # A background task's result is sent once, complete: it shows nothing while it runs.
        stream=profile_streams(config, source.profile) and not turn.background,
        status_reactions=status_reactions(config, source.profile),
        tool_progress="off" if turn.background else profile_tool_progress(config, source.profile),
        stream_without_edits=profile_stream_without_edits(config, source.profile),
        # A scheduled run's message id is the gateway's own: there is no platform message to reply or react to.
        reply_to=None if turn.event.internal else turn.event.platform_message_id)


def user_event(turn_id: str, event: MessageEvent, seq: int) -> dict:
    payload = {"text": event.text, "inbound_seq": seq, "platform_message_id": event.platform_message_id,
               "user": event.source.user_name or event.source.user_id}
    if event.attachments:   # the cache keys keep their files from the sweep for as long as this event is kept
        payload["attachments"] = [dict(vars(a), ref="") for a in event.attachments]
    return {"role": "user", "kind": "message", "turn_id": turn_id, "payload": payload}


def unrecorded_user_events(transcript: list, turn_id: str, rows: list) -> list[dict]:
    """The user events of ``rows`` ((inbox seq, MessageEvent) pairs) that ``transcript`` does not hold yet: a row
    requeued by a crash after its event was appended is not written twice. Known by platform message id (unique in
    a session's chat, the inbox's own dedup), never by inbox seq: a seq is one host's, and a session moved from
    another host (storage/moving.py) carries that host's seqs, which this host's inbox hands out again."""
    known = {e.payload.get("platform_message_id") for e in transcript if e.role == "user" and e.kind == "message"}
    return [user_event(turn_id, event, seq) for seq, event in rows if event.platform_message_id not in known]


def steer_item(event: MessageEvent):
    """What the steer queue carries of a message sent during a turn: its text, or a user message whose attachments
    are their lines (the turn's request is built already; their files reach the model with the next turn's history
    as lines too, the full parts being for the turn a message starts)."""
    if not event.attachments:
        return event.text
    return {"role": "user", "content": user_content(event.text, [vars(a) for a in event.attachments], None, False)}


def with_appended(recent: list, appended: list[dict], seqs: list[int]) -> list:
    """The transcript's last HISTORY_EVENTS after ``appended`` (user_event / tool_events dicts) went in with
    ``seqs``: what loading it again would return, without the second read (only the session writes its
    transcript, one handler at a time)."""
    return (list(recent) + [TranscriptEvent(e["role"], e["kind"], e["payload"], e.get("turn_id"), None, seq)
                            for e, seq in zip(appended, seqs)])[-HISTORY_EVENTS:]


def tool_events(turn_id: str, finished: ToolCallFinished) -> list[dict]:
    """A tool call and its result, appended together so the transcript never holds one without the other."""
    return [{"role": "assistant", "kind": "tool_call", "turn_id": turn_id,
             "payload": {"call_id": finished.call_id, "name": finished.name, "arguments": finished.arguments}},
            {"role": "tool", "kind": "tool_result", "turn_id": turn_id,
             "payload": {"call_id": finished.call_id, "name": finished.name, "result": finished.result,
                         "ok": finished.ok, **_files_payload(finished.files)}}]


def _files_payload(files: tuple) -> dict:
    # Under ``attachments`` with their cache keys, as a user's files are: the media cache keeps what a transcript
    # names (storage/media_refs.py), so a reply's files live as long as the chat's history.
    return {"attachments": [f.to_part() for f in files]} if files else {}


def redacted_tool_call(finished: ToolCallFinished, secrets: list) -> ToolCallFinished:
    """What of a tool call may be stored and shown: arguments, result and file captions without a secret."""
    files = tuple(dataclasses.replace(f, caption=redact(f.caption, secrets)) for f in finished.files)
    return dataclasses.replace(finished, arguments=redact(finished.arguments, secrets),
                               result=redact(finished.result, secrets), files=files)


def turn_files(transcript: list, turn_id: str) -> tuple:
    """The files the tools of a turn made, in order, then its voice note (for a reply delivered again after a
    crash). A turn run again after a crash may have spoken twice: its last note is the one its reply carries."""
    files = [OutgoingFile.from_part(part) for e in transcript
             if e.turn_id == turn_id and e.kind == "tool_result"
             for part in e.payload.get("attachments") or () if isinstance(part, dict)]
    voices = [OutgoingFile.from_part(part) for e in transcript if e.turn_id == turn_id and e.kind == VOICE_EVENT
              for part in e.payload.get("attachments") or () if isinstance(part, dict)]
    return tuple(files + voices[-1:])


def with_note(answer: str, note: str) -> str:
    """The answer so far of a turn cut short, then the note that says why ("(stopped)", an error): a code block the
    answer was in the middle of is closed first, so the note is not shown as code."""
    answer = answer.rstrip()
    return f"{close_open_fence(answer)}\n\n{note}" if answer else note


def assistant_event(turn_id: str, text: str, reason: str, error: Optional[str] = None, canned: bool = False) -> dict:
    """The answer of a turn. ``error``: the notice the chat was shown when the turn failed (the agent raised, or
    the gateway gave up on the message), kept apart from the text so a client can report the failure. ``canned``:
    the offline agent's answer, which ``model_messages`` leaves out (a model must not take it for its own)."""
    payload = {"text": text, "reason": reason, **({"error": error} if error else {}),
               **({"canned": True} if canned else {})}
    return {"role": "assistant", "kind": "message", "turn_id": turn_id, "payload": payload}


def model_messages(transcript: list, system_prompt: str = "", media: Optional[MediaCache] = None,
                   turn_id: Optional[str] = None, notes: Optional[dict] = None) -> tuple:
    """The transcript as OpenAI chat messages: user and assistant text, with undone turns and the offline agent's
    answers left out. A user message with attachments becomes content parts (actors/media/parts.py): in full
    (images, document text) for the turn ``turn_id`` when ``media`` is given, as one line each otherwise; ``notes``
    are the turn's transcripts."""
    undone = {e.payload.get("turn_id") for e in transcript if e.kind == "undo"}
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for e in transcript[-HISTORY_EVENTS:]:
        if e.turn_id in undone or e.kind != "message":
            continue
        if e.role == "assistant" and e.payload.get("canned"):   # the offline agent's, from before a model was set
            continue
        if e.role == "assistant" and e.payload.get("reason") == AWAITING_APPROVAL:
            continue   # a question for the chat; the turn that goes on gets the paused step itself (OpenStep)
        if e.role == "user" and e.payload.get("attachments"):
            full = turn_id is not None and e.turn_id == turn_id
            content = user_content(e.payload.get("text", ""), e.payload["attachments"], media, full,
                                   notes if full else None)
            messages.append({"role": "user", "content": content})
        elif e.role in ("user", "assistant"):
            messages.append({"role": e.role, "content": e.payload.get("text", "")})
    return tuple(messages)


def turn_attachments(transcript: list, turn_id: str) -> list:
    """The attachments of the turn's own user messages (the voice notes to transcribe are among them)."""
    return [a for e in transcript if e.turn_id == turn_id and e.role == "user" and e.kind == "message"
            for a in e.payload.get("attachments") or () if isinstance(a, dict)]


def has_attachments(transcript: list, turn_id: str) -> bool:
    """Whether a user message of the turn carries attachments (the model then gets them as parts)."""
    return any(e.turn_id == turn_id and e.role == "user" and e.kind == "message" and e.payload.get("attachments")
               for e in transcript)


def request_record(transcript: list, system_prompt: str, profile: str) -> dict:
    """What the API sidecar keeps of a turn's request to the model: what it was made of, not the messages
    themselves. ``model_messages`` over the transcript events ``transcript_seqs`` (inclusive; the transcript is
    append-only) with this system prompt rebuilds it exactly (the parts of its attachments too, while the media cache
    still holds their files). Storing the messages would write the whole history again on every turn (60 events of
    a long chat: tens of KiB per turn, kept as long as the session; more with images)."""
    seqs = [e.seq for e in transcript if e.seq is not None]
    return {"system_prompt": system_prompt, "profile": profile,
            "transcript_seqs": [seqs[0], seqs[-1]] if seqs else [], "events": len(transcript)}


def final_answer(transcript: list, turn_id: str) -> Optional[str]:
    """The turn's final answer if the transcript already holds it (a crash came after it was written)."""
    for e in transcript:
        if e.turn_id == turn_id and e.role == "assistant" and e.kind == "message":
            return e.payload.get("text", "")
    return None


def last_user_turn(transcript: list) -> Optional[str]:
    undone = {e.payload.get("turn_id") for e in transcript if e.kind == "undo"}
    for e in reversed(transcript):
        if e.role == "user" and e.kind == "message" and e.turn_id not in undone:
            return e.turn_id
    return None


def tokens_shown(tokens: Optional[tuple]) -> str:
    """How the turn's log line names its tokens: ``, 120 tokens in, 36 out``; "" when the service did not count."""
    return f", {tokens[0]} tokens in, {tokens[1]} out" if tokens else ""


def turn_finished(event, events, delivered: bool) -> TurnFinished:
    """The fact of a finished turn: its outcome from its last TurnEnd (failed if the reply was not delivered) and
    its time from the inbound message's arrival."""
    reason = next((e.reason for e in reversed(events) if isinstance(e, TurnEnd)), "complete")
    outcome = OUTCOMES.get(reason, "failed") if delivered else "failed"
    seconds = max(0.0, time.time() - event.received_at) if event.received_at > 0 else 0.0
    return TurnFinished(event.source.profile, event.source.platform, outcome, seconds, internal=event.internal)


def turn_speaker(speaker, profile, transcript: list, turn: Turn, sends_voice: bool):
    """The speaker that reads the turn's answer aloud (actors/media/speech.py), or None when it is not spoken."""
    if speaker is None or not wants_voice_reply(profile.voice_replies, turn_attachments(transcript, turn.turn_id),
                                                sends_voice):
        return None
    return speaker


def agent_request(transcript: list, turn: Turn, event: MessageEvent, prompt: str, memory, media: MediaCache):
    """A starting turn's request to its agent, and what its agent task must still read in (images and documents,
    re-encoded off the shard's loop: ``Session._run_agent``) or None. The turn's steer queue is made here, used on
    the bridge's loop: an asyncio.Queue binds to a loop when first awaited, not when made, and the shard's thread
    feeds it only through bridge.call (call_soon_threadsafe)."""
    with_media = (transcript, prompt, media, turn.turn_id) if has_attachments(transcript, turn.turn_id) else None
    turn.steer = asyncio.Queue()
    request = AgentRequest(model_messages(transcript, prompt), event.source.profile, turn.turn_id, turn.steer,
                           media, memory)
    return request, with_media
