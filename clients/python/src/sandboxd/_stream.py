"""The frames of ``application/vnd.sandboxd.stream``, without I/O.

:class:`FrameParser` splits bytes into frames; :class:`StreamState` turns
frames into chunks and keeps the offsets a reconnect resumes from;
:class:`RunState` gathers a ``run``'s text. The sync and asyncio streams
drive them over their own connections.
"""

from __future__ import annotations

import codecs
import json
import struct
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Union

from ._common import bad_response, field_of, non_negative, status_fields, str_of
from .errors import SandboxRequestError
from .types import ProcessChunk, ProcessOutput, ProcessStatus, RunResult, StreamExit, StreamStart

FRAME_START = 1
FRAME_STDOUT = 2
FRAME_STDERR = 3
FRAME_EXIT = 4
FRAME_ERROR = 5
# 6 is the keepalive: like any type not named here, skipped.

HEAD_BYTES = 16
MAX_FRAME_BYTES = 8 * 1024 * 1024
IDLE_S = 45.0
"""A connection that brought nothing for this long is dead (keepalives come every 15 s)."""
RECONNECT_WINDOW_S = 30.0
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 1.0

ERROR_STATUS = {
    "invalid_argument": 400,
    "unauthenticated": 401,
    "credential_stale": 401,
    "cap_reached": 402,
    "permission_denied": 403,
    "sandbox_not_found": 404,
    "process_not_found": 404,
    "file_not_found": 404,
    "not_found": 404,
    "image_not_found": 404,
    "timeout": 408,
    "invalid_state": 409,
    "unsupported_class": 409,
    "no_checkpoint": 409,
    "already_exists": 409,
    "too_large": 413,
    "rate_limited": 429,
    "internal": 500,
    "bring_up_failed": 502,
    "unavailable": 503,
}

_HEAD = struct.Struct(">B3xIQ")


@dataclass(frozen=True)
class Frame:
    type: int
    offset: int
    payload: bytes


class FrameParser:
    """Splits a byte stream into frames, whatever the reads' boundaries."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def push(self, data: bytes) -> None:
        if self._pos and self._pos * 2 > len(self._buf):
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet make a whole frame."""
        return len(self._buf) - self._pos

    def next(self) -> Optional[Frame]:
        """The next whole frame, or None until more bytes come.

        Raises SandboxRequestError 502 ``invalid_response`` for a frame
        longer than the protocol allows, before its payload is read.
        """
        if self.buffered < HEAD_BYTES:
            return None
        ftype, length, offset = _HEAD.unpack_from(self._buf, self._pos)
        if length > MAX_FRAME_BYTES:
            raise bad_response(f"a frame of {length} bytes (at most {MAX_FRAME_BYTES} are allowed)")
        if self.buffered < HEAD_BYTES + length:
            return None
        start = self._pos + HEAD_BYTES
        payload = bytes(self._buf[start : start + length])
        self._pos = start + length
        return Frame(ftype, offset, payload)


EXIT = object()


class StreamState:
    """Offsets, dropped counts, the latest start and the exit of one stream."""

    def __init__(self, stdout_from: int, stderr_from: int) -> None:
        self.stdout_next = stdout_from
        self.stderr_next = stderr_from
        self.stdout_dropped = 0
        self.stderr_dropped = 0
        self.start: Optional[StreamStart] = None
        self.exit: Optional[StreamExit] = None

    def take(self, frame: Frame) -> Union[ProcessChunk, SandboxRequestError, object, None]:
        """A chunk to yield, EXIT, the error an ``error`` frame carries, or None."""
        if frame.type == FRAME_START:
            body = _json(frame.payload, "start")
            stdout_from = non_negative(field_of(body, "stdoutFrom"), self.stdout_next)
            stderr_from = non_negative(field_of(body, "stderrFrom"), self.stderr_next)
            self.stdout_dropped += non_negative(field_of(body, "stdoutDropped"), 0)
            self.stderr_dropped += non_negative(field_of(body, "stderrDropped"), 0)
            # A start further on than asked: the gap is in the dropped counts.
            self.stdout_next = max(self.stdout_next, stdout_from)
            self.stderr_next = max(self.stderr_next, stderr_from)
            self.start = StreamStart(
                **status_fields(body),
                stdout_from=stdout_from,
                stderr_from=stderr_from,
                stdout_dropped=self.stdout_dropped,
                stderr_dropped=self.stderr_dropped,
            )
            return None
        if frame.type in (FRAME_STDOUT, FRAME_STDERR):
            stream = "stdout" if frame.type == FRAME_STDOUT else "stderr"
            nxt = self.stdout_next if stream == "stdout" else self.stderr_next
            offset, payload = frame.offset, frame.payload
            end = offset + len(payload)
            if end <= nxt:
                return None  # already yielded
            if offset < nxt:
                payload = payload[nxt - offset :]
                offset = nxt
            elif offset > nxt:
                self._add_dropped(stream, offset - nxt)  # not sent: count it rather than hide it
            if stream == "stdout":
                self.stdout_next = end
            else:
                self.stderr_next = end
            return ProcessChunk(stream, offset, payload)  # type: ignore[arg-type]
        if frame.type == FRAME_EXIT:
            body = _json(frame.payload, "exit")
            self.exit = StreamExit(
                **status_fields(body),
                stdout_next=non_negative(field_of(body, "stdoutNext"), self.stdout_next),
                stderr_next=non_negative(field_of(body, "stderrNext"), self.stderr_next),
            )
            return EXIT
        if frame.type == FRAME_ERROR:
            err = field_of(_json(frame.payload, "error"), "error")
            code = str_of(field_of(err, "code")) or "stream_error"
            message = str_of(field_of(err, "message")) or f"the process stream ended with {code}"
            return SandboxRequestError(ERROR_STATUS.get(code, 502), code, message)
        return None  # keepalive, or a type this client does not know

    def _add_dropped(self, stream: str, n: int) -> None:
        if stream == "stdout":
            self.stdout_dropped += n
        else:
            self.stderr_dropped += n
        if self.start is not None:
            self.start = replace(self.start, stdout_dropped=self.stdout_dropped, stderr_dropped=self.stderr_dropped)


