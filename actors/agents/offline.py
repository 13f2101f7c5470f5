"""The offline agent: answers when no model is configured, and drives tests without a network.

Its answer quotes the user's last message (and names what it carried: "You sent a photo (PNG, 640×480, 12 KB)"), says
it is the offline agent and how to configure a real model, and is
streamed in several chunks. Arithmetic in the message (``what is 12*7``), a question about the time, or ``#tool``
or a request for a picture ("draw a card saying hello": the text_image tool, whose PNG the reply carries)
makes it call a tool through the registry, visibly; so do "remember that ..." and "forget ..." (or "forget entry 3")
at the start of a message, where the profile offers its memory tools, and "background task: PROMPT" anywhere in it,
where the profile offers start_background_task (the task's prompt: what follows, to the message's end), and
"watch URL every N seconds: PROMPT" (or "watch file PATH every N seconds: PROMPT", "watch mcp SERVER URI every N
seconds: PROMPT", "... at 'CRON': PROMPT")
where it offers create_watch. Same input, same events (except the clock
tool's reading).

Test hooks, written anywhere in the user's last message, honoured only with ``[debug] fault_injection`` (on the
defaults any chat user could otherwise hold a turn for hours with ``#slow``, or ask for a megabyte with ``#long``):

* ``#long N``  the answer is exactly N characters and holds a ```python fence (for chunking);
* ``#slow S``  sleep S seconds between chunks (for interrupts, typing indicators, stuck-turn detection);
* ``#think S`` sleep S seconds before the first chunk (a model slow to start: the typing indicator);
* ``#fail``    raise AgentError before any output; ``#failmid`` after the first chunk. The message holds
  ``FAKE_SECRET``, so a test can check that redaction happens before anything reaches a chat;
* ``#tool``    force a calculator call.

Steer: messages waiting in the request's steer queue are folded into the next chunk as ``(noted: ...)``.
"""
from __future__ import annotations

import asyncio
import json
import re
from typing import AsyncIterator, Optional

from actors.agents.base import AgentError, AgentRequest, StreamEvent, content_text, take_steer_messages
from actors.agents.tools import CREATE_WATCH_NAME, START_TASK_NAME, ToolRegistry, default_registry
from actors.media.parts import LINE_PREFIX
from actors.messages import TextDelta, ToolCallDelta, ToolCallFinished, ToolCallStarted, TurnEnd

FAKE_SECRET = "sk-offlineFAKEsecret0123456789abcdef"

CONFIG_HELP = """To answer with a real model, set it in gateway.toml and restart the gateway:

```toml
[agent]
kind = "openai"                         # any OpenAI-compatible server: OpenAI, vLLM, Ollama, OpenRouter
base_url = "https://api.openai.com/v1"
model = "gpt-4o-mini"
api_key_env = "OPENAI_API_KEY"          # the environment variable holding the key
```"""

_ARITHMETIC = re.compile(r"[-(]*\d+(?:\.\d+)?\)*(?:\s*(?:\*\*|[-+*/%])\s*[-(]*\d+(?:\.\d+)?\)*)+")
_TIME_QUESTION = re.compile(r"\b(?:what time|time is it|current time|date today|today's date)\b", re.I)
# "draw me a picture of a lighthouse", "make an image saying hello", "draw a card: happy birthday"
_PICTURE = re.compile(r"\b(?:draw|make|send)\b[^.?!\n]*?\b(?:picture|image|card|sign)\b"
                      r"(?:\s+(?:of|saying|with|that says)|:)?\s*([^\n]{0,200})", re.I)
# "remember that I like tea", "please remember: the door code changed"; "forget about tea", "forget entry 3"
_REMEMBER = re.compile(r"^\s*(?:please\s+)?remember(?:\s+that)?[\s:,]+(\S.*)", re.I | re.S)
_FORGET = re.compile(r"^\s*(?:please\s+)?forget(?:\s+(?:that|about))?[\s:,]+(\S.*)", re.I | re.S)
# "start a background task: count the moons"; the task's prompt is the rest of the message
_BACKGROUND = re.compile(r"\bbackground task\s*:\s*(\S.*)", re.I | re.S)
# "please watch https://example.com/status every 60 seconds: tell me what changed" (or "watch file /path every ...")
_WATCH = re.compile(r"\bwatch\s+(file\s+/\S+|https?://\S+)\s+every\s+(\d+(?:\.\d+)?)\s*s(?:econds?)?\s*:\s*(\S.*)",
                    re.I | re.S)
_WATCH_MCP = re.compile(r"\bwatch\s+mcp\s+(\S+)\s+(\S+://\S+)\s+(?:every\s+(\d+(?:\.\d+)?)\s*s(?:econds?)?|at\s+"
                        r"'([^']+)')\s*:\s*(\S.*)", re.I | re.S)
