"""RecentHistory: what a live session keeps of its transcript between turns. Whatever was appended in between, by
whoever, the next turn reads exactly what a full load of the last events would return."""
from __future__ import annotations

import random

import pytest

from actors.sessions.history import RecentHistory
from storage.sessions import TranscriptEvent

pytestmark = pytest.mark.timeout(30)
SIZE = 5


class Transcript:
    """An append-only transcript per session, with the loads the session makes (counted)."""

    def __init__(self):
        self.events: dict[str, list] = {}
        self.loaded_rows = 0

    def append(self, sid: str, n: int) -> list:
        rows = self.events.setdefault(sid, [])
        new = [TranscriptEvent("user", "message", {"n": len(rows) + i}, None, None, len(rows) + i + 1)
               for i in range(n)]
        rows.extend(new)
        return new

    def loader(self, sid: str):
        def load(since: int) -> list:
            out = [e for e in self.events.get(sid, []) if e.seq > since][-SIZE:]
            self.loaded_rows += len(out)
            return out
        return load

    def last(self, sid: str) -> list:
        return self.events.get(sid, [])[-SIZE:]


def test_every_read_equals_a_full_load_whatever_was_appended_between_turns():
    rng, transcript, history = random.Random(7), Transcript(), RecentHistory(SIZE, keep_s=60)
    now = 0.0
    for turn in range(200):
        sid = rng.choice(["s1", "s1", "s1", "s2"])      # mostly one chat; now and then a reset's new session id
        transcript.append(sid, rng.choice([0, 1, 2, 7]))  # the last turn's answer, tool events, a long tool loop
        now += rng.choice([1.0, 5.0, 61.0])             # sometimes longer than the copy is kept
        seen = history.read(sid, transcript.loader(sid), now)
        assert seen == transcript.last(sid), f"turn {turn}"
        seen += transcript.append(sid, 1)                 # the turn's own message, appended and kept
        history.keep(sid, seen, now)


def test_a_warm_turn_reads_only_what_was_appended_since():
    transcript, history = Transcript(), RecentHistory(SIZE, keep_s=60)
    transcript.append("s1", 20)
    history.keep("s1", history.read("s1", transcript.loader("s1"), 0.0), 0.0)
    transcript.loaded_rows = 0
    transcript.append("s1", 1)
    assert history.read("s1", transcript.loader("s1"), 1.0) == transcript.last("s1")
    assert transcript.loaded_rows == 1


def test_the_copy_is_dropped_once_quiet_for_keep_s_and_one_timer_covers_many_turns():
    history = RecentHistory(SIZE, keep_s=60)
    events = Transcript().append("s1", 3)
    assert history.keep("s1", events, 0.0) is True        # arm the drop timer
    assert history.keep("s1", events, 30.0) is False      # one is armed already
    assert history.expire(60.0) == pytest.approx(30.0)    # kept again at 30 s: not yet
    assert history.events
    assert history.expire(90.0) is None
    assert history.events == () and history.session_id is None
    assert history.keep("s1", events, 100.0) is True      # a new turn arms a new timer


def test_events_without_a_seq_are_not_kept():
    history = RecentHistory(SIZE)
    event = TranscriptEvent("user", "message", {}, None, None, None)
    assert history.keep("s1", [event], 0.0) is False
    assert history.events == ()
