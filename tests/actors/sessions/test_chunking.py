import re

import pytest
from hypothesis import given, settings, strategies as st

from actors.adapters.pacing import LENGTH_FUNCTIONS, utf16_len, utf8_len
from actors.sessions.chunking import close_open_fence, plan_chunks, split_message

FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")


def open_fence_at_end(text):
    """An independent reading of the fence rules: the (char, count) of the fence left open, or None."""
    fence = None
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if fence is None:
            m = FENCE_OPEN.match(line)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = (m.group(1)[0], len(m.group(1)))
        else:
            m = FENCE_CLOSE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1]:
                fence = None
    return fence


def check_plan(text, limit, length):
    chunks = plan_chunks(text, limit, length)
    position = 0
    for chunk in chunks:
        assert chunk.start == position and chunk.end > chunk.start
        assert chunk.text == chunk.opened + text[chunk.start:chunk.end] + chunk.closed
        assert length(chunk.text) <= limit, (length(chunk.text), limit)
        assert open_fence_at_end(chunk.text) is None, chunk.text
        if chunk.opened:
            assert FENCE_OPEN.match(chunk.opened.rstrip("\n"))
        if chunk.closed:
            assert FENCE_CLOSE.match(chunk.closed.lstrip("\n"))
        position = chunk.end
    assert position == len(text)
    return chunks


def test_short_text_is_one_chunk_and_empty_text_none():
    assert split_message("hello", 100) == ["hello"]
    assert split_message("", 100) == []
    assert split_message("   \n ", 100) == []


def test_prefers_paragraph_then_line_then_sentence_then_space():
    para = "a" * 30 + "\n\n" + "b" * 30
    assert split_message(para, 50) == ["a" * 30 + "\n\n", "b" * 30]
    lines = "a" * 30 + "\n" + "b" * 30
    assert split_message(lines, 50) == ["a" * 30 + "\n", "b" * 30]
    sentences = "First sentence here. Second one is here and long"
    assert split_message(sentences, 30) == ["First sentence here. ", "Second one is here and long"]
    words = "alpha beta gamma delta epsilon zeta"
    chunks = split_message(words, 12)
    assert "".join(chunks) == words
    assert all(re.fullmatch(r"([a-z]+ )*[a-z]+ ?", c) for c in chunks), chunks


def test_paragraph_break_preferred_over_later_line_break():
    text = "p" * 40 + "\n\n" + "l" * 20 + "\n" + "x" * 30
    assert split_message(text, 80)[0] == "p" * 40 + "\n\n"


def test_unbroken_run_is_cut_mid_word():
    assert split_message("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_cut_inside_fence_closes_and_reopens_with_info_string():
    code = "\n".join(f"line_{i} = {i}" for i in range(40))
    text = "Intro paragraph.\n\n```python\n" + code + "\n```\n\nOutro."
    chunks = check_plan(text, 120, len)
    texts = [c.text for c in chunks]
    assert len(texts) > 2
    inner = [t for t in texts if "line_20 = 20" in t][0]
    assert inner.startswith("```python\n") and inner.endswith("```")
    assert texts[0].endswith("```")
    assert texts[1].startswith("```python\n")


def test_longer_fence_markers_are_reopened_verbatim():
    text = "````md\n" + "```\ninner\n```\n" * 20 + "````\nafter"
    chunks = check_plan(text, 60, len)
    assert any(c.opened == "````md\n" for c in chunks)
    assert all(c.closed.lstrip("\n") in ("", "````") for c in chunks)


def test_unclosed_fence_at_end_is_closed():
    chunks = check_plan("```js\nlet a = 1;\n", 100, len)
    assert chunks[0].text == "```js\nlet a = 1;\n```"


def test_inline_triple_backticks_mid_line_are_not_a_fence_after_a_cut():
    text = "word " * 5 + "```not a fence``` tail " * 4
    check_plan(text, 30, len)


def test_utf16_len_counts_astral_characters_twice():
    assert utf16_len("abc") == 3
    assert utf16_len("😀") == 2
    assert utf16_len("é") == 1
    assert utf8_len("😀") == 4
    assert LENGTH_FUNCTIONS["utf16"] is utf16_len


def test_emoji_never_split_and_limits_in_utf16():
    text = "😀" * 50
    chunks = split_message(text, 9, utf16_len)
    assert all(utf16_len(c) <= 9 for c in chunks)
    assert "".join(chunks) == text
    assert all(set(c) == {"😀"} for c in chunks)


def test_surrogate_pairs_and_joiners_stay_together():
    family = "👨\u200d👩\u200d👧"
    text = (family + " ") * 10
    for chunk in split_message(text, 12, utf16_len):
        assert not chunk.startswith("\u200d") and not chunk.endswith("\u200d")
    lone = "\ud83d\ude00" * 10    # a pair kept as two code points, as a lax decoder can leave it
    for chunk in split_message(lone, 5, utf16_len):
        assert not chunk.startswith("\ude00")


def test_bytes_limit_for_multibyte_text():
    text = "日本語のテキスト。" * 100
    chunks = split_message(text, 100, utf8_len)
    assert all(utf8_len(c) <= 100 for c in chunks)
    assert "".join(chunks) == text


def test_limit_too_small_for_a_character_raises():
    with pytest.raises(ValueError):
        split_message("😀", 1, utf16_len)
    with pytest.raises(ValueError):
        split_message("a", 0)


def test_twenty_thousand_character_answer():
    paragraph = "This is a sentence of a long answer, with emoji 🎉 and words. " * 8
    code = "```python\n" + "\n".join(f"def f{i}(x):\n    return x * {i}" for i in range(150)) + "\n```\n\n"
    text = ((paragraph + "\n\n") * 12 + code) * 3
    text = text[:20_000]
    assert len(text) == 20_000
    chunks = check_plan(text, 4096, utf16_len)
    assert 5 <= len(chunks) <= 8
    assert sum(len(c.text) - len(c.opened) - len(c.closed) for c in chunks) == 20_000


# ------------------------------------------------------------------------------------------------ properties

words = st.sampled_from(["word", "x", "longerword", "😀", "👍🏽", "日本", "é", "a\u0301", "🇫🇷", "1.5", "end.",
                         "http://example.com/a?b=c", "```inline```"])
separators = st.sampled_from([" ", " ", " ", "\n", "\n\n", ". ", "  "])


@st.composite
def prose(draw):
    items = draw(st.lists(st.tuples(words, separators), max_size=40))
    return "".join(w + s for w, s in items)


@st.composite
def fenced(draw):
    marker = draw(st.sampled_from(["```", "````", "~~~"]))
    info = draw(st.sampled_from(["", "python", "js", "text title"]))
    body = draw(prose())
    closed = draw(st.booleans())
    return f"{marker}{info}\n{body}\n" + (marker + "\n" if closed else "")


documents = st.lists(st.one_of(prose(), fenced(), st.text(max_size=30)), max_size=8).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=documents, limit=st.integers(min_value=24, max_value=200),
       length_name=st.sampled_from(["chars", "utf16", "bytes"]))
