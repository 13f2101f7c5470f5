"""The guarantees, checked after a chaos run from what the platforms show (the fake Telegram's chats, the web
chat's history as a reloaded page shows it) and from what the state dir holds (inbox, ledger, transcripts).

Each check returns ``(checked, violations)``: how many things it looked at, and one line per violation.
"""
from __future__ import annotations

import asyncio
import re
import sqlite3
from collections import Counter

from actors.agents.offline import FAKE_SECRET
from actors.sessions.turn import GAVE_UP_PREFIX
from actors.adapters.pacing import DEFAULT_RESENT_MARKER as RESENT_MARKER
from actors.adapters import registry  # noqa: F401 - before a platform's module: it loads every platform in order
from actors.adapters.telegram.formatting import render
from storage import Store
from tests.chaos.world import Message, World
from tests.fakes.telegram import DEFAULT_TOKEN


CURSOR = "▍"
ANSWER_BOUND_S = 60.0        # [sessions] answer_bound_s, the default the chaos gateway runs with
SLOW = re.compile(r"#slow\s+(\d+(?:\.\d+)?)")
SLOW_CHUNKS = 40             # the offline agent's answers are shorter than this many chunks
SECRETS = (FAKE_SECRET, DEFAULT_TOKEN.split(":", 1)[1])


def inbox_rows(world: World) -> list[tuple]:
    with sqlite3.connect(world.gw.state / "gateway.db", timeout=30) as db:
        return db.execute("SELECT platform, platform_message_id, state FROM inbox").fetchall()


def obligations_open(world: World) -> int:
    with sqlite3.connect(world.gw.state / "gateway.db", timeout=30) as db:
        return db.execute("SELECT count(*) FROM obligations WHERE state IN ('pending', 'attempting')").fetchone()[0]


def settled(world: World) -> bool:
    """Every message sent is in the inbox and done, no reply is in hand, no visitor waits for an ack."""
    rows = inbox_rows(world)
    return (len(rows) >= len(world.sent) and all(state == "done" for _, _, state in rows)
            and obligations_open(world) == 0
            and not any(v.unacked for v in world.web.visitors.values()))


# ------------------------------------------------------------------------------------------ platform views

def telegram_view(world: World) -> dict[str, list[dict]]:
    """Chat id -> the bot's messages in it (deleted ones left out), as the people in the chat see them."""
    out = {}
    for chat in world.telegram_chat_ids():
        timeline = world.control.get(f"/_control/chats/{chat}")
        out[chat] = [m for m in timeline["messages"] if m["outgoing"] and not m["deleted"]]
    return out


def web_view(world: World) -> dict[str, list[dict]]:
    return {visitor: world.web.request(visitor, {"type": "history"}, timeout=30)["messages"]
            for visitor in world.web_visitors()}


# ----------------------------------------------------------------------------------------------- the checks

def replies(world: World, telegram: dict, web: dict) -> tuple[int, list[str], int]:
    """G1 + G3 from the chats: every message sent has exactly one complete reply; no stale preview is left.

    One exception, counted apart (the third value): where a send's outcome was lost (the daemon died, or the
    connection was cut after the call left), Telegram offers no idempotency key, so the reply is sent again carrying
    the visible re-sent marker (docs/design.md §2.6). A chat may then show an earlier copy (complete, or a preview)
    next to the marked reply, and a marked copy whose own answer was lost next to the one that went through; that is
    the documented behaviour. More than one unmarked copy is still a violation."""
    violations, marked_chats = [], set()
    sent = world.sent
    for m in sent:
        if m.failing:
            continue
        if m.platform == "telegram":
            answers = [b["text"] for b in telegram[m.chat] if m.token in b["text"] and CURSOR not in b["text"]]
        else:
            answers = [e["text"] for e in web[m.chat] if e["role"] == "assistant" and m.token in e["text"]]
        unmarked = [a for a in answers if RESENT_MARKER not in a]
        if answers and len(unmarked) <= 1 and len(answers) > 1:
            marked_chats.add((m.platform, m.chat))
        elif len(answers) != 1:
            what = "no reply" if not answers else f"{len(answers)} replies (a visible duplicate)"
            violations.append(f"{m.platform} {m.chat}: {m.text!r} has {what}")
    for chat, shown in telegram.items():
        marked = any(RESENT_MARKER in b["text"] for b in shown)
        for b in shown:
            if CURSOR in b["text"] and marked:
                marked_chats.add(("telegram", chat))
            elif CURSOR in b["text"]:
                violations.append(f"telegram {chat}: message {b['message_id']} still shows the streaming cursor: "
                                  f"{b['text'][-50:]!r}")
    failing = Counter(m.chat for m in sent if m.failing)
    for chat, expected in failing.items():
        errors = [b for b in telegram[chat] if CURSOR not in b["text"]]
        unmarked = [b for b in errors if RESENT_MARKER not in b["text"]]
        if len(errors) < expected or len(unmarked) > expected:   # extra copies only with the marker
            violations.append(f"telegram {chat}: {expected} failing questions, {len(errors)} error replies")
    return len(sent), violations, len(marked_chats)


