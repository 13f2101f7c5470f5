"""A message in, one answer out: the pipeline end to end on the real daemon and the fake platform."""
from __future__ import annotations

import sqlite3

import pytest

from actors.agents.offline import FAKE_SECRET
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import CURSOR, FENCE, pipeline_gateway, settled_answers, visible

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def platform():
    with FakePlatform() as fake:
        yield fake


@pytest.fixture
def gateway(tmp_path, platform):
    gw = pipeline_gateway(tmp_path, platform)
    gw.start()
    gw.wait_ready()
    yield gw
    gw.cli("stop")
    gw.kill_everything()


def test_a_message_gets_one_streamed_answer(gateway, platform):
    platform.inject("c1", "hello there, gateway #slow 0.05")
    [answer] = settled_answers(platform, "c1")
    assert "hello there, gateway" in answer and "offline" in answer.lower()
    message = visible(platform, "c1")[0]
    assert len(message["history"]) >= 2, "the answer should stream in through edits"
    assert message["reply_to"] is not None
    # The doorbell, the operations and their results went over the direct link (supervision/direct_link.py).
    adapter = gateway.node("fake")
    assert dict(adapter.get("facts") or ()).get("links", 0) >= 1, f"the adapter has no direct link: {adapter}"


def test_the_shard_indexes_a_turn_for_search_in_the_background(gateway, platform):
    # No search runs here: only the shard's search_index timer can empty search_pending (storage/search_index.py).
    platform.inject("c1", "pelicans in the harbour")
    settled_answers(platform, "c1")

    def counts():
        with sqlite3.connect(gateway.state / "gateway.db") as db:
            return (db.execute("SELECT COUNT(*) FROM search_pending").fetchone()[0],
                    db.execute("SELECT COUNT(*) FROM transcript_fts WHERE transcript_fts MATCH 'pelicans'")
                    .fetchone()[0])
    seen = []
    try:
        wait_for(lambda: seen.append(counts()) or seen[-1] == (0, 2), 30, 0.1, "the turn indexed by the shard")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen (pending events, hits for 'pelicans'): {seen[-1]}") from None


def test_a_20000_character_answer_is_split_at_the_limit_with_fences_intact(gateway, platform):
    platform.inject("long", "#long 20000")
    # At least 5 parts; how many exactly depends on where fences fall, so "settled" is: no cursor, whole length.
    parts = wait_for(lambda: (texts := [m["text"] for m in visible(platform, "long")])
                     and not any(CURSOR in t for t in texts) and len("".join(texts)) >= 20000 and texts,
                     60, 0.05, "the whole 20,000-character answer")
    assert len(parts) >= 5
    assert all(len(p) <= 4000 for p in parts)
    assert all(len(FENCE.findall(p)) % 2 == 0 for p in parts), "every part closes the fences it opens"
    ids = [int(m["message_id"]) for m in visible(platform, "long")]
    assert ids == sorted(ids)
    joined = "".join(parts)
    assert len(joined) >= 20000


def test_a_flood_of_429s_is_waited_out_and_the_answer_arrives_whole(gateway, platform):
    platform.set_faults(p_flood=0.4, seed=7, flood_retry_after=0.2)
    platform.inject("flood", "please answer despite the flood")
    [answer] = settled_answers(platform, "flood", timeout=60)
    assert "please answer despite the flood" in answer
    stats = platform.stats()
    assert stats["retry_after_violations"] == 0
    assert any(op["status"] == 429 for op in platform.ops("flood"))


def test_edits_refused_longer_than_the_adapter_waits_still_end_in_one_message(gateway, platform):
    """A storm of 429s on every edit outlasts the adapter's own waits: the reply retries instead of falling back to
    a new message, which would leave the preview behind with its cursor."""
    platform.inject("storm", "an answer through an edit storm #slow 0.1")
    wait_for(lambda: any(CURSOR in m["text"] for m in visible(platform, "storm")), 20, 0.02, "a preview")
    platform.set_faults(p_flood=1.0, seed=3, flood_retry_after=0.2, methods=["edit"])
    wait_for(lambda: sum(op["status"] == 429 for op in platform.ops("storm", "edit")) >= 20, 30, 0.05,
             "edits refused past the adapter's waits")
    platform.set_faults()
    [answer] = settled_answers(platform, "storm", timeout=60)
    assert "an answer through an edit storm" in answer and "api_key_env" in answer
    assert len(platform.messages("storm")) == 1, platform.messages("storm")


def test_an_api_key_in_an_agent_error_never_reaches_the_chat(gateway, platform):
    platform.inject("err", "#fail now")
    [answer] = settled_answers(platform, "err")
    history = [h["text"] for m in platform.messages("err") for h in m["history"]]
    assert all(FAKE_SECRET not in text for text in history)
    assert "[redacted]" in answer or "failed" in answer.lower()
    wait_for(lambda: FAKE_SECRET in gateway.log() or "AgentError" in gateway.log(), 15, 0.05,
             "the agent error in the log")


def test_commands_answer_and_unknown_commands_help(gateway, platform):
    platform.inject("cmd", "/help")
    [help_text] = settled_answers(platform, "cmd")
    assert "/new" in help_text and "/stop" in help_text
    platform.inject("cmd", "/frobnicate")
    texts = settled_answers(platform, "cmd", count=2)
    assert "/frobnicate" in texts[1] and "/help" in texts[1]


def test_messages_of_one_chat_are_answered_in_order_one_turn_at_a_time(gateway, platform):
    for i in range(5):
        platform.inject("seq", f"message number {i}")
    texts = settled_answers(platform, "seq", count=5, timeout=60)
    for i, text in enumerate(texts):
        assert f"message number {i}" in text
