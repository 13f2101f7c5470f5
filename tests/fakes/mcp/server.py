"""A test MCP server written with the official SDK (FastMCP), over stdio or streamable HTTP.

    python tests/fakes/mcp/server.py                 # stdio
    python tests/fakes/mcp/server.py --http PORT     # streamable HTTP at http://127.0.0.1:PORT/mcp

Tools: ``shout`` (text), ``picture`` (a PNG image), ``hang`` (never answers), ``crash`` (the server process exits at
once, mid-call). Resource: ``status://board``, the text of ``--board FILE`` as it is when read. ``--marker FILE``:
each start appends a line to FILE, so a test sees restarts. ``--calls FILE``: each tool call appends the tool's name
to FILE as it starts, so a test knows a call is in flight.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import os
import time

from mcp.server.fastmcp import FastMCP, Image

# a 1x1 red PNG
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


def build(port: int = 0, calls: str = "", board: str = "") -> FastMCP:
    server = FastMCP("fake-tools", host="127.0.0.1", port=port or 8000, log_level="WARNING")

    @server.resource("status://board", mime_type="text/plain")
    def status_board() -> str:
        """The board: the text of the --board file as it is now (a test changes it)."""
        try:
            with open(board, encoding="utf-8") as text:
                return text.read()
        except OSError:
            return ""

    def called(tool: str) -> None:
        if calls:
            with open(calls, "a") as record:
                record.write(tool + "\n")

    @server.tool()
    def shout(text: str) -> str:
        """Answer the text in capitals."""
        called("shout")
        return f"SHOUTED: {text.upper()}"

    @server.tool()
    def picture() -> Image:
        """A small picture."""
        called("picture")
        return Image(data=PNG, format="png")

    @server.tool()
    async def hang() -> str:
        """Never answers."""
        called("hang")
        await asyncio.sleep(3600)
        return "late"

    @server.tool()
    def crash() -> str:
        """Takes the server down."""
        called("crash")
        os._exit(3)

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=0)
    parser.add_argument("--marker", default="")
    parser.add_argument("--calls", default="")
    parser.add_argument("--board", default="")
    options = parser.parse_args()
    if options.marker:
        with open(options.marker, "a") as marker:
            marker.write(f"{os.getpid()} {time.time()}\n")
    server = build(options.http, options.calls, options.board)
    server.run("streamable-http" if options.http else "stdio")


if __name__ == "__main__":
    main()
