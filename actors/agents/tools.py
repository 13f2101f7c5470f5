"""A small tool registry and the safe built-in tools: clock, calculator, text_image; remember / forget (a profile's
memory), start_background_task and create_watch (docs/background.md): offered only to a profile that names them
(docs/profiles.md).

Tools run on the agent's loop, which a session shard shares between all its cells' agent streams: a tool that
computes (``Tool.blocking``: a plain function) runs in a worker thread instead, bounded by ``timeout_s``, so the
loop goes on streaming every other chat's answer meanwhile. A tool that waits on I/O is a coroutine and stays on the
loop. A memory tool (``Tool.uses_memory``) is also given the turn's memory binding (``AgentRequest.memory``,
actors/memory/binding.py: which profile and scope it writes), or None when the turn has no memory; a tool its
session decides (``Tool.uses_session``: start_background_task, create_watch) the turn's binding to its session
(``AgentRequest.session_tools``, actors/sessions/task_tool.py) and the call's id, which names what the call made
across every resume of the turn.

A tool answers text (a str, or anything JSON can encode) or a ``ToolOutput``: text and files. ``run`` puts each
file in the media cache (actors/media/outgoing.py, in a worker thread) and answers them as ``OutgoingFile``s, which
the reply shows after its text; the model reads a line per file in the tool's result.
"""
from __future__ import annotations

import asyncio
import ast
import functools
import json
import math
import operator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Optional

from actors.agents.text_image import text_image
from actors.media.outgoing import (MAX_FILES_PER_RESULT, FileRefused, ToolFile, ToolOutput, cache_tool_file,
                                   sent_note)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    json_schema: dict                          # JSON Schema of the arguments object
    fn: Callable[[dict], Any]                  # a coroutine function; a plain function when ``blocking``
    blocking: bool = False                     # computes rather than waits: run in a worker thread, off the loop
    timeout_s: float = 10.0                    # a blocking tool's answer must come within this
    uses_memory: bool = False                  # fn(arguments, memory): writes the turn's memory
    uses_session: bool = False                 # fn(arguments, session_tools, call_id): its session decides it


@dataclass(frozen=True)
class ToolAnswer:
    ok: bool
    text: str                      # what the model reads (a line per file sent, after the tool's own text)
    files: tuple = ()              # of OutgoingFile, already in the media cache


