"""Messages: platform operations (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


# StreamConsumer / sweeper / session -> adapter, answered with OpResult to the sender. The adapter serialises the
# operations of one chat, spends that chat's pacing budget (shared by sends and edits) and waits out flood errors.

@dataclass(frozen=True)
class OutgoingFile:
    """A file a reply carries (docs/media.md, "Outbound"): bytes already in the media cache, named by their hash.

    ``kind`` says how a platform shows it: ``photo`` (a raster image it renders inline) or ``document`` (a file to
    download). ``mime``, ``size`` and the pixel size are the bytes' own (sniffed and measured when the tool's file was
    cached, never a name's or a tool's claim). In the ledger a file is a part of the reply like a text chunk, stored
    as ``{"file": to_part()}`` (``from_part`` reads it back), so a crash recovers it the same way."""
    cache_key: str
    mime: str
    kind: str = "document"         # photo | document
    name: str = ""                 # display name, sanitised (actors/media/names.py): never a path
    caption: str = ""
    size: int = 0
    width: int = 0
    height: int = 0

    def to_part(self) -> dict:
        return dict(vars(self))

    @classmethod
    def from_part(cls, part: dict) -> "OutgoingFile":
        return cls(**{k: v for k, v in dict(part).items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class PlatformOp:
    """One operation on a chat, answered by an OpResult with the same ``op_id``.

    The rule of ids and keys (actors/adapters/idempotency.py): an op id, and any key a platform deduplicates on,
    names one operation with one content across every life of the daemon: the same id only for a genuine retry of
    that operation, never for a new edit made by a later life of the same turn (a platform would answer it with the
    earlier edit and change nothing). Senders number their ops under their claim's fence (``idempotency.op_id``);
    adapters send ``idempotency.platform_key(op)``, which carries the content; the kit refuses an id handed again in
    one life for another operation. A keyed send (``idempotency_key``) is the one key that names a part rather than
    a text: every attempt at the part carries it, and the part is edited to its text after."""
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
    # send: a file part instead of text (the adapter's ``send_file``); ``text`` is then unused, the caption is the
    # file's. Every other rule of a send holds for it: intent, recorded id, lanes, pacing.
    file: Optional[OutgoingFile] = None
    # send / edit of a final text: "error" when the turn failed (the text ends with the notice that says why), so a
    # platform that can show an error as one does (the web chat: styled, with Retry); "" for an answer.
    kind: str = ""


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
    # The platform's own words for a refusal, without our method name or HTTP status: what a chat may be shown
    # (a refused file's line). Empty when the platform gave none.
    reason: str = ""
    retry_after: float = 0.0
    recorded: bool = False             # a send with ``ledger``: its id is in the ledger already


@dataclass(frozen=True)
class AdapterConnected:
    """Adapter -> sweeper (through the directory): the platform is reachable; re-send what a crash left behind."""
    name: str




# Fault injection, honoured only with [debug] fault_injection (an adapter without it logs the refusal and does
# nothing): the delivery case of the conformance suite holds a reply's send between the platform and the ledger.

@dataclass(frozen=True)
class HoldNextSend:
    """Anyone -> adapter: the next recorded send (a reply's part: PlatformOp.ledger) to ``chat_id`` goes to the
    platform as usual, then its answer waits, not recorded in the ledger, until ReleaseSend or a bound
    (actors/adapters/send_hold.py); the adapter tells the sender SendHeld once it holds one."""
    chat_id: str


@dataclass(frozen=True)
class SendHeld:
    """Adapter -> whoever sent HoldNextSend: the send of ``message_id`` to ``chat_id`` is done and held."""
    chat_id: str
    message_id: str


@dataclass(frozen=True)
class ReleaseSend:
    """Anyone -> adapter: the held send goes on (to be recorded), and a hold not used yet is dropped."""
