"""sandboxd: named, isolated Linux sandboxes for AI agents.

:class:`SandboxClient` (blocking) and :class:`AsyncSandboxClient` (asyncio)
offer the documented ``SandboxClient`` surface in Python: the same methods
as the TypeScript SDK, in snake_case.
"""

from .aio import AsyncProcessStream, AsyncSandboxClient
from .client import ProcessStream, SandboxClient
from .errors import SandboxError, SandboxNotEnabledError, SandboxRequestError, SandboxUnavailableError
from .types import (
    CheckpointInfo,
    CombinedResult,
    DirEntry,
    ExecResult,
    GrepMatch,
    ImageInfo,
    Network,
    ProcessChunk,
    ProcessOutput,
    ProcessStatus,
    PtySize,
    RunResult,
    SandboxHandle,
    SandboxRecord,
    Signal,
    SnapshotInfo,
    StreamExit,
    StreamStart,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncProcessStream",
    "AsyncSandboxClient",
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
    "ProcessStream",
    "PtySize",
    "RunResult",
    "SandboxClient",
    "SandboxError",
    "SandboxHandle",
    "SandboxNotEnabledError",
    "SandboxRecord",
    "SandboxRequestError",
    "SandboxUnavailableError",
    "Signal",
    "SnapshotInfo",
    "StreamExit",
    "StreamStart",
]
