"""Direct links on their own: two hubs in one process, real abstract Unix sockets, real Thespian addresses."""
from __future__ import annotations

import itertools
import os
import select
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
from thespian.actors import ActorAddress
from thespian.system.transport.IPBase import TCPv4ActorAddress

from supervision import direct_link
from supervision.direct_link import LinkHub, frame, link_name

pytestmark = pytest.mark.timeout(30)

_ports = itertools.count(40_000 + os.getpid() % 10_000 * 2)


@dataclass(frozen=True)
class Note:
    n: int
    text: str = ""


def address() -> ActorAddress:
    return ActorAddress(TCPv4ActorAddress("127.0.0.1", next(_ports), external=False))


def take(hub: LinkHub, count: int, timeout: float = 10.0) -> list:
    """Poll the hub's descriptors as Thespian would until ``count`` messages arrived; says what came if not."""
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"only {len(got)} of {count} messages arrived: {got[-3:]}"
        ready, _, _ = select.select(hub.fds(), [], [], min(left, 0.5))
        got += hub.readable(ready)
    return got


@pytest.fixture
def pair():
    a, b = LinkHub(address(), "a"), LinkHub(address(), "b")
    yield a, b
    a.close()
    b.close()


def test_messages_arrive_in_order_with_the_sender_and_replies_use_the_same_link(pair):
    a, b = pair
    for n in range(100):
        assert a.send(b.own_address, Note(n))
    got = take(b, 100)
    assert [m.n for m, _ in got] == list(range(100))
    assert all(sender == a.own_address for _, sender in got)
    assert b.send(got[0][1], Note(-1, "reply"))
    assert [m for m, _ in take(a, 1)] == [Note(-1, "reply")]
    assert len(b.by_fd) == 1, "the reply opened a second connection instead of using the one that came in"


def test_an_address_nobody_listens_on_is_not_linked_and_remembered(pair):
    a, _ = pair
    nobody = address()
    assert not a.send(nobody, Note(1))
    assert link_name(nobody) in a.unlinkable
    assert not a.send(a.own_address, Note(2)), "a message to itself went over a link"


def test_a_message_bigger_than_the_socket_buffer_waits_and_is_flushed_whole(pair):
    a, b = pair
    big = Note(7, "x" * (8 * 1024 * 1024))
    assert a.send(b.own_address, big)
    got, deadline = [], time.monotonic() + 20
    while not got:
        assert time.monotonic() < deadline, "the big message never arrived"
        a.flush()
        ready, _, _ = select.select(b.fds(), [], [], 0.05)
        got = b.readable(ready)
    assert got[0][0] == big
    assert not a.flush(), "bytes still wait after the peer read the whole message"


def test_a_dead_peer_closes_the_link_and_sends_fall_back(pair):
    a, b = pair
    assert a.send(b.own_address, Note(1))
    take(b, 1)
    peer = b.own_address
    b.close()
    deadline = time.monotonic() + 10
    while a.send(peer, Note(2)):   # the first write after the peer's end closed may still be taken by the kernel
        assert time.monotonic() < deadline, "sends to a closed peer kept succeeding"
        ready, _, _ = select.select(a.fds(), [], [], 0.05)
        a.readable(ready)
    assert not a.by_peer


def test_garbage_on_a_link_closes_it_and_delivers_nothing(pair):
    _, b = pair
    rogue = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    rogue.connect(link_name(b.own_address))
    rogue.sendall(frame(direct_link.Hello(address())) + b"\xff\xff\xff\xff" + b"junk")
    deadline, accepted = time.monotonic() + 10, False
    while not accepted or b.by_fd:
        assert time.monotonic() < deadline, f"the broken link stayed open: {b.by_fd}"
        ready, _, _ = select.select(b.fds(), [], [], 0.05)
        assert b.readable(ready) == []
        accepted = accepted or bool(b.by_fd)
    rogue.settimeout(5)
    assert rogue.recv(1) == b"", "the hub did not close the connection that sent garbage"
    rogue.close()


@pytest.mark.skipif(os.getuid() != 0, reason="switching to another user needs root")
def test_another_user_is_refused_before_a_byte_is_read(pair):
    _, b = pair
    script = (
        "import os, pickle, socket, struct, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect('\\0' + sys.argv[1])\n"
        "body = pickle.dumps(('hostile',))\n"
        "s.settimeout(10)\n"
        # The gateway may close the connection before the frame is written (it checks the peer at accept): then
        # the write itself fails, which is a refusal too.
        "try: s.sendall(struct.pack('>I', len(body)) + body); print('closed' if s.recv(1) == b'' else 'open')\n"
        "except (BrokenPipeError, ConnectionResetError): print('closed')\n")
    child = subprocess.Popen([sys.executable, "-c", script, link_name(b.own_address)[1:]], stdout=subprocess.PIPE,
                             text=True)
    deadline = time.monotonic() + 15
    while child.poll() is None:
        assert time.monotonic() < deadline, "the other user's connection was neither closed nor answered"
        ready, _, _ = select.select(b.fds(), [], [], 0.05)
        assert b.readable(ready) == [], "a message from another user was delivered"
    assert child.stdout.read().strip() == "closed"
    assert not b.by_fd


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to listen as another uid")
def test_a_listener_another_user_squats_on_is_refused_and_never_read(pair):
    """Another user binds the abstract name an actor's link would listen on: a sender connecting to it refuses it
    by its owner, writes nothing to it, reads nothing from it, and sends by Thespian instead (False)."""
    a, _ = pair
    target = address()
    script = (
        "import os, pickle, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind('\\0' + sys.argv[1]); s.listen(4)\n"
        "print('listening', flush=True)\n"
        "conn, _ = s.accept()\n"
        "got = b''\n"
        "try:\n"
        # The sender may have refused and closed before this write: a broken pipe is the refusal, not a failure.
        "    conn.sendall(len(b := pickle.dumps(('squatted',))).to_bytes(4, 'big') + b)\n"
        "    conn.settimeout(10)\n"
        "    while chunk := conn.recv(4096): got += chunk\n"
        "except (socket.timeout, ConnectionResetError, BrokenPipeError): pass\n"
        "print('received %d bytes' % len(got), flush=True)\n")
    child = subprocess.Popen([sys.executable, "-c", script, link_name(target)[1:]], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "listening"
        assert a.send(target, Note(1)) is False, "a message went to another user's listener"
        assert child.wait(15) == 0
        assert child.stdout.read().strip() == "received 0 bytes"
        assert not a.by_fd and a.send(target, Note(2)) is False   # remembered: no second connection
    finally:
        child.kill()
