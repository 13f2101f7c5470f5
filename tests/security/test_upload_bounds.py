"""Request bodies are bounded on every HTTP server, web chat uploads included: an upload at a byte a second is cut at
its deadline, stalled uploads cost disk (streamed to the media cache's incoming folder) and not memory, and go with
their deadline; one address has few uploads in flight at once; a body declared over the limit is refused before a
byte of it is read. Real daemon, real sockets (uploads from several loopback addresses: 127.0.0.0/8 is all ours)."""
from __future__ import annotations

import socket
import threading
import time

import psutil
import pytest

from tests.actor_system import free_port, wait_for
from tests.security.test_slow_clients import rss_of_listener
from tests.webchat.helpers import served_port, webchat_gateway

pytestmark = pytest.mark.timeout(120)
UPLOAD_TIMEOUT_S = 6.0   # room for the stalled test to send its 16 MiB first
BOUNDARY = "gw-test-boundary"
API_MAX_BODY = 4096


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    api_port = free_port()
    gw = webchat_gateway(tmp_path_factory.mktemp("upload-bounds"), port=free_port(),
                         extra=f"upload_timeout_s = {UPLOAD_TIMEOUT_S}\n"
                               f"""[adapters.api]
type = "http"
port = {api_port}
max_body_bytes = {API_MAX_BODY}
api_tokens = ["a-token-for-the-tests-0123456789"]
""", gateway_toml="http_connections_per_client = 0")
    try:
        gw.start()
        gw.wait_ready()
        port = served_port(gw)
        yield gw, port, api_port, visitor_cookie(port)
    finally:
        gw.cli("stop")
        gw.kill_everything()


def visitor_cookie(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
    line = next(h for h in head.decode("latin-1").split("\r\n") if h.lower().startswith("set-cookie: gw_visitor="))
    return line.split(":", 1)[1].strip().split(";")[0]


def start_upload(port: int, cookie: str, declared: int, source: str = "127.0.0.1") -> socket.socket:
    """A multipart upload declaring ``declared`` bytes of file, headers and the part's head sent, no file yet."""
    head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    s.sendall((f"POST /upload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n"
               f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
               f"Content-Length: {len(head) + declared + len(tail)}\r\n\r\n").encode() + head)
    return s


def answer_of(s: socket.socket, timeout: float) -> tuple[bytes, float]:
    """The head of the server's answer (or all it sent before it closed the connection, or ``timeout``), and when
    that came."""
    s.settimeout(timeout)
    got, started = b"", time.monotonic()
    try:
        while b"\r\n\r\n" not in got and (chunk := s.recv(65536)):
            got += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return got, time.monotonic() - started


def incoming_parts(gw) -> list:
    folder = gw.state / "media" / "incoming"
    return sorted(folder.glob(".*.part")) if folder.exists() else []


def test_an_upload_at_a_byte_a_second_is_cut_at_its_deadline(rig):
    gw, port, _, cookie = rig
    s = start_upload(port, cookie, declared=10_000)
    stop = threading.Event()

    def trickle():
        while not stop.wait(0.25):
            try:
                s.send(b"x")
            except OSError:
                return
    threading.Thread(target=trickle, daemon=True).start()
    try:
        got, took = answer_of(s, UPLOAD_TIMEOUT_S + 10)
    finally:
        stop.set()
        s.close()
    assert got.startswith(b"HTTP/1.1 408"), (got[:200], took)
    assert took < UPLOAD_TIMEOUT_S + 5, f"cut after {took:.1f}s with a {UPLOAD_TIMEOUT_S}s upload deadline"
    wait_for(lambda: not incoming_parts(gw), 10, 0.1, "the cut upload's part file removed")


def test_stalled_uploads_go_to_disk_not_memory_and_one_address_has_few_in_flight(rig):
    gw, port, _, cookie = rig
    sent = 2 * 1024 * 1024
    pid, before = rss_of_listener(gw, port)
    uploads = []
    try:
        for n in range(8):    # each from its own address: the in-flight bound is per address
            s = start_upload(port, cookie, declared=2 * sent, source=f"127.0.3.{n + 1}")
            s.sendall(b"\0" * sent)   # then nothing more: stalled
            uploads.append(s)
        # The bytes are on disk as they arrive: eight part files holding what was sent (but the few bytes the
        # multipart reader holds back while it looks for the boundary).
        def on_disk():
            sizes = [p.stat().st_size for p in incoming_parts(gw)]
            return len(sizes) == 8 and all(size >= sent - 64 * 1024 for size in sizes) or print("on disk:", sizes)
        wait_for(on_disk, UPLOAD_TIMEOUT_S - 1, 0.1, f"8 part files of {sent} bytes in media/incoming")
        grown = psutil.Process(pid).memory_info().rss - before
        assert grown < 8 * 2**20, f"the web chat's RSS grew {grown / 2**20:.1f} MiB for 8 stalled 2 MiB uploads"
        # A third upload at once from one address is refused before its body is read.
        same = [start_upload(port, cookie, declared=100, source="127.0.4.1") for _ in range(3)]
        uploads += same
        refused, _ = answer_of(same[2], 5)
        assert refused.startswith(b"HTTP/1.1 429") and b"at a time from one address" in refused, refused[:300]
        # Past the deadline every stalled upload is cut and its part file goes.
        for s in uploads[:8]:
            got, _took = answer_of(s, UPLOAD_TIMEOUT_S + 10)
            assert got.startswith(b"HTTP/1.1 408"), got[:200]
        wait_for(lambda: not incoming_parts(gw), 10, 0.1, "every stalled upload's part file removed")
    finally:
        for s in uploads:
            s.close()


def test_a_body_declared_over_the_limit_is_refused_before_it_is_sent(rig):
    _, _, api_port, _ = rig
    with socket.create_connection(("127.0.0.1", api_port), timeout=10) as s:
        s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   f"Authorization: Bearer a-token-for-the-tests-0123456789\r\n"
                   f"Content-Length: {API_MAX_BODY * 100}\r\n\r\n").encode())   # and never the body
        got, took = answer_of(s, 8)
    assert got.startswith(b"HTTP/1.1 413"), (got[:200], took)
    assert took < 1.5, f"answered after {took:.1f}s: it waited for a body it was going to refuse"
