"""The ``[cron.NAME]`` tables: each a job with a schedule, a prompt, a profile and where its answer goes. Pure: the
configuration in, checked jobs out (a ``ConfigError`` naming the key otherwise, so the launcher exits 78), and the
inbox row a run of a job puts in its conversation's inbox.

    [cron.morning]
    schedule = "0 9 * * 1-5"        # cron syntax: 5 fields, or 6 with seconds first; or @daily, @hourly...
    timezone = "Europe/Berlin"      # default "UTC"
    prompt = "Summarise what is on my calendar today."
    profile = "default"             # the profile the turn runs under (its session key's profile)
    adapter = "telegram"            # where the answer goes: a configured [adapters.NAME]
    chat = "123456789"              # that platform's chat id
    chat_type = "dm"                # dm | group | channel | thread (the conversation it joins)
    thread = ""                     # optional: a thread or topic id
    catch_up = "latest"             # after downtime: "latest" runs the most recent missed time once; "skip" none
    enabled = true

A run's prompt is an internal event (``MessageEvent.internal``): no sender, so no access policy or sender limit
applies; it is not user traffic for the metrics or for a session's idle clock.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from actors.adapters.registry import DEFAULT_ADAPTERS, IMPLICIT_ADAPTERS
from actors.messages import MessageEvent, Source
from actors.scheduling.schedule import CATCH_UP_RULES, Schedule, ScheduleError, parse_schedule
from common.config import (TYPE_NAMES, ConfigError, did_you_mean, gathering, raise_gathered, setting,
                           unknown_name)
from storage import CRON_PLATFORM, InboundItem, session_key
from storage.keys import CHAT_TYPES

JOB_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
# key -> (types, default; REQUIRED: must be given)
REQUIRED = object()
KEYS: dict[str, tuple] = {
    "schedule": ((str,), REQUIRED),
    "prompt": ((str,), REQUIRED),
    "adapter": ((str,), REQUIRED),
    "chat": ((str, int), REQUIRED),
    "profile": ((str,), "default"),
    "chat_type": ((str,), "dm"),
    "thread": ((str, int), ""),
    "catch_up": ((str,), "latest"),
    "timezone": ((str,), "UTC"),
    "enabled": ((bool,), True),
}
# The keys that say what a turn of the gateway's own says and where it answers: a watch's too (watches.py).
CHAT_KEYS = ("prompt", "adapter", "chat", "profile", "chat_type", "thread", "enabled")


def chat_source(who: str, table) -> Source:
    """The source of a turn of the gateway's own in ``table``'s chat (a CronJob or a Watch): no user."""
    return Source(platform=table.adapter, chat_id=table.chat, chat_type=table.chat_type, thread_id=table.thread,
                  user_id=None, user_name=who, profile=table.profile)


@dataclass(frozen=True)
class CronJob:
    name: str
    schedule: Schedule
    prompt: str
    adapter: str
    chat: str
    profile: str = "default"
    chat_type: str = "dm"
    thread: Optional[str] = None
    catch_up: str = "latest"
    enabled: bool = True

    def source(self) -> Source:
        return chat_source(f"cron:{self.name}", self)

    def session_key(self) -> str:
        """The conversation a run joins: the chat's (or its thread's), never one user's (a run has no user)."""
        return session_key(self.source())


def validate_jobs(config: Mapping, now: float = 0.0) -> dict[str, CronJob]:
    """Every ``[cron.NAME]`` table as a CronJob, in name order; raises a ConfigError naming every bad key of every
    job (``more``), not only the first."""
    return each_table(config, "cron", "a job", "morning-summary", lambda file, name, table, adapters, profiles:
                      _job(file, name, table, adapters, profiles, config, now))


def each_table(config: Mapping, section: str, noun: str, example: str, check) -> dict:
    """``check(file, name, table, adapters, profiles)`` of every ``[section.NAME]`` table (its name and that it is
    a table checked first), in name order; one ConfigError naming every failure of every table."""
    file = config.get("_source") or "(config)"
    tables = config.get(section) or {}
    # The adapters that run: the configured ones (the default web chat when none is), and the implicit terminal.
    adapters = {**IMPLICIT_ADAPTERS, **(config.get("adapters") or DEFAULT_ADAPTERS)}
    profiles = set(config.get("profiles") or {}) | {"default"}
    checked, errors = {}, []
    for name in sorted(tables):
        with gathering(errors):
            where = f"[{section}.{name}]"
            if not JOB_NAME.fullmatch(name):
                raise ConfigError(file, where, f"{noun}'s name is lower-case letters, digits, '-' and '_' (at most "
                                               f"64), e.g. [{section}.{example}]")
            if not isinstance(tables[name], dict):
                raise ConfigError(file, where, "must be a table")
            checked[name] = check(file, name, tables[name], adapters, profiles)
    raise_gathered(errors)
    return checked