class ToolRegistry:
    """The built-in tools an agent offers, and its sources of further tools (``add_source``: an object whose
    ``tools()`` lists them at each request, e.g. a profile's MCP servers, actors/agents/mcp_tools.py)."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        self._sources: list = []
        for tool in tools:
            self.register(tool)

    def add_source(self, source) -> None:
        self._sources.append(source)

    async def prepare(self) -> None:
        """Before a turn: let each source get its tools ready (e.g. MCP servers still starting)."""
        for source in self._sources:
            await source.prepare()

    def _offered(self) -> dict[str, Tool]:
        if not self._sources:
            return self._tools
        offered = dict(self._tools)
        for source in self._sources:
            for tool in source.tools():
                offered.setdefault(tool.name, tool)    # a built-in tool keeps its name
        return offered

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def names(self) -> list[str]:
        return list(self._offered())

    def __len__(self) -> int:
        return len(self._offered())

    def openai_schema(self) -> list[dict]:
        """The ``tools`` field of a chat-completions request."""
        return [{"type": "function",
                 "function": {"name": t.name, "description": t.description, "parameters": t.json_schema}}
                for t in self._offered().values()]

    async def call(self, name: str, arguments_json: str) -> tuple[bool, str]:
        """Run a tool for its text: ``(ok, text)`` (``run`` without files)."""
        answer = await self.run(name, arguments_json)
        return answer.ok, answer.text

    async def run(self, name: str, arguments_json: str, media=None, memory=None, session_tools=None,
                  call_id: str = "") -> ToolAnswer:
        """Run a tool. Never raises (except on cancellation): failures come back as ``ok=False`` with an
        explanation the model reads and can act on. ``media``: the MediaCache files go to; without it a tool's
        files are refused (said in the text). ``memory``: the turn's memory binding, for the memory tools;
        ``session_tools`` and ``call_id``: the turn's binding to its session and the call's id, for the tools the
        session decides."""
        ok, result = await self._call(name, arguments_json, memory, session_tools, call_id)
        if isinstance(result, ToolAnswer):
            return result
        if not isinstance(result, ToolOutput):
            return ToolAnswer(ok, result if isinstance(result, str) else json.dumps(result, default=str))
        files, notes = [], [result.text] if result.text else []
        for tool_file in result.files[:MAX_FILES_PER_RESULT]:
            if media is None or not isinstance(tool_file, ToolFile):
                notes.append("[a file could not be sent: this chat takes no files from tools]")
                continue
            try:
                cached = await asyncio.to_thread(cache_tool_file, media, tool_file)
            except (FileRefused, OSError) as exc:
                notes.append(f"[a file could not be sent: {exc}]")
                continue
            files.append(cached)
            notes.append(sent_note(cached))
        if len(result.files) > MAX_FILES_PER_RESULT:
            notes.append(f"[only the first {MAX_FILES_PER_RESULT} files were sent]")
        return ToolAnswer(ok, "\n".join(notes), tuple(files))

    async def _call(self, name: str, arguments_json: str, memory=None, session_tools=None,
                    call_id: str = "") -> tuple[bool, Any]:
        offered = self._offered()
        tool = offered.get(name)
        if tool is None:
            return False, f"unknown tool {name!r}; available: {', '.join(offered) or 'none'}"
        try:
            arguments = json.loads(arguments_json) if arguments_json and arguments_json.strip() else {}
        except (json.JSONDecodeError, TypeError) as exc:
            return False, f"arguments for {name} are not valid JSON: {exc}"
        if not isinstance(arguments, dict):
            return False, f"arguments for {name} must be a JSON object, got {type(arguments).__name__}"
        try:
            if tool.uses_memory:
                result = await tool.fn(arguments, memory)
            elif tool.uses_session:
                result = await tool.fn(arguments, session_tools, call_id)
            elif tool.blocking:
                # The thread cannot be stopped at the deadline; the answer is simply no longer waited for.
                result = await asyncio.wait_for(asyncio.to_thread(tool.fn, arguments), tool.timeout_s)
            else:
                result = await tool.fn(arguments)
        except asyncio.TimeoutError:
            return False, f"tool {name} took longer than {tool.timeout_s:g}s; gave up waiting for it"
        except Exception as exc:  # noqa: BLE001 - a tool's failure is information for the model, not a crash
            return False, f"tool {name} failed: {type(exc).__name__}: {exc}"
        return True, result


# --------------------------------------------------------------------------------------------------- calculator

MAX_EXPRESSION_CHARS = 200
MAX_INT_BITS = 4096          # about 1,200 digits: enough for any sensible answer, cheap to compute
MAX_EXPONENT = 10_000

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}


class CalculatorError(ValueError):
    pass


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError("result too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("result out of range")
    if isinstance(value, complex):    # (-8) ** 0.5
        raise CalculatorError("result is not a real number")
    return value


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check_size(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            # Refuse before computing: 9**9**9 would take the process down, not just be slow.
            if abs(right) > MAX_EXPONENT or (isinstance(left, int) and isinstance(right, int) and right > 0
                                             and left.bit_length() * right > MAX_INT_BITS):
                raise CalculatorError("exponent too large")
        try:
            return _check_size(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("result out of range") from None
    raise CalculatorError(f"unsupported element: {type(node).__name__}")


def calculate(expression: str) -> str:
    """Evaluate arithmetic (numbers, + - * / ** %, parentheses, unary minus) without eval."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CalculatorError("not an arithmetic expression") from None
    value = _evaluate(tree)
    if isinstance(value, float):
        return format(value, ".15g")
    return str(value)


def _calculator(arguments: dict) -> str:
    expression = arguments.get("expression")
    if not isinstance(expression, str):
        raise CalculatorError("'expression' (a string) is required")
    return calculate(expression)


async def _clock(arguments: dict) -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


CALCULATOR = Tool(
    name="calculator",
    description="Evaluate an arithmetic expression: numbers, + - * / ** %, parentheses. Returns the result.",
    json_schema={"type": "object", "properties": {"expression": {"type": "string", "description": "e.g. (2+3)*4"}},
                 "required": ["expression"], "additionalProperties": False},
    fn=_calculator, blocking=True, timeout_s=5.0)

CLOCK = Tool(
    name="clock",
    description="The current date and time in UTC, ISO 8601.",
    json_schema={"type": "object", "properties": {}, "additionalProperties": False},
    fn=_clock)

TEXT_IMAGE = Tool(
    name="text_image",
    description="Draw a short text (up to 280 characters) on a card and send it to the chat as a PNG image.",
    json_schema={"type": "object", "properties": {
        "text": {"type": "string", "description": "the words on the card"},
        "caption": {"type": "string", "description": "a caption shown with the image (optional)"}},
        "required": ["text"], "additionalProperties": False},
    fn=text_image, blocking=True, timeout_s=10.0)

NO_MEMORY = "this conversation has no memory (the profile's memory is off, or the turn has no user to remember for)"


