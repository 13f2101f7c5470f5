"""Every message that crosses an actor boundary, in one place.

Rules kept by every message here:

* a small frozen dataclass of plain values (str, int, float, bool, None, tuples and dicts of those), so it pickles
  across processes and can be msgpack-encoded for storage;
* no actor addresses inside unless the field says so (``reply_to``); addresses compare with ``==``;
* where order matters between two actors the message carries a sequence number, because Thespian does not
  guarantee ordering between actors (docs/design.md §4).

Stream events are the internal protocol between the agent and the stream consumer: the model's timeline, before it
is translated into what a platform can bear.
"""
from __future__ import annotations

from actors.messages.inbound import (
    Source, ATTACHMENT_KINDS, Attachment, MessageEvent, InboxDoorbell, InboundStored, StoreInbound)
from actors.messages.platform_ops import (
    OutgoingFile, PlatformOp, OpResult, AdapterConnected, HoldNextSend, SendHeld, ReleaseSend)
from actors.messages.stream import (
    TextDelta, ToolCallStarted, ToolCallDelta, ToolCallFinished, ReplyFile, LongToolHint, WaitingForModel,
    GatewayNotice, ApprovalNeeded, AWAITING_APPROVAL, TOKEN_LIMIT, TurnEnd, AgentEvent, AgentCancelled, AgentFailed,
    StreamBatch, SessionToolCall)
from actors.messages.terminal import (
    CliSay, CliAccepted, CliShow, CliAskDone, CliDone)
from actors.messages.sessions import (
    Passivate, RunCells, ShardArgs, SessionArgs, ConsumerArgs, SpawnConsumer, ConsumerReady, ConsumerGone, ReplyDone,
    ModelOutcome, TaskStop)
from actors.messages.moves import (
    SessionWanted, SessionHandover, SessionTaken, MovesDone)
from actors.messages.store_reads import StoreRead, StoreReadResult
from actors.messages.control import (
    DrainRequest, DrainReport, ShutdownRequest, ShutdownReady, DrainDone, StatusRequest, GatewayStatus,
    ReloadRequest, ReloadReport)
from actors.messages.metrics import (
    StalledReply, LostSend, TurnFinished, FloodWaited, AdapterConnection, HookFailed,
    IntakeSilent, RecentMinutesWanted, RecentMinutes)
from actors.messages.cron import CronRunRequest, CronRunReport
from actors.messages.operator import (ADAPTER_COMMANDS, APPROVAL_VERDICTS, SESSION_COMMANDS, AdapterCommand,
                                     AdapterCommandDone, ApprovalAnswer, ApprovalAnswerDone, SessionCommand,
                                     SessionCommandDone)

__all__ = [
    'Source', 'ATTACHMENT_KINDS', 'Attachment', 'MessageEvent', 'InboxDoorbell', 'InboundStored', 'StoreInbound',
    'OutgoingFile', 'PlatformOp',
    'OpResult', 'AdapterConnected', 'HoldNextSend', 'SendHeld', 'ReleaseSend', 'TextDelta', 'ToolCallStarted',
    'ToolCallDelta', 'ToolCallFinished', 'ReplyFile', 'LongToolHint', 'WaitingForModel', 'GatewayNotice',
    'ApprovalNeeded', 'AWAITING_APPROVAL', 'TOKEN_LIMIT', 'TurnEnd',
    'AgentEvent', 'AgentCancelled', 'AgentFailed', 'StreamBatch', 'SessionToolCall', 'CliSay', 'CliAccepted', 'CliShow',
    'CliAskDone', 'CliDone', 'Passivate', 'RunCells',
    'ShardArgs', 'SessionArgs', 'ConsumerArgs', 'SpawnConsumer', 'ConsumerReady', 'ConsumerGone', 'ReplyDone',
    'ModelOutcome', 'TaskStop', 'DrainRequest', 'DrainReport',
    'ShutdownRequest', 'ShutdownReady', 'DrainDone', 'StatusRequest', 'GatewayStatus', 'StalledReply', 'LostSend',
    'TurnFinished', 'FloodWaited', 'IntakeSilent', 'AdapterConnection', 'HookFailed', 'CronRunRequest',
    'CronRunReport', 'ADAPTER_COMMANDS', 'AdapterCommand', 'AdapterCommandDone',
    'SESSION_COMMANDS', 'SessionCommand', 'SessionCommandDone', 'APPROVAL_VERDICTS', 'ApprovalAnswer',
    'ApprovalAnswerDone',
    'ReloadRequest', 'ReloadReport', 'SessionWanted', 'SessionHandover', 'SessionTaken', 'MovesDone',
    'StoreRead', 'StoreReadResult', 'RecentMinutesWanted', 'RecentMinutes'
]
