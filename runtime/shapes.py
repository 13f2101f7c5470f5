"""How a module of the seam says what it expects of an internal: present, of a kind, taking these parameters, its
code still reading these names. Each module's ``missing()`` is built from these; runtime/selftest.py runs them all.

Every check is a lookup or a look at a code object: nothing is called, nothing is patched, a few microseconds each.
A problem is one short string naming the internal (``asyncio.BaseEventLoop._run_once is missing``)."""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Iterable, Optional


def module(name: str, problems: list[str]) -> Optional[Any]:
    """The module ``name``, or None with the problem noted."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - whatever stops the import is what the refusal names
        problems.append(f"module {name} cannot be imported ({type(exc).__name__}: {exc})")
        return None


def need(owner: Any, label: str, name: str, problems: list[str], *, kind: Optional[type] = None,
         params: Optional[Iterable[str]] = None, uses: Iterable[str] = ()) -> Optional[Any]:
    """``owner.name`` (its raw class attribute for a class: a staticmethod stays one), or None with the problem
    noted. ``kind``: it is an instance of that type. ``params``: a function whose parameters are exactly these, in
    this order. ``uses``: a function whose code reads or sets each of these names (an attribute it relies on).
    Where the seam has patched the function already, the original it wraps (``__wrapped__``) is what is checked."""
    where = f"{label}.{name}"
    if owner is None:
        return None
    found = inspect.getattr_static(owner, name, _ABSENT) if isinstance(owner, type) else getattr(owner, name, _ABSENT)
    if found is _ABSENT:
        problems.append(f"{where} is missing")
        return None
    if kind is not None and not isinstance(found, kind):
        problems.append(f"{where} is a {type(found).__name__}, not a {kind.__name__}")
        return None
    function = found.__func__ if isinstance(found, (staticmethod, classmethod)) else found
    function = getattr(function, "__wrapped__", function)   # one of the seam's patches: the original's shape
    code = getattr(function, "__code__", None)
    if params is not None:
        expected = tuple(params)
        seen = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount] if code is not None else None
        if seen != expected:
            problems.append(f"{where} takes ({', '.join(seen or ('?',))}), expected ({', '.join(expected)})")
    for used in uses:
        if code is None or used not in code.co_names:
            problems.append(f"{where} no longer uses {used}")
    return found


_ABSENT = object()
TCP_MODULE = "thespian.system.transport.TCPTransport"


def tcp_transport(problems: list[str]) -> tuple[Optional[Any], Optional[type]]:
    """Thespian's TCP transport module and its ``TCPTransport`` class (what most of the patches change), each None
    with the problem noted when it is not there."""
    tcp = module(TCP_MODULE, problems)
    return tcp, need(tcp, TCP_MODULE, "TCPTransport", problems, kind=type)
