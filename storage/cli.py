"""The storage side of the admin CLI: plain async functions of an open ``Store`` returning JSON-able dicts.

The admin CLI owns argument parsing and printing (``json.dumps(result)``); these functions own the queries. They
raise ``StorageError`` subclasses (``NotFound``, ``ImportRefused``, ``IllegalTransition``) with messages fit for
the operator.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any, Optional, Union

from common.privacy import write_private
from common.redact import redact

from . import Store
from .errors import AmbiguousId, IllegalTransition, ImportRefused, NotFound
from .ledger import Obligation, ObligationState
from .moving import MoveOutcome
from .sessions import SessionInfo, short_id
from .tasks import Task
from .transfer import MOVE_VERSION, version_of

CONTENT_PREVIEW_CHARS = 200
AMBIGUOUS_SHOWN = 10   # candidates an ambiguous name lists
SOURCE_MATCHES = 200   # sessions a user or chat name is looked up in (its conversations, old ones included)
# The shortest id prefix that names a session (as git's abbreviations): a shorter name ("7", "42") is a user or a
# chat, never also the start of whichever random id happens to begin with it.
MIN_ID_PREFIX = 4
PREVIEW_CHARS = 80     # of a session's last message in a listing
TASKS_SHOWN = 20       # a chat's newest background tasks a session's view lists


def jsonable(value: Any) -> Any:
    """Plain JSON types only: bytes become {"$base64": ...}, tuples lists, dataclasses dicts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k if not isinstance(k, bytes) else k.decode("utf-8", "replace")): jsonable(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"$base64": base64.b64encode(bytes(value)).decode("ascii")}
    return value


def _session(info: SessionInfo) -> dict:
    data = jsonable(info)
    data.pop("created", None)
    data["short_id"] = short_id(info.session_id)
    return data


def reply_text(ob: Obligation) -> str:
    """The text a delivery carries: its chunks, once the reply's final text is recorded. (``content`` names the
    reply's slot, which the obligation id is made from, not its text.)"""
    return "".join(str(c) for c in ob.chunks)


def _obligation(ob: Obligation) -> dict:
    return {
        "obligation_id": ob.obligation_id, "state": ob.state, "session_key": ob.session_key,
        "inbound_ref": ob.inbound_ref, "target": jsonable(ob.target), "attempts": ob.attempts, "fence": ob.fence,
        "owner": jsonable(ob.owner) if ob.owner else None, "last_error": ob.last_error,
        "content_preview": " ".join(reply_text(ob).split())[:CONTENT_PREVIEW_CHARS],
        "content_chars": len(reply_text(ob)),
        "chunks": len(ob.chunks), "parts": {str(i): mid for i, mid in sorted(ob.parts.items())},
        "ambiguous": ob.ambiguous, "send_intent": ob.send_intent,
        "receipts": {str(i): r for i, r in sorted(ob.receipts.items())}, "not_received": ob.not_received,
        "created_at": ob.created_at, "updated_at": ob.updated_at,
    }


async def resolve(store: Store, key_or_id: str) -> SessionInfo:
    """The session ``key_or_id`` names: its id, a session key (its current session, else its latest), a unique
    prefix of its id of MIN_ID_PREFIX characters or more (``sessions list`` shows the first 12), or what its source
    names: a user's name or id, a chat id, alone or as ``PLATFORM:VALUE`` (that conversation's current session, else
    its latest). ``AmbiguousId`` lists the candidates when the name fits several."""
    info = await store.sessions.get(key_or_id) or await latest_of_key(store, key_or_id)
    if info is not None:
        return info
    by_prefix = (await store.sessions.with_id_prefix(key_or_id, limit=AMBIGUOUS_SHOWN + 1)
                 if len(key_or_id) >= MIN_ID_PREFIX else [])
    candidates = {s.session_id: s for s in by_prefix}
    keys = dict.fromkeys(s.session_key for s in await store.sessions.with_source(key_or_id, limit=SOURCE_MATCHES))
    for key in list(keys)[:AMBIGUOUS_SHOWN + 1]:
        latest = await latest_of_key(store, key)
        candidates.setdefault(latest.session_id, latest)
    if len(candidates) > 1:
        found = sorted(candidates.values(), key=lambda s: -s.updated_at)
        listed = "; ".join(f"{short_id(s.session_id)} {s.state} {_who(s.source)} {s.session_key}"
                           for s in found[:AMBIGUOUS_SHOWN])
        more = " and more" if len(found) > AMBIGUOUS_SHOWN else ""
        raise AmbiguousId(f"{key_or_id!r} names {len(found)}{'+' if more else ''} sessions (an id prefix, a user or "
                          f"a chat): {listed}{more}; give the id (or more of it)")
    if not candidates:
        raise NotFound(f"no session with id, id prefix, key, user or chat {key_or_id!r} (see 'sessions list')")
    return next(iter(candidates.values()))


