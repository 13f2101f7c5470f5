"""The test MCP server (server.py beside this file) over streamable HTTP as a subprocess on a port of its own: killed
(kill -9, mid-call if a test likes) and started again on the same port, as a remote server that goes away and comes
back. (Not named ``http.py``: server.py runs as a script from this folder, where that name would hide the standard
library's ``http``.)"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

SERVER = Path(__file__).resolve().parent / "server.py"
LISTEN_DEADLINE_S = 60.0   # the SDK's import and start take seconds on a loaded machine


class HttpMcpServer:
    def __init__(self, port: int, calls_file: str = "", board: str = ""):
        """``calls_file``: each tool call the server starts appends its tool's name there (server.py --calls);
        ``board``: the file whose text the resource status://board serves (server.py --board)."""
        self.port, self.calls_file, self.board = port, calls_file, board
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> "HttpMcpServer":
        args = [sys.executable, str(SERVER), "--http", str(self.port)]
        if self.calls_file:
            args += ["--calls", self.calls_file]
        if self.board:
            args += ["--board", self.board]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + LISTEN_DEADLINE_S
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the HTTP MCP server did not listen on port {self.port} within "
                                     f"{LISTEN_DEADLINE_S:g}s (exit status: {self.process.poll()})")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait(10)

    def calls(self) -> list[str]:
        try:
            return Path(self.calls_file).read_text().split()
        except FileNotFoundError:
            return []
