"""Background tasks (docs/background.md): ``/bg PROMPT`` runs a prompt as its own turn, in a session of its own,
while the chat goes on; its result comes back to the chat. ``/tasks [N]`` lists them or shows one, ``/cancel N``
stops one. The agent's start_background_task tool starts one as /bg does (``begin``; its call: task_tool.py). The
task row is in storage (storage/tasks.py); this module is the sessions' part of it.

Where a task runs: a session whose key is the chat's key and ``.task-N`` (``task_key``), placed on the chat's own
shard (common/shard_map.py ``placement_key``). Its one inbox row is the prompt, as an internal message with the
chat's Source, so its answer goes to the chat like any reply (ledger, pacing, re-send rules) and its turn is
resumed or given up after a kill -9 under the rules of every turn (G2, G8): the row is done only once the result
is delivered, so it is never run twice. Its inbox rows are the gateway's own (``TASK_PLATFORM``): no traffic for
the activity clock (daemon/idle_exit.py).

What reaches the chat: nothing while the task runs (its turn asks for its reply's consumer only once it ended:
no previews, no typing), then one message. Before it is sent, ``settle`` compares the chat's conversation with the
one the task started in. The same: the result is delivered (a long one as a file, its start in the message)
and a one-line record of it is appended to the chat's transcript, so the chat's next turn knows. Another one (the
chat was reset with /new, forgotten, or moved to an identity since: ``chat_moved``): fail closed, the result is
kept in the task row (state ``kept``) and the chat is told only that an earlier task finished and how to see it;
nothing of it enters the new conversation. The decision, the task row and the record commit in the turn's
handler's one transaction, before the reply's consumer is asked for; a crash after it delivers what was decided
(``delivery``).

Bounds: at most ``max_tasks`` running per chat (a profile option), each stopped after ``task_timeout_s`` and once
its model calls used ``task_max_tokens`` (``bounds``: the agent asks nothing more, its run ends token_limit); tool
calls are bounded by the profile's agent (``max_tool_rounds``) as in any turn.

Pure text helpers first; the handlers take the session cell (as approval_flow.py does).
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Optional

from actors.media.outgoing import ToolFile, cache_tool_file
from actors.sessions.turn import inbound_ref, quote
from actors.messages import (AWAITING_APPROVAL, TOKEN_LIMIT, InboxDoorbell, MessageEvent, OutgoingFile, ReplyFile,
                             Source, TaskStop, TurnEnd)
from storage import TASK_PLATFORM, InboundItem, MediaCache, Started
from storage.keys import is_valid_key, session_key

TASK_SUFFIX = ".task-"
_TASK_KEY = re.compile(r"^(?P<origin>.+)\.task-(?P<number>[0-9]+)$")
_NUMBER = re.compile(r"^#?([0-9]{1,9})$")
LONG_RESULT_CHARS = 3000      # a longer result goes as a file, the message shows its start
SHOWN_START_CHARS = 600       # the start of a long result shown in the message
RECORD_LINE_CHARS = 200       # the first line of a result, in the chat's transcript record
LISTED = 20                   # tasks /tasks lists
SHOWN_RESULT_CHARS = 3000     # of a result, in /tasks N
STATE_WORDS = {"done": "finished", "failed": "failed", "cancelled": "was cancelled", "kept": "finished"}
TASK_EVENT = "task"           # the kind of the record a task leaves in its chat's transcript
TASK_FILE_EVENT = "task_file"  # the kind of the event that names a long result's file in the task's transcript


# ------------------------------------------------------------------------------------------------------ pure

def task_key(origin_key: str, number: int) -> str:
    return f"{origin_key}{TASK_SUFFIX}{number}"


def task_of(key: str) -> Optional[tuple[str, int]]:
    """(the chat's key, N) for a task's session key; None for any other key."""
    match = _TASK_KEY.match(key)
    return (match.group("origin"), int(match.group("number"))) if match else None


def is_task_key(key: str) -> bool:
    return task_of(key) is not None


def parse_number(args: str) -> Optional[int]:
    match = _NUMBER.match(args.strip())
    return int(match.group(1)) if match else None


def first_line(text: str, limit: int = RECORD_LINE_CHARS) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 1] + "\u2026"


def chat_moved(origin_key: str, source, identity: Optional[str]) -> bool:
    """Whether the chat's messages now go to another conversation key than the task's chat had: its sender's
    direct chat was linked to an identity since (or unlinked), so its conversation is the identity's now."""
    try:
        return getattr(source, "chat_type", None) == "dm" and session_key(source, identity=identity) != origin_key
    except ValueError:   # a source no key is made of: nothing says it moved
        return False


def bounds(profile, turn) -> dict:
    """What a turn's agent request takes of the task bounds: a task's turn its token budget, any other nothing."""
    return {"token_budget": profile.task_max_tokens} if turn.background else {}


def end_reason(agent_reason: str) -> str:
    """A run's end as its turn ends: complete, or stopped at its token budget (said so in a task's result)."""
    return TOKEN_LIMIT if agent_reason == TOKEN_LIMIT else "complete"


def final_state(reason: str) -> str:
    """A task's state from its turn's end: complete -> done, stopped (/cancel) -> cancelled, else failed (an error,
    the time bound, a restart given up on, a tool call that waits for a person's yes)."""
    return {"complete": "done", "stopped": "cancelled"}.get(reason, "failed")


def result_message(number: int, state: str, result: str, timeout_s: float = 0.0, reason: str = "",
                   max_tokens: int = 0) -> str:
    """What the chat is sent for a task that ended in its conversation (a long result's body: ``long_result_body``)."""
    body = result.strip()
    if reason == AWAITING_APPROVAL:   # without its question: nobody answers in the task's session
        return (f"Task #{number} stopped: it wanted to run a tool that needs a person's yes, which a background "
                f"task cannot wait for. Ask for it in the chat instead.")
    if state == "done":
        return f"Task #{number} finished:\n\n{body}" if body else f"Task #{number} finished, with no answer."
    if state == "cancelled":
        head = f"Task #{number} was cancelled."
    elif reason == TOKEN_LIMIT:
        head = f"Task #{number} was stopped after using its {max_tokens} tokens (the profile's task_max_tokens)."
    elif timeout_s:
        head = f"Task #{number} was stopped after {timeout_s:g}s (the profile's task_timeout_s)."
    else:
        head = f"Task #{number} failed."
    return f"{head}\n\n{body}" if body else head


def long_result_body(result: str, file_name: str) -> str:
    """What the message shows of a result too long for it: its start, and where the whole of it is."""
    start = result.strip()[:SHOWN_START_CHARS].rstrip()
    return f"{start}\u2026\n\n(The whole result, {len(result)} characters, is in {file_name}.)"


def kept_notice(number: int) -> str:
    return (f"An earlier task #{number} finished after this conversation was reset; its result is kept, not added "
            f"here. See it with /tasks {number}.")


def record_text(number: int, state: str, result: str) -> str:
    """The line a task leaves in its chat's transcript: enough for the next turn to know it happened."""
    return f"(background task #{number} {STATE_WORDS.get(state, state)}: {first_line(result) or 'no answer'})"


def record_event(number: int, state: str, result: str) -> dict:
    """An assistant message of the chat's transcript (the model sees it in the history); no turn of its own."""
    return {"role": "assistant", "kind": "message", "turn_id": None,
            "payload": {"text": record_text(number, state, result), "reason": TASK_EVENT, "task": number}}


def started_text(number: int) -> str:
    return (f"Started task #{number}. Its result comes here when it is done; /tasks shows how it goes, "
            f"/cancel {number} stops it.")


def refused_text(running: int, limit: int) -> str:
    return (f"Not started: this chat has {running} task(s) running and may run {limit} at once (the profile's "
            f"max_tasks). Wait for one to finish, or stop one with /cancel N.")


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m" if seconds < 7200 else f"{seconds // 3600}h"


def listing(tasks: list, now: float) -> str:
    if not tasks:
        return "This chat has no tasks. Start one with /bg PROMPT."
    lines = ["Tasks of this chat (newest first):"]
    for t in tasks:
        when = (f"running for {_ago(now - t.started_at)}" if t.state == "started" else
                f"{t.state} {_ago(now - (t.finished_at or now))} ago")
        cancel = ", cancelling" if t.state == "started" and t.cancel_requested else ""
        lines.append(f"#{t.number} {when}{cancel}: \u201c{quote(t.prompt)}\u201d")
    lines.append("/tasks N shows one; /cancel N stops one.")
    return "\n".join(lines)


def detail(task, now: float) -> str:
    lines = [f"Task #{task.number}: {task.state}", f"Prompt: {task.prompt}",
             f"Started {_ago(now - task.started_at)} ago" +
             (f", ended {_ago(now - task.finished_at)} ago" if task.finished_at else "")]
    if task.state == "kept":
        lines.append("It finished after the conversation it started in was reset or moved: its result was not "
                     "added to this one.")
    if task.result is not None:
        shown = task.result if len(task.result) <= SHOWN_RESULT_CHARS else \
            task.result[:SHOWN_RESULT_CHARS] + f"\u2026 ({len(task.result)} characters; the whole result: " \
                                               f"`run_gateway.py tasks show` on the gateway)"
        lines += ["", shown]
    return "\n".join(lines)


# -------------------------------------------------------------------------------------- the chat's commands

def start(session, command, seqs: list, event: MessageEvent) -> None:
    """``/bg PROMPT``: the task started (``begin``), and the chat answered at once with the task's number."""
    prompt = command.args.strip()
    if not prompt:
        session.reply_turn(seqs, event, "Usage: /bg PROMPT \u2014 runs PROMPT as a background task; its result "
                                        "comes here when it is done.")
        return
    # One task per message: a /bg handled again after a crash (its row requeued before it was marked done) finds
    # the task it started, and its answer is the same reply, which the ledger does not send twice.
    started = begin(session, event, prompt, inbound_ref(event))
    if started is None:
        session.reply_turn(seqs, event, TOO_LONG_KEY)
    elif started.task is None:
        session.reply_turn(seqs, event, refused_text(started.running, session.profiles.get(
            event.source.profile).max_tasks))
    else:
        session.reply_turn(seqs, event, started_text(started.task.number))


TOO_LONG_KEY = "This chat cannot run background tasks (its conversation key is too long)."


def begin(session, event: MessageEvent, prompt: str, origin_ref: str) -> Optional[Started]:
    """Start the chat's next task for ``origin_ref`` (the message, or the tool call, that asks for it): the task
    row and its prompt's inbox row in one transaction (within the handler's), the task's session rung once it
    committed. The answer of storage's ``start`` (the task, or the limit's refusal; a task ``origin_ref`` started
    before is the answer again), or None when the chat's key leaves no room for a task's."""
    profile = session.profiles.get(event.source.profile)
    if not is_valid_key(task_key(session.key, 999_999_999)):
        return None
    now = time.time()

    def item_for(number: int) -> InboundItem:
        key = task_key(session.key, number)
        prompt_event = MessageEvent(source=event.source, text=prompt, platform_message_id=key, received_at=now,
                                    internal=True)
        return InboundItem(key, TASK_PLATFORM, key, prompt_event.to_payload())

    started = session.db(session.store.tasks.start(session.key, session.info.session_id, profile.name, prompt,
                                                   profile.max_tasks, item_for, origin_ref, now))
    if started.task is not None:
        if not started.again:
            session.log.info("task #%d started", started.task.number, extra=session.log_fields())
        # Sent once this handler committed (cell_host.py); lost with a crash, the restarted shard finds the row.
        session.send(session.parent, InboxDoorbell(started.task.task_key, started.task.inbox_seq, internal=True))
    return started


def show(session, command, seqs: list, event: MessageEvent) -> None:
    """``/tasks``: the chat's tasks; ``/tasks N``: one, with its result (a kept one's too: it is this chat's)."""
    now = time.time()
    if not command.args.strip():
        session.reply_turn(seqs, event, listing(session.db(session.store.tasks.of_chat(session.key, LISTED)), now))
        return
    number = parse_number(command.args)
    task = session.db(session.store.tasks.get(session.key, number)) if number is not None else None
    session.reply_turn(seqs, event, detail(task, now) if task is not None else
                       f"There is no task {command.args.strip()[:20]} in this chat; /tasks lists them.")


def cancel(session, command, seqs: list, event: MessageEvent) -> None:
    """``/cancel N``: the cancel mark (a turn not started yet is then never run), and a stop for the task's
    running turn; its result (what it wrote so far) comes as any task's does."""
    number = parse_number(command.args)
    if number is None:
        session.reply_turn(seqs, event, "Usage: /cancel N \u2014 stops task #N (/tasks lists them).")
        return
    task = session.db(session.store.tasks.request_cancel(session.key, number))
    if task is None:
        session.reply_turn(seqs, event, f"There is no task #{number} in this chat; /tasks lists them.")
        return
    if task.state != "started":
        session.reply_turn(seqs, event, f"Task #{number} is over already ({task.state}).")
        return
    session.send(session.parent, TaskStop(task.task_key))
    session.reply_turn(seqs, event, f"Stopping task #{number}.")


# ------------------------------------------------------------------------------------------ the task's session

def run(session, seqs: list, event: MessageEvent) -> None:
    """The task's prompt starts its turn (its time bounded: ``arm_deadline``). A task
    cancelled before its turn began is answered without one; a row met after the task ended (a tool approval's
    deadline, say) is done without a word: the task's one message was sent already."""
    task = session.db(session.store.tasks.by_key(session.key))
    if task is None or task.state != "started":
        for seq in seqs:
            session.db(session.store.inbox.done(seq))
        session.pump()
        return
    if task.cancel_requested:
        reply, files = delivery(session, "", "stopped", ())
        session.reply_turn(seqs, event, reply, files=files)
        return
    session.start_agent_turn(seqs, event)


def arm_deadline(session, turn) -> None:
    """A task's turn, started or resumed after a restart, is stopped once task_timeout_s passed since the task
    started (its deadline timer, ``deadline``)."""
    task = session.db(session.store.tasks.by_key(session.key))
    if task is not None:
        left = task.started_at + session.profiles.get(task.profile).task_timeout_s - time.time()
        session.after(max(1.0, left), "task_deadline", turn.turn_id)


def deadline(session, turn_id: str) -> None:
    """The task's time bound passed: its turn is stopped (its answer so far is its result, state failed)."""
    turn = session.turn
    if turn is not None and turn.turn_id == turn_id and not turn.ended:
        session.interrupt("timed_out")


def settle(session, text: str, reason: str) -> tuple[str, tuple]:
    """The task's end, decided once (module docstring): what its chat is sent, and the files with it."""
    task = session.db(session.store.tasks.by_key(session.key))
    if task is None:
        return text, ()
    if task.state != "started":   # decided before (a row met again): what was decided then stands
        return task.delivered or kept_notice(task.number), task.delivered_files
    state = final_state(reason)
    current = session.db(session.store.sessions.current(task.origin_key))
    source = Source(**session.info.source)   # the chat's, as the task's prompt carried it
    if current is None or current.session_id != task.origin_session_id or \
            chat_moved(task.origin_key, source, session.profiles.identity_of(source)):
        session.log.warning("task #%d ended after its chat's conversation changed: its result is kept, not delivered",
                            task.number, extra=session.log_fields())
        session.db(session.store.tasks.finish(session.key, "kept", text, kept_notice(task.number)))
        return kept_notice(task.number), ()
    files, body = (), text
    if len(text) > LONG_RESULT_CHARS:
        file = _result_file(session, task.number, text)
        files, body = (file.to_part(),), long_result_body(text, file.name)
    profile = session.profiles.get(task.profile)
    timeout = profile.task_timeout_s if reason == "timed_out" else 0.0
    message = result_message(task.number, state, body, timeout, reason, profile.task_max_tokens)
    session.db(session.store.tasks.finish(session.key, state, text, message, files))
    session.db(session.store.sessions.append(current.session_id, [record_event(task.number, state, text)]))
    return message, files


def delivery(session, text: str, reason: str, files: tuple) -> tuple[str, tuple]:
    """What a task's turn delivers when its reply is made again after a crash, or without a turn: what was decided
    at its end, or decided now. ``files``: the tool files of its turn, sent with a result delivered in the chat."""
    message, parts = settle(session, text, reason)
    task = session.db(session.store.tasks.by_key(session.key))
    own = tuple(files) if task is None or task.state != "kept" else ()
    return message, own + tuple(OutgoingFile.from_part(p) for p in parts)


def deliver(session, turn, final_text: str, reason: str) -> None:
    """The end of a task's turn (after its answer went into its own transcript): settle it, then ask for the
    reply's consumer with only what the chat is to see (a kept result's files and text stay out)."""
    tool_files = tuple(e.file for e in turn.events if isinstance(e, ReplyFile))
    message, files = delivery(session, final_text, reason, tool_files)
    turn.events, turn.unsent, turn.final_text = [], [], message
    for file in files:
        session.push(turn, ReplyFile(file))
    session.push(turn, TurnEnd(reason, message))
    session.ask_consumer(turn)


def _result_file(session, number: int, text: str) -> OutgoingFile:
    """A long result as a text file in the media cache (a small write, on the cell's thread), named by an event of
    the task's transcript so the cache keeps it as long as that transcript (storage/media_refs.py)."""
    cache = MediaCache(Path(session.config["gateway"]["state_dir"]) / "media")
    file = cache_tool_file(cache, ToolFile(text.encode("utf-8"), f"task-{number}-result.md"))
    session.db(session.store.sessions.append(session.info.session_id, [
        {"role": "system", "kind": TASK_FILE_EVENT, "turn_id": session.turn.turn_id if session.turn else None,
         "payload": {"attachments": [file.to_part()]}}]))
    return file