async def latest_of_key(store: Store, session_key: str) -> Optional[SessionInfo]:
    """The current session of a key, else its latest; None if the key has none."""
    info = await store.sessions.current(session_key)
    if info is None:
        latest = await store.sessions.list(session_key=session_key, limit=1)
        info = latest[0] if latest else None
    return info


def _who(source: Any) -> str:
    """A session's chat as an operator names it: PLATFORM:USER (the user's name, else id, else the chat id)."""
    source = source if isinstance(source, dict) else {}
    user = source.get("user_name") or source.get("user_id") or source.get("chat_id") or "?"
    return f"{source.get('platform') or '?'}:{user}"


def _preview(payload: Any) -> str:
    """A message's text on one line, cut at PREVIEW_CHARS."""
    text = " ".join(str((payload or {}).get("text") or "").split()) if isinstance(payload, dict) else ""
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1] + "…"


async def sessions_list(store: Store, state: Optional[str] = None, session_key: Optional[str] = None,
                        limit: int = 50) -> dict:
    """Sessions, most recently updated first, each with its user, how many messages it holds, its last activity
    and the first words of its last message."""
    found = await store.sessions.list(state=state, session_key=session_key, limit=limit)
    summaries = await store.sessions.summaries(s.session_id for s in found)
    listed = []
    for info in found:
        summary = summaries.get(info.session_id)
        listed.append({**_session(info), "user": _who(info.source),
                       "messages": summary.messages if summary else 0,
                       "last_activity": max(info.updated_at, (summary.last_at if summary else None) or 0),
                       "last_role": summary.last_role if summary else None,
                       "preview": _preview(summary.last_payload) if summary else ""})
    return {"count": len(listed), "sessions": listed}


async def session_show(store: Store, key_or_id: str, last_n: Optional[int] = 20, secrets: tuple = ()) -> dict:
    """A session (by id, key, id prefix, user or chat: ``resolve``) with its last ``last_n`` events (all: None), and
    its chat's newest background tasks in brief (their prompts redacted of ``secrets``; ``chat_tasks``)."""
    info = await resolve(store, key_or_id)
    events = await store.sessions.load(info.session_id, last_n=last_n)
    summary = (await store.sessions.summaries([info.session_id])).get(info.session_id)
    return {
        "session": {**_session(info), "user": _who(info.source), "messages": summary.messages if summary else 0},
        "display": jsonable(await store.sessions.get_display(info.session_id)),
        "runtime": jsonable(await store.sessions.runtime(info.session_id)),
        "events": [jsonable(e) for e in events],
        "tasks": [task_row(t, secrets) for t in await store.tasks.of_chat(info.session_key, TASKS_SHOWN)],
    }


def task_row(task: Task, secrets, whole: bool = False) -> dict:
    """A background task as the operator reads it (`tasks`, `sessions show`, the console): its prompt, and with
    ``whole`` its result and what its chat was sent, redacted of the configured secrets and credential shapes."""
    out = {"number": task.number, "state": task.state, "chat": task.origin_key, "task_key": task.task_key,
           "profile": task.profile, "prompt": redact(task.prompt, list(secrets)), "started_at": task.started_at,
           "finished_at": task.finished_at, "cancel_requested": task.cancel_requested,
           "chat_session_id": task.origin_session_id}
    if whole:
        out.update(result=redact(task.result, list(secrets)) if task.result is not None else None,
                   delivered=redact(task.delivered, list(secrets)) if task.delivered is not None else None,
                   files=[f.get("name") for f in task.delivered_files])
    return out


async def chat_tasks(store: Store, key_or_id: str, secrets, limit: int = TASKS_SHOWN) -> dict:
    """The newest background tasks of the chat ``key_or_id`` names (``resolve``), whole: results included, a kept
    one's too (a result withheld from the chat because its conversation was reset since the task started)."""
    info = await resolve(store, key_or_id)
    return {"chat": info.session_key, "tasks": [task_row(t, secrets, whole=True)
                                                for t in await store.tasks.of_chat(info.session_key, limit)]}