def _job(file: str, name: str, table: Any, adapters: Mapping, profiles: set, config: Mapping,
         now: float) -> CronJob:
    where = f"[cron.{name}]"
    values = typed_values(file, where, table, KEYS, "a job needs schedule, prompt, adapter and chat")
    errors: list[ConfigError] = []
    schedule = None
    with gathering(errors):
        try:
            schedule = parse_schedule(values["schedule"], values["timezone"], now)
        except ScheduleError as exc:
            key = "timezone" if "time zone" in str(exc) else "schedule"
            raise ConfigError(file, f"{where} {key}", str(exc)) from None
    errors += _value_errors(file, where, values, adapters, profiles, setting(config, "gateway", "max_text_chars"))
    raise_gathered(errors)
    thread = str(values["thread"]) if str(values["thread"]) != "" else None
    return CronJob(name, schedule, values["prompt"], values["adapter"], str(values["chat"]), values["profile"],
                   values["chat_type"], thread, values["catch_up"], values["enabled"])


def typed_values(file: str, where: str, table: Mapping, keys: Mapping[str, tuple], needs: str) -> dict:
    """``table``'s values by ``keys`` (key -> (types, default or REQUIRED)), defaults filled in; one ConfigError
    naming every unknown key, missing one (``needs`` says which are required) and value of the wrong type."""
    errors = [ConfigError(file, f"{where} {key}", unknown_name("key", key, keys)) for key in table if key not in keys]
    values = {}
    for key, (types, default) in keys.items():
        if key not in table:
            if default is REQUIRED:
                errors.append(ConfigError(file, f"{where} {key}", f"missing ({needs})"))
            values[key] = default
            continue
        value = table[key]
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            wanted = " or ".join(TYPE_NAMES[t] for t in types)
            errors.append(ConfigError(file, f"{where} {key}", f"expected {wanted}, got {value!r}"))
        values[key] = value
    raise_gathered(errors)
    return values


def _value_errors(file: str, where: str, values: Mapping, adapters: Mapping, profiles: set,
                  limit: int) -> list[ConfigError]:
    """What is wrong with a job's values of the right types (each one, not only the first)."""
    errors = []
    prompt = values["prompt"]
    if not prompt.strip():
        errors.append(ConfigError(file, f"{where} prompt", "must not be empty"))
    if len(prompt) > limit:
        errors.append(ConfigError(file, f"{where} prompt", f"is {len(prompt):,} characters; [gateway] "
                                                           f"max_text_chars is {limit:,}"))
    if values["adapter"] not in adapters:
        known = ", ".join(sorted(adapters)) or "none"
        errors.append(ConfigError(file, f"{where} adapter", f"no adapter {values['adapter']!r} is configured"
                                                            f"{did_you_mean(values['adapter'], adapters)} "
                                                            f"(configured: {known})"))
    if str(values["chat"]) == "":
        errors.append(ConfigError(file, f"{where} chat", "must not be empty: the chat id the answer goes to"))
    if values["profile"] not in profiles:
        errors.append(ConfigError(file, f"{where} profile", f"no profile {values['profile']!r}"
                                                            f"{did_you_mean(values['profile'], profiles)} (known: "
                                                            f"{', '.join(sorted(profiles))})"))
    for key, allowed in (("chat_type", CHAT_TYPES), ("catch_up", CATCH_UP_RULES)):
        if values[key] not in allowed:
            hint = did_you_mean(values[key], allowed)
            errors.append(ConfigError(file, f"{where} {key}", f"must be one of {', '.join(map(repr, allowed))}, "
                                                              f"got {values[key]!r}{hint}"))
    return errors


def schedule_run_id(job: str, at: float) -> str:
    """The id of the run of ``job`` for the time ``at`` of its schedule (whole seconds: cron has no finer times)."""
    return f"{job}:schedule:{int(round(at))}"


def manual_run_id(job: str, token: str) -> str:
    return f"{job}:manual:{token}"


def run_item(job: CronJob, run_id: str, now: float) -> InboundItem:
    """The inbox row of one run: the job's prompt as an internal event of its conversation. Its message id is the
    run's id, so the same run injected twice is one row (the inbox's dedup on platform and message id)."""
    event = MessageEvent(source=job.source(), text=job.prompt, platform_message_id=run_id, received_at=now,
                         internal=True)
    return InboundItem(job.session_key(), CRON_PLATFORM, run_id, event.to_payload())
