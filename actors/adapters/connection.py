"""What an adapter tells the operator about its platform connection, and how `status` reads it from the tree.

An adapter keeps a ``ConnectionView`` on its actor thread, fed by its intake (connected; a failed attempt with its
redacted error; stopped by a drain), and puts it in the facts of its ``TreeNode``; the root's status walk then
turns every adapter node into one row (``adapter_rows``). Pure: no actor, no clock but the one passed in.

States a row can have:

    connected    the platform connection is up (the intake ran a round, or the server listens)
    connecting   not yet up, and no attempt has failed yet (the first seconds after a start); after a crash of
                 the adapter (restarts > 0) it counts as down, with the crash as its error: an adapter in a crash
                 loop spends its short lives connecting
    retrying     the last attempt failed; the intake tries again with backoff (error: why; since: down since when)
    stopped      a drain stopped the intake (outbound still works)
    paused       an operator paused the intake (`adapters pause NAME`, or the console): the platform keeps what is
                 sent meanwhile and the intake takes it on `adapters resume`; outbound still works. Down, so the
                 health says so until it is resumed (a pause lasts the adapter's life: a restart takes messages again)
    restarting   the adapter actor crashed and its supervisor is starting it again (error: the crash)
    failed       its supervisor gave up on it, or it stopped answering (error: the last crash, if any)
    up           an adapter without a platform connection (the terminal chat), running
"""
from __future__ import annotations

import enum

from supervision import tree

DOWN_STATES = ("retrying", "stopped", "paused", "restarting", "failed")   # a configured adapter in one of these is down
ERROR_CHARS = 300


class Connection(enum.StrEnum):
    """What an adapter's own actor knows of its connection (the first four states above; the others are the tree's).
    str-valued: the value is the ``connection`` fact of its TreeNode and the state `status` shows, unchanged.

      CONNECTING -> CONNECTED | RETRYING      the intake ran a round / an attempt failed
      CONNECTED <-> RETRYING                  the connection dropped / came back
      any -> STOPPED                          a drain stopped the intake (for good: the actor is stopped next)
      any but STOPPED <-> PAUSED              an operator paused the intake / resumed it (back to CONNECTING)
    """
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RETRYING = "retrying"
    STOPPED = "stopped"
    PAUSED = "paused"


class ConnectionView:
    """One adapter's connection as its actor thread learnt it. ``since``: wall-clock time of the last change
    between up and not up (so "retrying since" is how long the connection has been down, not the last attempt).
    ``messages_in`` / ``messages_out``: messages this adapter's life took from the platform (new rows stored) and
    sent to it (sends the platform accepted)."""

    def __init__(self, now: float, local: bool = False):
        self.state, self.since, self.error, self.attempts = Connection.CONNECTING, now, "", 0
        self.paused_by = ""
        self.messages_in = self.messages_out = 0
        self.local = local     # no platform connection (the terminal chat): its row says "up" while it runs

    def connected(self, now: float) -> None:
        if self.state is Connection.PAUSED:   # a report of the intake before its pause, read after it
            return
        if self.state is not Connection.CONNECTED:
            self.since = now
        self.state, self.attempts = Connection.CONNECTED, 0

    def retrying(self, error: str, attempt: int, now: float) -> None:
        if self.state is Connection.PAUSED:
            return
        if self.state is Connection.CONNECTED:
            self.since = now
        self.state, self.error, self.attempts = Connection.RETRYING, " ".join(error.split())[:ERROR_CHARS], attempt

    def stopped(self, now: float) -> None:
        if self.state is not Connection.STOPPED:
            self.state, self.since = Connection.STOPPED, now

    def paused(self, by: str, now: float) -> None:
        if self.state is not Connection.STOPPED:
            self.state, self.since, self.paused_by = Connection.PAUSED, now, by

    def resumed(self, now: float) -> None:
        if self.state is Connection.PAUSED:
            self.state, self.since, self.paused_by, self.attempts = Connection.CONNECTING, now, "", 0

    def facts(self, url: str | None = None) -> tuple:
        """The ``TreeNode.facts`` of the adapter: what `tree` shows and `status` reads."""
        counts = (("messages_in", self.messages_in), ("messages_out", self.messages_out))
        if self.local:
            return ((("url", url),) if url else ()) + counts
        facts = [("connection", self.state.value), ("since", round(self.since, 3)), *counts]   # plain str on wire
        if self.state is Connection.RETRYING:
            facts += [("attempts", self.attempts), ("error", self.error)]
        if self.state is Connection.PAUSED:
            facts.append(("paused_by", self.paused_by))
        if url:
            facts.append(("url", url))
        return tuple(facts)


def adapter_rows(root, configured: dict | None = None) -> list[dict]:
    """One row per adapter under the root's AdapterSupervisor: name, kind, state (see the module docstring), and where
    known since, error, attempts, url and the platform's own note (``status_note``: OneBot's pace). An adapter the
    tree could not describe shows as the tree says; one of ``configured`` ({name: kind}) missing from the tree (its
    supervisor was just restarted and has not started it yet) shows as restarting."""
    rows = []
    for node, parent, _depth in tree.walk(root):
        if parent is None or parent.kind != "AdapterSupervisor":
            continue
        facts = dict(node.facts)
        row = {"name": node.name, "kind": node.kind, "state": _state(node, facts)}
        if row["state"] in ("restarting", "failed"):
            if node.last_exit:
                row["error"] = " ".join(str(node.last_exit).split())[:ERROR_CHARS]
        else:
            row.update({k: facts[k] for k in ("since", "attempts", "error", "url", "paused_by", "messages_in",
                                              "messages_out", "note") if k in facts})
            if row["state"] == "connecting" and node.restarts and node.last_exit:
                row.update(restarts=node.restarts, error=" ".join(str(node.last_exit).split())[:ERROR_CHARS])
            elif node.restarts and node.last_exit:
                # Up again after a restart (a zombie intake's, say: actors/adapters/liveness.py): why it restarted
                # stays visible, so a connection that keeps going silent is seen before users say so.
                row.update(restarts=node.restarts, last_restart=" ".join(str(node.last_exit).split())[:ERROR_CHARS])
        rows.append(row)
    seen = {row["name"] for row in rows}
    rows += [{"name": name, "kind": kind, "state": "restarting"} for name, kind in (configured or {}).items()
             if name not in seen]
    return rows


def _state(node, facts: dict) -> str:
    if node.state in tree.FAILED_STATES:
        return "failed"
    if node.state in tree.RESTARTING_STATES:
        return "restarting"
    if node.state not in tree.UP_STATES:
        return "failed"                    # stopped for good by its supervisor
    return str(facts.get("connection", "up"))


def adapter_problems(rows: list[dict]) -> list[str]:
    """One short line per adapter that is down, for `status` and `health --ready`."""
    problems = []
    for row in rows:
        if is_down(row):
            after = f" after {row['restarts']} restart(s)" if row["state"] == "connecting" else ""
            why = (f": {row['error']}" if row.get("error") else
                   f" by {row['paused_by']}" if row.get("paused_by") else "")
            problems.append(f"adapter {row['name']} {row['state']}{after}{why}")
    return problems


def is_down(row: dict) -> bool:
    return row["state"] in DOWN_STATES or (row["state"] == "connecting" and bool(row.get("restarts")))


def adapter_node(root, name: str):
    """The running adapter called ``name`` in a walk's tree (a TreeNode with its address), or None: where the CLI
    and the console send an operator's AdapterCommand."""
    return next((node for node, parent, _depth in tree.walk(root)
                 if parent is not None and parent.kind == "AdapterSupervisor" and node.name == name
                 and node.ref is not None), None)
