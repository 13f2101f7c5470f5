"""Files a reply carries, on the generic fake platform through the real daemon: the offline agent's drawing arrives
once, byte for byte, after the text; a file the platform refuses becomes a line of the reply in its place."""
from __future__ import annotations


import pytest

from storage import MediaCache
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import pipeline_gateway, visible

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    platform = FakePlatform().start()
    gw = pipeline_gateway(tmp_path_factory.mktemp("files-out"), platform)
    gw.start()
    gw.wait_ready()
    yield platform, gw
    gw.cli("stop")
    gw.kill_everything()
    platform.stop()


def reply_in(platform: FakePlatform, chat: str, parts: int, gw) -> list[dict]:
    def done():
        shown = visible(platform, chat)
        return len(shown) >= parts and all("▍" not in m["text"] for m in shown) and shown
    try:
        return wait_for(done, 60, 0.05, f"{parts} settled part(s) in {chat}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n" + "\n".join(gw.log().splitlines()[-30:])) from None


def test_a_drawn_card_arrives_once_byte_for_byte_after_the_text(rig):
    platform, gw = rig
    platform.inject("files-1", "draw a card saying open all night")
    text, card = reply_in(platform, "files-1", 2, gw)
    assert "I used the text_image tool" in text["text"] and "file" not in text
    assert card["file"]["kind"] == "photo" and card["file"]["name"] == "card.png" and card["text"] == "drawn offline"
    cached = MediaCache(gw.state / "media").read(card["file"]["sha256"])
    assert cached is not None and len(cached) == card["file"]["size"]
    assert len([o for o in platform.ops("files-1", "send_file") if o["status"] == 200]) == 1


def test_a_file_the_platform_refuses_is_named_in_a_line_in_its_place(rig):
    platform, gw = rig
    platform.file_limit = 100          # every card is larger: 400 "too_large"
    try:
        platform.inject("files-2", "draw a card saying closed")
        text, line = reply_in(platform, "files-2", 2, gw)
        assert "file" not in line and line["text"].startswith("[file: card.png (PNG, ")
        # The chat reads the platform's words, never our method name or the HTTP status of the log line.
        assert "the platform refused it (too_large)" in line["text"], line["text"]
        assert "send_file" not in line["text"] and "[400]" not in line["text"], line["text"]
        assert [o["status"] for o in platform.ops("files-2", "send_file")] == [400]
    finally:
        platform.file_limit = 50 * 1024 * 1024
