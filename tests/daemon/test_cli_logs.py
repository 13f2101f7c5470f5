"""``logs --since``: durations, and which lines of a log (in either format, as the gateway writes it) are recent."""
from __future__ import annotations

import logging
import time

import pytest

from common.logging_setup import JsonFormatter, TextFormatter
from daemon.cli_logs import DurationError, parse_duration, record_time, since

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("10m", 600), ("2h", 7200), ("1d", 86400),
                                           ("1h30m", 5400), (" 1.5h ", 5400), ("0s", 0)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "m", "10x", "ten minutes", "-5m", "10m garbage", "1h 30m"])
def test_a_bad_duration_says_what_a_good_one_looks_like(text):
    with pytest.raises(DurationError, match="say e.g. 90s, 10m"):
        parse_duration(text)


def _line(formatter: logging.Formatter, at: float, message: str) -> str:
    record = logging.LogRecord("gateway.launcher", logging.INFO, __file__, 1, message, None, None)
    record.created, record.msecs = at, (at % 1) * 1000
    return formatter.format(record) + "\n"


@pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()], ids=["text", "json"])
def test_since_keeps_the_records_of_the_last_stretch_with_their_continuation_lines(formatter):
    now = time.time()
    lines = [_line(formatter, now - 7200, "two hours ago"), "Traceback (most recent call last):\n",
             _line(formatter, now - 300, "five minutes ago"), "  a continuation of it\n",
             _line(formatter, now - 5, "just now")]
    assert abs(record_time(lines[0]) - (now - 7200)) < 0.01 and record_time(lines[1]) is None
    kept = "".join(since(lines, now - 600))
    assert "two hours ago" not in kept and "Traceback" not in kept
    assert "five minutes ago" in kept and "a continuation of it" in kept and "just now" in kept
    assert "".join(since(lines, now - 86400)) == "".join(lines)
