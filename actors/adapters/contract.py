"""The adapter kit's contract, written as code: what a platform must write (abstract) and what it may write (a
default that refuses clearly, or does nothing where doing nothing is right). ``PlatformAdapter`` (base.py) is this
contract with the kit's machinery behind it; its docstring lists the whole contract with the helpers, and
docs/adapters.md walks through a platform end to end.

Every ``async`` method runs on the adapter's bridge loop (its own thread): it may await network I/O and the
adapter's store, and must never block the loop on a synchronous call (``asyncio.to_thread`` for those). The
capability a method serves is in brackets: the kit asks for it only where the platform's ``Capabilities`` say so,
and tests/actors/adapters/test_contract.py checks that each platform implements exactly what it declares.
"""
from __future__ import annotations

import abc
from typing import Any, Optional

from actors.adapters.errors import PermanentError
from actors.adapters.lost_copies import Unresolved
from actors.adapters.media_intake import AttachmentGone
from actors.adapters.outbound import classify_error
from actors.messages import Attachment, MessageEvent, PlatformOp


class PlatformContract(abc.ABC):
    """The methods a platform writes. It declares no fields: what they read (``settings``, ``name``, ``profile``,
    ``offset``, ``pacing``) is the adapter's (base.py)."""

    @abc.abstractmethod
    def normalise(self, raw: Any) -> MessageEvent:
        """One raw event of the platform as a ``MessageEvent`` (pure; any thread). Raise ``MalformedPayload(reason)``
        for input that is no valid event: it is logged, counted and skipped, and its round still commits."""

    @abc.abstractmethod
    def normal_silence_s(self) -> float:
        """The longest silence of a connected intake that is normal for this platform, in seconds (actor thread, at
        start): past it with no ``report_progress()`` the intake is a zombie and the adapter is restarted. Derive it
        from what the platform guarantees: a long poll's wait plus its request timeout, twice a heartbeat interval,
        a server's self-probe interval (liveness.py). ``[adapters.NAME] max_silence_s`` overrides it."""

    @abc.abstractmethod
    async def send_message(self, op: PlatformOp) -> str:
        """Send ``op.text`` to ``op.chat_id`` (in ``op.thread_id``, replying to ``op.reply_to``) -> its message id.
        Raise the classes of actors.adapters.errors; a send whose fate is unknown sets ``maybe_done``."""

    @property
    @abc.abstractmethod
    def push_style(self) -> bool:
        """True: the platform pushes (``run_intake(emit)``); False: the adapter polls (``fetch()``). Given by the
        intake styles of intake_styles.py; a platform with two modes (Telegram) decides from its settings."""

    async def connect(self) -> None:
        """Open the inbound connection (loop). Called before intake and after each failure."""

    async def disconnect(self) -> None:
        """Close the inbound connection (loop); idempotent, may be called when not connected."""

    async def fetch(self) -> tuple[list, Any]:
        """A polling intake's round (loop): the raw events after ``self.offset`` and the offset that acknowledges
        them (None: unchanged). It may block as long as the platform's long poll; ``PollingAdapter`` makes it
        abstract."""
        raise NotImplementedError(f"{type(self).__name__} polls but implements no fetch()")

    async def run_intake(self, emit) -> None:
        """A pushed intake (loop), forever: ``await emit(raws, offset)`` per batch, then acknowledge the platform.
        Returning means the platform ended the stream (the intake reconnects). ``StreamingAdapter`` and
        ``ServingAdapter`` make it abstract."""
        raise NotImplementedError(f"{type(self).__name__} is pushed to but implements no run_intake()")

    async def send_file(self, op: PlatformOp) -> str:
        """[files_out] A send of ``op.file`` (bytes: ``file_bytes``) -> its message id (loop)."""
        raise PermanentError(f"the {type(self).__name__} sends no files")

    async def edit_message(self, op: PlatformOp) -> None:
        """[edit] Message ``op.message_id`` now shows ``op.text`` (loop). An edit to the same text is a success.

        The default, for a platform without edits: its replies stream no previews, so every part left with its final
        text, and an edit to a final text (the sweeper, or a consumer taking a reply over, bringing a recorded part
        up to date) finds the part showing it already: done, nothing sent. Any other edit is refused."""
        if not op.final:
            raise PermanentError(f"the {type(self).__name__} cannot edit a sent message", method="edit")

    async def delete_message(self, op: PlatformOp) -> None:
        """[delete] Take message ``op.message_id`` back (loop). One already gone is a success."""
        raise PermanentError(f"the {type(self).__name__} cannot delete a sent message")

    async def send_typing(self, op: PlatformOp) -> None:
        """[typing] Show the typing indicator in ``op.chat_id`` (loop). The default shows none, quietly: typing is
        a courtesy, never a failure."""

    async def set_reaction(self, op: PlatformOp) -> None:
        """[reactions] The bot's reaction on message ``op.message_id`` becomes ``op.text`` (an emoji; "": none)
        (loop). Only adapters whose pacing says ``supports_reactions`` are asked (actors/sessions/reply_status.py)."""
        raise PermanentError(f"the {type(self).__name__} sets no reactions")

    async def download_attachment(self, attachment: Attachment, cap: int) -> bytes:
        """[files_in] The bytes of a pending attachment (loop; at most ``cap``: raise AttachmentTooLarge past it,
        AttachmentGone when the platform will never give them)."""
        raise AttachmentGone(f"the {type(self).__name__} fetches no files")

    async def find_lost_copy(self, op: PlatformOp) -> Optional[str]:
        """[pacing finds_lost_copies] ``find_lost``: the id of the copy a lost send of part ``op.ledger[2]`` left in
        the chat, now showing ``op.text``, or None if that send never landed; raises ``Unresolved`` when the
        platform cannot tell (lost_copies.py)."""
        raise Unresolved("the platform gives no way to find a lost copy")

    async def close(self) -> None:
        """Release outbound clients at stop (loop)."""

    def classify(self, exc: BaseException) -> tuple[str, float]:
        """(kind, retry_after) of a failure (loop): kind is one of actors.adapters.errors' kinds."""
        return classify_error(exc)

    def served_url(self) -> Optional[str]:
        """The URL this adapter serves (a chat page, an API, a webhook) once it listens; None: it serves none (any
        thread: reads what the loop set)."""
        return None

    def status_note(self) -> str:
        """A short line of the platform's own that ``status`` shows after the adapter's state (OneBot: the account
        and its pace); "": none (actor thread: reads what the loop set)."""
        return ""