def retryable(err: BaseException) -> bool:
    """Whether a failed stream connection is worth another: no answer, a cut body, 503."""
    if isinstance(err, SandboxRequestError):
        return err.status == 503
    return True


def _json(payload: bytes, what: str) -> Any:
    try:
        return json.loads(payload.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise bad_response(f"a {what} frame that is not JSON") from None


class RunState:
    """Output gathered across a run's stream, handed to ``on_output`` as it comes."""

    def __init__(self, proc: ProcessStatus, state: StreamState,
                 on_output: Optional[Callable[[ProcessOutput], Any]]) -> None:
        self._proc = proc
        self._state = state
        self._on_output = on_output
        # One incremental decoder per stream: a UTF-8 sequence split across
        # frames decodes whole.
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in ("stdout", "stderr")}
        self._text: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._told_dropped = {"stdout": 0, "stderr": 0}
        self.pending: list[Any] = []
        """What on_output returned (the asyncio client awaits what is awaitable)."""

    def add(self, chunk: ProcessChunk) -> None:
        self._keep(chunk.stream, self._decoders[chunk.stream].decode(chunk.data))

    def result(self, timed_out: bool, killed: bool) -> RunResult:
        for s in ("stdout", "stderr"):
            self._keep(s, self._decoders[s].decode(b"", final=True))
        st = self._state
        start = st.start
        return RunResult(
            **self._status(),
            stdout="".join(self._text["stdout"]),
            stderr="".join(self._text["stderr"]),
            stdout_next=st.stdout_next,
            stderr_next=st.stderr_next,
            stdout_dropped=start.stdout_dropped if start else 0,
            stderr_dropped=start.stderr_dropped if start else 0,
            timed_out=timed_out,
            killed=killed,
        )

    def _keep(self, stream: str, text: str) -> None:
        if not text:
            return
        self._text[stream].append(text)
        if self._on_output is None:
            return
        start = self._state.start
        dropped = {}
        for s in ("stdout", "stderr"):
            total = getattr(start, f"{s}_dropped") if start else 0
            dropped[s] = total - self._told_dropped[s]
            self._told_dropped[s] = total
        self.pending.append(self._on_output(
            ProcessOutput(
                **self._status(),
                stdout=text if stream == "stdout" else "",
                stderr=text if stream == "stderr" else "",
                stdout_next=self._state.stdout_next,
                stderr_next=self._state.stderr_next,
                stdout_dropped=dropped["stdout"],
                stderr_dropped=dropped["stderr"],
            )
        ))

    def _status(self) -> dict[str, Any]:
        """The latest status known: the exit's, else the latest start's, else the spawn's."""
        s: ProcessStatus = self._state.exit or self._state.start or self._proc
        out: dict[str, Any] = {
            "process_id": s.process_id or self._proc.process_id,
            "command": list(s.command),
            "state": s.state,
            "started_at": s.started_at,
            "exit_code": s.exit_code,
            "exited_at": s.exited_at,
            "pty": s.pty,
            "lossless": s.lossless,
        }
        return out
