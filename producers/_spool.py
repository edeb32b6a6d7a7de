"""The outage spool: turns the broker could not take, as JSON lines in one local file bounded in bytes.

Only the shipper thread touches it, through a raw file descriptor (``O_APPEND``, no userspace buffer, so a forked
child can drop its copy without writing anything). Turns are read back in the order they were written, from an
offset kept in a sidecar file (``<path>.offset``) after every drained batch: a restarted process drains what an
earlier one left and re-sends at most the batch that was in flight. The file is locked (``flock``) by its process;
a second process finding it locked spools to ``<path>.<pid>`` instead, as does a forked child (pre-fork servers:
gunicorn, uWSGI). At recovery a process also adopts every sibling file (``<path>`` and ``<path>.<pid>``) it can
lock, i.e. whose process is gone: their unsent turns move into its own file, in order, and the sibling is removed.
The file is created when first needed and removed when the shipper stops with it empty.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["Spool"]

_CHUNK = 1 << 20


class Spool:
    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.pending = 0
        self.size = 0
        self._offset = 0
        self._fd: int | None = None

    def recover(self) -> int:
        """Take over what earlier processes left at this path and its siblings (see above); without such files,
        nothing is created yet. Returns how many turns were adopted from siblings."""
        if self.path.exists():
            self._open()
        return sum(self._adopt(sibling) for sibling in self._siblings())

    def _siblings(self) -> list[Path]:
        """``<base>`` and every ``<base>.<pid>`` other than this spool's own file."""
        stem, _, suffix = self.path.name.rpartition(".")
        base = self.path.with_name(stem) if suffix.isdigit() and stem else self.path
        found = [base, *(p for p in base.parent.glob(f"{base.name}.*") if p.name[len(base.name) + 1:].isdigit())]
        return [p for p in found if p != self.path and p.exists()]

    def _adopt(self, sibling: Path) -> int:
        """Move a dead process's unsent turns here (what fits under the bound, in order); 0 while it is alive."""
        orphan = Spool(sibling, self.max_bytes)
        try:
            fd = os.open(sibling, os.O_RDWR | os.O_APPEND)
        except OSError:
            return 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its process is alive and ships it itself
            os.close(fd)
            return 0
        orphan._fd = fd
        orphan._recover()
        turns, _, _ = orphan.peek(orphan.pending)
        taken = self._append_prefix(turns)
        if taken == len(turns):
            orphan.pending = 0  # close() removes the file and its offset
        else:
            _, offset, _ = orphan.peek(taken)
            orphan.commit(offset, taken)
        orphan.close()
        return taken

    def _append_prefix(self, turns: list[dict[str, Any]]) -> int:
        """Append turns in order until one does not fit; return how many were written."""
        lines, size = [], self.size
        for turn in turns:
            line = json.dumps(turn, separators=(",", ":")).encode("ascii") + b"\n"
            if size + len(line) > self.max_bytes:
                break
            lines.append(line)
            size += len(line)
        if lines:
            fd = self._require()
            data = memoryview(b"".join(lines))
            while data:
                data = data[os.write(fd, data):]
            self.size, self.pending = size, self.pending + len(lines)
        return len(lines)

    def _open(self) -> int:
        """Lock the file (or a per-process one), creating it, and recover what it holds."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self.path = self.path.with_name(f"{self.path.name}.{os.getpid()}")
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._fd = fd
        self._recover()
        return fd

    def append(self, turns: list[dict[str, Any]]) -> int:
        """Write the turns that fit under the bound, in order, in one write; return how many were written."""
        fd = self._require()
        chunks, size = [], self.size
        for turn in turns:
            line = json.dumps(turn, separators=(",", ":")).encode("ascii") + b"\n"
            if size + len(line) <= self.max_bytes:
                chunks.append(line)
                size += len(line)
        if chunks:
            data = memoryview(b"".join(chunks))
            while data:
                data = data[os.write(fd, data) :]
            self.size, self.pending = size, self.pending + len(chunks)
        return len(chunks)

    def peek(self, limit: int) -> tuple[list[dict[str, Any]], int, int]:
        """Up to ``limit`` turns from the read offset: (turns, the offset after them, unreadable lines skipped)."""
        fd = self._require()
        want = min(limit, self.pending)
        buffer, newlines = bytearray(), 0
        while newlines < want:
            chunk = os.pread(fd, _CHUNK, self._offset + len(buffer))
            if not chunk:
                break
            buffer += chunk
            newlines += chunk.count(b"\n")
        lines = bytes(buffer).split(b"\n")[:want]
        turns, unreadable = [], 0
        for line in lines:
            try:
                turns.append(json.loads(line))
            except ValueError:
                unreadable += 1
        return turns, self._offset + sum(len(line) + 1 for line in lines), unreadable

    def commit(self, offset: int, count: int) -> None:
        """Mark everything before ``offset`` (``count`` turns) as delivered; an empty spool is truncated."""
        fd = self._require()
        self.pending -= count
        if self.pending <= 0:
            os.ftruncate(fd, 0)
            self.pending = self.size = self._offset = 0
        else:
            self._offset = offset
        tmp = self._offset_path.with_name(self._offset_path.name + ".tmp")
        tmp.write_text(str(self._offset))
        os.replace(tmp, self._offset_path)

    def close(self) -> None:
        """Release the file; an empty spool leaves nothing behind."""
        if self._fd is None:
            return
        if self.pending == 0:
            self.path.unlink(missing_ok=True)
            self._offset_path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None

    def abandon(self) -> None:
        """In a forked child: drop the inherited descriptor; the lock and the file stay the parent's."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def _offset_path(self) -> Path:
        return self.path.with_name(self.path.name + ".offset")

    def _require(self) -> int:
        return self._open() if self._fd is None else self._fd

    def _recover(self) -> None:
        assert self._fd is not None
        fd = self._fd
        size = os.fstat(fd).st_size
        tail = os.pread(fd, min(size, _CHUNK), max(0, size - _CHUNK))
        if size and not tail.endswith(b"\n"):  # a torn last line from a crash mid-write
            size -= len(tail) - (tail.rfind(b"\n") + 1)
            os.ftruncate(fd, size)
        try:
            offset = int(self._offset_path.read_text())
        except (OSError, ValueError):
            offset = 0
        self._offset = offset if 0 <= offset <= size else 0
        self.size = size
        self.pending = 0
        position = self._offset
        while position < size:
            chunk = os.pread(fd, _CHUNK, position)
            self.pending += chunk.count(b"\n")
            position += len(chunk)
