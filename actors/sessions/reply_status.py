"""What a chat is shown of a reply's progress beside the reply itself: the typing indicator while nothing of it
shows yet, and status reactions on the user's message where the platform has them (pacing ``supports_reactions``;
the profile's ``status_reactions``, else ``[sessions] status_reactions``, e.g. "👀 👍": the first while the turn
works, the second once it is answered).

Pure: it makes the PlatformOps, the stream consumer sends them. Best effort by design: none is recorded, a lost one
is not retried, and a kill -9 mid-turn may leave the first reaction in place (the reply itself is recovered by the
ledger; the sweeper that finishes it does not touch reactions). A reply that fails takes its reaction away.
"""
from __future__ import annotations

from typing import Optional

from actors.adapters.pacing import PlatformPacing
from actors.messages import ConsumerArgs, PlatformOp
from actors.profiles.profiles import resolve, validate_profiles
from common.config import setting

FIRST_TYPING_AFTER_S = 1.0    # a reply with nothing to show by then gets the typing indicator (a faster one never
                              # costs the platform call)


def status_reactions(config: dict, profile: Optional[str] = None) -> tuple[str, str]:
    """The profile's ``status_reactions`` (else [sessions] status_reactions) -> (while working, once answered);
    ("", "") when off."""
    chosen = resolve(config, profile, validate_profiles(config)).status_reactions if profile else None
    words = str(setting(config, "sessions", "status_reactions") if chosen is None else chosen).split()
    return (words + ["", ""])[0], (words + ["", ""])[1]


def reply_reactions(args: ConsumerArgs) -> tuple[str, str]:
    """A reply's reactions as its turn started (``consumer_args``: a reload during the turn changes nothing of it)."""
    working, answered = (list(args.status_reactions) + ["", ""])[:2]
    return str(working), str(answered)


class ReplyStatus:
    def __init__(self, args: ConsumerArgs, pacing: PlatformPacing, reactions: tuple[str, str] = ("", "")):
        self.args, self.pacing = args, pacing
        self.working, self.answered = reactions if pacing.supports_reactions and args.reply_to else ("", "")
        self.held: Optional[PlatformOp] = None   # a hint made before the adapter was known

    def due(self, hint: Optional[PlatformOp], adapter_known: bool) -> list[PlatformOp]:
        """The hints to send now. A reaction made before the adapter is known is held until it is (the newest
        only: it replaces the one before); a typing indicator is sent only if the adapter is known (a late one
        says nothing)."""
        if hint is not None and hint.action == "react":
            self.held, hint = hint, None
        if not adapter_known:
            return []
        due = [op for op in (self.held, hint) if op is not None]
        self.held = None
        return due

    def first_typing_after(self) -> Optional[float]:
        return FIRST_TYPING_AFTER_S if self.pacing.typing_interval_s else None

    def typing_interval(self) -> float:
        return self.pacing.typing_interval_s or 5.0

    def typing(self) -> PlatformOp:
        return PlatformOp(f"{self.args.turn_id}:typing", "typing", self.args.chat_id,
                          thread_id=self.args.thread_id)

    def started(self) -> Optional[PlatformOp]:
        return self._react("working", self.working) if self.working else None

    def finished(self, delivered: bool) -> Optional[PlatformOp]:
        if not self.working and not self.answered:
            return None
        return self._react("done", self.answered if delivered else "")   # "": the reaction is taken away

    def _react(self, step: str, emoji: str) -> PlatformOp:
        return PlatformOp(f"{self.args.turn_id}:react-{step}", "react", self.args.chat_id, emoji,
                          message_id=self.args.reply_to, thread_id=self.args.thread_id,
                          chat_type=self.args.chat_type)
