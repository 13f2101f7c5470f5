"""A turn's memory: what its request reads (``memory_for_turn``, in the session's handler) and the handle its
``remember`` / ``forget`` tools write through (``MemoryBinding``, on the agent's loop).

Reading happens where the session builds the request, on its shard's store, so the system prompt (and the request
record the API sidecar keeps) holds the entries as they were when the turn started. The tools run on the shard's
agent loop, which cannot use the shard's store (that one is reached from the shard's thread only), so each tool call
opens its own connection to the same file, writes in one transaction and closes it: a memory tool is called rarely,
and its answer is on disk before the model reads it.

What survives kill -9: an entry the model was told is remembered is committed. A crash after that commit but before
the tool call reached the transcript resumes the turn, and the model may remember the same text again: the store
keeps one entry per text (storage/memory.py), so nothing doubles.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from actors.memory.scope import MemorySettings, clean_text, entry_refusal, matching, scope_name, section, with_memory
from common.redact import redact
from storage import Store
from supervision.storage_access import durability, store_location

FORGET_AT_ONCE = 20     # entries one "forget" by words may remove: a vague request must not empty a scope


@dataclass(frozen=True)
class MemoryBinding:
    """Where a turn's memory tools write: a profile's scope in the state dir's database."""
    path: str
    durability: str
    profile: str
    scope: str
    settings: MemorySettings
    session_key: str = ""
    secrets: tuple = ()            # configured secrets: a model that repeats a key never makes it a memory

    async def _with_store(self, fn):
        store = await Store.open(self.path, self.durability)
        try:
            return await fn(store)
        finally:
            await store.close()

    async def remember(self, text: Any) -> tuple[bool, str]:
        refusal = entry_refusal(text, self.settings)
        if refusal:
            return False, refusal
        entry_text = clean_text(redact(text, list(self.secrets)))
        added = await self._with_store(lambda store: store.memory.add(
            self.profile, self.scope, entry_text, self.settings.max_entries, self.session_key or None))
        if added.full:
            return False, (f"not remembered: this memory is full ({added.count} of {self.settings.max_entries} "
                           "entries); forget an entry first")
        if not added.inserted:
            return True, f"already remembered as entry {added.entry.memory_id}"
        return True, f"remembered as entry {added.entry.memory_id}: {entry_text}"

    async def forget(self, memory_id: Any = None, about: Any = None) -> tuple[bool, str]:
        if memory_id is not None:
            if isinstance(memory_id, bool) or not isinstance(memory_id, (int, str)) or not str(memory_id).isdigit():
                return False, f"'id' must be an entry's number, got {memory_id!r}"
            ids = [int(memory_id)]
        elif isinstance(about, str) and about.strip():
            entries = await self._with_store(lambda store: store.memory.entries(self.profile, self.scope))
            ids = [e.memory_id for e in matching(entries, about)]
            if len(ids) > FORGET_AT_ONCE:
                return False, (f"{len(ids)} entries mention {about!r}: say which, by number (at most "
                               f"{FORGET_AT_ONCE} at once)")
        else:
            return False, "give 'id' (an entry's number) or 'about' (words the entry holds)"
        gone = await self._with_store(lambda store: store.memory.forget(ids, self.profile, self.scope))
        if not gone:
            return False, "nothing forgotten: no entry of this memory matches"
        return True, "forgot " + "; ".join(f"entry {e.memory_id}: {e.text}" for e in gone)


def memory_for_turn(session, profile, source) -> tuple[str, Optional[MemoryBinding]]:
    """The system prompt a turn of ``profile`` from ``source`` runs with (its persona, then what it remembers) and
    its memory tools' binding (None: no memory for this turn). ``session``: the session cell (its configuration,
    its profiles, its store)."""
    settings: MemorySettings = profile.memory
    scope = scope_name(settings.mode, source, session.profiles.identity_of(source)) if settings.enabled else None
    if scope is None:
        return profile.system_prompt, None
    entries = session.db(session.store.memory.entries(profile.name, scope, settings.max_entries))
    prompt = with_memory(profile.system_prompt, section(settings.mode, entries, settings.prompt_bytes))
    return prompt, MemoryBinding(str(store_location(session.config)), durability(session.config), profile.name, scope,
                                 settings, session.key, tuple(session.secrets))