async def _remember(arguments: dict, memory) -> ToolAnswer:
    if memory is None:
        return ToolAnswer(False, NO_MEMORY)
    return ToolAnswer(*await memory.remember(arguments.get("text")))


async def _forget(arguments: dict, memory) -> ToolAnswer:
    if memory is None:
        return ToolAnswer(False, NO_MEMORY)
    return ToolAnswer(*await memory.forget(arguments.get("id"), arguments.get("about")))


REMEMBER = Tool(
    name="remember",
    description="Remember one short fact for later conversations (it is shown to you in the system prompt from "
                "then on). Use it when the user asks you to remember something, or tells you a lasting preference.",
    json_schema={"type": "object", "properties": {"text": {"type": "string", "description": "the fact, one line"}},
                 "required": ["text"], "additionalProperties": False},
    fn=_remember, uses_memory=True)

FORGET = Tool(
    name="forget",
    description="Forget a remembered fact: by its number ('id', as the system prompt lists it), or every entry "
                "holding the words 'about'.",
    json_schema={"type": "object", "properties": {
        "id": {"type": "integer", "description": "the entry's number"},
        "about": {"type": "string", "description": "words the entries to forget hold"}},
        "additionalProperties": False},
    fn=_forget, uses_memory=True)

NO_SESSION = "this conversation cannot run this tool (it starts background work, and this run has no chat)"
START_TASK_NAME = "start_background_task"
CREATE_WATCH_NAME = "create_watch"


async def _by_session(name: str, arguments: dict, session_tools, call_id: str) -> ToolAnswer:
    if session_tools is None:
        return ToolAnswer(False, NO_SESSION)
    return ToolAnswer(*await session_tools.call(name, arguments, call_id))


START_TASK = Tool(
    name=START_TASK_NAME,
    description="Start a background task: the prompt runs as its own turn, in a session of its own, while this "
                "conversation goes on; its result is sent to this chat when it is done. Use it for work that takes "
                "long. Answers the task's number, or why it was not started (the chat's limit of tasks at once).",
    json_schema={"type": "object", "properties": {
        "prompt": {"type": "string", "description": "what the task is to do, complete in itself"}},
        "required": ["prompt"], "additionalProperties": False},
    fn=functools.partial(_by_session, START_TASK_NAME), uses_session=True)

CREATE_WATCH = Tool(
    name=CREATE_WATCH_NAME,
    description="Watch something for changes: a public web page (url), a file the gateway lets you watch (file, "
                "an absolute path) or a resource of an MCP server offered here (mcp_server and resource). It is "
                "read every interval_s seconds, or at the times of a cron schedule (six fields, seconds first, "
                "e.g. '0 0 9 * * 1-5'; timezone, default UTC), and when its content changed, prompt runs as a turn "
                "of this chat with what changed. Answers the watch's number, or why it was not created (the chat's "
                "limit of watches, a private address, a schedule too often).",
    json_schema={"type": "object", "properties": {
        "url": {"type": "string", "description": "the page to watch, http:// or https://"},
        "file": {"type": "string", "description": "instead of url: the file to watch, an absolute path"},
        "mcp_server": {"type": "string", "description": "instead of url: the MCP server whose resource to watch"},
        "resource": {"type": "string", "description": "with mcp_server: the resource's URI"},
        "interval_s": {"type": "number", "description": "how often it is read, in seconds"},
        "schedule": {"type": "string", "description": "instead of interval_s: a cron schedule of when to read it"},
        "timezone": {"type": "string", "description": "the schedule's time zone (default UTC)"},
        "prompt": {"type": "string", "description": "what to do when it changed (what changed follows it)"}},
        "required": ["prompt"], "additionalProperties": False},
    fn=functools.partial(_by_session, CREATE_WATCH_NAME), uses_session=True)

BUILTIN_TOOLS: dict[str, Tool] = {t.name: t for t in (CLOCK, CALCULATOR, TEXT_IMAGE, REMEMBER, FORGET, START_TASK,
                                                      CREATE_WATCH)}
# Offered only to a profile whose tool set names them (the memory tools: and whose memory is on): never by default.
OPT_IN_TOOLS = ("remember", "forget", START_TASK_NAME, CREATE_WATCH_NAME)


def default_registry(names: Optional[Iterable[str]] = None) -> ToolRegistry:
    """A registry with the named built-in tools (when ``names`` is None, every one but the opt-in memory tools)."""
    chosen = [n for n in BUILTIN_TOOLS if n not in OPT_IN_TOOLS] if names is None else list(names)
    unknown = [n for n in chosen if n not in BUILTIN_TOOLS]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; built-in tools are {sorted(BUILTIN_TOOLS)}")
    return ToolRegistry(BUILTIN_TOOLS[n] for n in chosen)