async def sessions_search(store: Store, query: str, limit: int = 20) -> dict:
    hits = await store.sessions.search(query, limit=limit)
    return {"query": query, "count": len(hits), "hits": [jsonable(h) for h in hits]}


async def session_export(store: Store, key_or_id: str, path: Union[str, os.PathLike], with_state: bool = False,
                         interrupted: bool = False) -> dict:
    """Write the session's export file (0600): a new file under a random name, never through a symlink or a file
    someone planted, fsynced, then renamed, so ``path`` holds either a complete export or what it held before.
    ``with_state``: format version 2, with the live state a move to another host needs (``moving.py``);
    ``TurnRunning`` if a turn of it is in flight, unless ``interrupted``."""
    info = await resolve(store, key_or_id)
    data = (await store.sessions.export_for_move(info.session_id, interrupted) if with_state
            else await store.sessions.export_session(info.session_id))
    path = Path(path)
    write_private(path, data)
    return {"session_id": info.session_id, "short_id": short_id(info.session_id), "path": str(path),
            "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "with_state": with_state}


def _moved(outcome: MoveOutcome, path: Union[str, os.PathLike], data: bytes) -> dict:
    return {"session": _session(outcome.session), "path": str(path), "bytes": len(data), "with_state": True,
            "changed": outcome.changed, "last_seq": outcome.events, "inbox": outcome.inbox,
            "obligations": outcome.obligations}


async def session_import(store: Store, path: Union[str, os.PathLike], max_bytes: int, as_new: bool = False) -> dict:
    """``as_new``: a copy under a new id, closed if its key has a current session (``SessionStore.import_session``).
    A file written with its live state (version 2) is stored with it, and the same file twice changes nothing."""
    data = read_capped(path, max_bytes)
    if version_of(data) == MOVE_VERSION and not as_new:   # with as_new, import_session refuses it and says why
        return {**_moved(await store.sessions.import_moved(data), path, data), "as_new": False}
    info = await store.sessions.import_session(data, as_new=as_new)
    events = await store.sessions.load(info.session_id, last_n=1)
    return {"session": _session(info), "path": str(path), "bytes": len(data), "as_new": as_new, "with_state": False,
            "last_seq": events[-1].seq if events else 0}


async def session_forget(store: Store, path: Union[str, os.PathLike], max_bytes: int) -> dict:
    """On the host a session moved from, once its destination imported the file: delete what the file holds."""
    data = read_capped(path, max_bytes)
    return _moved(await store.sessions.forget_moved(data), path, data)


def read_capped(path: Union[str, os.PathLike], max_bytes: int) -> bytes:
    """The whole file, or ImportRefused if it holds more than ``max_bytes`` (read bounded: a device or a pipe that
    never ends costs at most that much memory)."""
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ImportRefused(f"{path} is larger than the import limit of {max_bytes:,} bytes "
                            "([storage] max_import_bytes)")
    return data


async def deliveries(store: Store, state: Optional[str] = None, limit: int = 100) -> dict:
    found = await store.ledger.list(state=state, limit=limit)
    return {"counts": await store.ledger.counts(), "ambiguous": await store.ledger.count_ambiguous(),
            "count": len(found),
            "deliveries": [_obligation(ob) for ob in found]}


async def delivery_retry(store: Store, obligation_id: str) -> dict:
    """failed|abandoned -> pending with attempts reset; the sweeper sends it on its next pass."""
    return _obligation(await store.ledger.requeue(obligation_id))


async def delivery_abandon(store: Store, obligation_id: str) -> dict:
    """pending|failed -> abandoned: the operator gives up on a reply (the sweeper stops trying it). One in flight
    (attempting) is its owner's: refused, so a live consumer is never overtaken."""
    ob = await store.ledger.get(obligation_id)
    if ob is None:
        raise NotFound(f"no delivery {obligation_id!r} (see 'deliveries')")
    if ob.state == ObligationState.ATTEMPTING:
        raise IllegalTransition(f"delivery {obligation_id[:16]} is being delivered right now; abandon it once it "
                                f"has failed (see 'deliveries --state failed')")
    await store.ledger.abandon(obligation_id, ob.fence, "abandoned by the operator")
    return _obligation(await store.ledger.get(obligation_id))


async def session_set_state(store: Store, key_or_id: str, suspended: bool) -> dict:
    """Suspend a session (its chat is told, to each message, that the operator suspended it) or resume it."""
    info = await resolve(store, key_or_id)
    await (store.sessions.suspend(info.session_id) if suspended else store.sessions.resume(info.session_id))
    return _session(await store.sessions.get(info.session_id))
