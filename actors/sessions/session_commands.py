"""Slash commands, handled by the session itself: a table from command name to handler (parsing lives in
``commands.py``).

Each handler is ``handler(session, command, seqs, event)``: it answers through ``session.reply_turn`` (so its reply
is a ledger obligation like any other) or starts an agent turn (``/retry``). What a handler uses of the session is
its public turn API: ``reply_turn``, ``start_agent_turn``, ``busy_mode``, ``profiles``, ``db`` and ``store``, ``key``
and ``info`` (and ``model_choice``, which ``chosen_model`` keeps).
While a turn runs, ``/stop`` and ``/new`` act at once, even behind messages waiting for the next turn (see
``Session.while_busy``); the others wait for the turn to end, in order.
"""
from __future__ import annotations

from actors.messages import MessageEvent
from actors.sessions import tasks, turn as turns, watch_tool
from actors.sessions.commands import Command, help_text, unknown_command_reply
from actors.sessions.model_choice import MODEL_EVENT, choice_event, chosen_in, model_command
from storage import short_id
from storage.inbox import InboxState


def run_command(session, command: Command, seqs: list, event: MessageEvent) -> None:
    handler = COMMANDS.get(command.name)
    if handler is None or not command.known:
        session.reply_turn(seqs, event, unknown_command_reply(command.typed or command.name))
        return
    handler(session, command, seqs, event)


def _help(session, command, seqs, event) -> None:
    session.reply_turn(seqs, event, help_text())


def _new(session, command, seqs, event) -> None:
    session.info = session.db(session.store.sessions.reset(session.key, dict(vars(event.source))))
    session.reply_turn(seqs, event, "Started a new conversation. The previous one is kept and can be found by the "
                                    "operator.")


def _stop(session, command, seqs, event) -> None:
    session.reply_turn(seqs, event, "Nothing is running right now.")


def _status(session, command, seqs, event) -> None:
    transcript = session.db(session.store.sessions.load(session.info.session_id))
    waiting = len(session.db(session.store.inbox.rows_in_state(session.key, (InboxState.RECEIVED,))))
    turns_so_far = sum(1 for e in transcript if e.role == "user" and e.kind == "message")
    session.reply_turn(seqs, event, f"Conversation {short_id(session.info.session_id)}: "
                                    f"{turns_so_far} message(s) so far, {waiting} waiting; "
                                    f"busy mode: {session.busy_mode(event)}.")


def _queue(session, command, seqs, event) -> None:
    waiting = len(session.db(session.store.inbox.rows_in_state(session.key, (InboxState.RECEIVED,))))
    session.reply_turn(seqs, event, f"{waiting} message(s) waiting after this one." if waiting
                       else "No message is waiting.")


def _undo(session, command, seqs, event) -> None:
    last = undo_last(session)
    session.reply_turn(seqs, event, "Removed your last message and its answer from the conversation." if last
                       else "There is nothing to undo.")


def _retry(session, command, seqs, event) -> None:
    transcript = session.db(session.store.sessions.load(session.info.session_id, last_n=turns.HISTORY_EVENTS))
    last = turns.last_user_turn(transcript)
    text = next((e.payload.get("text", "") for e in transcript
                 if e.turn_id == last and e.role == "user" and e.kind == "message"), None)
    if not text:
        session.reply_turn(seqs, event, "There is no earlier message to retry.")
        return
    undo_last(session)
    retried = MessageEvent(event.source, text, event.platform_message_id, event.received_at)
    session.start_agent_turn(seqs, retried)


def _model(session, command, seqs, event) -> None:
    answer = model_command(session.profiles.get(event.source.profile), chosen_model(session), command.args)
    if answer.chosen is not None:   # committed before the answer goes: a chat told "switched" is switched
        sid = session.info.session_id
        session.db(session.store.sessions.append(sid, [choice_event(answer.chosen)]))
        session.model_choice = (sid, answer.chosen)
    session.reply_turn(seqs, event, answer.text)


def chosen_model(session):
    """The model ``/model`` chose in the session's current conversation (a transcript event, so it survives restarts
    and moves: model_choice.py), or None; read once per conversation, then kept (only the session's cell writes
    it)."""
    sid = session.info.session_id
    if session.model_choice[0] != sid:
        last = session.db(session.store.sessions.load(sid, 1, kind=MODEL_EVENT))
        session.model_choice = (sid, chosen_in(last[-1] if last else None))
    return session.model_choice[1]


def undo_last(session):
    """Mark the last user turn undone in the transcript (it stays, and the model no longer sees it); its id."""
    transcript = session.db(session.store.sessions.load(session.info.session_id, last_n=turns.HISTORY_EVENTS))
    last = turns.last_user_turn(transcript)
    if last is not None:
        session.db(session.store.sessions.append(session.info.session_id, [
            {"role": "system", "kind": "undo", "turn_id": None, "payload": {"turn_id": last}}]))
    return last


COMMANDS = {"help": _help, "new": _new, "stop": _stop, "status": _status, "queue": _queue, "undo": _undo,
            "retry": _retry, "model": _model, "bg": tasks.start, "tasks": tasks.show, "cancel": tasks.cancel,
            "watches": watch_tool.show, "unwatch": watch_tool.unwatch}
