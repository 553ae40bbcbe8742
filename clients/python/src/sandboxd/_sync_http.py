"""Blocking HTTP/1.1 over sockets, with a keep-alive pool (thread-safe).

Each request takes a connection of its own; one whose response was read to
its end goes back to the pool. A pooled connection the server has closed
meanwhile is noticed before it is used, so no request is ever sent twice.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time
from typing import Optional

from ._common import RequestSpec, origin_of
from ._http1 import END, NEED_DATA, Head, ProtocolError, ResponseParser, request_head

READ_BYTES = 256 * 1024
POOL_PER_ORIGIN = 8
POOL_IDLE_S = 60.0
"""Pooled connections idle longer than this are closed (sandboxd drops them at 120 s)."""

Origin = tuple[str, str, int]


def remaining(deadline: Optional[float]) -> Optional[float]:
    """Seconds left before deadline (None: no deadline); TimeoutError once it passed."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def host_header(host: str, port: int, scheme: str) -> str:
    h = f"[{host}]" if ":" in host else host
    default = 443 if scheme == "https" else 80
    return h if port == default else f"{h}:{port}"


class Conn:
    def __init__(self, sock: socket.socket, origin: Origin) -> None:
        self.sock = sock
        self.origin = origin
        self.idle_since = time.monotonic()

    def usable(self) -> bool:
        """Still open, and nothing unasked-for waiting on it."""
        if time.monotonic() - self.idle_since > POOL_IDLE_S:
            return False
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable  # readable while idle: EOF, or bytes nobody asked for

    def close(self) -> None:
        # shutdown first: it wakes a thread blocked reading this socket
        # (ProcessStream.close() from another thread), which close() alone
        # does not.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


class Response:
    """A response whose head has been read; its body is read on demand."""

    def __init__(self, transport: Transport, conn: Conn, parser: ResponseParser, head: Head,
                 deadline: Optional[float]) -> None:
        self._transport = transport
        self._conn: Optional[Conn] = conn
        self._parser = parser
        self.head = head
        self.status = head.status
        self.reason = head.reason
        self.deadline = deadline
        self._done = False

    def header(self, name: str) -> Optional[str]:
        return self.head.get(name)

    def _event(self, timeout: Optional[float]) -> object:
        while True:
            ev = self._parser.next_event()
            if ev is not NEED_DATA:
                return ev
            conn = self._conn
            if conn is None:
                raise ProtocolError("the response was closed")
            conn.sock.settimeout(timeout)
            self._parser.feed(conn.sock.recv(READ_BYTES))

    def read_some(self, timeout: Optional[float] = None) -> bytes:
        """The next piece of the body, b"" at its end. TimeoutError leaves the response usable."""
        if self._done:
            return b""
        if timeout is None:
            timeout = remaining(self.deadline)
        ev = self._event(timeout)
        if ev is END:
            self._finish()
            return b""
        assert isinstance(ev, bytes)
        return ev

    def read_all(self, limit: Optional[int] = None) -> bytes:
        """The whole body; None when it is longer than limit (the connection is then closed)."""
        parts: list[bytes] = []
        n = 0
        while True:
            data = self.read_some(remaining(self.deadline))
            if not data:
                return b"".join(parts)
            n += len(data)
            if limit is not None and n > limit:
                self.close()
                raise BodyTooLarge(limit)
            parts.append(data)

    def _finish(self) -> None:
        self._done = True
        conn, self._conn = self._conn, None
        if conn is not None:
            if self._parser.reusable and self._parser.leftover == 0:
                self._transport.put(conn)
            else:
                conn.close()

    def close(self) -> None:
        """Gives the response up; an unfinished one's connection is closed."""
        self._done = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"a body over {limit} bytes")
        self.limit = limit


class Transport:
    def __init__(self) -> None:
        self._pool: dict[Origin, list[Conn]] = {}
        self._lock = threading.Lock()
        self._ssl: Optional[ssl.SSLContext] = None

    def put(self, conn: Conn) -> None:
        conn.idle_since = time.monotonic()
        with self._lock:
            idle = self._pool.setdefault(conn.origin, [])
            if len(idle) < POOL_PER_ORIGIN:
                idle.append(conn)
                return
        conn.close()

    def _take(self, origin: Origin) -> Optional[Conn]:
        while True:
            with self._lock:
                idle = self._pool.get(origin)
                if not idle:
                    return None
                conn = idle.pop()
            if conn.usable():
                return conn
            conn.close()

    def _connect(self, origin: Origin, deadline: Optional[float]) -> Conn:
        scheme, host, port = origin
        sock = socket.create_connection((host, port), timeout=remaining(deadline))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                if self._ssl is None:
                    self._ssl = ssl.create_default_context()
                sock = self._ssl.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        return Conn(sock, origin)

    def request(self, spec: RequestSpec, timeout_s: float) -> Response:
        """Sends spec and reads the answer's head, all within timeout_s.

        Raises OSError (TimeoutError for the deadline) or ProtocolError; the
        body is then read from the Response, bounded by the same deadline
        unless ``spec.untimed_body``.
        """
        scheme, host, port, target = origin_of(spec.url)
        origin = (scheme, host, port)
        deadline = time.monotonic() + timeout_s
        headers = dict(spec.headers)
        headers["Accept"] = spec.accept
        if spec.content_type:
            headers["Content-Type"] = spec.content_type
        body = spec.body
        length = len(body) if body is not None else (0 if spec.method in ("POST", "PUT") else None)
        head = request_head(spec.method, target, host_header(host, port, scheme), headers, length)
        conn = self._take(origin) or self._connect(origin, deadline)
        parser = ResponseParser()
        try:
            try:
                conn.sock.settimeout(remaining(deadline))
                conn.sock.sendall(head)
                if body:
                    conn.sock.sendall(body)
            except (BrokenPipeError, ConnectionResetError):
                # The server may have answered (a 413, say) and closed before
                # reading the whole body: its answer, if any, is still there.
                pass
            while True:
                ev = parser.next_event()
                if isinstance(ev, Head):
                    break
                conn.sock.settimeout(remaining(deadline))
                parser.feed(conn.sock.recv(READ_BYTES))
        except BaseException:
            conn.close()
            raise
        return Response(self, conn, parser, ev, None if spec.untimed_body else deadline)

    def close(self) -> None:
        with self._lock:
            conns = [c for idle in self._pool.values() for c in idle]
            self._pool.clear()
        for c in conns:
            c.close()
