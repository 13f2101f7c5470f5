"""Small actors used by the supervision tests. They live in an importable module because every actor process
imports its class by dotted path."""
from __future__ import annotations

import os

from supervision.actor import GatewayActor
from supervision.supervisor import Supervisor


class Worker(GatewayActor):
    """Answers Ping (base behaviour); crashes, hangs or exits on a Fault when fault injection is on."""


class CrashOnStart(GatewayActor):
    def on_start(self, args) -> None:
        raise RuntimeError("cannot start: broken on purpose")


class StopsCleanly(GatewayActor):
    """Stops on its own, cleanly, when told to (transient children stay stopped after that)."""

    def on_str(self, message, sender) -> None:
        if message == "stop":
            self.stop_self(clean=True)
        elif message == "pid":
            self.send(sender, os.getpid())


class Sleeper(GatewayActor):
    """Long I/O on the async bridge: ("sleep", seconds, tag) answers ("woke", tag) when the coroutine is done, while
    the mailbox keeps moving (Ping answers in between)."""
    uses_bridge = True

    def on_tuple(self, message, sender) -> None:
        import asyncio
        _, seconds, tag = message
        self.bridge.submit(asyncio.sleep(seconds, result=(sender, tag)), tag="sleep")

    def on_bridge(self, item) -> None:
        sender, tag = item.result
        self.send(sender, ("woke", tag))


class NeedsDisk(GatewayActor):
    """Fails to start with a full disk (``StorageFull``) for as long as the file named by its args exists."""

    def on_start(self, args) -> None:
        from storage import StorageFull
        if os.path.exists(args["full_while"]):
            raise StorageFull("gateway.db: database or disk is full")


class DeafSupervisor(Supervisor):
    """A supervisor that never hears its children's exit notices, as when Thespian loses them."""

    def on_ChildActorExited(self, message, sender) -> None:
        pass


class LosesFirstQuestion(GatewayActor):
    """Never answers the first DescribeTree it gets, as if that question or its answer were lost on the way; answers
    every later one, saying it holds 5 items of work (a value only its own answer carries)."""

    def __init__(self):
        super().__init__()
        self.questions = 0

    def on_DescribeTree(self, message, sender) -> None:
        self.questions += 1
        if self.questions > 1:
            super().on_DescribeTree(message, sender)

    def pending_work(self) -> int:
        return 5


class CountsAddresses(Supervisor):
    """A supervisor that says how many child addresses Thespian's address manager still holds for it."""

    def on_str(self, message, sender) -> None:
        from runtime.child_addresses import addresses_held
        if message == "addresses":
            self.send(sender, ("addresses", addresses_held(self)))


class PlacedProbe(GatewayActor):
    """Placed by host like a session shard (common/cluster.py runs_here): says where it runs and which database a
    store there would open."""
    actorSystemCapabilityCheck = staticmethod(__import__("common.cluster", fromlist=["runs_here"]).runs_here)

    def receiveMessage(self, message, sender):
        if message == "where":
            from supervision.storage_access import store_path
            self.send(sender, {"pid": os.getpid(), "store": str(store_path({"gateway": {"state_dir": "/leader"}}))})
