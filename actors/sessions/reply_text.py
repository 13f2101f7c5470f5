"""What a reply shows: the answer so far and the tool progress line, folded from the turn's stream events, and the
text of its preview or of its final form, and the files it carries (shown after the final text: reply_files.py).
Pure: no actor, no platform; the stream consumer cuts it into chunks.

A preview is the deltas as they came, redacted each time it is drawn (the session redacts the final text; a secret
split across deltas is whole again in the answer so far), with the tool line under it and a cursor at its end.
While the model has sent nothing yet for a while, the line says so instead ("⏳ still waiting for the model… (10s)"):
on a platform that edits, the chat sees that the answer is coming; where nothing is edited (no preview is sent), the
typing indicator goes on as before.

What the preview shows of the turn's tools is the profile's ``tool_progress``: ``bubble`` (the default) one live
line, "⚙ search…" then "⚙ search ✓", edited as the tools run and gone once the answer goes on; ``lines`` a line per
tool call, each edited from running to done and kept under the answer until the final text replaces the preview;
``off`` none. Either way the lines are part of the preview, so they cost no operation of their own: they show with
the next edit the throttle allows (edit_throttle.py), within the platform's pacing, and only where previews are
edited (a reply sent once, complete, shows none).
"""
from __future__ import annotations

from typing import Optional

from actors.messages import (LongToolHint, ReplyFile, TextDelta, ToolCallFinished, ToolCallStarted, TurnEnd,
                             WaitingForModel)
from common.redact import redact

CURSOR = " ▍"
WAITING_MARK = "⏳"          # starts the progress line while the model has sent nothing yet (WaitingForModel)


class ReplyText:
    def __init__(self, tool_progress: str = "bubble"):
        self.answer = ""
        self.tool_progress = tool_progress
        self.tool_line = ""                 # the bubble's line, or the wait for the model's
        self.tool_lines: dict = {}          # lines mode: call id -> its line, in the order the calls started
        self.final: Optional[str] = None    # set by TurnEnd
        self.files: list = []               # OutgoingFile, each once (a tool may make the same bytes twice)
        self.reason = ""                    # the TurnEnd's: complete | interrupted | error | stopped

    def apply(self, event) -> bool:
        """Fold one stream event in; True when it is the TurnEnd."""
        if isinstance(event, TextDelta):
            self.answer += event.text
            if self.tool_line.endswith(("✓", "✗")) or self.tool_line.startswith(WAITING_MARK):
                self.tool_line = ""
        elif isinstance(event, ToolCallStarted):
            self.show_tool(event.call_id, f"⚙ {event.name}…")
        elif isinstance(event, ToolCallFinished):
            self.show_tool(event.call_id, f"⚙ {event.name} {'✓' if event.ok else '✗'}")
        elif isinstance(event, ReplyFile):
            if all(f.cache_key != event.file.cache_key for f in self.files):
                self.files.append(event.file)
        elif isinstance(event, LongToolHint):
            self.show_tool(event.call_id, f"⚙ {event.name}… still working ({int(event.elapsed_s)}s)")
        elif isinstance(event, WaitingForModel):
            self.tool_line = f"{WAITING_MARK} still waiting for the model… ({int(event.elapsed_s)}s)"
        elif isinstance(event, TurnEnd):
            self.final = event.final_text if event.final_text is not None else self.answer
            self.reason = event.reason
            return True
        return False

    def show_tool(self, call_id: str, line: str) -> None:
        if self.tool_line.startswith(WAITING_MARK):   # a tool runs: the model has answered
            self.tool_line = ""
        if self.tool_progress == "lines":
            self.tool_lines[call_id] = line
        elif self.tool_progress != "off":
            self.tool_line = line

    def progress(self) -> str:
        """The lines under the answer so far: the tools' (as the mode says), then the wait for the model's."""
        return "\n".join([*self.tool_lines.values(), *([self.tool_line] if self.tool_line else [])])

    def kind(self) -> str:
        """What the final text is: "error" when the turn failed (PlatformOp.kind), else ""."""
        return "error" if self.reason == "error" else ""

    def final_text(self) -> str:
        return self.final or "…"

    def preview(self, secrets: list) -> Optional[str]:
        """The preview to show now, or None while there is nothing to show."""
        progress = self.progress()
        text = redact(self.answer, secrets) + (f"\n\n{progress}" if progress else "")
        return text + CURSOR if text.strip() else None
