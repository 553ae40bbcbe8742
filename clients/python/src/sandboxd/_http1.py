"""HTTP/1.1 without I/O: request heads out, response events in.

The sync and the asyncio clients share this parser and differ only in how
they move bytes. It accepts what sandboxd sends (Content-Length and chunked
bodies, keep-alive) and refuses, with :class:`ProtocolError`, anything it
cannot frame: an oversize head, a bad status line, a bad or conflicting
length, a bad chunk. Every buffer it keeps is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
MAX_CHUNK_LINE = 4096
MAX_TRAILER_BYTES = 16 * 1024

NEED_DATA = object()
"""Event: feed more bytes (or EOF) before asking again."""
END = object()
"""Event: the response is complete."""


class ProtocolError(Exception):
    """The peer's bytes are not an HTTP/1.1 response this parser can frame."""


@dataclass
class Head:
    """A response's status line and headers (names lower-cased)."""

    status: int
    reason: str
    headers: list[tuple[str, str]] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        """The first value of a header, or None."""
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def get_all(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self.headers if k == name]


def _token_ok(s: str) -> bool:
    return s != "" and all(33 <= ord(c) <= 126 and c not in '()<>@,;:\\"/[]?={}' for c in s)


def _value_ok(s: str) -> bool:
    return all(c == "\t" or 32 <= ord(c) <= 126 or ord(c) >= 128 for c in s)


def request_head(method: str, target: str, host: str, headers: dict[str, str], length: int | None) -> bytes:
    """The bytes of a request line and its headers.

    Raises ValueError for a header name or value that would split the
    request (CR, LF or other control characters).
    """
    if not target.startswith("/") or not _value_ok(target) or " " in target:
        raise ValueError(f"bad request target {target!r}")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    for k, v in headers.items():
        if not _token_ok(k) or not _value_ok(v):
            raise ValueError(f"bad header {k!r}")
        lines.append(f"{k}: {v}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")


