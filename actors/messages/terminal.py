"""Messages: terminal chat (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


# ``run_gateway.py chat`` (an external process attached through the admin port) <-> the cli adapter.

@dataclass(frozen=True)
class CliSay:
    """terminal -> cli adapter: a line typed. ``message_id`` names this line in every life of the gateway: a
    terminal that got no CliAccepted tells the same line again under the same id, and the inbox stores it once."""
    user: str
    text: str
    message_id: str


@dataclass(frozen=True)
class CliAccepted:
    """cli adapter -> terminal: the line is stored as inbox row ``seq``; seq < 0: it was not, and ``refused`` says
    why (a drain, the text bound, a plugin that answered it itself). ``stopping``: refused only because the gateway
    is draining to stop: the terminal keeps the line and tells it again to the gateway that comes next."""
    message_id: str
    seq: int
    refused: str = ""
    stopping: bool = False


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
    # done: the final text of the answer the turn stored (None: answered without a model turn), for a terminal
    # that was not attached while it was shown (the gateway restarted between the line and its answer)
    answer: Optional[str] = None


