"""Messages: terminal chat (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


# ``run_gateway.py chat`` (an external process attached through the admin port) <-> the cli adapter.

@dataclass(frozen=True)
class CliSay:
    user: str
    text: str
    message_id: str


@dataclass(frozen=True)
class CliAccepted:
    """cli adapter -> terminal: the line is stored as inbox row ``seq``; seq < 0: it was not, and ``refused`` says
    why (a drain, the text bound, a plugin that answered it itself)."""
    message_id: str
    seq: int
    refused: str = ""


@dataclass(frozen=True)
class CliShow:
    """cli adapter -> terminal: show, replace or remove one message of the bot."""
    action: str                    # send | edit | delete | typing
    message_id: str
    text: str = ""


@dataclass(frozen=True)
class CliAskDone:
    seq: int


@dataclass(frozen=True)
class CliDone:
    seq: int
    done: bool
    error: Optional[str] = None    # done: the notice of the turn that failed answering it (None: it did not fail)


