"""Voice replies: a turn's answer spoken by an OpenAI-compatible ``/audio/speech`` endpoint ([media] speech_url,
docs/media.md), sent as a voice note after the answer's text.

When: the profile says ``voice_replies = true``, the turn's own message was a voice note, and the chat's platform
takes voice notes (its pacing row's ``sends_voice``): ``wants_voice_reply``, pure. The answer is spoken when the
agent has finished it, in the agent's task on the shard's loop (never blocking it), bounded by
``speech_timeout_s``; the audio goes to the media cache and becomes a file of the reply (``kind = "voice"``), after
its text, through the same ledger parts as a tool's files (actors/sessions/reply_files.py). So the text goes first,
and a speech endpoint that fails, hangs or answers something that is not audio costs the reply its voice note only
(logged): never its text. What survives kill -9: the note is in the transcript (an ``assistant`` event of kind
``voice`` naming its cache key) before the answer is, so a reply recovered after a crash sends the same audio; a
crash before the answer is written runs the turn again, and only the last note of a turn is sent.
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

import aiohttp

from actors.media.limits import human_size
from actors.media.sniff import sniff
from actors.messages import OutgoingFile
from common.config import setting
from storage import MediaCache

VOICE_EVENT = "voice"                  # the transcript event kind that names a turn's voice note
MAX_SPEECH_BYTES = 20 * 1024 * 1024    # an answer read aloud: minutes of opus are well under a MB
AUDIO_TYPES = ("audio/ogg", "audio/mpeg", "audio/mp4", "audio/aac", "audio/wav", "audio/flac")
NAMES = {"opus": "voice.ogg", "mp3": "voice.mp3", "aac": "voice.m4a"}


class SpeechFailed(Exception):
    """Why there is no voice note; safe to log (no key, no URL with credentials)."""


@dataclass(frozen=True)
class Speaker:
    url: str                       # base URL: {url}/audio/speech
    model: str
    voice: str
    response_format: str           # opus (OGG Opus: Telegram's voice notes) | mp3 | aac
    api_key: Optional[str]
    timeout_s: float
    max_chars: int                 # the answer's first characters are spoken (OpenAI takes 4,096)

    @classmethod
    def from_config(cls, config: Mapping, env: Mapping[str, str] = os.environ) -> Optional["Speaker"]:
        url = setting(config, "media", "speech_url")
        if not url:
            return None
        return cls(url.rstrip("/"), setting(config, "media", "speech_model"), setting(config, "media", "speech_voice"),
                   setting(config, "media", "speech_format"),
                   env.get(setting(config, "media", "speech_api_key_env")) or None,
                   setting(config, "media", "speech_timeout_s"), setting(config, "media", "speech_max_chars"))

    async def speak(self, text: str) -> bytes:
        body = {"model": self.model, "input": spoken_text(text, self.max_chars), "voice": self.voice,
                "response_format": self.response_format}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as http:
                async with http.post(f"{self.url}/audio/speech", json=body, headers=headers) as response:
                    if response.status != 200:
                        raise SpeechFailed(f"the speech service answered {response.status}")
                    data = await response.content.read(MAX_SPEECH_BYTES + 1)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise SpeechFailed(f"the speech service could not be reached ({type(exc).__name__})") from None
        if len(data) > MAX_SPEECH_BYTES:
            raise SpeechFailed(f"the speech service sent more than {human_size(MAX_SPEECH_BYTES)}")
        return data


def spoken_text(text: str, max_chars: int) -> str:
    """What is read aloud: the answer's first ``max_chars`` characters, cut at a word where one is near."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars * 0.8 else cut).rstrip() + "…"


def wants_voice_reply(voice_replies: bool, attachments: Iterable[dict], sends_voice: bool) -> bool:
    """Whether a turn's answer is also spoken: the profile asks for it, the turn's message was a voice note, and the
    platform takes voice notes."""
    return voice_replies and sends_voice and any(a.get("kind") == "voice" for a in attachments
                                                 if isinstance(a, dict))


def voice_file(cache: MediaCache, data: bytes, response_format: str) -> OutgoingFile:
    """The speech's audio in the media cache, as a reply's voice note. Blocking (a file write): in a worker thread.
    Raises SpeechFailed when the bytes are not audio (an error page answered with 200)."""
    mime = sniff(data)
    if mime not in AUDIO_TYPES:
        raise SpeechFailed(f"the speech service sent {mime}, not audio")
    return OutgoingFile(cache_key=cache.put(data), mime=mime, kind="voice",
                        name=NAMES.get(response_format, "voice.ogg"), size=len(data))


async def voice_reply(speaker: Speaker, text: str, cache: MediaCache, log) -> Optional[OutgoingFile]:
    """The answer ``text`` as a voice note in the cache, or None (nothing to say, or the speech failed: logged)."""
    if not text.strip():
        return None
    try:
        data = await speaker.speak(text)
        return await asyncio.to_thread(voice_file, cache, data, speaker.response_format)
    except SpeechFailed as exc:
        log.warning("no voice note for this answer: %s", exc)
        return None


def voice_event(turn_id: str, file: OutgoingFile) -> dict:
    """The transcript event naming a turn's voice note (``attachments``: the media cache keeps what a transcript
    names, storage/media_refs.py)."""
    return {"role": "assistant", "kind": VOICE_EVENT, "turn_id": turn_id, "payload": {"attachments": [file.to_part()]}}
