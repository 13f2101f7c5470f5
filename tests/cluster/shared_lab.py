"""The lab for gateway hosts that share one PostgreSQL (issue 48): every machine a network namespace on the lab's
bridge (netns.py), the test process outside them all.

* ``db``: the test PostgreSQL (tests/servers/postgresql.py) on its lab address, password authentication (scram)
  for the lab's network; the test process reads it through its unix socket (``SharedLab.sql``).
* ``platform``: the Telegram fake (tests/fakes/telegram) as its own process, serving the Bot API on its lab address
  and its control API on a unix socket too (``LabTelegram.control``): the test process is on no lab address.
  It keeps every getUpdates on record with the caller's address, so the lab tells which host polled when.
* ``g1``, ``g2``…: gateway daemons (``LabGateway``), one per namespace, each with its own state directory (log, run
  lock) and the same TOML but for ``[cluster] host_name``, started and stopped through the real CLI run inside
  their namespace (their admin port is on their own loopback, which a cut leaves alone).

Faults: ``kill`` (kill -9 of every process of a host's namespace, as a machine losing power), ``cut`` and
``restore`` (its port on the bridge down and up again: a partition, the host runs on and hears nothing). What a
host's TCP connections do meanwhile, seen from inside its namespace: netns.py (``Lab.connections_to``,
``Lab.retransmitting``, ``ConnectionWatch``). Waits (``wait_until`` and the ones built on it) poll with a deadline
and say what they last saw.
"""
from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import psycopg

from actors.adapters.pacing import DEFAULT_RESENT_MARKER
from tests.cluster.hosts import NamespacedGateway
from tests.cluster.netns import SUBNET, Lab
from tests.fakes.harness import ControlClient
from tests.fakes.telegram import DEFAULT_TOKEN
from tests.gateway import PYTHON, ROOT, exited
from tests.pipeline.harness import CURSOR
from tests.pipeline.test_telegram_e2e import start_after_kill
from tests.servers.postgresql import PASSWORD_ENV, PostgreSQL

DB, PLATFORM = "db", "platform"
PG_PORT = 5432          # in the db namespace: nothing else listens there
TELEGRAM_PORT = 8081    # in the platform namespace
START_S = 60.0          # a daemon or a server coming up on a loaded 2-core machine


# ------------------------------------------------------------------------------------------------------ waiting

def wait_until(what: str, probe: Callable[[], Any], done: Callable[[Any], Any] = bool, timeout: float = 60.0,
               interval: float = 0.1) -> Any:
    """Poll ``probe()`` until ``done(value)``; returns that value. At the deadline: AssertionError naming ``what``
    and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            shown = repr(value)
            raise AssertionError(f"after {timeout:.0f}s still waiting for {what}; last seen: "
                                 f"{shown[:3000]}{'…' if len(shown) > 3000 else ''}")
        time.sleep(interval)   # the polling interval of a deadline loop


# ---------------------------------------------------------------------------------------------------- PostgreSQL

def start_postgresql(lab: Lab, host: str = DB) -> PostgreSQL:
    """The test PostgreSQL in ``host``'s namespace, on its lab address, taking the lab's network with a password."""
    return PostgreSQL(listen=lab.hosts[host], hba_networks=(f"{SUBNET}.0/24",), command_prefix=lab.exec_prefix(host),
                      port=PG_PORT).start()


def storage_toml(server: PostgreSQL, database: str) -> str:
    """[storage] on ``database`` of the lab's PostgreSQL; the password from PASSWORD_ENV (LabGateway sets it)."""
    return f'[storage]\nbackend = "postgresql"\ndsn = "{server.dsn(database)}"\npassword_env = "{PASSWORD_ENV}"\n'


# ------------------------------------------------------------------------------------------------ the Telegram fake

