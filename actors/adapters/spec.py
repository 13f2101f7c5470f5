"""What a platform declares about itself, as data: its registration, its options, its capabilities, its pacing.

Every platform folder (``actors/adapters/<type>/``) has a ``platform.py`` whose ``PLATFORM`` is a ``Platform``; the
registry (registry.py) finds it there, so adding a platform edits no shared file. The rest of the gateway reads these
records and nothing else about a platform: the config loader its ``options`` and ``checks``, the access policy its
``access`` default, the stream consumer and the sweeper its ``pacing``, ``run_gateway.py platforms`` and the README
its ``capabilities``, the conformance suite which cases apply (tests/adapters/test_conformance.py).

Like ``supervision/spec.py`` for child specs, these are frozen values with their invariants checked when they are made:
a capability that contradicts the pacing row (edits declared but ``supports_edit`` off, an idempotency key named but
``idempotent_send`` off) fails the import of the platform's folder, so it can never reach a running gateway.

A guide to adding a platform, with a worked example: docs/adapters.md.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from actors.adapters.pacing import PlatformPacing

REQUIRED = object()
INTAKE_KINDS = ("poll", "socket", "server", "actor")
ACCESS_MODES = ("open", "allowlist", "pairing")


@dataclass(frozen=True)
class Option:
    """One key of an adapter table. ``secret`` values are redacted from every error string and admin view."""
    kind: type
    default: Any = REQUIRED
    secret: bool = False
    allowed: Optional[tuple] = None
    doc: str = ""


@dataclass(frozen=True)
class Capabilities:
    """What the platform lets the bot do, as a user of the platform would describe it.

    Text limits and speeds are the pacing row's (``PlatformPacing``); the booleans both records carry must agree
    (``Platform.__post_init__``)."""
    edit: bool                 # a sent message can be changed: replies stream as edits of one message
    delete: bool               # a sent message can be taken back
    threads: bool              # replies can go into a thread of the conversation
    reactions: bool            # the bot can put a reaction on a user's message (its turn's status)
    files_in: bool             # a user's photos and documents reach the agent (docs/media.md)
    files_out: bool            # the agent's files go as files, not as a line naming them
    voice: bool                # a user's voice notes reach the agent (transcribed)
    buttons: bool              # interactive replies: buttons the user can press
    typing: bool               # a typing indicator while the agent works
    # The field of a send the platform deduplicates on (Discord's "nonce", Matrix's "txnId"): a send whose answer
    # was lost may go again under the same key and show once. "": none, so a re-sent reply carries the re-sent mark.
    idempotent_send: str = ""
    voice_out: bool = False    # an answer to a voice note can follow as a voice note (docs/media.md, voice replies)


# Each row of ``run_gateway.py platforms``: (column title, how a Platform's value is written).
def _yes(value: bool) -> str:
    return "yes" if value else "-"


@dataclass(frozen=True)
class Platform:
    """One registered platform type.

    type          the value of ``type = "..."`` in ``[adapters.NAME]``; also the platform folder's name
    actor         dotted path of its ``PlatformAdapter`` subclass (imported only when an adapter of the type runs)
    summary       one line for the platform table
    intake        how messages come in: "poll" (the adapter asks, ``PollingAdapter``), "socket" (a connection the
                  platform pushes on, ``StreamingAdapter``), "server" (the platform or a browser calls a server the
                  adapter runs, ``ServingAdapter``), "actor" (actor messages: the terminal chat)
    capabilities  what it can do (``Capabilities``)
    pacing        its text limit, unit and speeds (actors/adapters/pacing.py); an ``[adapters.NAME] pacing`` table
                  overrides fields of it per adapter
    options       the keys of its table besides the common ones (registry.COMMON_OPTIONS)
    access        the access policy when the table names none (actors/adapters/access.py)
    addresses     its user ids are mail addresses: ``allow`` entries match in any case and may name a whole domain
                  (access.address_admitted); the platform's checks should refuse entries that are neither
    checks        checks across keys, on the filled-in table: each returns (key, problem) or None (a config error)
    table_pacing  the pacing fields the table's own options decide (LINE sends files only with a ``public_url``):
                  the filled-in table -> overrides; an ``[adapters.NAME] pacing`` table still has the last word
    served        for a platform with several intake modes, whether the filled-in table's mode is one where the
                  platform calls a server the adapter runs (a webhook): only such a mode can start a gateway on
                  demand ([gateway] idle_exit_s, on_demand.py). None: the ``intake`` says it ("server")
    """
    type: str
    actor: str
    summary: str
    intake: str
    capabilities: Capabilities
    pacing: PlatformPacing
    options: Mapping[str, Option] = field(default_factory=dict)
    access: str = "open"
    addresses: bool = False
    checks: tuple[Callable[[Mapping], Optional[tuple[str, str]]], ...] = ()
    table_pacing: Optional[Callable[[Mapping], Mapping[str, Any]]] = None
    served: Optional[Callable[[Mapping], bool]] = None

    def __post_init__(self) -> None:
        if self.intake not in INTAKE_KINDS:
            raise ValueError(f"platform {self.type!r}: intake {self.intake!r} is none of {INTAKE_KINDS}")
        if self.access not in ACCESS_MODES:
            raise ValueError(f"platform {self.type!r}: access {self.access!r} is none of {ACCESS_MODES}")
        if self.pacing.platform != self.type:
            raise ValueError(f"platform {self.type!r}: its pacing row is named {self.pacing.platform!r}")
        for problem in capability_conflicts(self.capabilities, self.pacing):
            raise ValueError(f"platform {self.type!r}: {problem}")

    @property
    def kind(self) -> str:
        """The actor's class name: what ``tree`` shows."""
        return self.actor.rsplit(".", 1)[-1]

    @property
    def doc(self) -> str:
        """Its page, in its own folder."""
        return f"actors/adapters/{self.type}/README.md"

    def serves(self, table: Mapping) -> bool:
        """With this filled-in table, messages arrive by calling a server the adapter runs (or, "actor", through
        the admin port): nothing is missed while the gateway is stopped that a call will not bring again."""
        if self.served is not None:
            return bool(self.served(table))
        return self.intake in ("server", "actor")

    @property
    def receives_files(self) -> bool:
        return self.capabilities.files_in


