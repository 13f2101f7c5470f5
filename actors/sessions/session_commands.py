"""Slash commands, handled by the session itself (a mixin of ``Session``; parsing lives in ``commands.py``).

Each command answers through ``reply_turn`` (so its reply is a ledger obligation like any other) or starts an agent
turn (``/retry``). While a turn runs, ``/stop`` and ``/new`` act at once (see ``Session.while_busy``); the others
wait for the turn to end, in order.
"""
from __future__ import annotations

from actors.messages import MessageEvent
from actors.sessions import turn as turns
from actors.sessions.commands import Command, help_text, unknown_command_reply
from storage import hash_id


class CommandHandler:
    def run_command(self, command: Command, seqs: list, event: MessageEvent) -> None:
        handler = getattr(self, f"command_{command.name}", None)
        if handler is None or not command.known:
            self.reply_turn(seqs, event, unknown_command_reply(command.typed or command.name))
            return
        handler(command, seqs, event)

    def command_help(self, command, seqs, event) -> None:
        self.reply_turn(seqs, event, help_text())

    def command_new(self, command, seqs, event) -> None:
        self.info = self.db(self.store.sessions.reset(self.key, dict(vars(event.source))))
        self.reply_turn(seqs, event, "Started a new conversation. The previous one is kept and can be found by "
                                     "the operator.")

    def command_stop(self, command, seqs, event) -> None:
        self.reply_turn(seqs, event, "Nothing is running right now.")

    def command_status(self, command, seqs, event) -> None:
        transcript = self.db(self.store.sessions.load(self.info.session_id))
        waiting = len(self.db(self.store.inbox.rows_in_state(self.key, ("received",))))
        turns_so_far = sum(1 for e in transcript if e.role == "user" and e.kind == "message")
        self.reply_turn(seqs, event, f"Conversation {hash_id('session', self.info.session_id)[:8]}: "
                                     f"{turns_so_far} message(s) so far, {waiting} waiting; "
                                     f"busy mode: {self.busy_mode(event)}.")

    def command_queue(self, command, seqs, event) -> None:
        waiting = len(self.db(self.store.inbox.rows_in_state(self.key, ("received",))))
        self.reply_turn(seqs, event, f"{waiting} message(s) waiting after this one." if waiting
                        else "No message is waiting.")

    def command_undo(self, command, seqs, event) -> None:
        last = self._undo_last()
        self.reply_turn(seqs, event, "Removed your last message and its answer from the conversation." if last
                        else "There is nothing to undo.")

    def command_retry(self, command, seqs, event) -> None:
        transcript = self.db(self.store.sessions.load(self.info.session_id, last_n=turns.HISTORY_EVENTS))
        last = turns.last_user_turn(transcript)
        text = next((e.payload.get("text", "") for e in transcript
                     if e.turn_id == last and e.role == "user" and e.kind == "message"), None)
        if not text:
            self.reply_turn(seqs, event, "There is no earlier message to retry.")
            return
        self._undo_last()
        retried = MessageEvent(event.source, text, event.platform_message_id, event.received_at)
        self.start_agent_turn(seqs, retried)

    def _undo_last(self):
        transcript = self.db(self.store.sessions.load(self.info.session_id, last_n=turns.HISTORY_EVENTS))
        last = turns.last_user_turn(transcript)
        if last is not None:
            self.db(self.store.sessions.append(self.info.session_id, [
                {"role": "system", "kind": "undo", "turn_id": None, "payload": {"turn_id": last}}]))
        return last