class UnixControlClient(ControlClient):
    """The fake's control API through its unix socket (a path reaches into any network namespace)."""

    def __init__(self, socket_path: str, timeout: float = 30.0):
        super().__init__("http://lab-platform", timeout)
        self.socket_path = socket_path

    def _request(self, req: urllib.request.Request) -> Any:
        conn = _UnixHTTPConnection(self.socket_path, self.timeout)
        try:
            conn.request(req.get_method(), req.selector, body=req.data, headers=dict(req.header_items()))
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        if response.status >= 400:
            raise RuntimeError(f"{req.get_method()} {req.selector}: {response.status} {body[:500]!r}")
        return json.loads(body or b"null")


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("lab-platform", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


class LabTelegram:
    """``python -m tests.fakes.telegram`` in ``host``'s namespace, on its lab address (``base_url``, for the
    gateways), its control API on a unix socket (``control``, for the test). ``config``: the fake's keyword
    arguments (limits, time_scale)."""

    def __init__(self, lab: Lab, host: str = PLATFORM, port: int = TELEGRAM_PORT, config: Optional[dict] = None):
        self.lab, self.host, self.port, self.config = lab, host, port, dict(config or {})
        self.address = lab.hosts[host]
        self.dir = Path(tempfile.mkdtemp(prefix="lab-tg-"))   # short: a unix socket's path has ~100 bytes
        self.socket_path = str(self.dir / "control.sock")
        self.control = UnixControlClient(self.socket_path)
        self.proc: Optional[subprocess.Popen] = None

    @property
    def base_url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def start(self, timeout: float = START_S) -> "LabTelegram":
        with open(self.dir / "fake.log", "ab") as log:
            self.proc = subprocess.Popen([*self.lab.exec_prefix(self.host), PYTHON, "-m", "tests.fakes.telegram",
                                          "--host", self.address, "--port", str(self.port),
                                          "--unix", self.socket_path, "--config", json.dumps(self.config)],
                                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_until("the Telegram fake to answer on its control socket", self._answers,
                       timeout=timeout, interval=0.05)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its log: {self.log()[-2000:]}") from None
        return self

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"the Telegram fake exited {self.proc.returncode}: {self.log()[-2000:]}")
        try:
            self.control.get("/_control/stats")
            return True
        except OSError:
            return False

    def log(self) -> str:
        path = self.dir / "fake.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- what the tests read and do
    def stats(self) -> dict:
        """The fake's stats: ``poll_conflicts`` (getUpdates cut by a newer one, 409), ``max_polls_pending``,
        ``requests`` by method, ``errors``, ``floods_served``, ``retry_after_violations``…"""
        return self.control.get("/_control/stats")

    def polls(self) -> list[dict]:
        """Every getUpdates served, oldest first (FakeTelegram.polls: id, peer, at, ended_at, status, ended_by…)."""
        return self.control.get("/_control/polls")["polls"]

    def polls_pending(self) -> int:
        return self.control.get("/_control/polls")["pending"]

    def ask(self, chat_ids: Iterable[int], words: str) -> list[tuple[int, str]]:
        """One message in each chat, ``"<words> in chat <id>"``; returns the questions (chat_id, text), as
        ``audit_answers`` takes them. The words may carry the offline agent's hooks (``#slow 0.1``)."""
        questions = [(chat_id, f"{words} in chat {chat_id}") for chat_id in chat_ids]
        self.inject(questions)
        return questions

    def inject(self, messages: Iterable[tuple[int, str]]) -> list[dict]:
        """Users write: each (chat_id, text) a private chat's message; returns the updates."""
        items = [{"chat_id": chat_id, "text": text} for chat_id, text in messages]
        return self.control.post("/_control/inject", items)["updates"] if items else []

    def chat(self, chat_id: int) -> dict:
        """{"chat", "messages" (in and out, each with ``history``), "ops", "topics", "blocked"}"""
        return self.control.get(f"/_control/chats/{chat_id}")

    def bot_messages(self, chat_id: int) -> list[dict]:
        """The bot's messages in the chat that are not deleted, oldest first."""
        return [m for m in self.chat(chat_id)["messages"] if m["outgoing"] and not m["deleted"]]


def first_poll(telegram: LabTelegram, since: float, peers: Optional[Iterable[str]] = None) -> Optional[dict]:
    """The first getUpdates that reached the fake at or after ``since`` (wall clock) from one of ``peers``
    (addresses; None: anyone), or None."""
    wanted = None if peers is None else set(peers)
    return next((p for p in telegram.polls() if p["at"] >= since and (wanted is None or p["peer"] in wanted)), None)


def wait_first_poll(telegram: LabTelegram, since: float, peers: Optional[Iterable[str]] = None,
                    timeout: float = 60.0) -> dict:
    """Waits for ``first_poll``; says which hosts polled since then where none of ``peers`` did."""
    peers = None if peers is None else set(peers)
    found = wait_until(f"a getUpdates since {since:.2f} from {sorted(peers) if peers else 'any host'}",
                       lambda: first_poll(telegram, since, peers) or
                       {"polls since then by peer": _count_by_peer(p for p in telegram.polls() if p["at"] >= since)},
                       lambda value: "peer" in value, timeout=timeout)
    return found


def _count_by_peer(polls: Iterable[dict]) -> dict:
    counts: dict = {}
    for poll in polls:
        counts[poll["peer"]] = counts.get(poll["peer"], 0) + 1
    return counts


def streaming(telegram: LabTelegram, chat_ids: Iterable[int]) -> list[int]:
    """The chats where a bot message still shows the streaming cursor: answers under way."""
    return [chat_id for chat_id in chat_ids if any(CURSOR in m["text"] for m in telegram.bot_messages(chat_id))]


# ------------------------------------------------------------------------------------------------------ answers

@dataclass
class AnswerAudit:
    """Each question (chat_id, text) against the bot's settled messages quoting it (the offline agent's answers
    quote the message): ``once`` answered by one message; ``marked`` by more, one of them carrying the re-sent
    marker (a copy may exist: the design's one accepted duplicate); ``doubled`` by more with no marker;
    ``missing`` by none (or only by one still streaming)."""
    once: list = field(default_factory=list)
    marked: dict = field(default_factory=dict)
    doubled: dict = field(default_factory=dict)
    missing: list = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing

    def failures(self) -> str:
        return (f"{len(self.missing)} unanswered {self.missing[:5]}; {len(self.doubled)} answered twice "
                f"without the marker {list(self.doubled.items())[:3]}" if self.missing or self.doubled else "")


def audit_answers(telegram: LabTelegram, questions: Iterable[tuple[int, str]]) -> AnswerAudit:
    audit, by_chat = AnswerAudit(), {}
    for chat_id, text in questions:
        if chat_id not in by_chat:
            by_chat[chat_id] = telegram.bot_messages(chat_id)
        answers = [m["text"] for m in by_chat[chat_id] if f'"{text}"' in m["text"]]
        settled = [a for a in answers if CURSOR not in a]
        if not settled:
            audit.missing.append((chat_id, text))
        elif len(answers) == 1:
            audit.once.append((chat_id, text))
        elif any(a.startswith(DEFAULT_RESENT_MARKER) for a in settled):
            audit.marked[(chat_id, text)] = answers
        else:
            audit.doubled[(chat_id, text)] = answers
    return audit


def wait_answered(telegram: LabTelegram, questions: list[tuple[int, str]], timeout: float = 120.0,
                  hosts: Iterable["LabGateway"] = ()) -> AnswerAudit:
    """Waits until every question has a settled answer; returns the audit (the caller asserts on ``doubled``).
    On a timeout: what is missing, and the end of each host's log."""
    try:
        return wait_until(f"answers to {len(questions)} questions", lambda: audit_answers(telegram, questions),
                          lambda audit: audit.complete, timeout=timeout, interval=0.25)
    except AssertionError as exc:
        tails = "\n".join(f"--- {h.host}:\n" + "\n".join(h.log().splitlines()[-25:]) for h in hosts)
        audit = audit_answers(telegram, questions)
        raise AssertionError(f"{str(exc)[:300]}\n{audit.failures()}\n{tails}") from None


# ---------------------------------------------------------------------------------------------------- gateway hosts

def with_host_name(toml: str, host: str) -> str:
    """The hosts' shared TOML with this host's ``[cluster] host_name`` (into its [cluster] table if it has one)."""
    line = f'host_name = "{host}"\n'
    if "[cluster]\n" in toml:
        return toml.replace("[cluster]\n", "[cluster]\n" + line, 1)
    return toml + "\n[cluster]\n" + line


class LabGateway(NamespacedGateway):
    """A gateway daemon in ``host``'s namespace with the shared TOML; its CLI (``start``, ``stop``, ``tree``,
    ``status``…) runs in that namespace. ``password``: the PostgreSQL password, put in PASSWORD_ENV."""

    def __init__(self, tmp_path: Path, lab: Lab, host: str, toml: str, password: str, ping_deadline: float = 10.0):
        # The watchdog's production-like deadline: a loaded 2-core machine running several daemons, and these
        # tests are about hosts, not about the watchdog.
        super().__init__(tmp_path, lab, host, extra_toml=with_host_name(toml, host), ping_deadline=ping_deadline)
        self.address = lab.hosts[host]
        self.env[PASSWORD_ENV] = password

    def start_and_wait(self, timeout: float = START_S) -> dict:
        """Start (again after a kill: the killed daemon's last process may hold the run lock a moment longer) and
        wait for every actor running."""
        start_after_kill(self)
        return self.wait_ready(timeout=timeout)

    def kill(self, timeout: float = 30.0) -> list[int]:
        """kill -9 of every process in the host's namespace; returns once they are all gone (their sockets
        closed), with their pids."""
        pids = self.lab.kill_host(self.host)
        wait_until(f"{self.host}'s processes to exit after kill -9", lambda: [p for p in pids if not exited(p)],
                   lambda alive: not alive, timeout=timeout, interval=0.05)
        return pids

    def cut(self) -> None:
        self.lab.cut_host(self.host)

    def restore(self) -> None:
        self.lab.restore_host(self.host)

    def running(self) -> bool:
        """Some process of the host's namespace is alive (the daemon, or a CLI call of the test)."""
        return any(not exited(p) for p in self.lab.pids(self.host))

    def stop(self) -> None:
        """A clean stop, then kill -9 of anything left in the namespace."""
        if self.running():
            self.cli("stop", timeout=60)
        self.kill()


class SharedLab:
    """The whole lab: ``up()`` brings the namespaces, PostgreSQL with one fresh database and the Telegram fake;
    ``start_hosts`` the gateways; ``down()`` everything, whatever state the test left it in."""

    def __init__(self, tmp_path: Path, gateway_hosts: Iterable[str] = ("g1", "g2", "g3"), tag: str = "s",
                 telegram_config: Optional[dict] = None):
        self.tmp_path, self.host_names, self.tag = tmp_path, list(gateway_hosts), tag
        self.telegram_config = telegram_config
        self.lab: Optional[Lab] = None
        self.server: Optional[PostgreSQL] = None
        self.telegram: Optional[LabTelegram] = None
        self.database = ""
        self.hosts: dict[str, LabGateway] = {}

    def up(self) -> "SharedLab":
        try:
            self.lab = Lab.of_hosts(self.tag, DB, PLATFORM, *self.host_names)
            self.server = start_postgresql(self.lab)
            self.database = self.server.create_database()
            self.telegram = LabTelegram(self.lab, config=self.telegram_config).start()
        except BaseException:
            self.down()
            raise
        return self

    def __enter__(self) -> "SharedLab":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    @property
    def storage_toml(self) -> str:
        return storage_toml(self.server, self.database)

    def telegram_toml(self, poll_timeout_s: float = 1.0, name: str = "telegram") -> str:
        """An open Telegram adapter in polling mode on the lab's fake."""
        return (f'[adapters.{name}]\ntype = "telegram"\naccess = "open"\ntoken = "{DEFAULT_TOKEN}"\n'
                f'base_url = "{self.telegram.base_url}"\npoll_timeout_s = {poll_timeout_s}\n')

    def start_hosts(self, toml: str, names: Optional[Iterable[str]] = None,
                    start: bool = True) -> dict[str, LabGateway]:
        """A LabGateway on each of ``names`` (default: every gateway host of the lab) with ``toml`` (the same for
        all but host_name); ``start``: each started and running before this returns. Returns them by name."""
        made = {}
        for name in names if names is not None else self.host_names:
            made[name] = self.hosts[name] = LabGateway(self.tmp_path / name, self.lab, name, toml,
                                                       self.server.password)
        if start:
            for gateway in made.values():
                gateway.start_and_wait()
        return made

    def host_of(self, address: Optional[str]) -> Optional[str]:
        """The lab host with this address (a poll's ``peer``), or None."""
        return next((name for name, known in self.lab.hosts.items() if known == address), None)

    def current_poller(self) -> Optional[str]:
        """The host whose getUpdates reached the fake last (by name), or None before any."""
        polls = self.telegram.polls()
        return self.host_of(polls[-1]["peer"]) if polls else None

    def pollers(self, since: float = 0.0) -> dict[str, int]:
        """How many getUpdates each host made since ``since`` (wall clock), by host name."""
        return {self.host_of(peer) or peer: n
                for peer, n in _count_by_peer(p for p in self.telegram.polls() if p["at"] >= since).items()}

    def sql(self, statement: str, *params) -> list:
        """Rows of a query on the lab's database, from the test process (through the server's unix socket)."""
        with psycopg.connect(self.server.local_dsn(self.database), password=self.server.password,
                             connect_timeout=10) as conn:
            return conn.execute(statement, params or None).fetchall()

    def down(self) -> None:
        for gateway in self.hosts.values():
            # Teardown goes on whatever a host does: the namespaces' deletion below kills what is left.
            try:
                gateway.stop()
            except (AssertionError, OSError, subprocess.SubprocessError):
                gateway.kill_everything()
        if self.telegram is not None:
            self.telegram.stop()
        if self.server is not None:
            self.server.stop()
        if self.lab is not None:
            self.lab.down()