def _answers_by_question(path) -> dict[str, str]:
    """Question text -> the last answer its turn recorded in the transcript (the agent's, or the notice given
    instead): the text the reply must show once every edit is applied."""
    async def read():
        async with await Store.open(path) as store:
            answers = {}
            for info in await store.sessions.list(limit=100_000):
                events = await store.sessions.load(info.session_id)
                turn_answer = {e.turn_id: e.payload.get("text") for e in events
                               if e.role == "assistant" and e.kind == "message" and e.turn_id}
                for e in events:
                    if e.role == "user" and e.kind == "message" and e.turn_id in turn_answer:
                        answers[e.payload.get("text")] = turn_answer[e.turn_id]
            return answers
    return asyncio.run(read())


def telegram_renderings(text: str) -> set[str]:
    """What the bot may have sent for ``text``: rendered for either parse mode, or plain (the adapter's fallback
    when a platform refuses the markup)."""
    return {text} | {render(text, mode)[0] for mode in ("HTML", "MarkdownV2")}


def final_texts(world: World, telegram: dict, web: dict, answers: dict | None = None) -> tuple[int, list[str]]:
    """G3 as the chat shows it: a reply's final visible text (its last version, every edit applied) is its turn's
    whole answer, not a preview an edit never replaced. Checked for every question with exactly one reply (the
    replies check reports the others); a marked re-sent copy is compared without its marker line. ``answers``:
    question -> answer (read from the state dir's transcripts when not given)."""
    if answers is None:
        answers = _answers_by_question(world.gw.state / "gateway.db")
    checked, violations = 0, []
    for m in world.sent:
        if m.failing:
            continue
        if m.platform == "telegram":
            shown = [b for b in telegram[m.chat] if m.token in b["text"] and CURSOR not in b["text"]]
            sent = [(b["history"][-1]["raw_text"] if b.get("history") else b["text"]) for b in shown]
        else:
            sent = [e["text"] for e in web[m.chat] if e["role"] == "assistant" and m.token in e["text"]]
        sent = [t.replace(RESENT_MARKER + "\n", "").replace(RESENT_MARKER, "").strip() for t in sent]
        if len(sent) != 1:
            continue
        expected = answers.get(m.text)
        checked += 1
        if expected is None:
            violations.append(f"{m.platform} {m.chat}: {m.text!r} has a reply but no answer in its transcript")
            continue
        wanted = telegram_renderings(expected) if m.platform == "telegram" else {expected}
        if sent[0] not in {w.strip() for w in wanted}:
            violations.append(f"{m.platform} {m.chat}: {m.text!r} shows {len(sent[0])} characters ending "
                              f"{sent[0][-40:]!r}, not its {len(expected)}-character answer ending "
                              f"{expected[-40:]!r}")
    return checked, violations


def gave_up_notices(telegram: dict, web: dict) -> int:
    """Replies that are the documented notice for a turn cut more often than max_resumes (G8 resumes it that often,
    then tells the user which message to send again). Each stands for its message's one reply; the report counts them apart."""
    texts = [b["text"] for shown in telegram.values() for b in shown]
    texts += [e["text"] for entries in web.values() for e in entries if e["role"] == "assistant"]
    return sum(GAVE_UP_PREFIX in t for t in texts)


def web_questions(world: World, web: dict) -> tuple[int, list[str]]:
    """G1/G2 for the web chat: each message a visitor sent shows once in its history, none is left queued."""
    violations = []
    for m in (m for m in world.sent if m.platform == "web"):
        shown = [e for e in web[m.chat] if e["role"] == "user" and e.get("id") == m.web_id]
        if len(shown) != 1 or shown[0].get("queued"):
            violations.append(f"web {m.chat}: {m.web_id} shows {len(shown)} time(s)"
                              + (" and is still queued" if shown and shown[0].get("queued") else ""))
    return sum(1 for m in world.sent if m.platform == "web"), violations


def inbox(world: World) -> tuple[int, list[str]]:
    """G1/G2 in the state: one inbox row per message sent, every one done."""
    rows = inbox_rows(world)
    violations = []
    per_platform = Counter(platform for platform, _, _ in rows)
    for platform, expected in Counter(m.platform for m in world.sent).items():
        got = per_platform.get("web" if platform == "web" else "telegram", 0)
        if got != expected:
            violations.append(f"{platform}: {expected} messages sent, {got} inbox rows")
    keys = Counter((platform, mid) for platform, mid, _ in rows)
    violations += [f"inbox row {key} twice" for key, n in keys.items() if n > 1]
    violations += [f"inbox row {platform}:{mid} left {state}" for platform, mid, state in rows if state != "done"]
    return len(rows), violations


