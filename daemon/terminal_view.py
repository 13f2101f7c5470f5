"""How the terminal chat shows an answer: redrawn in place on a terminal, written once when it ends into a pipe.

An answer is one or more messages of the bot (a reply longer than a message is cut into parts), each sent and then
edited as the model streams: the gateway sends the whole text of a message each time, with a cursor while it
streams (and, in an open code block, the fence that closes it after the cursor). ``Answer`` keeps the messages'
latest texts; the views show them as one text, the parts a line apart.

``LiveView`` keeps the screen showing exactly that text: each change erases the rows from the first one that
differs and writes the rest again (``screen_layout.redraw``), so an answer is on screen once however its previews
differ. ``PipedView`` writes each answer once, as it ends, without the cursor: what a program reading the output
wants.
"""
from __future__ import annotations

import os
from collections import OrderedDict
from typing import Callable, Optional

from daemon.screen_layout import Layout, lay_out, redraw
from daemon.tty_modes import interrupts_deferred

CURSOR = " ▍"
REMEMBERED = 64         # messages of answers already ended whose text is remembered (a late copy is not shown again)


class Answer:
    """The messages of the answer being shown, by id in the order they came, and those of earlier answers."""

    def __init__(self) -> None:
        self.parts: dict[str, str] = {}
        self.ended: OrderedDict[str, str] = OrderedDict()

    def show(self, message_id: str, text: str) -> bool:
        """A send or edit; False if it changes nothing on screen."""
        if message_id not in self.parts and self.ended.get(message_id) == text:
            return False        # the last edit of an answer that ended arriving again: it is on screen already
        if self.parts.get(message_id) == text:
            return False
        self.parts[message_id] = text
        return True

    def delete(self, message_id: str) -> bool:
        return self.parts.pop(message_id, None) is not None

    def text(self) -> str:
        return "\n".join(self.parts.values())

    def end(self) -> str:
        """The answer's text, and the next message starts a new answer."""
        text = self.text()
        self.ended.update(self.parts)
        while len(self.ended) > REMEMBERED:
            self.ended.popitem(last=False)
        self.parts = {}
        return text


class PipedView:
    """Each answer once, when it ends: previews never reach a pipe."""
    live = False

    def __init__(self, out) -> None:
        self.out = out
        self.answer = Answer()

    def show(self, message_id: str, text: str) -> None:
        self.answer.show(message_id, text)

    def delete(self, message_id: str) -> None:
        self.answer.delete(message_id)

    def end(self) -> None:
        text = self.answer.end().replace(CURSOR, "")
        if text:
            self.out.write(text + "\n")
            self.out.flush()


class LiveView:
    """The answer being streamed, redrawn in place below the line the user typed."""
    live = True

    def __init__(self, out, size: Optional[Callable[[], os.terminal_size]] = None) -> None:
        self.out = out
        self.size = size or (lambda: os.get_terminal_size(out.fileno()))
        self.answer = Answer()
        self.drawn: Optional[tuple[str, int, Layout]] = None   # on screen: (text, columns, layout); None: nothing

    def show(self, message_id: str, text: str) -> None:
        if self.answer.show(message_id, text):
            self.draw(self.answer.text())

    def delete(self, message_id: str) -> None:
        if self.answer.delete(message_id):
            self.draw(self.answer.text())

    def end(self) -> None:
        """The answer is complete: it stays as it is (without the cursor, if its final text never came), and what
        follows starts on the line below it."""
        text = self.answer.end()
        if self.drawn is not None:
            self.draw(text.replace(CURSOR, ""), ending=True)

    def draw(self, text: str, ending: bool = False) -> None:
        try:
            columns, lines = self.size()
        except OSError:                      # no longer a terminal (detached)
            columns, lines = 0, 0
        # A terminal that does not know its size (a pty nobody set one on) says 0: the usual size, then.
        columns, lines = columns if columns > 0 else 80, lines if lines > 0 else 24
        old = None
        if self.drawn is not None:
            # A terminal resized meanwhile may have rewrapped the old rows: counted again at the new width.
            old_text, old_columns, old = self.drawn
            old = old if old_columns == columns else lay_out(old_text, columns)
        new = lay_out(text, columns)
        # All of it or nothing: a Ctrl-C halfway through would leave the screen showing neither text.
        with interrupts_deferred():
            self.out.write(redraw(old, new, lines) + ("\n" if ending else ""))
            self.out.flush()
            self.drawn = None if ending else (text, columns, new)


RETRY_HINT = "/retry sends your message again"


def failed_answer(text: str, error: str) -> str:
    """What stays of a failed turn's answer once its error is shown apart: the text without its trailing notice."""
    text = text.replace(CURSOR, "").rstrip()
    return text[:-len(error)].rstrip() if error and text.endswith(error) else text


def error_lines(error: str, colour: bool) -> str:
    """The error of a failed turn, told apart from an answer: ``error:`` first (red on a terminal), and the hint."""
    if not colour:
        return f"error: {error}\n({RETRY_HINT})\n"
    return f"\x1b[1;31merror:\x1b[0;31m {error}\x1b[0m\n\x1b[2m({RETRY_HINT})\x1b[0m\n"


def end_failed(view, error: str) -> None:
    """End the answer of a failed turn: what the model said before it failed stays as an answer, the error follows
    in its own style (``view``: a LiveView or a PipedView; a terminal's in colour unless NO_COLOR is set)."""
    answer = view.answer
    for message_id in list(answer.parts):          # the notice the answer ends with is shown apart, once
        answer.parts[message_id] = failed_answer(answer.parts[message_id], error)
    answer.parts = {k: v for k, v in answer.parts.items() if v}
    if view.live and view.drawn is not None:
        view.draw(answer.text())
    if answer.parts:
        view.end()
    else:                        # nothing but the notice: the error takes the answer's place on screen
        answer.end()
        if view.live:
            view.drawn = None
    view.out.write(error_lines(error, view.live and not os.environ.get("NO_COLOR")))
    view.out.flush()
