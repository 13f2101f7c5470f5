"""The benchmarks' printed tables: drawn by rich for a person at a terminal, the plain lines otherwise.

Piped or redirected (a CI log, ``> results.txt``, a script reading the figures) every benchmark prints the same
aligned lines as before, flushed as each row is measured; on a terminal the same rows are a rich table (the
admin CLI's drawing, daemon/cli_rich.py), growing as rows arrive where a benchmark measures one row at a time.
"""
from __future__ import annotations

import contextlib
import sys

from daemon import cli_rich


def show(columns: list[str], rows: list[list], plain: list[str], right: tuple[str, ...] = (),
         title: str | None = None) -> None:
    """``rows`` as a table on a terminal; else ``plain``, the lines as the benchmark has always printed them."""
    if cli_rich.for_a_person():
        cli_rich.show(cli_rich.table(columns, rows, title=title, right=right, wrap=(columns[0],)))
    else:
        print("\n".join(plain), flush=True)


@contextlib.contextmanager
def growing(columns: list[str], plain_header: str, right: tuple[str, ...] = ()):
    """A table whose rows arrive one by one: yields ``add(row, plain_line)``. On a terminal the table is redrawn
    in place as it grows; else the header line, then each plain line as it comes (flushed)."""
    if not cli_rich.for_a_person():
        print(plain_header, flush=True)
        yield lambda row, line: print(line, flush=True)
        return
    from rich.live import Live
    drawn = cli_rich.table(columns, [], right=right)
    with Live(drawn, console=cli_rich.console(), refresh_per_second=4, redirect_stdout=False,
              redirect_stderr=False):
        yield lambda row, line: drawn.add_row(*(cli_rich.styled(cell, "") for cell in row))
    sys.stdout.flush()
