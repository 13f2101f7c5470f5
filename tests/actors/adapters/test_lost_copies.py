"""The walk over a private chat's message ids that finds a lost send's copy (actors/adapters/lost_copies.py)."""
from __future__ import annotations

import asyncio

import pytest

from actors.adapters.lost_copies import (END_MISSES, MAX_PROBES, NOTHING, OTHERS, OURS, Unresolved, search,
                                         search_floor)

pytestmark = pytest.mark.timeout(10)


def chat(**messages):
    """A chat as the probe sees it: id -> OURS / OTHERS; every other id answers NOTHING. Returns (probe, tried)."""
    tried = []

    async def probe(message_id: int) -> str:
        tried.append(message_id)
        return messages.get(f"m{message_id}", NOTHING)
    return probe, tried


def run(probe, floor, ours=(), highest=None):
    return asyncio.run(search(probe, floor, set(ours), floor if highest is None else highest))


def test_the_copy_right_after_the_message_it_answers_is_found():
    probe, tried = chat(m11=OURS)
    assert run(probe, 10) == 11 and tried == [11]


def test_the_users_messages_in_between_are_passed_over():
    probe, tried = chat(m11=OTHERS, m12=OTHERS, m13=OURS)
    assert run(probe, 10) == 13 and tried == [11, 12, 13]


def test_a_send_that_never_landed_is_told_by_the_end_of_the_chat():
    probe, tried = chat(m11=OTHERS)
    assert run(probe, 10) is None and tried == [11, 12, 13][:1 + END_MISSES]


def test_known_copies_of_other_replies_are_never_taken_for_the_lost_one():
    probe, tried = chat(m11=OURS, m12=OURS)   # 11 is another reply's recorded part
    assert run(probe, 10, ours={"11"}, highest=11) == 12 and tried == [12]


def test_a_deleted_message_below_the_highest_known_id_does_not_end_the_search():
    probe, _ = chat(m14=OTHERS, m15=OURS)     # 11..13 deleted; 14 known (the user's), so they were messages
    assert run(probe, 10, highest=14) == 15


def test_one_gap_above_every_known_id_is_not_yet_the_end():
    probe, _ = chat(m12=OURS)                 # 11: a message deleted before the gateway heard of it
    assert run(probe, 10) == 12


def test_a_search_that_cannot_tell_gives_up_after_its_probes():
    probe, tried = chat(**{f"m{i}": OTHERS for i in range(11, 40)})
    with pytest.raises(Unresolved):
        run(probe, 10)
    assert len(tried) == MAX_PROBES


def test_the_floor_is_the_highest_numeric_id_known_before_the_lost_send():
    assert search_floor("10", ["12", "11"]) == 12
    assert search_floor(None, []) is None and search_floor("web-3", ["x"]) is None
