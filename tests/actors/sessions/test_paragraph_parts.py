"""A reply sent in paragraph-sized parts as it is written, where the platform has no edits
(actors/sessions/paragraph_parts.py): where the text is cut, and what a reply resumed after a crash sends. Pure."""
from __future__ import annotations

import pytest

from actors.adapters.registry import pacing_for
from actors.messages import OutgoingFile
from actors.sessions.chunking import paragraph_breaks
from actors.sessions.paragraph_parts import ParagraphParts, continuation, paragraph_end, part_key, ready_parts
from actors.sessions.reply_files import is_file

pytestmark = pytest.mark.timeout(30)

MARK = "↻ re-sent after a restart; an unfinished copy may appear above"
WHATSAPP = pacing_for("whatsapp")
PHOTO = OutgoingFile("a" * 64, "image/png", "photo", "card.png", "our hours", 20_000, 800, 200)


def para(tag: str, size: int = 250) -> str:
    return (tag + " " + "word " * size)[:size].rstrip() + "."


def plan(limit: int = 4000, min_chars: int = 200) -> ParagraphParts:
    return ParagraphParts(limit, len, MARK, min_chars)


def writes(parts: ParagraphParts, answer: str, step: int = 7, placed: dict | None = None) -> list[str]:
    """The parts as the answer comes in ``step``-character deltas; each must only grow (a part never changes)."""
    seen: list[str] = []
    for end in range(step, len(answer) + step, step):
        now = parts.streaming(answer[:end], placed or {})
        assert now[:len(seen)] == seen, f"a part changed after it was cut: {seen} -> {now}"
        seen = now
    return seen


# ------------------------------------------------------------------------------------------------- cutting

def test_complete_paragraphs_are_parts_once_they_hold_enough_and_the_unfinished_one_waits():
    one, two, three = para("one"), para("two"), para("three")
    answer = f"{one}\n\n{two}\n\n{three}"
    assert writes(plan(), answer) == [one, two], "the third paragraph is not complete until the turn ends"
    short = "Short.\n\nAlso short.\n\n"
    assert paragraph_end(short, 0, 200) == 0, "two short paragraphs wait for more text"
    assert paragraph_end(short + one + "\n\n", 0, 200) == len(short + one + "\n\n")


def test_a_blank_line_inside_a_code_block_is_no_paragraph_break():
    code = "```python\nx = 1\n\n\ny = 2\n```"
    answer = f"{para('intro')}\n\n{code}\n\nafter"
    assert paragraph_breaks(code) == []
    parts = plan()
    assert writes(parts, answer) == [para("intro")], "the block and what follows are under the minimum: they wait"
    assert parts.finished(answer, [], WHATSAPP, {0: "m0"}) == [para("intro"), f"{code}\n\nafter"]
    big = "```python\n" + "x = 1\n\n" * 60 + "```"
    parts = plan()
    assert writes(parts, f"{big}\n\nafter") == [big], "the block goes once it is closed, whole"
    mid = answer[:answer.index("y = 2")]
    assert paragraph_end(mid, 0, 10) == len(para("intro")) + 2, "no cut inside the open block"


def test_no_part_is_over_the_limit_and_a_long_unbroken_paragraph_goes_out_in_chunks_as_it_comes():
    long_run = " ".join(f"w{i}" for i in range(800))   # ~4,000 characters, no blank line
    parts = writes(plan(limit=1000), long_run, step=50)
    assert len(parts) >= 3 and all(len(p) <= 1000 for p in parts), [len(p) for p in parts]
    assert " ".join(parts) == long_run[:len(" ".join(parts))], "the chunks are the text, in order"
    in_code = "```\n" + "x = 1\n" * 400   # a code block longer than the limit, still open: waits for its end
    assert ready_parts(in_code, 0, 1000, 200)[0] == []


def test_the_final_parts_are_the_parts_sent_then_the_rest_then_the_files():
    one, two, three = para("one"), para("two"), para("three")
    answer = f"{one}\n\n{two}\n\n{three}"
    parts = plan()
    writes(parts, answer)
    final = parts.finished(answer, [PHOTO], WHATSAPP, {0: "m0", 1: "m1"})
    assert final[:3] == [one, two, three] and is_file(final[3]) and len(final) == 4
    assert parts.record() == {"from": 0, "parts": final}
    everything_sent = plan()
    writes(everything_sent, answer + "\n\n")
    assert everything_sent.finished(answer + "\n\n", [], WHATSAPP, {}) == [one, two, three], \
        "no empty part after the last paragraph"


# ------------------------------------------------------------------------------------------------ resuming

def resumed(record: dict | None, placed: dict) -> ParagraphParts:
    parts = plan()
    parts.resume(record, placed)
    return parts


