"""Logging for the launcher and, through Thespian's logger process, for every actor.

Where records go: every actor process forwards its records (message already formatted, ``extra=`` fields kept) to
Thespian's logger process, which applies the ``logDefs`` built here; the launcher applies the same handler itself.
Both write to stderr, which is the log file when the gateway runs as a daemon and the journal under systemd.
Thespian needs a real logDefs dictionary: ``logDefs=False`` breaks the multiproc bases.

Two formats, chosen by ``[logging] format``:

* ``text``  ``2024-05-01 12:00:00,123 INFO gateway.Session: message  session=3f9c0a7d51e2``
* ``json``  one object per line: ts (ISO 8601 UTC), level, logger, msg, pid, actor and actor_name when the record
  comes from an actor, then the structured fields a call site passed with ``extra=`` (session, platform, chat,
  turn, ...), and exc for a traceback.

Whatever the format, ``Redact`` runs on every record before it is written: configured secrets and known credential
shapes become ``[redacted]`` (common/redact.py), and a session key becomes ``session#<key_hash>``. A session key
holds no raw platform id, but it still names one conversation; the 12-hex hash lets an operator follow one session
through the log (``key_hash`` of a key from ``sessions list``) without the log naming it.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import logging.config
import re
import threading
from datetime import datetime, timezone
from typing import Iterable

from common.redact import configured_secrets, escape_controls, redact

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
KEY_HASH_HEX = 12
# What a call site may pass with extra=...: these become fields of the JSON object (and key=value in text).
STRUCTURED_FIELDS = ("session", "platform", "chat", "turn", "adapter", "obligation", "seq", "phase", "reason",
                     "outcome", "seconds", "tokens_in", "tokens_out")

# storage/keys.py builds keys as <profile>.<platform>.<chat_type>.chat-<h>[.thread-<h>][.user-<h>]
# (a session actor's name is "session:<key>": the prefix goes with the key)
SESSION_KEY = re.compile(r"(?<![A-Za-z0-9._-])(?:session:)?([a-z0-9][a-z0-9_-]*\.[a-z0-9][a-z0-9_-]*\."
                         r"(?:dm|group|channel|thread)\.chat-[0-9a-f]{16}(?:\.thread-[0-9a-f]{16})?"
                         r"(?:\.user-[0-9a-f]{16})?)(?![A-Za-z0-9_-])")


def key_hash(key: str) -> str:
    """A short stable name for a session key in logs: the first 12 hex digits of its sha256."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:KEY_HASH_HEX]


def hide_session_keys(text: str) -> str:
    return SESSION_KEY.sub(lambda m: "session#" + key_hash(m.group(1)), text) if text else text


def log_settings(config: dict) -> tuple[str, str]:
    """(level, format) from ``[logging]``; ``level`` falls back to the older ``[gateway] log_level``."""
    section = config.get("logging", {})
    level = section.get("level") or config.get("gateway", {}).get("log_level") or "info"
    return level.upper(), section.get("format") or "text"


# ------------------------------------------------------------------------------------------------------ filters

class NotThespianNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.startswith("gateway")


class Redact(logging.Filter):
    """Rewrite a record so that neither a secret nor a raw session key survives, in any format.

    The message is formatted once here (Thespian's forwarder has usually done it already) and the arguments
    dropped, so no formatter can bring a raw value back; extras and the traceback text are cleaned too."""

    def __init__(self, secrets: Iterable[str] = ()):
        super().__init__()
        self.secrets = tuple(secrets)

    def clean(self, text: str) -> str:
        return hide_session_keys(redact(text, self.secrets))

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not lose the record
            message = f"{record.msg!r} {record.args!r}"
        # One record, one line of the text log: a newline or an escape sequence from outside text is shown escaped.
        record.msg, record.args = escape_controls(self.clean(message)), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_info = None
        if record.exc_text:
            record.exc_text = self.clean(record.exc_text)
        for name in STRUCTURED_FIELDS + ("actor_name",):
            value = record.__dict__.get(name)
            if isinstance(value, str):
                record.__dict__[name] = escape_controls(self.clean(value))
        return True


# --------------------------------------------------------------------------------------------------- formatters

def _extras(record: logging.LogRecord) -> dict:
    return {name: record.__dict__[name] for name in STRUCTURED_FIELDS if record.__dict__.get(name) is not None}


def _actor_kind(record: logging.LogRecord) -> str | None:
    kind = record.__dict__.get("actor")
    if kind:
        return kind
    # Actors log through "gateway.<kind>" (supervision/actor.py): the kind is known even before the process is tagged.
    if record.name.startswith("gateway.") and record.name.count(".") == 1 and record.name != "gateway.launcher":
        return record.name.split(".", 1)[1]
    return None


class TextFormatter(logging.Formatter):
    def __init__(self):
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = _extras(record)
        return line + ("  " + " ".join(f"{k}={v}" for k, v in fields.items()) if fields else "")


class JsonFormatter(logging.Formatter):
    """One JSON object per line; a newline inside a message or traceback is escaped, never a second line."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "msg": record.getMessage(), "pid": record.process,
        }
        kind = _actor_kind(record)
        if kind:
            entry["actor"] = kind
        if record.__dict__.get("actor_name"):
            entry["actor_name"] = record.__dict__["actor_name"]
        entry.update(_extras(record))
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


FORMATTERS = {"text": TextFormatter, "json": JsonFormatter}


# ----------------------------------------------------------------------------------------------------- wiring

def thespian_log_defs(level: str = "INFO", fmt: str = "text", secrets: Iterable[str] = ()) -> dict:
    """The dictConfig for Thespian's logger process (and, through ``configure_launcher_logging``, the launcher)."""
    return {
        "version": 1,
        "formatters": {"gateway": {"()": FORMATTERS[fmt]}},
        "filters": {"gateway": {"()": NotThespianNoise}, "redact": {"()": Redact, "secrets": list(secrets)}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "gateway",
                                "filters": ["gateway", "redact"], "level": level.upper(), "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": level.upper()},
    }


def log_defs_for(config: dict) -> dict:
    level, fmt = log_settings(config)
    return thespian_log_defs(level, fmt, configured_secrets(config))


def configure_launcher_logging(config: dict | str = "INFO") -> None:
    """The launcher's own records: same handler, formatter and filters as the actors'. A plain level string is
    accepted for callers that have no configuration (text format, no configured secrets)."""
    defs = log_defs_for(config) if isinstance(config, dict) else thespian_log_defs(config)
    defs["disable_existing_loggers"] = False
    logging.config.dictConfig(defs)


_acting = threading.local()   # .tag: (kind, name) of the cell whose handler runs now on this thread


def tag_actor_process(kind: str, name: str) -> None:
    """Stamp every record this process makes with its actor kind and name (one actor per process), or with the
    cell's while a cell's handler runs (``acting_as``)."""
    previous = logging.getLogRecordFactory()
    base = getattr(previous, "untagged", previous)

    def factory(*args, **kwargs):
        record = base(*args, **kwargs)
        record.actor, record.actor_name = getattr(_acting, "tag", None) or (kind, name)
        return record
    factory.untagged = base
    logging.setLogRecordFactory(factory)


@contextlib.contextmanager
def acting_as(kind: str, name: str):
    """While a cell's handler runs on its host's thread, the records made on that thread name the cell. (Per thread,
    not a ContextVar: a task a cell creates on the shared loop must not inherit it.)"""
    outer = getattr(_acting, "tag", None)
    _acting.tag = (kind, name)
    try:
        yield
    finally:
        _acting.tag = outer
