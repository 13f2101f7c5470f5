"""IrcLink: one connection to the IRC server at a time, on the adapter's loop (asyncio streams, no client library).

State: the streams, our nick and prefix as the server shows them (``nick!user@host``: from the welcome, our own
JOIN or USERHOST), the channels joined, the inbound queue, the barriers in flight, the connection-wide flood bucket.

    open()          connect, register (registration.py), ask to join the channels; raises PermanentError for a
                    refused configuration, RetryableError for the rest
    inbound         PRIVMSGs to us, as raw dicts, for the adapter's intake (bounded: a flood beyond it is dropped)
    send_part(target, progress, marker)   the lines of one part, each confirmed by the server before the next
    close()         QUIT and close (idempotent)

The reader answers the server's PING (and CTCP PING and VERSION, within the flood bucket), and pings the server itself after ``ping_interval_s`` of silence: no data at
all for ``ping_timeout_s`` and the connection is taken for dead (a half-open TCP connection is otherwise never
noticed). It runs whether or not the intake does, so replies go on while the gateway drains.

Delivery of a line: IRC answers nothing to a PRIVMSG that worked. Each line goes with a ``PING :token`` behind it;
the server handles one client's commands in order, so the PONG with that token means the line was handled, and an
error about its target in between (401 no such nick, 404 cannot send to the channel) means it was not. Only the
line written when the connection dies is unknown; ``progress`` keeps which one that was, and the line goes again
after the re-sent marker when the part is tried again. Pacing: every line spends one token of a bucket for the
whole connection (``flood_lines_per_s``, ``flood_burst``; the classic ircd rule of RFC 1459 §8.10 and ngircd's
throttling are in actors/adapters/irc/README.md).
"""
from __future__ import annotations

import asyncio
import itertools
import ssl
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from actors.adapters.errors import PermanentError, RetryableError
from actors.adapters.irc.formatting import BadLine, Message, command, irc_lower, is_channel, parse
from actors.adapters.irc.registration import NoNickLeft, Registration, RegistrationRefused
from actors.adapters.pacing import ChatBudget

TARGET_ERRORS = ("401", "403", "404", "406", "407", "411", "412", "437", "477", "489")
JOIN_REFUSALS = ("405", "471", "473", "474", "475", "476")
LINE_LIMIT = 16384                 # a server line longer than this is broken input: the connection is dropped
REJOIN_S = 10.0
REGAIN_S = 15.0                    # registered under another nick: ask for ours this often
FIRST_REGAIN_S = 3.0               # ... and first this soon after registering


class LinkLost(RetryableError):
    """The connection ended (closed, reset, ping timeout)."""


class TargetRefused(PermanentError):
    """The server refused a line for its target (``code``: 401, 404, ...)."""

    def __init__(self, code: str, text: str, target: str):
        super().__init__(f"{code} for {target}: {text}", method="PRIVMSG")
        self.code = code


@dataclass
class Progress:
    """How far the lines of one part got: ``payloads`` fixed at the first attempt, ``done`` confirmed by the server,
    ``unknown`` the index of a line written when the connection died (its fate unknown)."""
    payloads: list
    done: int = 0
    unknown: Optional[int] = None
    marked: bool = field(default=False)


