"""A fake signal-cli HTTP daemon (``signal-cli daemon --http``) for tests: its three endpoints as signal-cli's man
pages (signal-cli-jsonrpc(5), signal-cli(1)) and its source (``HttpServerHandler``, ``ServerSentEventSender``,
``JsonReceiveMessageHandler``, the ``Json*`` records, ``SendCommand``) give them, and how it hands messages to its
clients, so an adapter can be tested against the behaviour it will meet, losses included.

In process::

    with FakeSignalCli(keepalive_interval=0.2) as sc:
        # http://127.0.0.1:P: POST /api/v1/rpc, GET /api/v1/events, GET /api/v1/check; the bot is ACCOUNT
        sc.inject_message("hello")                                   # a direct message from DEFAULT_USER_UUID
        group = sc.add_group("friends", members=("+15550000100",))
        sc.inject_message("@bot hi", group_id=group, mentions=({"number": ACCOUNT, "start": 0, "length": 1},))
        ... the bot answers ...
        sc.wait_for(lambda: sc.shown_texts(DEFAULT_USER_UUID) == ["hi!"], timeout=5)

Standalone (outlives a killed gateway; messages, queued envelopes and files kept in the state file)::

    python -m tests.fakes.signal --port P --state FILE [--config '{"keepalive_interval": 0.2}']

Modules: ``world`` (the account, groups, the clock, envelopes and injection), ``stream`` (the event stream, the
receive modes, what a dead stream loses), ``rpc`` (JSON-RPC: transport, methods, errors, faults), ``server``
(FakeSignalCli, limits, control API, inspection).

Events (``GET /api/v1/events``; Host header pinned to the listening address, else 421; ``?account=`` of an unknown
account 400 in multi-account mode): ``event:receive`` with ``data:{"envelope": {...}, "account": BOT}``, the
envelope with source, sourceNumber, sourceUuid, sourceName, sourceDevice, timestamp, serverReceivedTimestamp,
serverDeliveredTimestamp (new for each delivery) and dataMessage {timestamp, message, expiresInSeconds, viewOnce,
attachments?, mentions?, quote?, groupInfo? {groupId, groupName, revision, type}}. A message over 2,000 bytes has
its whole text in ``message`` and the long-text attachment listed, as signal-cli gives it.

Left out: registration and linking, contacts, profiles, stories, reactions, polls, receipts and typing of others,
edits (``editMessage``), outbound attachments given by path (recorded, not read; a data URI is decoded and kept
with ``voiceNote``), sealed-sender and identity failures, the
daemon's other transports (socket, TCP, D-Bus), and ``receive`` / ``subscribeReceive`` over JSON-RPC.

Control API (JSON; ``tests.fakes.harness.ControlClient`` speaks it):

    POST /_control/inject          inject_message's keywords (attachments as [type, base64, name] are not served)
    POST /_control/inject_event    any event object, as it would be on the stream
    POST /_control/redeliver       {"handle"}                POST /_control/groups   {"name", "members"?}
    POST /_control/streams/drop    signal-cli closes every stream (unsubscribed at once)
    POST /_control/streams/cut     the connections vanish under it (found out on writing)
    GET  /_control/chats/{chat}    GET /_control/stats       POST /_control/faults   POST /_control/config
"""
from tests.fakes.signal.server import DEFAULT_LIMITS, FakeSignalCli
from tests.fakes.signal.world import (ACCOUNT, ACCOUNT_UUID, DEFAULT_USER_NUMBER, DEFAULT_USER_UUID, LONG_TEXT,
                                      group_id_for, uuid_for)

__all__ = ["FakeSignalCli", "DEFAULT_LIMITS", "ACCOUNT", "ACCOUNT_UUID", "DEFAULT_USER_UUID", "DEFAULT_USER_NUMBER",
           "LONG_TEXT", "group_id_for", "uuid_for"]
