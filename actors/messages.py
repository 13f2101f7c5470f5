"""Every message that crosses an actor boundary, in one place.

Rules kept by every message here:

* a small frozen dataclass of plain values (str, int, float, bool, None, tuples and dicts of those), so it pickles
  across processes and can be msgpack-encoded for storage;
* no actor addresses inside unless the field says so (``reply_to``); addresses compare with ``==``;
* where order matters between two actors the message carries a sequence number, because Thespian does not
  guarantee ordering between actors (DESIGN.md §4).

Stream events are the internal protocol between the agent and the stream consumer: the model's timeline, before it
is translated into what a platform can bear.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


# --------------------------------------------------------------------------------------------------------- inbound

@dataclass(frozen=True)
class Source:
    """Where a message came from: the identity a session key is derived from (see storage.keys)."""
    platform: str
    chat_id: str
    chat_type: str = "dm"          # dm | group | channel | thread
    thread_id: Optional[str] = None
    user_id: Optional[str] = None
    user_name: Optional[str] = None
    profile: str = "default"


ATTACHMENT_KINDS = ("photo", "document", "voice", "audio", "video")


@dataclass(frozen=True)
class Attachment:
    """A file that came with a message (docs/media.md). ``normalise`` makes it ``pending`` with the platform's
    handle (``ref``) and what the platform claims; the intake fetches it before the row is stored, after which it is
    ``cached`` (``cache_key`` names its bytes in the media cache, ``mime`` and ``size`` are the bytes' own, sniffed,
    never the platform's), ``too_large`` (nothing was fetched) or ``unavailable`` (every try failed: the turn runs
    with a note saying so)."""
    kind: str                      # photo | document | voice | audio | video
    mime: str = ""                 # sniffed from the bytes (actors/media/sniff.py); "" until cached
    size: int = 0                  # bytes: the platform's figure while pending, the real one once cached
    cache_key: str = ""            # SHA-256 hex of the bytes (storage/media.py)
    name: str = ""                 # display name, sanitised (actors/media/names.py): never a path
    caption: str = ""
    state: str = "pending"         # pending | cached | too_large | unavailable
    ref: str = ""                  # the platform's handle to fetch it by (Telegram: file_id)
    width: int = 0                 # pixels, for images and videos (the image's own once cached)
    height: int = 0
    duration_s: int = 0            # voice, audio, video: as the platform gives it

    @classmethod
    def from_payload(cls, payload) -> "Attachment":
        if isinstance(payload, Attachment):
            return payload
        known = {k: v for k, v in dict(payload).items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class MessageEvent:
    """One platform event, normalised. Adapters produce it; the inbox stores it; the session consumes it."""
    source: Source
    text: str
    platform_message_id: str
    received_at: float
    reply_to_message_id: Optional[str] = None
    attachments: tuple = ()        # of Attachment
    internal: bool = False         # produced by the gateway itself (resume, replay): not user traffic
    # When the sender sent it, by the platform's own server clock (Telegram's ``date``); None where the platform
    # gives no such time or the client chooses it. Sender limits charge a message at this time, so a backlog the
    # platform held while the gateway was down is not mistaken for a burst (sender_limits.charge_time).
    sent_at: Optional[float] = None

    def to_payload(self) -> dict:
        """The inbox record: plain values only (msgpack)."""
        return {"source": dict(vars(self.source)), "text": self.text, "platform_message_id":
                self.platform_message_id, "received_at": self.received_at, "reply_to_message_id":
                self.reply_to_message_id, "attachments": [dict(vars(a)) for a in self.attachments],
                "internal": self.internal, "sent_at": self.sent_at}

    @classmethod
    def from_payload(cls, payload: dict) -> "MessageEvent":
        return cls(source=Source(**payload["source"]), text=payload.get("text", ""),
                   platform_message_id=str(payload["platform_message_id"]),
                   received_at=payload.get("received_at", 0.0),
                   reply_to_message_id=payload.get("reply_to_message_id"),
                   attachments=tuple(Attachment.from_payload(a) for a in payload.get("attachments") or ()),
                   internal=payload.get("internal", False), sent_at=payload.get("sent_at"))


@dataclass(frozen=True)
class InboxDoorbell:
    """Adapter -> session supervisor -> session: new rows are durable in this session's inbox. A doorbell carries
    no content: the inbox is the truth, so a lost doorbell delays a message but never loses it."""
    session_key: str
    seq: int = 0


# ------------------------------------------------------------------------------------------- platform operations
# StreamConsumer / sweeper / session -> adapter, answered with OpResult to the sender. The adapter serialises the
# operations of one chat, spends that chat's pacing budget (shared by sends and edits) and waits out flood errors.

@dataclass(frozen=True)
class PlatformOp:
    op_id: str
    action: str                    # send | edit | delete | typing
    chat_id: str
    text: str = ""
    message_id: Optional[str] = None   # edit / delete: the platform message to change
    thread_id: Optional[str] = None
    reply_to: Optional[str] = None     # send: the platform message this answers
    chat_type: str = "dm"
    final: bool = False                # the text is the reply's final text (not a streaming preview)
    idempotency_key: Optional[str] = None  # send: the same key for every attempt at one part (pacing idempotent_send)
    # send: (obligation id, fence, part index) of the reply it is a part of. The adapter commits the send's intent
    # just before the request leaves and the returned id with the platform's answer (actors/adapters/base.py), so a
    # kill -9 leaves a send ambiguous only inside those milliseconds.
    ledger: Optional[tuple] = None


@dataclass(frozen=True)
class OpResult:
    op_id: str
    ok: bool
    message_id: Optional[str] = None
    # retryable | flood | permanent | too_long | formatting | not_found | ambiguous (a send that may have gone
    # through before it failed: not retried blind, the sender marks its next copy as re-sent) | lost_claim (the
    # ledger refused the send's intent: another owner holds the reply, and nothing was sent) | storage (the
    # intent could not be recorded, storage being unavailable: nothing was sent)
    error_kind: Optional[str] = None
    error: str = ""                    # short, already redacted: safe to log
    retry_after: float = 0.0
    recorded: bool = False             # a send with ``ledger``: its id is in the ledger already


@dataclass(frozen=True)
class AdapterConnected:
    """Adapter -> sweeper (through the directory): the platform is reachable; re-send what a crash left behind."""
    name: str


# ------------------------------------------------------------------------------------------------- stream events

@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    call_id: str
    name: str


@dataclass(frozen=True)
class ToolCallDelta:
    call_id: str
    arguments_delta: str


@dataclass(frozen=True)
class ToolCallFinished:
    call_id: str
    name: str
    arguments: str
    result: str
    ok: bool = True


@dataclass(frozen=True)
class LongToolHint:
    """A tool is still running after a while: tell the chat something is happening."""
    call_id: str
    name: str
    elapsed_s: float


@dataclass(frozen=True)
class GatewayNotice:
    """Text from the gateway itself (not the model): errors, resumes, command replies."""
    text: str
    level: str = "info"            # info | warning | error


@dataclass(frozen=True)
class TurnEnd:
    reason: str = "complete"       # complete | interrupted | error | stopped
    final_text: Optional[str] = None


# What a session's agent run, on the shard's loop, posts back to its session cell (through the bridge).
@dataclass(frozen=True)
class AgentEvent:
    turn_id: str
    event: Any                     # one of the stream events above


@dataclass(frozen=True)
class AgentCancelled:
    """The run was cancelled (the turn was interrupted or stopped)."""
    turn_id: str


@dataclass(frozen=True)
class AgentFailed:
    turn_id: str
    error: BaseException           # shown to the chat redacted, logged in full


@dataclass(frozen=True)
class StreamBatch:
    """Stream events of one turn, sent as one actor message: a tell per token would cap throughput (DESIGN.md §4)."""
    turn_id: str
    seq: int
    events: tuple


# ------------------------------------------------------------------------------------------------- terminal chat
# ``run_gateway.py chat`` (an external process attached through the admin port) <-> the cli adapter.

@dataclass(frozen=True)
class CliSay:
    user: str
    text: str
    message_id: str


@dataclass(frozen=True)
class CliAccepted:
    message_id: str
    seq: int


@dataclass(frozen=True)
class CliShow:
    """cli adapter -> terminal: show, replace or remove one message of the bot."""
    action: str                    # send | edit | delete | typing
    message_id: str
    text: str = ""


@dataclass(frozen=True)
class CliAskDone:
    seq: int


@dataclass(frozen=True)
class CliDone:
    seq: int
    done: bool
    error: Optional[str] = None    # done: the notice of the turn that failed answering it (None: it did not fail)


# --------------------------------------------------------------------------------------------- sessions and turns

@dataclass(frozen=True)
class Passivate:
    """Session shard -> session cell: stop if idle (idle timeout or the live-session cap)."""


@dataclass(frozen=True)
class RunCells:
    """Session shard -> itself: its cells still have mail after one run's budget (run again once Thespian has
    transmitted what they sent so far)."""


@dataclass(frozen=True)
class SpawnConsumer:
    """Session -> session supervisor: start the stream consumer of one reply. Sessions run a thread (their async
    bridge) so they create no processes themselves; the supervisor, which has none, forks the consumer."""
    turn_id: str
    args: Any


@dataclass(frozen=True)
class ConsumerReady:
    turn_id: str
    address: Any


@dataclass(frozen=True)
class ConsumerGone:
    """Session supervisor -> session: the consumer of this turn exited before reporting ReplyDone (``outside_cause``:
    it stopped on storage being unavailable, which is waited out rather than counted)."""
    turn_id: str
    reason: str = ""
    outside_cause: bool = False


@dataclass(frozen=True)
class ReplyDone:
    """Stream consumer -> session: the reply of this turn is delivered (or failed for good)."""
    turn_id: str
    ok: bool
    detail: str = ""
    message_ids: tuple = ()


# ------------------------------------------------------------------------------------------------ runtime control
# Supervision: parent <-> child.













# Health and inspection.













# Drain and shutdown.











@dataclass(frozen=True)
class DrainRequest:
    timeout_s: float = 30.0


@dataclass(frozen=True)
class DrainReport:
    ok: bool
    waited_s: float
    in_flight_left: int   # -1: the drain did not start
    detail: str = ""

    def __str__(self) -> str:
        """A sentence for the log and the operator (the dataclass repr is for debugging)."""
        if self.in_flight_left < 0:
            return f"drain not done: {self.detail}"
        left = ("every turn finished" if self.in_flight_left == 0 else
                f"{self.in_flight_left} turn(s) still in flight, kept for the next instance")
        return f"drained in {self.waited_s:.2f}s: {left}" + (f"; {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class ShutdownRequest:
    """Launcher -> root: graceful shutdown (stop intake, flush everything, then answer ShutdownReady)."""
    timeout_s: float = 10.0


@dataclass(frozen=True)
class ShutdownReady:
    flushed: int = 0
    detail: str = ""

    def __str__(self) -> str:
        return f"flushed {self.flushed} item(s)" + (f"; {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class DrainDone:
    """Root -> launcher: the drain finished; the launcher stops the actor system and exits 0."""
    report: DrainReport


@dataclass(frozen=True)
class StatusRequest:
    pass


@dataclass(frozen=True)
class GatewayStatus:
    started_at: float
    actors_up: int
    actors_restarting: int
    actors_failed: int
    sessions_live: int
    obligations_pending: int
    draining: bool
    detail: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------------ metrics
# Facts told to the metrics actor (its address is in the Directory) by the actors that see them. Best effort: a fact
# sent while the metrics actor restarts is lost, and nobody waits for an answer (actors/metrics.py).

@dataclass(frozen=True)
class StalledReply:
    """Stream consumer -> metrics: a reply that could make no progress for longer than its bound, and why
    (no_adapter: the directory names no adapter for its platform)."""
    platform: str
    reason: str


@dataclass(frozen=True)
class LostSend:
    """Stream consumer / sweeper -> metrics: a send whose outcome was unknown (its answer died with a process or a
    connection, or never came), and how it ended: found (its copy is the part now), never_landed (sent again as
    usual), marked (sent again under the re-sent marker), unanswered (no answer in time: taken for lost)."""
    platform: str
    outcome: str


@dataclass(frozen=True)
class TurnFinished:
    """Session -> metrics: a turn is over (its reply delivered or given up)."""
    profile: str
    platform: str
    outcome: str                   # done | failed | interrupted | cancelled
    seconds: float                 # from the inbound message's arrival to the end of the turn




@dataclass(frozen=True)
class FloodWaited:
    """Adapter -> metrics: the platform answered 429; the chat waits ``seconds`` before its next operation."""
    platform: str
    seconds: float


@dataclass(frozen=True)
class AdapterConnection:
    """Adapter -> metrics: its platform connection came up or went down (sent again on every new Directory).
    Two reports can cross on their way, so each carries its count in the adapter's incarnation: the metrics actor
    keeps a report of the same reporter only if it is newer than the one it holds."""
    adapter: str
    connected: bool
    seq: int = 0
