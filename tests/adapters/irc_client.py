"""A small IRC client that plays the human in the tests: a socket, a reader thread, every line kept with the time
it came (monotonic), so a test can wait for what the bot said and check how it was paced.
"""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from actors.adapters.irc.formatting import Message, command, irc_lower, parse
from tests.actor_system import wait_for


@dataclass(frozen=True)
class Heard:
    at: float
    raw: bytes                     # the line as it came, CR LF included
    msg: Message


class IrcClient:
    def __init__(self, port: int, nick: str, password: str = "", host: str = "127.0.0.1"):
        self.port, self.nick, self.password, self.host = port, nick, password, host
        self.heard: list[Heard] = []
        self.sock: Optional[socket.socket] = None
        self._lock = threading.Lock()
        self.closed = threading.Event()

    def connect(self, timeout: float = 30.0) -> "IrcClient":
        self.closed.clear()
        self.sock = socket.create_connection((self.host, self.port), timeout=timeout)
        self.sock.settimeout(None)
        threading.Thread(target=self._read, args=(self.sock,), name=f"irc-{self.nick}", daemon=True).start()
        if self.password:
            self.send("PASS", self.password)
        self.send("NICK", self.nick)
        self.send("USER", self.nick, "0", "*", "test human")
        self.wait(lambda h: h.msg.command == "001", timeout, "the welcome (001)")
        return self

    def _read(self, sock: socket.socket) -> None:
        buffer = b""
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                buffer += data
                while b"\r\n" in buffer:
                    line, buffer = buffer.split(b"\r\n", 1)
                    msg = parse(line)
                    if msg.command == "PING":
                        sock.sendall(command("PONG", *msg.params[-1:]))
                    with self._lock:
                        self.heard.append(Heard(time.monotonic(), line + b"\r\n", msg))
        except OSError:
            pass
        finally:
            self.closed.set()

    def send(self, name: str, *params: str, trailing: bool = False) -> None:
        self.sock.sendall(command(name, *params, trailing=trailing))

    def say(self, target: str, text: str) -> None:
        self.send("PRIVMSG", target, text, trailing=True)

    def join(self, channel: str, timeout: float = 30.0) -> None:
        self.send("JOIN", channel)
        self.wait(lambda h: h.msg.command == "366" and irc_lower(h.msg.params[1]) == irc_lower(channel), timeout,
                  f"joined {channel}")

    def lines(self, where: Callable[[Heard], bool] = lambda h: True) -> list[Heard]:
        with self._lock:
            return [h for h in self.heard if where(h)]

    def privmsgs(self, sender: str, target: Optional[str] = None) -> list[Heard]:
        return self.lines(lambda h: h.msg.command == "PRIVMSG" and irc_lower(h.msg.nick) == irc_lower(sender)
                          and (target is None or irc_lower(h.msg.params[0]) == irc_lower(target)))

    def wait(self, where: Callable[[Heard], bool], timeout: float, what: str) -> Heard:
        return wait_for(lambda: next(iter(self.lines(where)), None), timeout, 0.02,
                        f"{self.nick}: {what} (last lines: {[h.raw for h in self.lines()[-4:]]})")

    def online(self, nick: str, timeout: float = 30.0) -> None:
        """Wait until ``nick`` is on the server (ISON, asked again until it answers with the nick)."""
        def asked():
            mark = len(self.lines())
            self.send("ISON", nick)
            reply = wait_for(lambda: next((h for h in self.lines()[mark:] if h.msg.command == "303"), None), 10,
                             0.02, "the ISON reply")
            return irc_lower(nick) in [irc_lower(n) for n in reply.msg.params[-1].split()]
        wait_for(asked, timeout, 0.1, f"{nick} on the server")

    def answers(self, nick: str, timeout: float = 30.0) -> None:
        """Wait until ``nick`` answers a CTCP PING: on the server with a live connection (ISON still lists a
        connection that just died, until the server has noticed)."""
        def answered():
            token = f"{time.monotonic_ns()}"
            self.say(nick, f"\x01PING {token}\x01")
            try:
                wait_for(lambda: self.lines(lambda h: h.msg.command == "NOTICE" and h.msg.params[-1] ==
                                            f"\x01PING {token}\x01"), 1.0, 0.02, "the CTCP answer")
                return True
            except AssertionError:
                return False
        wait_for(answered, timeout, 0.0, f"{nick} to answer a CTCP PING")

    def synced(self, timeout: float = 30.0) -> None:
        """Everything the server sent us before now has been read: our PING's PONG comes after it."""
        token = f"sync-{time.monotonic_ns()}"
        self.send("PING", token)
        self.wait(lambda h: h.msg.command == "PONG" and h.msg.params[-1:] == (token,), timeout, "the PONG")

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.sendall(command("QUIT", "bye"))
            except OSError:
                pass
            sock.close()