class IrcLink:
    def __init__(self, settings: dict, name: str, say: Callable[..., None], alive: Callable[[], None] = lambda: None):
        self.settings, self.name, self.say = settings, name, say
        self.alive = alive                 # each line from the server: the connection's proof of life
        self.nick = settings["nick"]
        self.own_prefix: Optional[str] = None
        self.joined: set[str] = set()
        self.inbound: asyncio.Queue = asyncio.Queue(maxsize=settings["max_queued_lines"])
        self.dropped = 0                   # inbound lines dropped because the queue was full
        self.connections = 0               # connections registered so far (each one's lines get their own epoch)
        self.epoch = ""
        self.ready = asyncio.Event()
        self.closed = asyncio.Event()
        self.closed.set()
        self.failure: Optional[BaseException] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._reader_task: Optional[asyncio.Task] = None
        self._barriers: dict[str, asyncio.Future] = {}
        self._errors: dict[str, tuple[str, str]] = {}
        self._tokens = itertools.count(1)
        self._one_line = asyncio.Lock()
        self._received = itertools.count(1)
        self._error_text = ""
        # Full at the start: a server counts a client's flood per connection, and this process's first connection
        # is a new one (a restarted adapter's old connection died with it).
        self.bucket = ChatBudget(settings["flood_lines_per_s"], settings["flood_burst"], time.monotonic())

    # ------------------------------------------------------------------------------------------ connecting
    async def open(self) -> None:
        await self.close()
        s = self.settings
        context = ssl.create_default_context() if s["tls"] else None
        if context is not None and not s["tls_verify"]:
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        where = f"{s['host']}:{s['port']}"
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(s["host"], s["port"], ssl=context, limit=LINE_LIMIT), s["connect_timeout_s"])
        except (OSError, asyncio.TimeoutError) as exc:
            raise RetryableError(f"cannot connect to {where}: {type(exc).__name__}: {exc}", method="connect") from None
        self._writer, self._error_text = writer, ""
        registration = Registration(s["nick"], s["username"] or s["nick"], s["realname"], tuple(s["alt_nicks"]),
                                    s["server_password"], s["sasl_username"], s["sasl_password"])
        try:
            await asyncio.wait_for(self._register(reader, registration), s["connect_timeout_s"])
        except RegistrationRefused as exc:
            await self.close()
            raise PermanentError(str(exc), method="register") from None
        except NoNickLeft as exc:
            await self.close()
            raise RetryableError(str(exc), method="register", retry_after=30.0) from None
        except asyncio.TimeoutError:
            await self.close()
            raise RetryableError(f"{where} did not register us within {s['connect_timeout_s']:g}s",
                                 method="register") from None
        except BaseException:
            await self.close()
            raise
        self.nick, self.own_prefix = registration.nick, registration.own_prefix
        self.failure = None
        self.connections += 1
        self.epoch = f"{time.time_ns():x}"   # a new one per connection: the lines it carries are new
        self.joined.clear()
        self.closed.clear()
        if self.own_prefix is None:
            self._write(command("USERHOST", self.nick))
        now = asyncio.get_running_loop().time()
        for channel in s["channels"]:
            self._join(channel)
            self.bucket.consume(now)     # a JOIN is a message to the server's flood counter too
        self._reader_task = asyncio.get_running_loop().create_task(self._read(reader, writer))
        self.ready.set()

    async def _register(self, reader: asyncio.StreamReader, registration: Registration) -> None:
        for line in registration.start():
            self._write(line)
        while not registration.done:
            raw = await reader.readline()
            if not raw:
                text = self._error_text or "the server closed the connection during registration"
                if "password" in text.lower() and self.settings["server_password"]:
                    raise RegistrationRefused(f"the server refused us: {text}")
                raise RetryableError(text, method="register")
            msg = self._parsed(raw)
            if msg is None:
                continue
            if msg.command == "PING":
                self._write(command("PONG", *msg.params[-1:]))
            elif msg.command == "ERROR":
                self._error_text = f"the server closed the connection: {msg.params[-1] if msg.params else ''}"
            for out in registration.feed(msg):
                self._write(out)
        await self._writer.drain()

    def _join(self, channel: str) -> None:
        name, _, key = channel.partition(" ")
        self._write(command("JOIN", name, key) if key else command("JOIN", name))

    async def close(self, reason: str = "") -> None:
        writer, self._writer = self._writer, None
        task, self._reader_task = self._reader_task, None
        self.ready.clear()
        if writer is not None:
            try:
                if reason:
                    writer.write(command("QUIT", reason))
                    await asyncio.wait_for(writer.drain(), 1.0)
            except (OSError, asyncio.TimeoutError, RuntimeError):
                pass
            writer.close()
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._lost(LinkLost("the connection was closed"))

    def _lost(self, why: BaseException) -> None:
        self.ready.clear()
        self.closed.set()
        for future in self._barriers.values():
            if not future.done():
                future.set_exception(why)

    # --------------------------------------------------------------------------------------------- reading
    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop, s = asyncio.get_running_loop(), self.settings
        # A nick taken at registration is often our own previous connection, not yet noticed as dead (ngircd reads
        # no socket of a client in penalty): the first ask for it comes soon, the next ones every REGAIN_S.
        last_data = loop.time()
        last_regain = last_data - REGAIN_S + FIRST_REGAIN_S
        try:
            while True:
                if self.nick != s["nick"] and loop.time() - last_regain >= REGAIN_S:
                    last_regain = loop.time()
                    self._write(command("NICK", s["nick"]))   # the nick we wanted may be free again
                wait = s["ping_interval_s"] if self.nick == s["nick"] else \
                    max(0.05, min(last_regain + REGAIN_S - loop.time(), s["ping_interval_s"]))
                try:
                    raw = await asyncio.wait_for(reader.readline(), wait)
                except asyncio.TimeoutError:
                    silent = loop.time() - last_data
                    if silent >= s["ping_timeout_s"]:
                        raise LinkLost(f"ping timeout: nothing from the server for {s['ping_timeout_s']:g}s")
                    if silent >= s["ping_interval_s"] - 0.01:
                        self._write(command("PING", f"keepalive-{next(self._tokens)}"))
                    continue
                if not raw:
                    raise LinkLost(self._error_text or "the server closed the connection")
                last_data = loop.time()
                self.alive()
                msg = self._parsed(raw)
                if msg is not None:
                    self._handle(msg)
        except (OSError, ValueError, LinkLost) as exc:   # ValueError: a line over LINE_LIMIT
            self.failure = exc if isinstance(exc, LinkLost) else LinkLost(f"{type(exc).__name__}: {exc}")
        finally:
            if self._writer is writer:
                self._writer = None
                writer.close()
            self._lost(self.failure or LinkLost("the connection ended"))

    def _parsed(self, raw: bytes) -> Optional[Message]:
        try:
            return parse(raw)
        except BadLine:
            return None

    def _handle(self, msg: Message) -> None:
        code, params, mine = msg.command, msg.params, irc_lower(msg.nick) == irc_lower(self.nick)
        if code == "PING":
            self._write(command("PONG", *params[-1:]))
        elif code == "PONG" and params:
            future = self._barriers.get(params[-1])
            if future is not None and not future.done():
                future.set_result(None)
        elif code == "PRIVMSG" and len(params) == 2 and not mine and params[1].startswith("\x01"):
            self._ctcp(msg.nick, params[1].strip("\x01"))
        elif code == "PRIVMSG" and len(params) == 2 and not mine:
            self._queue(msg)
        elif code == "JOIN" and mine and params:
            self.joined.add(irc_lower(params[0]))
            self.own_prefix = self.own_prefix or (msg.prefix if "@" in msg.prefix else None)
        elif code in ("PART", "KICK") and params:
            gone = params[1] if code == "KICK" else msg.nick
            if irc_lower(gone) == irc_lower(self.nick):
                self.joined.discard(irc_lower(params[0]))
                self.say(30, "%s: %s %s; joining again in %gs", self.name, code, params[0], REJOIN_S)
                asyncio.get_running_loop().call_later(REJOIN_S, self._rejoin, params[0])
        elif code == "NICK" and mine and params:
            self.nick = params[0]
            if self.own_prefix:
                self.own_prefix = params[0] + self.own_prefix[len(msg.nick):]
        elif code == "302" and params:                  # RPL_USERHOST: nick[*]=[+-]user@host
            for reply in params[-1].split():
                nick, _, rest = reply.partition("=")
                if irc_lower(nick.rstrip("*")) == irc_lower(self.nick) and "@" in rest:
                    self.own_prefix = f"{self.nick}!{rest[1:]}"
        elif code == "396" and len(params) > 1 and self.own_prefix:   # our host is shown as another now
            self.own_prefix = self.own_prefix.split("@", 1)[0] + "@" + params[1]
        elif code in JOIN_REFUSALS and len(params) > 1:
            self.say(30, "%s: the server would not let us join %s (%s: %s)", self.name, params[1], code, params[-1])
        elif code in TARGET_ERRORS and len(params) > 1:
            self._errors[irc_lower(params[1])] = (code, params[-1])
        elif code == "ERROR":
            self._error_text = f"the server closed the connection: {params[-1] if params else ''}"

    def _ctcp(self, nick: str, request: str) -> None:
        """CTCP PING and VERSION are answered, as IRC clients do (a person can see the bot is there), when the flood
        bucket has a token to spare: a CTCP flood is never answered beyond it. Other requests are ignored."""
        verb, _, argument = request.partition(" ")
        verb = verb.upper()
        if verb not in ("PING", "VERSION") or any(c in nick for c in " ,\0"):
            return
        now = asyncio.get_running_loop().time()
        if self.bucket.wait_time(now) > 0:
            return
        self.bucket.consume(now)
        answer = f"PING {argument[:64]}" if verb == "PING" else "VERSION agent gateway"
        self._write(command("NOTICE", nick, f"\x01{answer}\x01", trailing=True))

    def _queue(self, msg: Message) -> None:
        user, _, host = msg.prefix.partition("!")[2].partition("@")
        raw = {"id": f"{self.epoch}.{next(self._received)}", "nick": msg.nick, "user": user, "host": host,
               "target": msg.params[0], "text": msg.params[1], "me": self.nick, "at": time.time()}
        try:
            self.inbound.put_nowait(raw)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                self.say(30, "%s: inbound queue full (%d lines): %d line(s) dropped so far", self.name,
                         self.inbound.maxsize, self.dropped)

    def _rejoin(self, channel: str) -> None:
        if self._writer is not None and irc_lower(channel) not in self.joined:
            self._join(next((c for c in self.settings["channels"] if irc_lower(c.split(" ")[0]) ==
                             irc_lower(channel)), channel))

    def _write(self, line: bytes) -> None:
        if self._writer is None:
            raise LinkLost("not connected")
        self._writer.write(line)

    # --------------------------------------------------------------------------------------------- writing
    async def wait_ready(self, target: str, timeout: float) -> None:
        """Registered, and in the channel if ``target`` is one; RetryableError (nothing was sent) past ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (self.ready.is_set() and (not is_channel(target) or irc_lower(target) in self.joined)):
            remaining = deadline - loop.time()
            if remaining <= 0:
                state = "not connected" if not self.ready.is_set() else f"not in {target}"
                raise RetryableError(f"{state} after {timeout:g}s", method="PRIVMSG", retry_after=1.0)
            try:
                await asyncio.wait_for(self.ready.wait() if not self.ready.is_set() else asyncio.sleep(0.05),
                                       remaining)
            except asyncio.TimeoutError:
                pass

    async def send_part(self, target: str, progress: Progress, marker: str) -> None:
        """Send the lines of ``progress`` not yet confirmed, each after its flood token, each confirmed before the
        next. A line whose fate the last connection took with it goes again after ``marker`` (once per part)."""
        s, loop = self.settings, asyncio.get_running_loop()
        while progress.done < len(progress.payloads):
            await self.wait_ready(target, s["send_wait_s"])
            lines = []
            if progress.unknown is not None and not progress.marked and marker:
                lines.append(marker)
            lines.append(progress.payloads[progress.done])
            for index, text in enumerate(lines):
                while (wait := self.bucket.wait_time(loop.time())) > 0:
                    await asyncio.sleep(wait)
                await self.wait_ready(target, s["send_wait_s"])
                self.bucket.consume(loop.time())
                await self._confirmed(target, text, progress if index == len(lines) - 1 else None)
                if index < len(lines) - 1:
                    progress.marked = True
            progress.done += 1
            progress.unknown = None

    async def _confirmed(self, target: str, text: str, progress: Optional[Progress]) -> None:
        """One line and its PING, then its PONG, with no other line of ours in flight: what an error reply is
        about is never in doubt, and the server never has more than two of our commands waiting (ngircd throttles
        a client with more than three)."""
        async with self._one_line:
            await self._one_confirmed(target, text, progress)

    async def _one_confirmed(self, target: str, text: str, progress: Optional[Progress]) -> None:
        token = f"line-{next(self._tokens)}"
        future = asyncio.get_running_loop().create_future()
        self._barriers[token] = future
        self._errors.pop(irc_lower(target), None)
        try:
            self._write(command("PRIVMSG", target, text, trailing=True) + command("PING", token))
            if progress is not None:
                progress.unknown = progress.done
            await asyncio.wait_for(future, self.settings["ping_timeout_s"])
        except asyncio.TimeoutError:
            await self.close()
            raise LinkLost("the server did not confirm a line", method="PRIVMSG") from None
        finally:
            self._barriers.pop(token, None)
        if progress is not None:
            progress.unknown = None
        refused = self._errors.pop(irc_lower(target), None)
        if refused is not None:
            raise TargetRefused(refused[0], refused[1], target)
