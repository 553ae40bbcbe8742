"""Results and options of the sandboxd clients (snake_case of the TS SDK's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

Signal = Literal["TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2"]
Network = Literal["nat", "none"]
StreamName = Literal["stdout", "stderr"]


@dataclass(frozen=True, kw_only=True)
class SandboxHandle:
    """The answer of ``attach``: where and how to reach a sandbox's data plane."""

    name: str
    sandbox_class: str
    """The class the sandbox was created in (``default``, ``ns``, ``gvisor``)."""
    state: str
    endpoint: str
    """Base URL of the data plane, scheme included."""
    headers: dict[str, str]
    """Opaque credentials for the data plane."""
    expires_at: str
    """RFC 3339. When ``headers`` stop working."""
    network: Optional[Network] = None
    image: Optional[str] = None


@dataclass(frozen=True, kw_only=True)
class SandboxRecord:
    name: str
    sandbox_class: str
    state: str
    """``running``, ``suspended`` or ``stopped``."""
    created_at: str
    last_active_at: str
    ceiling_at: Optional[str] = None
    """When the runtime reclaims it regardless of activity; None when nothing runs."""
    network: Optional[Network] = None
    image: Optional[str] = None


@dataclass(frozen=True, kw_only=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    duration_ms: int
    timed_out: bool
    """Killed at its timeout rather than exiting."""
    truncated: bool
    """Output was cut at 1 MiB."""


@dataclass(frozen=True, kw_only=True)
class CombinedResult:
    output: str
    exit_code: int
    truncated: bool


@dataclass(frozen=True)
class PtySize:
    """A terminal's size in character cells (each 1 to 4096)."""

    cols: int
    rows: int


@dataclass(frozen=True, kw_only=True)
class ProcessStatus:
    process_id: str
    command: list[str]
    state: Literal["running", "exited"]
    started_at: str
    exit_code: Optional[int] = None
    """None while running."""
    exited_at: Optional[str] = None
    exec: bool = False
    """True on the record of an exec whose answer was lost."""
    timed_out: Optional[bool] = None
    """On an exec's record: what its ExecResult would have said."""
    truncated: Optional[bool] = None
    pty: bool = False
    lossless: bool = False


@dataclass(frozen=True, kw_only=True)
class ProcessOutput(ProcessStatus):
    stdout: str = ""
    """Output after ``stdout_from``."""
    stderr: str = ""
    stdout_next: int = 0
    """Pass as the next ``stdout_from``."""
    stderr_next: int = 0
    stdout_dropped: int = 0
    """Bytes discarded before this read."""
    stderr_dropped: int = 0


@dataclass(frozen=True, kw_only=True)
class RunResult(ProcessOutput):
    """The final output of a ``run``: the whole stdout and stderr."""

    timed_out: bool = False
    """``timeout_ms`` elapsed."""
    killed: bool = False
    """Stopped by ``timeout_ms`` (or a cancellation) rather than exiting."""


@dataclass(frozen=True, kw_only=True)
class StreamStart(ProcessStatus):
    """A stream's ``start`` frame; dropped counts are totals over every connection."""

    stdout_from: int = 0
    stderr_from: int = 0
    stdout_dropped: int = 0
    stderr_dropped: int = 0


@dataclass(frozen=True, kw_only=True)
class StreamExit(ProcessStatus):
    """A stream's ``exit`` frame: the exited status and the offsets after the last byte."""

    stdout_next: int = 0
    stderr_next: int = 0


@dataclass(frozen=True)
class ProcessChunk:
    """One piece of a process's output: its own bytes (UTF-8 may be split)."""

    stream: StreamName
    offset: int
    """The stream offset of ``data``'s first byte."""
    data: bytes


@dataclass(frozen=True)
class DirEntry:
    name: str
    is_directory: bool


@dataclass(frozen=True)
class GrepMatch:
    path: str
    line: int
    text: str


@dataclass(frozen=True, kw_only=True)
class ImageInfo:
    name: str
    size_bytes: int
    built_at: str
    source: str
    """``built``, ``snapshot``, or an import's ``oci`` or ``docker``."""
    layers: int


@dataclass(frozen=True, kw_only=True)
class SnapshotInfo:
    image: str
    size_bytes: int
    copied_bytes: int
    linked_files: int
    duration_ms: int
    created_at: str


@dataclass(frozen=True, kw_only=True)
class CheckpointInfo:
    size_bytes: int
    duration_ms: int
    created_at: str
    running: bool


__all__ = [
    "CheckpointInfo",
    "CombinedResult",
    "DirEntry",
    "ExecResult",
    "GrepMatch",
    "ImageInfo",
    "Network",
    "ProcessChunk",
    "ProcessOutput",
    "ProcessStatus",
    "PtySize",
    "RunResult",
    "SandboxHandle",
    "SandboxRecord",
    "Signal",
    "SnapshotInfo",
    "StreamExit",
    "StreamName",
    "StreamStart",
]
