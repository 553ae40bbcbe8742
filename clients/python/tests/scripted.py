"""A scripted loopback HTTP server, for what a real daemon does not do on
demand: answer garbage, cut a body mid-frame, send an oversized frame.

Each test sets ``server.script = fn(request) -> bytes | None``; ``None``
closes the connection without an answer. Attach answers are built in: an
endpoint pointing back at this server.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Callable, Optional, Union


@dataclass
class Request:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


Answer = Union[bytes, list, None]


def frame(ftype: int, payload: Union[bytes, str, dict] = b"", offset: int = 0) -> bytes:
    if isinstance(payload, dict):
        payload = json.dumps(payload)
    if isinstance(payload, str):
        payload = payload.encode()
    return struct.pack(">B3xIQ", ftype, len(payload), offset) + payload


STATUS = {"processId": "p1", "command": ["x"], "state": "running", "startedAt": "2026-01-01T00:00:00.000Z"}
EXITED = {**STATUS, "state": "exited", "exitCode": 0, "exitedAt": "2026-01-01T00:00:01.000Z"}


def start(**kw: int) -> bytes:
    return frame(1, {**STATUS, "stdoutFrom": 0, "stderrFrom": 0, "stdoutDropped": 0, "stderrDropped": 0, **kw})


def exit_(**kw: int) -> bytes:
    return frame(4, {**EXITED, **kw})


def response(status: int, body: bytes = b"", ctype: str = "application/json", chunked: bool = False,
             extra: str = "") -> bytes:
    reason = {200: "OK", 204: "No Content", 401: "Unauthorized", 404: "Not Found"}.get(status, "X")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n{extra}"
    if chunked:
        return (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + (
            f"{len(body):x}\r\n".encode() + body + b"\r\n" if body else b"")
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def stream_head() -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.sandboxd.stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


END_CHUNKS = b"0\r\n\r\n"


class ScriptedServer:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.script: Callable[[Request], Answer] = lambda r: response(404)
        self.requests: list[Request] = []
        self.attaches = 0
        self.attach_answer: Optional[bytes] = None
        self._conns: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def token(self) -> str:
        import base64

        claims = base64.urlsafe_b64encode(json.dumps({"iss": self.url}).encode()).decode().rstrip("=")
        return f"e30.{claims}.sig"

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _read_request(self, conn: socket.socket, buf: bytearray) -> Optional[Request]:
        while b"\r\n\r\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return None
            buf += data
        head, _, rest = bytes(buf).partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        method, target, _ = lines[0].split(" ")
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        n = int(headers.get("content-length", "0"))
        while len(rest) < n:
            data = conn.recv(65536)
            if not data:
                return None
            rest += data
        buf[:] = rest[n:]
        path, _, query = target.partition("?")
        return Request(method, path, query, headers, rest[:n])

    def _handle(self, conn: socket.socket) -> None:
        buf = bytearray()
        try:
            while True:
                req = self._read_request(conn, buf)
                if req is None:
                    return
                self.requests.append(req)
                if req.method == "POST" and req.path.endswith("/attach"):
                    self.attaches += 1
                    if self.attach_answer is not None:
                        conn.sendall(self.attach_answer)
                        continue
                    name = req.path.split("/")[3]
                    body = json.dumps({
                        "name": name, "class": "default", "state": "running",
                        "endpoint": f"{self.url}/v1/sandboxes/{name}",
                        "headers": {"Authorization": f"Bearer cred-{self.attaches}"},
                        "expiresAt": "2099-01-01T00:00:00.000Z",
                    }).encode()
                    conn.sendall(response(200, body))
                    continue
                answer = self.script(req)
                if answer is None:
                    return
                for piece in answer if isinstance(answer, list) else [answer]:
                    if isinstance(piece, float):
                        threading.Event().wait(piece)  # a pause between pieces
                    elif piece == "close":
                        return
                    else:
                        conn.sendall(piece)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.sock.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass
