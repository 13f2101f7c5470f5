"""Runs plugins' hooks with a time bound, off the loop that called them.

Every hook call is a coroutine on the calling actor's (or cell's) bridge loop, which hands the plugin's function to
that plugin's own worker threads and waits at most its bound: a hook that sleeps, blocks on I/O or loops forever
stalls neither the shard's cells nor the adapter's intake, only its own threads. An overrun is given up on (the
turn goes on without it); a hook that raises is skipped. Either way the caller gets "no answer" and the message
goes on as if the plugin were absent: a hook never loses a message.

Whatever it raises: ``sys.exit()`` (SystemExit), KeyboardInterrupt, GeneratorExit or any other BaseException
from a hook is the plugin's bug like any Exception, logged and skipped. Re-raised on the loop, SystemExit or
KeyboardInterrupt would stop the loop that serves the adapter (asyncio lets both escape ``run_forever``), and the
web chat would stop answering. Nor is a KeyboardInterrupt from a hook ever the operator's Ctrl-C: Python raises
that in a process's main thread only, a hook runs on a worker thread, and an actor's signals belong to Thespian
and the launcher. Only the cancellation of the caller itself goes on up (a CancelledError the hook raised is its
bug too).

Bounds a hostile sender (or a stuck plugin) could otherwise exhaust: each plugin has ``[hooks] threads`` worker
threads; a call still queued when its bound passes is withdrawn; a plugin with ``QUEUED_PER_THREAD`` calls per
thread waiting already is skipped at once ("busy"). Calls made together (a round's rows) wait together: a stuck
plugin costs the round its bound once. Worker threads are daemon threads, so a hook stuck for good
never holds up a process's exit.

Nothing here logs or calls Thespian (it runs on loop threads): a failure is posted, through the caller's ``post``,
as a ``HookFailed`` fact; the actor thread that receives it logs its line (with the plugin's name) and tells the
metrics actor (``gateway_hook_failures_total``). Nothing survives a restart: the plugins are loaded again by the
new process, at its first hook call.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import queue
import threading
import traceback
from typing import Any, Callable

from actors.hooks.plugins import Loaded, Plugin, load_plugins
from actors.messages.metrics import HookFailed
from common.config import setting
from common.redact import configured_secrets, redact

# Calls one plugin may have waiting per worker thread: a whole intake round (Telegram hands over up to 100 updates
# at once) is looked at, not cut short by this bound; a stuck plugin's calls are withdrawn at their own bound anyway.
QUEUED_PER_THREAD = 64
TRACEBACK_CHARS = 2000

Post = Callable[[Any], None]


def _invoke(fn: Callable, event: Any) -> Any:
    result = fn(event)
    if inspect.isawaitable(result):      # an async hook runs to its end on this worker thread's own loop
        result = asyncio.run(_awaited(result))
    return result


async def _awaited(awaitable):
    return await awaitable


class _Workers:
    """One plugin's threads and the queue of its calls (a thread starts with each call until ``threads`` run)."""

    def __init__(self, name: str, threads: int):
        self.name, self.threads = name, max(1, threads)
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        self.started = 0
        self.live: list = []
        self.lock = threading.Lock()

    def submit(self, fn: Callable, event: Any) -> concurrent.futures.Future | None:
        """The call's future, or None when the plugin has too many calls waiting already."""
        with self.lock:
            self.live = [f for f in self.live if not f.done()]
            if len(self.live) >= self.threads * (QUEUED_PER_THREAD + 1):
                return None
            future: concurrent.futures.Future = concurrent.futures.Future()
            self.live.append(future)
            self.calls.put((future, fn, event))
            if self.started < self.threads:
                self.started += 1
                threading.Thread(target=self._work, name=f"hook-{self.name}-{self.started}", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            future, fn, event = self.calls.get()
            if not future.set_running_or_notify_cancel():
                continue           # withdrawn: its bound passed while it waited
            try:
                future.set_result(_invoke(fn, event))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, which skips the hook
                future.set_exception(exc)


def raised_by_hook(job: concurrent.futures.Future) -> bool:
    """Whether a CancelledError met while awaiting ``job`` is the hook's own (its function raised one) rather than
    the cancellation of the task that awaits it (a drain, an interrupted turn), which must go on up."""
    task = asyncio.current_task()
    return (job.done() and not job.cancelled() and isinstance(job.exception(), asyncio.CancelledError)
            and not (task is not None and task.cancelling()))


def failure_detail(exc: BaseException) -> str:
    trace = "".join(traceback.format_exception(exc))[-TRACEBACK_CHARS:]
    return f"raised {type(exc).__name__}: {exc}; skipped\n{trace}"


class HookRunner:
    def __init__(self, config: dict, loaded: Loaded):
        self.plugins: list[Plugin] = loaded.plugins
        self.load_errors = list(loaded.errors)     # reported once, at the first call that has a post
        self.timeout_s = setting(config, "hooks", "timeout_s")
        self.threads = setting(config, "hooks", "threads")
        self.secrets = tuple(configured_secrets(config))
        self._workers: dict[str, _Workers] = {}

    def has(self, point: str) -> bool:
        return bool(self.load_errors) or any(point in p.hooks for p in self.plugins)

    def with_hook(self, point: str) -> list[Plugin]:
        return [p for p in self.plugins if point in p.hooks]

    def clean_for(self, plugin: Plugin) -> Callable[[str], str]:
        """What the plugin's events hold of a text: as written if its table grants it secrets, else redacted."""
        if plugin.see_secrets:
            return lambda text: text or ""
        return lambda text: redact(text or "", self.secrets)

    def redact_out(self, text: str) -> str:
        """A plugin's text on its way into the gateway (a rewrite, an answer, context): no configured secret."""
        return redact(text, self.secrets, shapes=False)

    async def run_one(self, plugin: Plugin, point: str, event: Any, post: Post) -> tuple[bool, Any]:
        """(True, what the hook returned), or (False, None) when it overran, raised or was busy."""
        self.report_load_errors(post)
        bound = plugin.timeout_s or self.timeout_s
        workers = self._workers.get(plugin.name)
        if workers is None:
            workers = self._workers[plugin.name] = _Workers(plugin.name, self.threads)
        job = workers.submit(plugin.hooks[point], event)
        if job is None:
            self.failed(post, plugin.name, point, "busy", f"{workers.threads} calls still running and more "
                        "waiting; this call is skipped")
            return False, None
        try:
            return True, await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job)), bound)
        except asyncio.TimeoutError:
            job.cancel()
            self.failed(post, plugin.name, point, "timeout", f"no answer within {bound:g}s; skipped")
        except asyncio.CancelledError as exc:
            if not raised_by_hook(job):
                job.cancel()
                raise     # the caller was cancelled (a drain, an interrupt): that is the caller's, not the hook's
            self.failed(post, plugin.name, point, "error", failure_detail(exc))
        except BaseException as exc:  # noqa: BLE001 - the plugin's bug, even sys.exit(): logged, skipped
            self.failed(post, plugin.name, point, "error", failure_detail(exc))
        return False, None

    async def observe(self, point: str, make_event: Callable[[Callable[[str], str]], Any], post: Post) -> None:
        """Every plugin's ``point`` hook with its event (``make_event(clean)``); answers are ignored."""
        self.report_load_errors(post)
        for plugin in self.with_hook(point):
            ok, answer = await self.run_one(plugin, point, make_event(self.clean_for(plugin)), post)
            if ok and answer is not None:
                self.failed(post, plugin.name, point, "bad_answer", f"returned {type(answer).__name__}; an "
                            "observing hook's answer is ignored")

    def fire(self, bridge, point: str, make_event: Callable[[Callable[[str], str]], Any]) -> None:
        """From an actor's (or cell's) own thread: run the observers of ``point`` on its bridge loop; never waits."""
        if bridge is not None and self.has(point):
            bridge.submit(self.observe(point, make_event, bridge.post))

    def failed(self, post: Post, plugin: str, point: str, outcome: str, detail: str) -> None:
        post(HookFailed(plugin, point, outcome, redact(detail, self.secrets)))

    def report_load_errors(self, post: Post) -> None:
        errors, self.load_errors = self.load_errors, []
        for error in errors:
            self.failed(post, error.plugin, "load", "error", error.reason)


_RUNNERS: dict[tuple, HookRunner] = {}


def hooks_for(config: dict) -> HookRunner:
    """This process's runner for the configuration (plugins loaded at the first call). Per process, because a
    forked actor must not share a parent's worker threads; shared by the cells of a shard, which share no state
    through it but the plugins' threads (every event carries its own session)."""
    key = (os.getpid(), repr(config.get("hooks")), repr(config.get("plugins")))
    runner = _RUNNERS.get(key)
    if runner is None:
        runner = _RUNNERS[key] = HookRunner(config, load_plugins(config))
    return runner
