"""A profile's memory as plain data: its settings, whose memory a turn reads and writes (the scope), and how the
entries read into the request (pure functions, no storage).

    [profiles.support]
    memory = "user"                 # off (the default) | user | chat | profile
    memory_max_entries = 50         # entries one scope may hold; the next remember is refused
    memory_max_entry_bytes = 500    # UTF-8 bytes of one entry
    memory_prompt_bytes = 4000      # bytes of entries read into one request (the newest that fit)

Scopes (``scope_name``), each a name within its profile (two profiles never read each other's):
  user      the sender: ``user:<adapter>:<user id>``, or ``identity:<name>`` for a user an ``[[identities]]`` entry
            links (their memory follows them across platforms, as their direct chats do)
  chat      the chat (with its thread): ``chat:<adapter>:<chat id>[:<thread id>]``, shared by everyone in it
  profile   one memory for the whole profile: ``profile``
A turn without the id its scope needs (a scheduled run has no user) has no memory: nothing read, tools refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

MODES = ("off", "user", "chat", "profile")
MEMORY_TOOLS = ("remember", "forget")
HEADINGS = {"user": "What you remember about this user:", "chat": "What you remember about this chat:",
            "profile": "What you remember:"}
# (default, most a configuration may set): a memory is read into every request, so it is kept small.
LIMITS = {"memory_max_entries": (50, 1000), "memory_max_entry_bytes": (500, 4000),
          "memory_prompt_bytes": (4000, 32000)}
NOTE = ("(Entries are numbered; the remember tool adds one, the forget tool removes one by its number. Only these "
        "entries are remembered between conversations.)")


@dataclass(frozen=True)
class MemorySettings:
    mode: str = "off"
    max_entries: int = LIMITS["memory_max_entries"][0]
    max_entry_bytes: int = LIMITS["memory_max_entry_bytes"][0]
    prompt_bytes: int = LIMITS["memory_prompt_bytes"][0]

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


def settings_from(table: dict) -> MemorySettings:
    """From a checked profile table (types and allowed values checked by its Spec; ranges by ``limit_error``)."""
    return MemorySettings(mode=table.get("memory", "off"),
                          **{key[len("memory_"):]: table.get(key, default) for key, (default, _) in LIMITS.items()})


def limit_error(key: str, value: int) -> Optional[str]:
    """Why a bound's value is refused, or None."""
    most = LIMITS[key][1]
    if not 1 <= value <= most:
        return f"must be 1 to {most}, got {value}"
    return None


def scope_name(mode: str, source: Any, identity: Optional[str] = None) -> Optional[str]:
    """The scope a turn from ``source`` (an ``actors.messages.Source``: ``platform`` is the adapter's name) reads
    and writes, or None (memory off, or the id the scope needs is missing)."""
    if mode == "profile":
        return "profile"
    if mode == "user":
        if identity:
            return f"identity:{identity}"
        user = getattr(source, "user_id", None)
        return f"user:{source.platform}:{user}" if user not in (None, "") else None
    if mode == "chat":
        chat, thread = getattr(source, "chat_id", None), getattr(source, "thread_id", None)
        if chat in (None, ""):
            return None
        return f"chat:{source.platform}:{chat}" + (f":{thread}" if thread not in (None, "") else "")
    return None


def entry_refusal(text: Any, settings: MemorySettings, count: int = 0) -> Optional[str]:
    """Why ``text`` cannot be remembered (a clear tool result the model reads), or None."""
    if not isinstance(text, str) or not text.strip():
        return "nothing to remember: give 'text', the fact to keep, as a non-empty string"
    size = len(text.strip().encode("utf-8", "surrogatepass"))
    if size > settings.max_entry_bytes:
        return (f"not remembered: the entry is {size} bytes and an entry holds at most {settings.max_entry_bytes}; "
                "keep the fact short")
    return None


def clean_text(text: str) -> str:
    """An entry as stored: one line (a newline could forge a line of the memory section), trimmed."""
    return " ".join(text.split())


def section(mode: str, entries: list, prompt_bytes: int) -> str:
    """The system prompt section listing ``entries`` (oldest first; ``MemoryEntry``-like: ``memory_id``,
    ``text``): the newest that fit in ``prompt_bytes``, shown oldest first. "" when there are none."""
    chosen, used = [], 0
    for entry in reversed(entries):
        line = f"- [{entry.memory_id}] {entry.text}"
        size = len(line.encode("utf-8", "surrogatepass")) + 1
        if used + size > prompt_bytes:
            break
        chosen.append(line)
        used += size
    if not chosen:
        return ""
    return "\n".join([HEADINGS.get(mode, HEADINGS["profile"]), *reversed(chosen), NOTE])


def with_memory(prompt: str, memory_section: str) -> str:
    """The system prompt with the memory section after the persona."""
    if not memory_section:
        return prompt
    return f"{prompt}\n\n{memory_section}" if prompt else memory_section


def matching(entries: list, about: str) -> list:
    """The entries whose text holds every word of ``about`` (case-insensitive): what "forget X" removes."""
    words = about.casefold().split()
    return [e for e in entries if words and all(w in e.text.casefold() for w in words)]
