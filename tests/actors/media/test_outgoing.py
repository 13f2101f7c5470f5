"""A tool's files into the media cache, described from their bytes (actors/media/outgoing.py), and the tool
registry's answer carrying them (actors/agents/tools.py)."""
from __future__ import annotations

import asyncio

import pytest

from actors.agents.offline import OfflineAgent
from actors.agents.base import AgentRequest
from actors.agents.text_image import draw_card
from actors.agents.tools import Tool, ToolRegistry, default_registry
from actors.media.limits import human_size
from actors.media.outgoing import MAX_TOOL_FILE_BYTES, FileRefused, ToolFile, ToolOutput, cache_tool_file
from actors.messages import ToolCallFinished
from storage import MediaCache
from tests.actors.media.fixtures import pixel_bomb, png, polyglot

pytestmark = pytest.mark.timeout(30)


def test_an_image_goes_as_a_photo_measured_from_its_bytes_and_the_name_is_only_a_name(tmp_path):
    cache = MediaCache(tmp_path / "media")
    file = cache_tool_file(cache, ToolFile(png(320, 200), "../../etc/passwd.png", "a caption"))
    assert (file.kind, file.mime, file.width, file.height) == ("photo", "image/png", 320, 200)
    assert file.name == "passwd.png" and file.caption == "a caption"
    assert cache.read(file.cache_key) == png(320, 200)


@pytest.mark.parametrize("data, name, kind, mime", [
    (b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>", "x.png", "document",
     "image/svg+xml"),
    (b"%PDF-1.7\n...", "report.png", "document", "application/pdf"),
    (b"item,qty\nbolts,12\n", "stock.csv", "document", "text/csv"),
], ids=["svg named png", "pdf named png", "csv"])
def test_anything_but_a_renderable_raster_goes_as_a_document_whatever_its_name(tmp_path, data, name, kind, mime):
    file = cache_tool_file(MediaCache(tmp_path / "media"), ToolFile(data, name))
    assert (file.kind, file.mime) == (kind, mime)


def test_a_pixel_bomb_is_not_a_photo_and_a_polyglot_is_typed_by_its_bytes(tmp_path):
    cache = MediaCache(tmp_path / "media")
    assert cache_tool_file(cache, ToolFile(pixel_bomb(), "bomb.png")).kind == "document"
    assert cache_tool_file(cache, ToolFile(polyglot(), "page.html")).mime == "image/png"


def test_empty_and_oversized_files_are_refused_before_anything_is_cached(tmp_path):
    cache = MediaCache(tmp_path / "media")
    with pytest.raises(FileRefused):
        cache_tool_file(cache, ToolFile(b"", "x"))
    with pytest.raises(FileRefused, match="50 MB"):
        cache_tool_file(cache, ToolFile(b"\0" * (MAX_TOOL_FILE_BYTES + 1), "big.bin"))
    assert cache.stats().files == 0


def test_the_registry_caches_a_tools_files_and_tells_the_model_each_went(tmp_path):
    cache = MediaCache(tmp_path / "media")
    registry = ToolRegistry([Tool("pics", "", {}, lambda args: ToolOutput("made two", (
        ToolFile(png(10, 10), "a.png"), ToolFile(b"", "empty"))), blocking=True)])
    answer = asyncio.run(registry.run("pics", "{}", cache))
    assert answer.ok and len(answer.files) == 1 and cache.has(answer.files[0].cache_key)
    assert answer.text.splitlines() == ["made two", f"[file sent to the chat: a.png (PNG, 10×10, "
                                                    f"{human_size(len(png(10, 10)))})]",
                                        "[a file could not be sent: a file must have some bytes]"]
    without_cache = asyncio.run(registry.run("pics", "{}"))
    assert without_cache.files == () and "this chat takes no files from tools" in without_cache.text


def test_text_image_draws_a_png_and_the_offline_agent_calls_it_when_asked_for_a_picture(tmp_path):
    assert draw_card("hello").startswith(b"\x89PNG")
    agent = OfflineAgent(registry=default_registry(), chunk_delay_s=0.0)
    request = AgentRequest(({"role": "user", "content": "draw a card saying happy birthday"},), turn_id="t1",
                           media=MediaCache(tmp_path / "media"))

    async def run():
        return [e async for e in agent.run(request)]
    finished = [e for e in asyncio.run(run()) if isinstance(e, ToolCallFinished)]
    assert [f.name for f in finished] == ["text_image"] and finished[0].ok
    (file,) = finished[0].files
    assert file.kind == "photo" and file.caption == "drawn offline"
    assert '"text": "happy birthday"' in finished[0].arguments


def test_transcripts_are_asked_once_per_voice_note_and_a_failure_is_a_note_not_an_error(tmp_path):
    from actors.media.transcription import Transcriber, transcribe_all
    from tests.fakes.openai_server import FakeOpenAIServer
    cache = MediaCache(tmp_path / "media")
    voice = {"kind": "voice", "state": "cached", "cache_key": cache.put(b"OggS voice"), "mime": "audio/ogg"}
    photo = {"kind": "photo", "state": "cached", "cache_key": cache.put(png()), "mime": "image/png"}
    gone = {"kind": "audio", "state": "cached", "cache_key": "f" * 64, "mime": "audio/mpeg"}
    with FakeOpenAIServer() as server:
        server.transcripts.append("hello there")
        transcriber = Transcriber(server.base_url, "whisper-1", None, 10.0)
        notes = asyncio.run(transcribe_all(transcriber, [voice, photo, voice, gone], cache))
        assert notes == {voice["cache_key"]: "transcript: “hello there”",
                         gone["cache_key"]: "not transcribed: the file is no longer kept"}
        assert len(server.transcriptions) == 1
        server.transcription_status = 503
        assert asyncio.run(transcribe_all(transcriber, [voice], cache)) == {
            voice["cache_key"]: "not transcribed: the transcription service answered 503"}
    unreachable = Transcriber("http://127.0.0.1:9/v1", "whisper-1", None, 5.0)
    (note,) = asyncio.run(transcribe_all(unreachable, [voice], cache)).values()
    assert note.startswith("not transcribed: the transcription service could not be reached")
    assert Transcriber.from_config({}) is None
