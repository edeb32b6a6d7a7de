"""Tools for the abuse tests: raw HTTP over a socket (a request that declares more than it sends, a connection held
open), and what a real process spends (resident memory, CPU seconds) from psutil."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psutil

__all__ = ["cpu_seconds", "held_connections", "raw_request", "rss_mb", "wait_until"]


def raw_request(port: int, method: str, path: str, headers: dict[str, str], body: bytes = b"", *,
                timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    """Send a request head and ``body`` (which may be shorter than the Content-Length it declares) and read the
    answer: its status, headers (lower-case names) and whatever body came before the server closed or went quiet."""
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        status_line, _, rest = data.partition(b"\r\n")
        head_bytes, _, answer = rest.partition(b"\r\n\r\n")
        answered = {}
        for line in head_bytes.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            answered[name.strip().lower()] = value.strip()
        length = int(answered.get("content-length", "0") or 0)
        while len(answer) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    return int(status_line.split()[1]), answered, answer


@contextmanager
def held_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections opened and left silent, closed on exit."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]
    try:
        yield socks
    finally:
        for sock in socks:
            sock.close()


def wait_until(condition: Callable[[], bool], timeout: float = 30, what: str = "the condition") -> None:
    """Poll ``condition`` until it holds (a closed connection is released by the server a moment later)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children, MB."""
    process = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)]) / 2**20


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` has used so far."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system