_ENTRY_NUMBER = re.compile(r"^(?:entry\s*|#)?(\d+)$", re.I)
_LONG = re.compile(r"#long\s+(\d+)")
_SLOW = re.compile(r"#slow\s+(\d+(?:\.\d+)?)")
_THINK = re.compile(r"#think\s+(\d+(?:\.\d+)?)")
_QUOTE_CHARS = 200
_MAX_LONG = 1_000_000


class OfflineAgent:
    supports_steer = True

    def __init__(self, registry: Optional[ToolRegistry] = None, chunk_delay_s: float = 0.03,
                 test_hooks: bool = False):
        self.registry = registry if registry is not None else default_registry()
        self.chunk_delay_s = chunk_delay_s
        self.test_hooks = test_hooks

    async def run(self, request: AgentRequest) -> AsyncIterator[StreamEvent]:
        text, files = split_attachments(request)
        hooks = text if self.test_hooks else ""   # where the hooks are looked for: nowhere without fault injection
        slow = _SLOW.search(hooks)
        delay = float(slow.group(1)) if slow else self.chunk_delay_s
        if "#fail" in hooks and "#failmid" not in hooks:
            raise AgentError(f"offline agent failure requested by #fail (api_key={FAKE_SECRET})")
        parts: list[str] = []
        think = _THINK.search(hooks)
        if think:
            await asyncio.sleep(float(think.group(1)))
        long_match = _LONG.search(hooks)
        body = long_answer(int(long_match.group(1)), text) if long_match else self._opening(request, text, files)
        async for event in _stream(_pieces(body), request, delay, parts, pause_first=False):
            yield event
            if "#failmid" in hooks:
                raise AgentError(f"offline agent failure requested by #failmid (api_key={FAKE_SECRET})")
        if not long_match:
            async for event in self._tool_part(request, text, parts, delay):
                yield event
            async for event in _stream(_pieces("\n\n" + CONFIG_HELP), request, delay, parts):
                yield event
        # canned: once a model is configured, it is not shown these answers as if it had given them
        yield TurnEnd(reason="complete", final_text="".join(parts), canned=True)

    @staticmethod
    def _opening(request: AgentRequest, text: str, files: list[str]) -> str:
        quote = " ".join(text.split())
        if len(quote) > _QUOTE_CHARS:
            quote = quote[:_QUOTE_CHARS - 1] + "…"
        user_turns = sum(1 for m in request.messages if m.get("role") == "user")
        said = f'You said: "{quote}"' if quote or not files else ""
        if files:
            sent = "You sent " + "; ".join(_a_file(line) for line in files) + "."
            said = sent + (f' With it you said: "{quote}"' if quote else "")
        return (f'{said}\n\n'
                "I am the offline agent: this gateway has no language model configured, so I can only echo your "
                "message and run the small built-in tools. "
                f"This conversation has {user_turns} message{'s' if user_turns != 1 else ''} from you so far.")

    async def _tool_part(self, request: AgentRequest, text: str, parts: list[str],
                         delay: float) -> AsyncIterator[StreamEvent]:
        name, arguments = _choose_tool(text, self.registry.names(), forced="#tool" in text and self.test_hooks)
        if name is None:
            return
        call_id = f"offline-{request.turn_id or 'turn'}-1"
        arguments_json = json.dumps(arguments)
        yield ToolCallStarted(call_id=call_id, name=name)
        split = len(arguments_json) // 2
        for piece in (arguments_json[:split], arguments_json[split:]):
            await asyncio.sleep(delay)
            yield ToolCallDelta(call_id=call_id, arguments_delta=piece)
        answer = await self.registry.run(name, arguments_json, request.media, request.memory, request.session_tools,
                                          call_id)
        ok, result = answer.ok, answer.text
        yield ToolCallFinished(call_id=call_id, name=name, arguments=arguments_json, result=result, ok=ok,
                               files=answer.files)
        if name == "calculator" and ok:
            summary = f"\n\nI used the calculator tool: {arguments['expression']} = {result}."
        else:
            summary = f"\n\nI used the {name} tool: {result}."
        async for event in _stream(_pieces(summary), request, delay, parts):
            yield event


async def _stream(pieces: list[str], request: AgentRequest, delay: float, parts: list[str],
                  pause_first: bool = True) -> AsyncIterator[TextDelta]:
    """Yield the pieces with a pause before each; steer messages that arrived during a pause join the next piece."""
    for number, piece in enumerate(pieces):
        if number or pause_first:
            await asyncio.sleep(delay)
            piece = _with_steer(request, piece)
        parts.append(piece)
        yield TextDelta(piece)


