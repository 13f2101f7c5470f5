"""Plugins the hook tests name in their gateway's configuration ([plugins.NAME] module = "tests.integration.
hook_plugins:NAME"): one that rewrites and records what it saw, one that overruns its bound, one that raises."""
from __future__ import annotations

import json
import os
import sys
import time

from actors.hooks.events import Rewrite


def _record(options: dict, what: str, text: str, **more) -> None:
    with open(os.path.join(options["plugin_dir"], "seen.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"hook": what, "text": text, **more}) + "\n")


class Rewriter:
    """colour -> color before dispatch; records the text of every message it is shown, every turn and every
    adapter's connection."""

    def __init__(self, options: dict):
        self.options = options

    def before_dispatch(self, message):
        _record(self.options, "before_dispatch", message.text)
        if "colour" in message.text:
            return Rewrite(message.text.replace("colour", "color"))
        return None

    def after_turn(self, turn):
        _record(self.options, "after_turn", turn.text, answer=turn.answer, delivered=turn.delivered,
                tools=[c.name for c in turn.tool_calls])

    def on_adapter_state(self, state):
        _record(self.options, "on_adapter_state", "", adapter=state.adapter, connected=state.connected)


class Sleepy:
    """Overruns its bound ([plugins.sleepy] timeout_s) on a message asking for it; answers nothing otherwise."""

    def __init__(self, options: dict):
        self.seconds = float(options.get("seconds", 5))

    def before_dispatch(self, message):
        if "#sleep-hook" in message.text:
            time.sleep(self.seconds)     # the overrun under test: the gateway must not wait for it
            return Rewrite("the sleepy hook's late rewrite (must never be seen)")
        return None


class Raiser:
    """Raises before the model call and after the turn on a message asking for it; adds context on another."""

    def __init__(self, options: dict):
        self.options = options

    def before_model_call(self, call):
        if "#raise-hook" in call.text:
            raise RuntimeError("the raising hook raised, as asked")
        return "Context added by a plugin." if "#context" in call.text else None

    def after_turn(self, turn):
        if "#raise-hook" in turn.text:
            raise RuntimeError("the raising hook raised after the turn")


class Exiter:
    """Calls ``sys.exit()`` (a BaseException, not an Exception) before dispatch on a message asking for it, and
    raises KeyboardInterrupt on another: a plugin's bug that must cost its hook, not the adapter's loop."""

    def __init__(self, options: dict):
        self.options = options

    def before_dispatch(self, message):
        if "#exit-hook" in message.text:
            sys.exit("the exiting hook exits, as asked")
        if "#interrupt-hook" in message.text:
            raise KeyboardInterrupt("the hook raised KeyboardInterrupt, as asked")
        return None
