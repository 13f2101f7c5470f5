"""Admin client: attach to the running gateway through its admin port, never start one.

``ActorSystem('multiprocTCPBase', {'Admin Port': p})`` silently starts a new actor system when nothing listens on
``p``; so the client first reads the runtime file and checks that the launcher is alive and the port answers, and
says "no gateway running" otherwise; a gateway that stops after that check makes the attach fail the same way
(runtime/attach_only.py), never start an admin of the client's. Every frame it sends is signed, and every reply
checked, with the running gateway's transport key (``<state>/run/transport.key``, daemon/transport_key.py). It never
calls ``shutdown()`` on its handle: for an attached client that would stop the gateway itself.
"""
from __future__ import annotations

import os
import socket
import time

from thespian.actors import ActorSystem

from actors.messages import DrainReport, DrainRequest, GatewayStatus, StatusRequest
from supervision.messages import DescribeTree, Fault, TreeNode, TreeReply
from common import peer_credentials
from daemon.transport_key import KeyUnreadable, read_key
from runtime import attach_only, frame_mac, loopback, peer_check
from common import processes
from supervision import tree as tree_mod
from daemon.asking import ask_for
from daemon.root_actor import ROOT_CLASS, ROOT_NAME
from common.logging_setup import thespian_log_defs
from common.runfiles import RunFiles


class NoGateway(Exception):
    pass


class AdminError(Exception):
    pass


class AdminClient:
    def __init__(self, config: dict):
        self.files = RunFiles(config["gateway"]["state_dir"])
        runtime = self.files.read_runtime()
        if not runtime or not processes.is_same_process(runtime["launcher_pid"], runtime.get("launcher_started")):
            raise NoGateway(f"no gateway running (state dir {self.files.state_dir})")
        if runtime.get("role") == "worker":   # its admin has no gateway tree: attaching would start a root there
            raise NoGateway(f"{self.files.state_dir} is worker host {runtime.get('host_name')} of the convention at "
                            f"{runtime.get('leader')}: run admin commands against the leader")
        self.runtime = runtime
        self.host, self.port = runtime["bind_host"], runtime["admin_port"]
        if not _answers(self.host, self.port):
            raise NoGateway(f"no gateway running: nothing answers on {self.host}:{self.port}")
        try:
            key = read_key(self.files.run_dir)
        except KeyUnreadable as exc:
            raise NoGateway(f"cannot talk to the gateway of {self.files.state_dir}: {exc}") from None
        loopback.install(self.host)
        # our reply port too
        peer_check.install(peer_credentials.admission(allow_remote=not peer_credentials.is_loopback(self.host)))
        frame_mac.install(key)   # what we send is signed; a reply that is not is never unpickled
        os.environ["THESPLOG_FILE"] = str(self.files.state_dir / "thespian.log")
        try:
            with attach_only.attaching():   # the gateway may stop after the check above: never start an admin
                self.asys = ActorSystem("multiprocTCPBase", {"Admin Port": self.port},
                                        logDefs=thespian_log_defs("ERROR"), transientUnique=True)
        except attach_only.AdminNotRunning:
            raise NoGateway(f"no gateway running: it stopped as this command attached ({self.host}:{self.port})") \
                from None
        self.root = self.asys.createActor(ROOT_CLASS, globalName=ROOT_NAME)

    def status(self, timeout: float = 10.0) -> GatewayStatus:
        reply = ask_for(self.asys, self.root, StatusRequest(), GatewayStatus, timeout)
        if reply is None:
            raise AdminError(f"the gateway did not answer a status request within {timeout:g}s")
        return reply

    def tree(self, timeout: float = 10.0):
        reply = ask_for(self.asys, self.root, DescribeTree(1), TreeReply, timeout)
        if reply is None:
            raise AdminError(f"the gateway did not describe its tree within {timeout:g}s")
        return reply.node

    def drain(self, timeout_s: float) -> DrainReport:
        reply = ask_for(self.asys, self.root, DrainRequest(timeout_s), DrainReport, timeout_s + 15)
        if reply is None:
            raise AdminError(f"no drain report within {timeout_s + 15:g}s")
        return reply

    def still_attached(self) -> bool:
        """The gateway attached to still runs: its launcher is alive and the runtime record is still its own. False
        once it stopped or was killed, and once another one started on the state dir (its actors are others)."""
        runtime = self.files.read_runtime()     # None while missing (a stopped gateway removes it)
        replaced = runtime is not None and runtime.get("launcher_pid") != self.runtime["launcher_pid"]
        return not replaced and processes.is_same_process(self.runtime["launcher_pid"],
                                                          self.runtime.get("launcher_started"))

    def wait_launcher_exit(self, timeout: float) -> bool:
        left = processes.wait_gone([self.runtime["launcher_pid"]], timeout)
        return not left

    def tell(self, message) -> None:
        self.asys.tell(self.root, message)

    def ask_actor(self, name: str, message, wanted: type, timeout: float = 10.0):
        """Ask the actor called ``name`` in the tree (a process actor: cells have no address of their own); None if
        it did not answer within ``timeout``. Raises AdminError if no such actor runs."""
        deadline = time.monotonic() + 10.0
        while True:
            named = [n for n, _parent, _ in tree_mod.walk(self.tree()) if n.name == name]
            node = next((n for n in named if n.ref is not None), None)
            if node is not None:
                return ask_for(self.asys, node.ref, message, wanted, timeout)
            # In the tree without an address: its supervisor was slow to answer this walk and showed it as it last
            # answered (supervision/describing.py). Walked again for a while before it is said not to run.
            if not named or time.monotonic() > deadline:
                raise AdminError(f"no actor called {name!r} is running (see `tree`)")
            time.sleep(0.1)

    def inject_fault(self, name: str, action: str, seconds: float = 0.0) -> TreeNode:
        """Fault injection (the daemon honours it only with [debug] fault_injection): the actor or cell called
        ``name`` crashes, hangs or exits. A cell has no address of its own: its shard is told which cell."""
        deadline = time.monotonic() + 10.0
        while True:
            found = next(((node, parent) for node, parent, _ in tree_mod.walk(self.tree()) if node.name == name), None)
            if found is None:
                raise AdminError(f"no actor or cell called {name!r} is running (see `tree --all`)")
            node, parent = found
            if node.ref is not None:
                self.asys.tell(node.ref, Fault(action, seconds))
                return node
            if parent is not None and parent.ref is not None:
                self.asys.tell(parent.ref, Fault(action, seconds, target=name))
                return node
            # Shown as last known, without addresses (its supervisor was slow to answer this walk): walk again.
            if time.monotonic() > deadline:
                raise AdminError(f"{name} is in the tree but its shard did not answer for 10s; try again")
            time.sleep(0.1)


def _answers(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
