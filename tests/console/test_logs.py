"""The logs page streams the gateway's new log lines (server-sent events), filtered by level and actor on the
gateway's side, and never holds more than one bounded chunk for a browser (actors/console/log_lines.py): the pure
reading and filtering, then the stream against the real daemon, from HTTP and from the page (Chromium)."""
from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request

import pytest

from actors.console.log_lines import matching, read_new
from tests.console.helpers import console_gateway, console_port, running

pytestmark = pytest.mark.timeout(180)

LINES = ["2026-12-06 09:00:00,001 INFO gateway.Console: console: serving",
         "2026-12-06 09:00:01,002 WARNING gateway.TelegramAdapter: telegram: intake error",
         "2026-12-06 09:00:02,003 ERROR gateway.Console: console: status failed",
         "Traceback (most recent call last):",
         "2026-12-06 09:00:03,004 DEBUG gateway.Root: walk"]


def test_filters_keep_a_level_and_above_of_one_actor_with_its_traceback():
    assert matching(LINES, level="WARNING") == LINES[1:4]
    assert matching(LINES, actor="console") == LINES[0:1] + LINES[2:4]
    assert matching(LINES, level="error", actor="Console") == LINES[2:4]
    assert matching(LINES, actor="Console", words="serving") == LINES[:1]
    assert matching(LINES) == LINES


def test_a_reader_gets_whole_new_lines_and_skips_what_exceeds_its_bound(tmp_path):
    log = tmp_path / "gateway.log"
    log.write_bytes(b"old line\n")
    position = log.stat().st_size
    with open(log, "ab") as f:
        f.write(b"one\ntwo\nthr")
    lines, position, skipped = read_new(log, position, 1024)
    assert (lines, skipped) == (["one", "two"], 0)
    with open(log, "ab") as f:
        f.write(b"ee\n" + b"x" * 5000 + b"\nnewest\n")
    lines, position, skipped = read_new(log, position, 100)
    assert lines == ["newest"] and skipped > 4900, "a burst past the bound: only the newest, the skip said"
    assert position == log.stat().st_size
    log.write_bytes(b"rotated\n")            # shorter than where the reader was: a new file
    assert read_new(log, position, 1024)[0] == ["rotated"]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = console_gateway(tmp_path_factory.mktemp("console-logs"), allow_actions=True)
    with running(gw):
        yield gw, console_port(gw)


def post_action(port: int, action: str, body: dict, headers: dict) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/actions/{action}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **headers}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def events_until(connection, wanted: str, timeout: float) -> list[str]:
    """The lines the stream sent until one holds ``wanted`` (AssertionError, saying what came, past ``timeout``)."""
    response, seen, deadline = connection.getresponse(), [], time.monotonic() + timeout
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    while time.monotonic() < deadline:
        line = response.fp.readline().decode()
        if line.startswith("data: "):
            seen += json.loads(line[6:])["lines"]
            if any(wanted in text for text in seen):
                return seen
    raise AssertionError(f"no line with {wanted!r} within {timeout}s; the stream sent {seen}")


def test_the_stream_sends_new_lines_of_the_level_and_actor_asked_for(gateway):
    gw, port = gateway
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/api/stream?topic=logs&level=WARNING&actor=Console")
    session = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/session", timeout=20).read())
    # INFO, from the console: "console: deliveries.retry 'not-a-delivery' by ..." (then 404)
    assert post_action(port, "deliveries.retry", {"id": "not-a-delivery"}, {"X-Console-CSRF": session["csrf"]}) == 404
    # WARNING, from the console: a write without the CSRF token refused
    assert post_action(port, "deliveries.retry", {"id": "refused-one"}, {}) == 403
    seen = events_until(connection, "refused action", 60)
    assert not any("not-a-delivery" in line for line in seen), "an INFO line passed a WARNING filter"
    assert all(" WARNING " in line or " ERROR " in line for line in seen if line[:4].isdigit()), seen
    connection.close()


def test_a_line_written_between_the_tail_and_the_stream_comes_by_the_stream(gateway):
    """The page reads the tail, then opens the stream: a line written in between is lost unless the stream starts
    where the tail ended (``from``), as the page asks."""
    gw, port = gateway
    tail = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/logs?level=WARNING", timeout=20).read())
    assert not any("between-reads" in line for line in tail["lines"])
    assert post_action(port, "between-reads", {}, {}) == 403    # logged: "refused action 'between-reads' by ..."
    gw.wait_log("between-reads", 30)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", f"/api/stream?topic=logs&level=WARNING&from={tail['position']}")
    events_until(connection, "between-reads", 60)
    connection.close()


def test_the_logs_page_shows_a_new_line_without_reloading(gateway, page):
    gw, port = gateway
    page.goto(f"http://127.0.0.1:{port}/logs")
    page.select_option("#level", "WARNING")
    page.wait_for_function("() => document.getElementById('live').dataset.connected === 'yes'")
    reads = []
    page.on("request", lambda r: reads.append(r.url) if "/api/logs" in r.url else None)
    assert post_action(port, "seen-live", {}, {}) == 403   # logged: "refused action 'seen-live' by ..."
    page.wait_for_function("() => document.getElementById('log').textContent.includes('seen-live')",
                           timeout=30_000)
    assert reads == [], f"the line came by a new read of the tail, not by the stream: {reads}"
