"""What the peer check costs per connection (common/peer_credentials.py): loopback connect + accept, bare and with the
kernel asked who owns the other end, in the same process. Prints per-connection microseconds and the ratio.

    python bench/bench_peer_check.py [--connections 3000]

Thespian keeps connections between two actors open (REUSE_SOCKETS), so this is paid once per connection, not once
per message.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import tables
from common.peer_credentials import admits


def run(connections: int, check: bool) -> list[float]:
    times = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        address = listener.getsockname()
        for _ in range(connections):
            started = time.perf_counter()
            client = socket.create_connection(address)
            server, _ = listener.accept()
            if check and not admits(server)[0]:
                raise SystemExit("the check refused this process's own connection")
            times.append(time.perf_counter() - started)
            server.close()
            client.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=3000)
    args = parser.parse_args()
    run(200, True)                                  # warm up
    rows = []
    for name, check in (("bare connect + accept", False), ("with the peer check", True)):
        t = sorted(run(args.connections, check))
        rows.append((name, statistics.median(t) * 1e6, t[int(len(t) * 0.99)] * 1e6))
    tables.show(["per connection", "p50 µs", "p99 µs"],
                [[name, f"{p50:.1f}", f"{p99:.1f}"] for name, p50, p99 in rows],
                [f"{'per connection':<24} {'p50 µs':>8} {'p99 µs':>8}"]
                + [f"{name:<24} {p50:8.1f} {p99:8.1f}" for name, p50, p99 in rows], right=("p50 µs", "p99 µs"))
    print(f"check adds {rows[1][1] - rows[0][1]:.1f} µs p50 ({rows[1][1] / rows[0][1]:.2f}x the bare accept); "
          f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
