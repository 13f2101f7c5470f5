"""Voice notes and audio as text for the model: an OpenAI-compatible ``/audio/transcriptions`` endpoint
([media] transcription_url, docs/media.md).

The turn's own voice notes are transcribed when its request is built (in the agent's task, on the shard's loop,
never blocking it); older turns keep their one-line description, so a long chat does not pay for its history's
audio again. A transcription that fails or times out is not fatal: the model is told the voice note came and why
its words are missing, and the turn goes on. The text is bounded (``MAX_TRANSCRIPT_CHARS``) as a document's is.
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

import aiohttp

from common.config import setting
from storage import MediaCache

MAX_TRANSCRIPT_CHARS = 8_000
AUDIO_KINDS = ("voice", "audio")


class TranscriptionFailed(Exception):
    """Why there is no transcript; safe to show the model (no key, no URL with credentials)."""


@dataclass(frozen=True)
class Transcriber:
    url: str                       # base URL: {url}/audio/transcriptions
    model: str
    api_key: Optional[str]
    timeout_s: float

    @classmethod
    def from_config(cls, config: Mapping, env: Mapping[str, str] = os.environ) -> Optional["Transcriber"]:
        url = setting(config, "media", "transcription_url")
        if not url:
            return None
        return cls(url.rstrip("/"), setting(config, "media", "transcription_model"),
                   env.get(setting(config, "media", "transcription_api_key_env")) or None,
                   setting(config, "media", "transcription_timeout_s"))

    async def transcribe(self, data: bytes, mime: str, name: str) -> str:
        form = aiohttp.FormData()
        form.add_field("model", self.model)
        form.add_field("file", data, filename=name or "voice.ogg", content_type=mime or "application/octet-stream")
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as http:
                async with http.post(f"{self.url}/audio/transcriptions", data=form, headers=headers) as response:
                    body = await response.json(content_type=None) if response.status < 500 else None
                    if response.status != 200 or not isinstance(body, dict) or not isinstance(body.get("text"),
                                                                                              str):
                        raise TranscriptionFailed(f"the transcription service answered {response.status}")
                    return body["text"].strip()[:MAX_TRANSCRIPT_CHARS]
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise TranscriptionFailed(f"the transcription service could not be reached ({type(exc).__name__})") \
                from None


async def transcribe_all(transcriber: Transcriber, attachments: Iterable[dict], cache: MediaCache) -> dict:
    """cache key -> the note the model reads of that voice note: its transcript, or why there is none."""
    notes = {}
    for att in attachments:
        key = att.get("cache_key") or ""
        if att.get("kind") not in AUDIO_KINDS or att.get("state") != "cached" or key in notes:
            continue
        data = await asyncio.to_thread(cache.read, key)
        try:
            if data is None:
                raise TranscriptionFailed("the file is no longer kept")
            text = await transcriber.transcribe(data, att.get("mime") or "", att.get("name") or "")
            notes[key] = f"transcript: “{text}”" if text else "the transcript is empty (no speech heard)"
        except TranscriptionFailed as exc:
            notes[key] = f"not transcribed: {exc}"
    return notes