def test_a_resumed_answer_that_begins_with_what_was_sent_goes_on_after_it_and_sends_nothing_twice():
    one, two, three, four = para("one"), para("two"), para("three"), para("four")
    answer = f"{one}\n\n{two}\n\n{three}\n\n{four}"
    # The first life sent part 0, recorded part 1 and may have sent it (its intent), then died.
    parts = resumed({"from": 0, "parts": [one, two]}, {0: "m0"})
    assert parts.streaming(answer[:100], {0: "m0"}) == [], "too early to tell: nothing is sent"
    streamed = writes(parts, answer, placed={0: "m0"})
    assert streamed == [one, two, three], "part 1 again (the same text: the same key, or marked by the claim)"
    assert parts.finished(answer, [], WHATSAPP, {0: "m0"}) == [one, two, three, four]


def test_a_resumed_answer_that_differs_is_sent_whole_after_the_parts_already_there_under_the_mark():
    one, two = para("one"), para("two")
    new = f"{para('new one')}\n\n{para('new two')}\n\n{para('new three')}"
    parts = resumed({"from": 0, "parts": [one, two]}, {0: "m0", 1: "m1"})
    streamed = writes(parts, new, placed={0: "m0", 1: "m1"})
    assert streamed[:2] == [one, two], "the parts on the platform stay"
    assert streamed[2] == f"{MARK}\n{para('new one')}" and streamed[3] == para("new two")
    final = parts.finished(new, [], WHATSAPP, {0: "m0", 1: "m1"})
    assert final == [one, two, f"{MARK}\n{para('new one')}", para("new two"), para("new three")]
    assert parts.record()["from"] == 2, "a third life compares its answer with this one, not the first"


def test_a_part_of_the_earlier_answer_not_on_the_platform_is_dropped_when_the_new_answer_differs():
    one, two = para("one"), para("two")
    parts = resumed({"from": 0, "parts": [one, two]}, {0: "m0"})   # part 1's send: outcome unknown
    final = parts.finished("A different answer.", [], WHATSAPP, {0: "m0"})
    assert final == [one, f"{MARK}\nA different answer."]


def test_a_resumed_answer_shorter_than_what_was_sent_is_sent_whole_under_the_mark():
    one, two = para("one"), para("two")
    parts = resumed({"from": 0, "parts": [one, two]}, {0: "m0", 1: "m1"})
    assert parts.finished(one, [], WHATSAPP, {0: "m0", 1: "m1"}) == [one, two, f"{MARK}\n{one}"]


def test_a_third_life_goes_on_from_the_second_answer_and_its_mark():
    one = para("one")
    second = f"{para('new one')}\n\n{para('new two')}"
    record = {"from": 1, "parts": [one, f"{MARK}\n{para('new one')}"]}
    parts = resumed(record, {0: "m0", 1: "m1"})
    assert parts.finished(second, [], WHATSAPP, {0: "m0", 1: "m1"}) == \
        [one, f"{MARK}\n{para('new one')}", para("new two")]


def test_parts_on_the_platform_whose_text_is_not_known_stay_and_the_answer_is_sent_whole_marked():
    parts = resumed(None, {0: "m0", 1: "m1"})
    final = parts.finished("The answer.", [], WHATSAPP, {0: "m0", 1: "m1"})
    assert final[2:] == [f"{MARK}\nThe answer."] and len(final) == 3


def test_a_final_text_that_does_not_begin_with_what_was_streamed_is_sent_whole_marked():
    one, two = para("one"), para("two")
    parts = plan()
    writes(parts, f"{one}\n\n{two}\n\nmore")
    final = parts.finished("Redacted differently.", [], WHATSAPP, {0: "m0", 1: "m1"})
    assert final == [one, two, f"{MARK}\nRedacted differently."]


def test_continuation_reads_past_blank_space_and_the_mark():
    assert continuation("a\n\nb c", ["a", f"{MARK}\nb"], MARK) == ("continues", 4)
    assert continuation("a\n\nb", ["a", "b c"], MARK) == ("too_short", 0)
    assert continuation("a\n\nx", ["a", "b"], MARK) == ("differs", 0)


def test_a_keyed_send_names_its_content():
    assert part_key("f" * 64, 2, "hello") == part_key("f" * 64, 2, "hello")
    assert part_key("f" * 64, 2, "hello") != part_key("f" * 64, 2, "hello!")
    assert part_key("f" * 64, 2, "hello") != part_key("f" * 64, 3, "hello")
    assert part_key("f" * 64, 0, {"file": PHOTO.to_part()}).startswith("f" * 16 + ".0.")
