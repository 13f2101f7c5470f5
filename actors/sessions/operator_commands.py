"""An operator's stop and reset of one session (SessionCommand: `sessions stop|reset ID`, and the console's chats
page), done the way the chat's own /stop and /new do them. Pure but for the session and shard they are given.

Where it goes: the shard that hosts the key (``owner_shard``, by the shard map every part of the gateway uses). The
shard hands it to the session's cell if that is live; a key without a live cell runs no turn, so ``stop`` has
nothing to stop and ``reset`` is the store's alone (``at_shard``). In the cell (``in_cell``): ``stop`` interrupts
the turn being answered, as /stop does (its partial answer is delivered, marked stopped); ``reset`` starts a new
conversation as /new does (``store.sessions.reset``: the old one kept, listed and searchable). A reset asked while
a turn runs stops that turn and is done when the session is next idle, before the next message starts a turn.
kill -9: a reset done is one committed transaction; one waiting for the turn to end is lost with the process (the
turn is resumed by the next life, G8; the operator asks again).
"""
from __future__ import annotations

from actors.messages import SESSION_COMMANDS, SessionCommand, SessionCommandDone
from common.config import setting
from common.shard_map import default_shard_count, shard_name, shard_of
from supervision import tree


def owner_shard(root, session_key: str, config: dict):
    """The running SessionShard node (with its address) that hosts ``session_key`` in a walk's tree, or None (that
    shard is restarting). The leader's shards, as many as configured (supervisor.py's shard_specs)."""
    count = setting(config, "sessions", "shards") or default_shard_count()
    wanted = shard_name(shard_of(session_key, count))
    return next((n for n, _p, _d in tree.walk(root)
                 if n.kind == "SessionShard" and n.name == wanted and n.ref is not None), None)


def refusal(message: SessionCommand) -> str:
    if message.action not in SESSION_COMMANDS:
        return f"no such command {message.action[:40]!r}; try one of {', '.join(SESSION_COMMANDS)}"
    return ""


def at_shard(shard, message: SessionCommand, cell_name: str, sender) -> None:
    """The shard's part: the live cell takes it; otherwise it is answered here."""
    why = refusal(message)
    if why:
        shard.send(sender, SessionCommandDone(message.session_key, message.action, False, why))
        return
    if shard.cells is not None and shard.cells.deliver(cell_name, message, sender):
        return
    if message.action == "stop":
        shard.send(sender, SessionCommandDone(message.session_key, "stop", False, "nothing is running"))
        return
    shard.db(shard.store.sessions.reset(message.session_key))
    shard.send(sender, SessionCommandDone(message.session_key, "reset", True,
                                          "a new conversation starts with the next message"))


def in_cell(session, message: SessionCommand, answering: bool, busy: bool) -> SessionCommandDone:
    """The cell's part (``answering``: a turn is being answered; ``busy``: a turn is answered or delivered)."""
    key = message.session_key
    if message.action == "stop":
        if not answering:
            return SessionCommandDone(key, "stop", False, "nothing is running" if not busy else
                                      "the turn's answer is being delivered: nothing left to stop")
        session.interrupt("stopped")
        return SessionCommandDone(key, "stop", True, "the turn is stopped; its answer so far is delivered")
    if busy:
        session.interrupt("interrupted")
        session.reset_wanted = True
        return SessionCommandDone(key, "reset", True, "the turn is stopped; the conversation is reset once its "
                                                      "answer is delivered")
    reset_now(session)
    return SessionCommandDone(key, "reset", True, "a new conversation starts with the next message")


def reset_now(session) -> None:
    session.reset_wanted = False
    session.info = session.db(session.store.sessions.reset(session.key))
