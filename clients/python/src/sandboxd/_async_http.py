"""HTTP/1.1 on asyncio streams, with a keep-alive pool.

The same parser as the blocking transport (``_http1``); each request takes
a connection of its own, and one whose response was read to its end goes
back to the pool of its event loop.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Optional

from ._common import RequestSpec, origin_of
from ._http1 import END, NEED_DATA, Head, ProtocolError, ResponseParser, request_head
from ._sync_http import POOL_IDLE_S, POOL_PER_ORIGIN, READ_BYTES, BodyTooLarge, Origin, host_header, remaining


class AsyncConn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: Origin,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.reader = reader
        self.writer = writer
        self.origin = origin
        self.loop = loop
        self.idle_since = time.monotonic()

    def usable(self) -> bool:
        return (
            self.loop is asyncio.get_running_loop()
            and time.monotonic() - self.idle_since <= POOL_IDLE_S
            and not self.reader.at_eof()
            and not self.writer.is_closing()
        )

    def close(self) -> None:
        try:
            self.writer.close()
        except (OSError, RuntimeError):
            pass  # its loop is gone


async def _read(conn: AsyncConn, timeout: Optional[float]) -> bytes:
    if timeout is None:
        return await conn.reader.read(READ_BYTES)
    return await asyncio.wait_for(conn.reader.read(READ_BYTES), timeout)


class AsyncResponse:
    def __init__(self, transport: AsyncTransport, conn: AsyncConn, parser: ResponseParser, head: Head,
                 deadline: Optional[float]) -> None:
        self._transport = transport
        self._conn: Optional[AsyncConn] = conn
        self._parser = parser
        self.head = head
        self.status = head.status
        self.reason = head.reason
        self.deadline = deadline
        self._done = False

    def header(self, name: str) -> Optional[str]:
        return self.head.get(name)

    async def _event(self, timeout: Optional[float]) -> object:
        while True:
            ev = self._parser.next_event()
            if ev is not NEED_DATA:
                return ev
            if self._conn is None:
                raise ProtocolError("the response was closed")
            # A timeout (or a cancellation) here consumes nothing: the
            # response stays usable.
            self._parser.feed(await _read(self._conn, timeout))

    async def read_some(self, timeout: Optional[float] = None) -> bytes:
        if self._done:
            return b""
        if timeout is None:
            timeout = remaining(self.deadline)
        ev = await self._event(timeout)
        if ev is END:
            self._finish()
            return b""
        assert isinstance(ev, bytes)
        return ev

    async def read_all(self, limit: Optional[int] = None) -> bytes:
        parts: list[bytes] = []
        n = 0
        while True:
            data = await self.read_some(remaining(self.deadline))
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
        self._done = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class AsyncTransport:
    def __init__(self) -> None:
        self._pool: dict[Origin, list[AsyncConn]] = {}
        self._ssl: Optional[ssl.SSLContext] = None

    def put(self, conn: AsyncConn) -> None:
        conn.idle_since = time.monotonic()
        idle = self._pool.setdefault(conn.origin, [])
        if len(idle) < POOL_PER_ORIGIN and not conn.reader.at_eof():
            idle.append(conn)
        else:
            conn.close()

    def _take(self, origin: Origin) -> Optional[AsyncConn]:
        idle = self._pool.get(origin)
        while idle:
            conn = idle.pop()
            if conn.usable():
                return conn
            conn.close()
        return None

    async def _connect(self, origin: Origin, deadline: float) -> AsyncConn:
        scheme, host, port = origin
        ctx = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            ctx = self._ssl
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=ctx, server_hostname=host if ctx else None, limit=READ_BYTES),
            remaining(deadline),
        )
        return AsyncConn(reader, writer, origin, asyncio.get_running_loop())

    async def request(self, spec: RequestSpec, timeout_s: float) -> AsyncResponse:
        """As the blocking Transport.request, awaiting instead."""
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
        conn = self._take(origin) or await self._connect(origin, deadline)
        parser = ResponseParser()
        try:
            try:
                conn.writer.write(head)
                if body:
                    conn.writer.write(body)
                await asyncio.wait_for(conn.writer.drain(), remaining(deadline))
            except (BrokenPipeError, ConnectionResetError):
                pass  # read what the server answered before it closed, if anything
            while True:
                ev = parser.next_event()
                if isinstance(ev, Head):
                    break
                parser.feed(await _read(conn, remaining(deadline)))
        except BaseException:
            conn.close()
            raise
        return AsyncResponse(self, conn, parser, ev, None if spec.untimed_body else deadline)

    async def aclose(self) -> None:
        conns = [c for idle in self._pool.values() for c in idle]
        self._pool.clear()
        for c in conns:
            c.close()
        for c in conns:
            try:
                if c.loop is asyncio.get_running_loop():
                    await c.writer.wait_closed()
            except (OSError, RuntimeError):
                pass