def capability_conflicts(caps: Capabilities, pacing: PlatformPacing) -> list[str]:
    """Where the capabilities and the pacing row disagree (a pure function; empty: they agree)."""
    pairs = (("edit", caps.edit, "supports_edit", pacing.supports_edit),
             ("files_out", caps.files_out, "sends_files", pacing.sends_files),
             ("reactions", caps.reactions, "supports_reactions", pacing.supports_reactions),
             ("voice_out", caps.voice_out, "sends_voice", pacing.sends_voice),
             ("idempotent_send", bool(caps.idempotent_send), "idempotent_send", pacing.idempotent_send),
             ("typing", caps.typing, "typing_interval_s", pacing.typing_interval_s is not None))
    return [f"capability {cap} = {declared!r} but pacing {row} says {paced!r}"
            for cap, declared, row, paced in pairs if declared != paced]


def paced(platform: str, caps: Capabilities, text_limit: int, length: str, **speeds) -> PlatformPacing:
    """The pacing row of a platform whose capabilities are ``caps``: the booleans both carry come from ``caps``,
    so a platform writes each fact once."""
    return PlatformPacing(platform, text_limit, length, supports_edit=caps.edit, sends_files=caps.files_out,
                          supports_reactions=caps.reactions, idempotent_send=bool(caps.idempotent_send),
                          sends_voice=caps.voice_out, **speeds)


def capability_row(platform: Platform) -> dict:
    """One platform's row of ``run_gateway.py platforms --json``: what it can do, its limit and its pacing."""
    caps, pacing = platform.capabilities, platform.pacing
    row = {"type": platform.type, "summary": platform.summary, "intake": platform.intake, "access": platform.access,
           **{f.name: getattr(caps, f.name) for f in dataclasses.fields(Capabilities)},
           "text_limit": pacing.text_limit, "length_unit": pacing.length,
           "per_chat_ops_per_s": pacing.per_chat_ops_per_s, "per_chat_burst": pacing.per_chat_burst,
           "edit_interval_s": pacing.edit_interval_s, "doc": platform.doc}
    return row


TABLE_COLUMNS: tuple[tuple[str, Callable[[dict], str]], ...] = (
    ("type", lambda r: r["type"]),
    ("intake", lambda r: r["intake"]),
    ("edit", lambda r: _yes(r["edit"])),
    ("delete", lambda r: _yes(r["delete"])),
    ("threads", lambda r: _yes(r["threads"])),
    ("reactions", lambda r: _yes(r["reactions"])),
    ("files in", lambda r: _yes(r["files_in"])),
    ("files out", lambda r: _yes(r["files_out"])),
    ("voice", lambda r: _yes(r["voice"])),
    ("voice out", lambda r: _yes(r["voice_out"])),
    ("buttons", lambda r: _yes(r["buttons"])),
    ("typing", lambda r: _yes(r["typing"])),
    ("idempotent send", lambda r: r["idempotent_send"] or "-"),
    ("text limit", lambda r: f"{r['text_limit']:,} {r['length_unit']}"),
    ("pace per chat", lambda r: f"{r['per_chat_ops_per_s']:g}/s, burst {r['per_chat_burst']}"),
)


def markdown_table(rows: list[dict]) -> str:
    """The platform table as the README shows it (tests/project/test_readme.py compares the two)."""
    lines = ["| " + " | ".join(title for title, _ in TABLE_COLUMNS) + " |",
             "|" + "|".join("---" for _ in TABLE_COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(row) for _, cell in TABLE_COLUMNS) + " |" for row in rows]
    return "\n".join(lines)