async def _transcripts(path) -> dict:
    async with await Store.open(path) as store:
        return {info.session_id: await store.sessions.load(info.session_id)
                for info in await store.sessions.list(limit=100_000)}


def transcripts(world: World) -> tuple[int, list[str]]:
    """G2 + G4: every session's transcript is a serial history (a turn's events contiguous, every tool call
    followed by its result) and no inbound message started two turns."""
    histories = asyncio.run(_transcripts(world.gw.state / "gateway.db"))
    violations = []
    for session_id, events in histories.items():
        violations += [f"session {session_id}: {v}" for v in serial_violations(events)]
        started = Counter(e.payload.get("platform_message_id") for e in events
                          if e.role == "user" and e.kind == "message")
        violations += [f"session {session_id}: inbound {ref} became {n} turns" for ref, n in started.items() if n > 1]
    return len(histories), violations


def serial_violations(events) -> list[str]:
    out, seen_turns, current, open_calls = [], set(), None, {}
    for e in events:
        if e.turn_id is None:
            continue
        if e.turn_id != current:
            if e.turn_id in seen_turns:
                out.append(f"turn {e.turn_id} interleaved with another")
            if open_calls:
                out.append(f"tool call(s) {sorted(open_calls)} without a result")
                open_calls = {}
            seen_turns.add(e.turn_id)
            current = e.turn_id
        if e.kind == "tool_call":
            open_calls[e.payload["call_id"]] = e
        elif e.kind == "tool_result" and open_calls.pop(e.payload["call_id"], None) is None:
            out.append(f"tool result {e.payload['call_id']} without its call")
    if open_calls:
        out.append(f"tool call(s) {sorted(open_calls)} without a result")
    return out


def secrets_hidden(world: World, telegram: dict, admin_outputs: list[str]) -> tuple[int, list[str]]:
    """G6: no secret in any text a chat shows, nor in the admin CLI's output."""
    texts = [(f"telegram {chat}", b["text"]) for chat, shown in telegram.items() for b in shown]
    texts += [(f"admin output {i}", out) for i, out in enumerate(admin_outputs)]
    violations = [f"{where} shows a secret" for where, text in texts if any(s in text for s in SECRETS)]
    return len(texts), violations


def liveness(world: World, telegram: dict, web: dict) -> tuple[int, list[str], float]:
    """Every message answered within the liveness bound of being sent: [sessions] answer_bound_s plus the model's own
    time (``#slow``) plus the time the run spent inside faults (a 429 storm, a full disk, a daemon restart delay
    answers legitimately). A reply stuck until the end of the run (a consumer waiting for what it never gets, a chat
    starved of a session slot) is over it. Also the slowest answer seen, for the report. Messages without exactly one
    answer are the replies check's; failing turns are left out (their error reply is checked there too)."""
    bound_s = ANSWER_BOUND_S + world.fault_s
    checked, violations, slowest = 0, [], 0.0
    for m in world.sent:
        if m.failing or m not in world.sent_at:
            continue
        if m.platform == "telegram":
            shown = [b for b in telegram[m.chat] if m.token in b["text"] and CURSOR not in b["text"]]
            at = [b.get("edit_date") or b["date"] for b in shown]
        else:
            at = [e["at"] for e in web[m.chat] if e["role"] == "assistant" and m.token in e["text"] and e.get("at")]
        if len(at) != 1:
            continue
        checked += 1
        # Telegram's dates are whole seconds: one second of slack.
        waited = at[0] - world.sent_at[m] - (1.0 if m.platform == "telegram" else 0.0)
        slowest = max(slowest, waited)
        allowed = bound_s + slow_seconds(m.text)
        if waited > allowed:
            violations.append(f"{m.platform} {m.chat}: {m.text!r} answered {waited:.1f}s after it was sent (bound "
                              f"{allowed:.1f}s)")
    return checked, violations, slowest


def slow_seconds(text: str) -> float:
    """The model's own time a ``#slow S`` message asks the offline agent for (an upper bound: S per chunk)."""
    match = SLOW.search(text)
    return 0.0 if match is None else float(match.group(1)) * SLOW_CHUNKS


def answered_count(world: World, telegram: dict, web: dict) -> int:
    """Questions with at least one complete reply (for progress lines)."""
    count = 0
    for m in world.sent:
        if m.platform == "telegram":
            count += any(m.token in b["text"] and CURSOR not in b["text"] for b in telegram.get(m.chat, []))
        else:
            count += any(e["role"] == "assistant" and m.token in e["text"] for e in web.get(m.chat, []))
    return count


__all__ = ["Message", "settled", "telegram_view", "web_view", "replies", "final_texts", "web_questions", "inbox",
           "transcripts", "secrets_hidden", "liveness", "answered_count"]