def test_property_chunks_fit_cover_text_and_keep_fences_balanced(text, limit, length_name):
    check_plan(text, limit, LENGTH_FUNCTIONS[length_name])


@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=1, max_size=300), limit=st.integers(min_value=4, max_value=60))
def test_property_any_unicode_text_fits_and_is_preserved(text, limit):
    chunks = plan_chunks(text, limit, utf16_len)
    assert all(utf16_len(c.text) <= limit for c in chunks)
    assert "".join(text[c.start:c.end] for c in chunks) == text
    kept = split_message(text, limit, utf16_len)
    assert [c for c in kept] == [c.text for c in chunks if text[c.start:c.end].strip()]


@settings(max_examples=300, deadline=None)
@given(text=documents, limit=st.integers(min_value=24, max_value=400),
       length_name=st.sampled_from(["chars", "utf16", "bytes"]))
def test_property_the_one_message_shortcut_plans_what_the_planner_plans(text, limit, length_name):
    """A reply that fits one message skips the planner (chunking._fits_whole); the planner would say the same."""
    from actors.sessions.chunking import _Planner
    length = LENGTH_FUNCTIONS[length_name]
    if not text:
        return
    planner, chunks, start = _Planner(text, limit, length), [], 0
    while start < len(text):
        chunks.append(planner.next_chunk(start))
        start = chunks[-1].end
    assert plan_chunks(text, limit, length) == chunks


# ----------------------------------------------------------------------- a reply cut short inside a code block

@pytest.mark.parametrize("text, closed", [
    ("```python\nprint(1)", "```python\nprint(1)\n```"),
    ("```python\nprint(1)\n", "```python\nprint(1)\n```"),
    ("~~~\nls -l", "~~~\nls -l\n~~~"),                                        # a tilde fence closes with tildes
    ("````md\n```py\nx = 1\n```\nmore", "````md\n```py\nx = 1\n```\nmore\n````"),  # inner ``` does not close ````
    ("~~~\n```\nstill code", "~~~\n```\nstill code\n~~~"),                    # backticks do not close a ~~~ fence
    ("   ```\nindented fence", "   ```\nindented fence\n```"),
    ("use ``` `x` ``` inline\nand more", "use ``` `x` ``` inline\nand more"),   # inline backticks: no block
    ("```` `x` not a fence\nprose", "```` `x` not a fence\nprose"),          # a backtick in the info string
    ("```\ncode\n```\nprose after", "```\ncode\n```\nprose after"),           # closed already: unchanged
    ("plain prose", "plain prose"),
    ("", ""),
])
def test_close_open_fence_closes_the_block_a_text_ends_inside_of(text, closed):
    assert close_open_fence(text) == closed
    assert open_fence_at_end(close_open_fence(text)) is None