def split_attachments(request: AgentRequest) -> tuple[str, list[str]]:
    """The user's own words in the last user message, and its ``[attachment: ...]`` lines (actors/media/parts.py)."""
    content = next((m.get("content") for m in reversed(request.messages) if m.get("role") == "user"), "")
    if not isinstance(content, list):
        return content_text(content), []
    texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    files = [t.strip() for t in texts if t.startswith(LINE_PREFIX)]
    own = texts[0] if texts and not texts[0].startswith(LINE_PREFIX) else ""
    return own, files


def _a_file(line: str) -> str:
    """"[attachment: photo (PNG, 640×480, 12 KB)]" -> "a photo (PNG, 640×480, 12 KB)"."""
    what = line[len(LINE_PREFIX):].rstrip("]")
    return ("an " if what[:1] in "aeiou" else "a ") + what


def _choose_tool(text: str, available: list[str], forced: bool = False) -> tuple[Optional[str], dict]:
    remember, forget = _REMEMBER.match(text), _FORGET.match(text)
    if remember and "remember" in available:
        return "remember", {"text": remember.group(1).strip().rstrip(".!")}
    if forget and "forget" in available:
        words = forget.group(1).strip().rstrip(".!?")
        number = _ENTRY_NUMBER.match(words)
        return "forget", {"id": int(number.group(1))} if number else {"about": words}
    on_mcp = _WATCH_MCP.search(text)
    if on_mcp and CREATE_WATCH_NAME in available:
        server, resource, every, schedule, prompt = on_mcp.groups()
        when = {"interval_s": float(every)} if every else {"schedule": schedule}
        return CREATE_WATCH_NAME, {"mcp_server": server, "resource": resource, **when, "prompt": prompt.strip()}
    watch = _WATCH.search(text)
    if watch and CREATE_WATCH_NAME in available:
        kind, _, target = watch.group(1).rpartition(" ")   # "file /path", or the URL alone
        return CREATE_WATCH_NAME, {"file" if kind else "url": target, "interval_s": float(watch.group(2)),
                                   "prompt": watch.group(3).strip()}
    background = _BACKGROUND.search(text)
    if background and START_TASK_NAME in available:
        return START_TASK_NAME, {"prompt": background.group(1).strip()}
    expression = _ARITHMETIC.search(text)
    if expression and "calculator" in available:
        return "calculator", {"expression": expression.group(0).strip()}
    if _TIME_QUESTION.search(text) and "clock" in available:
        return "clock", {}
    picture = _PICTURE.search(text)
    if picture and "text_image" in available:
        return "text_image", {"text": picture.group(1).strip(" .!?\"'") or "hello", "caption": "drawn offline"}
    if forced and "calculator" in available:
        words = len(text.split())
        return "calculator", {"expression": f"{words} * 7 + {len(text)}"}
    return None, {}


def _with_steer(request: AgentRequest, chunk: str) -> str:
    steered = take_steer_messages(request.steer)
    if not steered:
        return chunk
    notes = "; ".join(" ".join(content_text(m.get("content")).split()) for m in steered)
    return f" (noted: {notes}) " + chunk


def _pieces(text: str) -> list[str]:
    """Word-aligned pieces: a few dozen per answer whatever its size, so streaming shows and long answers stay fast."""
    size = max(24, len(text) // 60)
    pieces, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        space = text.rfind(" ", start + 1, end)
        if end < len(text) and space > start:
            end = space + 1
        pieces.append(text[start:end])
        start = end
    return pieces


def long_answer(length: int, user_text: str) -> str:
    """Exactly ``length`` characters: prose, then a long ```python block, then prose."""
    length = max(0, min(length, _MAX_LONG))
    quote = " ".join(user_text.split())[:40]
    intro = f'Long answer ({length} characters) to "{quote}".\n\n'
    sentence = "This paragraph is filler text from the offline agent, written to exercise message splitting. "
    paragraph = (sentence * 4).strip() + "\n\n"
    prose_budget = max(0, length // 3)
    code_lines, code_size = [], max(0, length // 3)
    index = 0
    while sum(len(line) for line in code_lines) < code_size:
        code_lines.append(f"def step_{index}(value):\n    return value * {index} + {index % 7}\n\n")
        index += 1
    code = "```python\n" + "".join(code_lines) + "```\n\n"
    head = intro + (paragraph * (prose_budget // len(paragraph) + 1))[:prose_budget]
    head = head[:head.rfind("\n\n") + 2] if "\n\n" in head else head
    text = head + code
    tail = (paragraph * (length // len(paragraph) + 2))
    return (text + tail)[:length]
