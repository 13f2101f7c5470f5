"""Terminal modes of the chat while an answer streams: keys typed meanwhile wait, unseen, for the next prompt, and a
Ctrl-C waits for the redraw being written to end.

The terminal echoes what is typed where the cursor is, which is inside the answer being drawn: the typed text would
land in the middle of it, and the redraw, which counts the rows the answer takes, would then erase the wrong ones.
So echo is off while an answer streams, and so is line editing: the keys stay in the terminal's input queue, and
the next prompt (readline) reads them as if typed there, showing them on its line.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

try:
    import termios
except ImportError:  # not a POSIX system: keys are echoed as the terminal does
    termios = None

_NO_TERMINAL = (AttributeError, OSError, ValueError) + ((termios.error,) if termios is not None else ())


@contextmanager
def keys_held(stream) -> Iterator[None]:
    """While the block runs, keys typed on the terminal ``stream`` (stdin) are neither echoed nor read; Ctrl-C still
    interrupts. Nothing changes if ``stream`` is no terminal."""
    try:
        fd = stream.fileno()
        saved = termios.tcgetattr(fd) if termios is not None and stream.isatty() else None
    except _NO_TERMINAL:
        saved = None
    if saved is None:
        yield
        return
    held = list(saved)
    held[3] &= ~(termios.ECHO | termios.ICANON)
    held[6] = list(saved[6])
    held[6][termios.VMIN], held[6][termios.VTIME] = 1, 0
    # TCSANOW, not TCSAFLUSH: what was typed ahead stays queued for the next prompt.
    termios.tcsetattr(fd, termios.TCSANOW, held)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """SIGINT (Ctrl-C) is held while the block runs and arrives as it ends. Only the main thread can hold it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