class ResponseParser:
    """Turns the bytes of one response into events.

    ``feed(data)`` takes bytes in (``b""`` is the end of the connection);
    ``next_event()`` answers a :class:`Head`, a ``bytes`` piece of the body,
    ``END``, or ``NEED_DATA``. After ``END``, ``reusable`` says whether the
    connection may carry another request.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._eof = False
        self._state = "head"
        self._left = 0  # bytes left of a length body or of the current chunk
        self._chunk_crlf = False
        self._close_after = False
        self.head: Head | None = None
        self.reusable = False

    def feed(self, data: bytes) -> None:
        if not data:
            self._eof = True
            return
        if self._pos > 65536 and self._pos * 2 > len(self._buf):
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    @property
    def leftover(self) -> int:
        """Bytes received past the end of the response."""
        return len(self._buf) - self._pos

    def _avail(self) -> int:
        return len(self._buf) - self._pos

    def _line(self, limit: int, what: str) -> str | None:
        i = self._buf.find(b"\r\n", self._pos, self._pos + limit + 2)
        if i < 0:
            if self._avail() > limit:
                raise ProtocolError(f"{what} over {limit} bytes")
            if self._eof:
                raise ProtocolError(f"the connection closed inside the {what}")
            return None
        line = bytes(self._buf[self._pos : i])
        self._pos = i + 2
        return line.decode("latin-1")

    def next_event(self) -> object:
        while True:
            if self._state == "head":
                ev = self._parse_head()
                if ev is None:
                    continue  # an informational head was skipped
                return ev
            if self._state == "length":
                return self._body_length()
            if self._state == "chunk":
                ev = self._body_chunk()
                if ev is None:
                    continue
                return ev
            if self._state == "close":
                if self._avail():
                    data = bytes(self._buf[self._pos :])
                    self._pos = len(self._buf)
                    return data
                if self._eof:
                    self._state = "done"
                    return END
                return NEED_DATA
            if self._state == "trailer":
                ev = self._trailer()
                if ev is None:
                    continue
                return ev
            return END

    def _parse_head(self) -> object:
        end = self._buf.find(b"\r\n\r\n", self._pos, self._pos + MAX_HEAD_BYTES + 4)
        if end < 0:
            if self._avail() > MAX_HEAD_BYTES:
                raise ProtocolError(f"a response head over {MAX_HEAD_BYTES} bytes")
            if self._eof:
                if self._avail() == 0:
                    raise ProtocolError("the connection closed without an answer")
                raise ProtocolError("the connection closed inside the response head")
            return NEED_DATA
        text = bytes(self._buf[self._pos : end]).decode("latin-1")
        self._pos = end + 4
        lines = text.split("\r\n")
        status_line = lines[0]
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or parts[0] not in ("HTTP/1.1", "HTTP/1.0") or len(parts[1]) != 3 or not parts[1].isdigit():
            raise ProtocolError(f"a bad status line {status_line[:80]!r}")
        status = int(parts[1])
        if status < 100:
            raise ProtocolError(f"a bad status {status}")
        if len(lines) - 1 > MAX_HEADERS:
            raise ProtocolError(f"more than {MAX_HEADERS} headers")
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not _token_ok(name):
                raise ProtocolError(f"a bad header line {line[:80]!r}")
            headers.append((name.lower(), value.strip(" \t")))
        head = Head(status, parts[2] if len(parts) > 2 else "", headers)
        if 100 <= status < 200:
            if status == 101:
                raise ProtocolError("an unasked-for protocol switch")
            return None  # 100 Continue and the like: the real answer follows
        self._frame_body(head, parts[0] == "HTTP/1.0")
        self.head = head
        return head

    def _frame_body(self, head: Head, http10: bool) -> None:
        conn = ",".join(head.get_all("connection")).lower()
        self._close_after = http10 and "keep-alive" not in conn or "close" in conn
        te = ",".join(head.get_all("transfer-encoding")).lower().replace(" ", "")
        lengths = head.get_all("content-length")
        if head.status in (204, 304):
            self._state = "done"
            self.reusable = not self._close_after
        elif te:
            if lengths:
                raise ProtocolError("both Transfer-Encoding and Content-Length")
            if te != "chunked":
                raise ProtocolError(f"an unsupported Transfer-Encoding {te!r}")
            self._state = "chunk"
            self._left = -1
        elif lengths:
            values = {v.strip() for v in ",".join(lengths).split(",")}
            if len(values) != 1:
                raise ProtocolError("conflicting Content-Length headers")
            v = values.pop()
            if not v.isdigit() or len(v) > 18:
                raise ProtocolError(f"a bad Content-Length {v[:40]!r}")
            self._left = int(v)
            self._state = "length" if self._left else "done"
        else:
            self._state = "close"
            self._close_after = True

    def _body_length(self) -> object:
        if self._left == 0:
            self._state = "done"
            self.reusable = not self._close_after
            return END
        n = min(self._avail(), self._left)
        if n == 0:
            if self._eof:
                raise ProtocolError(f"the connection closed with {self._left} bytes of the body to come")
            return NEED_DATA
        data = bytes(self._buf[self._pos : self._pos + n])
        self._pos += n
        self._left -= n
        return data

    def _body_chunk(self) -> object:
        if self._chunk_crlf:
            if self._avail() < 2:
                if self._eof:
                    raise ProtocolError("the connection closed inside a chunk")
                return NEED_DATA
            if self._buf[self._pos : self._pos + 2] != b"\r\n":
                raise ProtocolError("a chunk not ended by CRLF")
            self._pos += 2
            self._chunk_crlf = False
            self._left = -1
            return None
        if self._left < 0:
            line = self._line(MAX_CHUNK_LINE, "chunk size line")
            if line is None:
                return NEED_DATA
            size = line.split(";", 1)[0].strip(" \t")
            if not size or len(size) > 15 or any(c not in "0123456789abcdefABCDEF" for c in size):
                raise ProtocolError(f"a bad chunk size {size[:40]!r}")
            self._left = int(size, 16)
            if self._left == 0:
                self._state = "trailer"
                self._trailer_bytes = 0
            return None
        n = min(self._avail(), self._left)
        if n == 0:
            if self._eof:
                raise ProtocolError("the connection closed inside a chunk")
            return NEED_DATA
        data = bytes(self._buf[self._pos : self._pos + n])
        self._pos += n
        self._left -= n
        if self._left == 0:
            self._chunk_crlf = True
        return data

    def _trailer(self) -> object:
        line = self._line(MAX_TRAILER_BYTES, "trailer")
        if line is None:
            return NEED_DATA
        self._trailer_bytes += len(line) + 2
        if self._trailer_bytes > MAX_TRAILER_BYTES:
            raise ProtocolError(f"trailers over {MAX_TRAILER_BYTES} bytes")
        if line == "":
            self._state = "done"
            self.reusable = not self._close_after
            return END
        return None
