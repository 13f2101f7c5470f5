"""Admin output for a person at a terminal, drawn with rich: the actor tree, tables, a spinner while a command waits.

Only when the stream is a terminal (its own ``isatty()``, not rich's guess: ``FORCE_COLOR`` in a CI's environment
must not turn a pipe into a terminal). Piped or redirected output (scripts, tests, ``| grep``) stays the plain text
each command has always printed, line for line, and ``--json`` is never drawn.

Every Console is made at the moment of drawing, on the ``sys.stdout`` (or ``sys.stderr``) of that moment, which in
the admin CLI is ``common.redact.RedactingStream``: each write rich makes is redacted there. Each cell is redacted
before that too (``_text``), because rich wraps a long cell across lines, and a secret cut by a line break and
colour codes would no longer be found in the write. Cells are ``Text``, never markup: a session title or a reply
that says ``[bold]`` is shown as written.
"""
from __future__ import annotations

import contextlib
import sys
import time
from supervision import tree as tree_mod

STATE_STYLES = {"running": "green", "busy": "yellow", "draining": "yellow", "drained": "yellow",
                "starting": "cyan", "restarting": "bold red", "failed": "bold red", "unresponsive": "bold red"}


def for_a_person(stream=None) -> bool:
    """``stream`` (default: stdout) is a terminal, so output may be drawn rather than printed line by line."""
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # no isatty, or a closed stream
        return False


def console(stream=None):
    from rich.console import Console   # rich loads only when drawing for a terminal
    return Console(file=sys.stdout if stream is None else stream, highlight=False, emoji=False)


def show(renderable) -> None:
    console().print(renderable)


def _text(value, style: str = ""):
    from rich.text import Text   # rich loads only when drawing for a terminal
    scrub = getattr(sys.stdout, "redact", None)   # the RedactingStream's own redaction, cell by cell
    text = "" if value is None else str(value)
    return Text(scrub(text) if scrub else text, style=style)


def table(columns: list[str], rows: list[list], title: str | None = None, right: tuple[str, ...] = (),
          wrap: tuple[str, ...] = ()):
    """A table of ``rows`` (one value per column; ``None`` or ``""`` shows as empty, and a column empty in every
    row is left out). ``right``: the columns of numbers, aligned right; ``wrap``: the columns of free text, folded
    over lines when the terminal is too narrow (the others, ids and states, keep one line: an id cut in two cannot
    be copied)."""
    from rich import box   # rich loads only when drawing for a terminal
    from rich.table import Table
    kept = [i for i, _ in enumerate(columns) if any(_filled(row[i]) for row in rows)] if rows else \
        list(range(len(columns)))
    drawn = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=_text(title) if title else None, title_justify="left")
    for i in kept:
        name = columns[i]
        drawn.add_column(name, justify="right" if name in right else "left", overflow="fold",
                         no_wrap=name not in wrap)
    for row in rows:
        drawn.add_row(*(row[i] if hasattr(row[i], "__rich_console__") else _text(row[i]) for i in kept))
    return drawn


def _filled(cell) -> bool:
    return bool(cell.plain if hasattr(cell, "plain") else cell not in (None, ""))


def styled(value, style: str):
    """One cell in a style of its own (a state's colour)."""
    return _text(value, style)


def state_style(state: str) -> str:
    return STATE_STYLES.get(state, "")


def actor_tree(root, every_cell: bool = False, now: float | None = None):
    """The supervision tree as rich draws it: what ``supervision.tree.render`` prints, with guides and colour."""
    from rich.tree import Tree   # rich loads only when drawing for a terminal
    now = now or time.time()

    def label(node):
        f = tree_mod.fields(node, now)
        line = _text(f["label"], "bold")
        line.append_text(_text(f"  [{f['state']}]", state_style(f["state"])))
        line.append_text(_text(f"  pid={f['pid']}  up {f['uptime']}  "))
        line.append_text(_text(f["address"], "dim"))
        if f["extra"]:
            line.append_text(_text("  " + " ".join(f["extra"]), "magenta"))
        return line

    def grow(branch, node):
        children, hidden = tree_mod.shown_children(node, every_cell)
        for child in children:
            grow(branch.add(label(child)), child)
        if hidden:
            branch.add(_text(tree_mod.hidden_text(hidden), "dim"))

    drawn = Tree(label(root), guide_style="dim")
    grow(drawn, root)
    return drawn


@contextlib.contextmanager
def waiting(args, what: str):
    """A spinner on stderr saying ``what`` while the block runs, for a person at a terminal; nothing otherwise
    (``--json``, or stderr not a terminal): stdout keeps the command's answer alone."""
    if getattr(args, "json", False) or not for_a_person(sys.stderr):
        yield
        return
    from rich.live import Live   # rich loads only when drawing for a terminal
    from rich.spinner import Spinner
    # Not Console.status: its Live takes over sys.stdout while it spins, and the command's answer belongs there.
    with Live(Spinner("dots", _text(what)), console=console(sys.stderr), transient=True, refresh_per_second=12.5,
              redirect_stdout=False, redirect_stderr=False):
        yield
