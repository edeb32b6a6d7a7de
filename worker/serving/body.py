"""A request body read within a byte budget.

The declared length (``Content-Length``) is checked before a byte is read; the bytes are counted as they arrive
(chunked bodies too), and a ``gzip`` or ``deflate`` body is inflated piece by piece with ``zlib``'s ``max_length``,
so neither the compressed nor the inflated bytes in memory ever exceed the budget, and inflating stops at the first
byte over it: a small compressed body that would inflate to gigabytes costs at most the budget.
"""

from __future__ import annotations

import zlib

__all__ = ["BodyTooLarge", "Inflater", "UnreadableBody", "UnsupportedEncoding", "check_declared"]


class BodyTooLarge(ValueError):
    """Over the budget (declared, received or inflated): answer 413."""

    def __init__(self, limit: int, what: str = "request body") -> None:
        super().__init__(f"{what} over {limit} bytes")
        self.limit = limit


class UnreadableBody(ValueError):
    """A body that cannot be read as declared (short, bad chunking, corrupt compression): answer 400."""


class UnsupportedEncoding(ValueError):
    """A ``Content-Encoding`` other than identity, gzip or deflate: answer 415."""


def check_declared(content_length: str | int | None, max_bytes: int) -> int | None:
    """The declared length, or None when there is none; raises before anything is read."""
    if content_length is None or content_length == "":
        return None
    try:
        length = int(content_length)
    except ValueError:
        raise UnreadableBody(f"Content-Length {str(content_length)[:40]!r} is not a number") from None
    if length < 0:
        raise UnreadableBody("Content-Length is negative")
    if length > max_bytes:
        raise BodyTooLarge(max_bytes, "declared request body")
    return length


class Inflater:
    """Collects a body's bytes as they arrive, inflating them when ``encoding`` says so, within ``max_bytes``
    (counted on the received and on the inflated bytes alike)."""

    def __init__(self, encoding: str | None, max_bytes: int) -> None:
        name = (encoding or "identity").strip().lower()
        if name in ("", "identity"):
            self._zlib = None
        elif name in ("gzip", "x-gzip", "deflate"):
            self._zlib = zlib.decompressobj(32 + zlib.MAX_WBITS)  # a gzip or zlib header, found from the bytes
        else:
            raise UnsupportedEncoding(f"Content-Encoding {name[:40]!r}: send identity, gzip or deflate")
        self.encoding, self.max_bytes = name, max_bytes
        self.received = 0
        self._out = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.received += len(chunk)
        if self.received > self.max_bytes:
            raise BodyTooLarge(self.max_bytes)
        if self._zlib is None:
            self._out += chunk
            return
        data = chunk
        while data and not self._zlib.eof:
            try:  # at most one byte past the budget is ever inflated
                piece = self._zlib.decompress(data, self.max_bytes - len(self._out) + 1)
            except zlib.error as exc:
                raise UnreadableBody(f"not valid {self.encoding}: {exc}") from None
            if len(self._out) + len(piece) > self.max_bytes:
                raise BodyTooLarge(self.max_bytes, "inflated request body")
            self._out += piece
            data = self._zlib.unconsumed_tail

    def finish(self) -> bytes:
        if self._zlib is not None and not self._zlib.eof and self.received:
            raise UnreadableBody(f"{self.encoding} body ends before its compressed stream does")
        return bytes(self._out)
