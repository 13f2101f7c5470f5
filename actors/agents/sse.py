"""Server-sent events as OpenAI-compatible servers send them, read leniently.

Real servers differ: some omit the blank line between events, some send keep-alive comments (``: ping``), some
bare JSON lines. A payload that is not JSON is skipped and logged: one bad chunk should not lose the answer.
"""
from __future__ import annotations

import json
import logging
from typing import Any, AsyncIterator, Optional

log = logging.getLogger(__name__)

DONE = object()      # the ``data: [DONE]`` sentinel


def _parse(data: str) -> Any:
    """The payload as a dict, DONE, or None when it is not a JSON object."""
    if data.strip() == "[DONE]":
        return DONE
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _Decoder:
    def __init__(self) -> None:
        self.data_lines: list[str] = []
        self.malformed = 0

    def _flush(self) -> Optional[Any]:
        if not self.data_lines:
            return None
        data = "\n".join(self.data_lines)
        self.data_lines = []
        payload = _parse(data)
        if payload is None:
            self.malformed += 1
            log.warning("skipping a malformed stream chunk: %.120r", data)
        return payload

    def feed_line(self, line: str) -> list[Any]:
        out: list[Any] = []
        if line == "":
            out.append(self._flush())
        elif line.startswith(":"):
            pass                                   # keep-alive comment
        elif line.startswith("data:"):
            value = line[5:]
            value = value[1:] if value.startswith(" ") else value
            # A server that forgets the blank line: the previous data is complete on its own, so send it now.
            if self.data_lines and _parse("\n".join(self.data_lines)) is not None:
                out.append(self._flush())
            self.data_lines.append(value)
        elif line.lstrip().startswith("{"):
            out.append(self._flush())
            self.data_lines.append(line)
            out.append(self._flush())
        # other fields (event:, id:, retry:) carry nothing the chat-completions stream needs
        return [p for p in out if p is not None]

    def finish(self) -> list[Any]:
        payload = self._flush()
        return [] if payload is None else [payload]


async def iter_sse_payloads(blocks: AsyncIterator[bytes]) -> AsyncIterator[Any]:
    """Decoded payloads (dicts, or DONE) from raw byte blocks, split anywhere."""
    decoder = _Decoder()
    buffer = b""
    async for block in blocks:
        buffer += block
        while (newline := buffer.find(b"\n")) >= 0:
            raw, buffer = buffer[:newline], buffer[newline + 1:]
            # Decode whole lines only: a block boundary can fall inside a multi-byte character.
            for payload in decoder.feed_line(raw.rstrip(b"\r").decode("utf-8", "replace")):
                yield payload
    if buffer:
        for payload in decoder.feed_line(buffer.rstrip(b"\r").decode("utf-8", "replace")):
            yield payload
    for payload in decoder.finish():
        yield payload
