"""Logging for the launcher and, through Thespian's logger process, for every actor.

Every record goes to stderr (the launcher's stderr is the log file when it runs as a daemon). Thespian needs a real
logDefs dictionary: ``logDefs=False`` breaks the multiproc bases.
"""
from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class NotThespianNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.startswith("gateway")


def thespian_log_defs(level: str = "INFO") -> dict:
    return {
        "version": 1,
        "formatters": {"plain": {"format": FORMAT}},
        "filters": {"gateway": {"()": NotThespianNoise}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["gateway"],
                                "level": level.upper(), "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": level.upper()},
    }


def configure_launcher_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=level.upper(), format=FORMAT)
