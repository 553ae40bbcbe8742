"""What the sync and asyncio clients share: checks, request specs, parsing.

Nothing here does I/O. Each check raises what the TS SDK raises for the
same input, before anything is sent.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Optional, Sequence, Union
from urllib.parse import quote, urlencode, urlsplit

from .errors import SandboxNotEnabledError, SandboxRequestError
from .types import (
    CheckpointInfo,
    DirEntry,
    ExecResult,
    GrepMatch,
    ImageInfo,
    ProcessOutput,
    ProcessStatus,
    PtySize,
    SandboxHandle,
    SandboxRecord,
    SnapshotInfo,
)

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
PROCESS_ID_RE = re.compile(r"[A-Za-z0-9-]{1,64}")
IMAGE_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
SIGNALS = frozenset({"TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2"})
PTY_MAX = 4096

DEFAULT_TIMEOUT_SECONDS = 30.0
REFRESH_MARGIN_S = 30.0
"""Refresh a cached handle this long before it expires (less for short-lived ones)."""
RUN_DRAIN_S = 5.0
"""How long ``run`` reads on after killing its process, for the exit."""
STREAM_TYPE = "application/vnd.sandboxd.stream"
MAX_JSON_BYTES = 64 * 1024 * 1024
"""Largest JSON answer read (an exec's 2 MiB of output, escaped, fits many times)."""
MAX_ERROR_BYTES = 64 * 1024
"""Largest error body read; past it only the status is kept."""

Bytes = Union[bytes, bytearray, memoryview]


@dataclass
class RequestSpec:
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: Optional[bytes] = None
    content_type: Optional[str] = None
    accept: str = "application/json"
    untimed_body: bool = False
    """The timeout bounds the wait for the head only (a stream)."""


@dataclass
class CachedHandle:
    handle: SandboxHandle
    sandbox_class: str
    network: Optional[str]
    image: Optional[str]
    refresh_at: float
    """time.time() after which the handle is refreshed before use."""
    egress: Optional[dict[str, Any]] = None
    """Its egress policy, asked for again by a re-attach (kept current by set_network)."""


# ------------------------------------------------------------------ options


def token_from(token: Optional[str]) -> Optional[str]:
    for v in (token, os.environ.get("ASTRO_AUTHZ_TOKEN"), os.environ.get("SANDBOXD_TOKEN")):
        if v:
            return v
    return None


def issuer_of(token: Optional[str]) -> Optional[str]:
    """The ``iss`` claim of a JWT, decoded without verification (the server verifies)."""
    if not token:
        return None
    parts = token.split(".")
    if len(parts) < 2 or not parts[1] or len(parts[1]) > 65536:
        return None
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        iss = field_of(json.loads(raw.decode("utf-8")), "iss")
    except (ValueError, UnicodeDecodeError):
        return None
    return iss if isinstance(iss, str) and iss else None


def timeout_of(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError("timeout_seconds must be a positive number")
    return math.ceil(seconds * 1000) / 1000


def base_url_of(base_url: Optional[str], token: Optional[str]) -> Optional[str]:
    url = base_url or issuer_of(token)
    return url.rstrip("/") if url else None


def no_token() -> SandboxRequestError:
    return SandboxRequestError(
        401, "unauthenticated", "no identity token: pass token= or set ASTRO_AUTHZ_TOKEN (or SANDBOXD_TOKEN)"
    )


def no_base_url() -> SandboxRequestError:
    return SandboxRequestError(
        400, "invalid_argument", "no server URL: pass base_url= or use an identity token with an 'iss' claim"
    )


# ------------------------------------------------------------------ checks


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise SandboxRequestError(
            400, "invalid_argument", f"invalid sandbox name {name!r}: must match ^{NAME_RE.pattern}$"
        )
    return name


def check_process_id(pid: object) -> str:
    if not isinstance(pid, str) or not PROCESS_ID_RE.fullmatch(pid):
        raise SandboxRequestError(400, "invalid_argument", f"invalid process id {pid!r}")
    return pid


def check_image(image: object) -> str:
    if not isinstance(image, str) or not IMAGE_RE.fullmatch(image):
        raise SandboxRequestError(400, "invalid_argument", f"invalid image name {image!r}")
    return image


def check_signal(sig: object) -> str:
    if sig not in SIGNALS:
        raise SandboxRequestError(400, "invalid_argument", f"unknown signal {sig!r}")
    return str(sig)


def check_pty(pty: Union[PtySize, Sequence[int], Mapping[str, int]]) -> dict[str, int]:
    cols: object
    rows: object
    if isinstance(pty, PtySize):
        cols, rows = pty.cols, pty.rows
    elif isinstance(pty, Mapping):
        cols, rows = pty.get("cols"), pty.get("rows")
    else:
        cols, rows = tuple(pty) if len(pty) == 2 else (None, None)
    size: dict[str, int] = {}
    for what, v in (("cols", cols), ("rows", rows)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= PTY_MAX:
            raise SandboxRequestError(400, "invalid_argument", f"pty {what} must be an integer from 1 to {PTY_MAX}, not {v!r}")
        size[what] = v
    return size


def check_offset(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0 or n > 2**53 - 1:
        raise SandboxRequestError(400, "invalid_argument", f"invalid offset {n!r}")
    return n


def check_command(command: object) -> list[str]:
    if isinstance(command, (str, bytes)):
        raise TypeError("command is argv, a list of strings, not a shell line: use ['/bin/sh', '-c', line]")
    if not isinstance(command, Sequence):
        raise TypeError("command: expected a list of strings")
    return [str(a) if not isinstance(a, str) else a for a in command]


def path_query(path: object) -> str:
    if not isinstance(path, str) or path == "":
        raise SandboxRequestError(400, "invalid_argument", "path must be a non-empty string")
    return urlencode({"path": path})


def to_bytes(data: Union[str, Bytes]) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError("expected str or bytes")


def q(name: str) -> str:
    """A name as one URL path segment (as encodeURIComponent spells it)."""
    return quote(name, safe="-_.!~*'()")


# ------------------------------------------------------------------ specs


def bare_spec(method: str, url: str) -> RequestSpec:
    return RequestSpec(method, url)


def json_spec(method: str, url: str, body: object) -> RequestSpec:
    return RequestSpec(method, url, body=json.dumps(body, separators=(",", ":")).encode("utf-8"), content_type="application/json")


def bytes_spec(method: str, url: str, body: bytes) -> RequestSpec:
    return RequestSpec(method, url, body=body, content_type="application/octet-stream")


def with_headers(spec: RequestSpec, headers: Mapping[str, str]) -> RequestSpec:
    return RequestSpec(
        spec.method, spec.url, {**spec.headers, **headers}, spec.body, spec.content_type, spec.accept, spec.untimed_body
    )


def exec_body(command: object, cwd: Optional[str], env: Optional[Mapping[str, str]], user: Optional[str],
              timeout_ms: Optional[float], timeout_s: float) -> dict[str, Any]:
    limit = max(1, int(timeout_s * 1000) - 1000)
    t = timeout_ms
    if t is None or isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
        t = limit
    body: dict[str, Any] = {"command": check_command(command), "timeoutMs": min(math.ceil(t), limit)}
    optional(body, cwd=cwd, env=None if env is None else dict(env), user=user)
    return body


def spawn_body(command: object, cwd: Optional[str], env: Optional[Mapping[str, str]], user: Optional[str],
               stdin: bool, lossless: bool, pty: object) -> dict[str, Any]:
    body: dict[str, Any] = {"command": check_command(command)}
    optional(body, cwd=cwd, env=None if env is None else dict(env), user=user)
    if stdin:
        body["stdin"] = True
    if lossless:
        body["lossless"] = True
    if pty is not None:
        body["pty"] = check_pty(pty)  # type: ignore[arg-type]
    return body


def optional(body: dict[str, Any], **kv: Any) -> None:
    for k, v in kv.items():
        if v is not None:
            body[k] = v


def poll_query(stdout_from: int, stderr_from: int, wait_ms: float, max_wait_ms: int) -> str:
    params = {"stdoutFrom": str(check_offset(stdout_from)), "stderrFrom": str(check_offset(stderr_from))}
    try:
        wait = int(wait_ms) if wait_ms and math.isfinite(wait_ms) else 0
    except (TypeError, ValueError):
        wait = 0
    wait = min(max(0, wait), max_wait_ms)
    if wait > 0:
        params["waitMs"] = str(wait)
    return urlencode(params)


def refresh_time(expires_at: str, received: float, server_date: Optional[str]) -> float:
    """When a handle received at ``received`` (time.time()) should be refreshed.

    The lifetime is measured against the server's clock when it sent a Date
    header, so a skewed local clock does not make every call re-attach.
    """
    expires = parse_time(expires_at)
    sent = parse_http_date(server_date)
    sent_at = sent + 1.0 if sent is not None else received  # Date has one-second resolution
    lifetime = expires - sent_at if expires is not None else 0.0
    margin = min(REFRESH_MARGIN_S, max(0.0, lifetime) / 4)
    return received + lifetime - margin


def parse_time(s: str) -> Optional[float]:
    if not s:
        return None
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def parse_http_date(s: Optional[str]) -> Optional[float]:
    if not s:
        return None
    from email.utils import parsedate_to_datetime

    try:
        return parsedate_to_datetime(s).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


def redact(url: str) -> str:
    """A URL without its query (it may carry a path the caller considers private)."""
    return url.split("?", 1)[0]


def origin_of(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, target) of an absolute http(s) URL."""
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"not an http(s) URL: {redact(url)}")
    port = u.port or (443 if u.scheme == "https" else 80)
    target = (u.path or "/") + (f"?{u.query}" if u.query else "")
    return u.scheme, u.hostname, port, target


# ------------------------------------------------------------------ answers


def bad_response(what: str) -> SandboxRequestError:
    return SandboxRequestError(502, "invalid_response", f"unexpected answer from the server: {what}")


def parse_json(data: bytes, status: int) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise bad_response(f"{status} answer is not JSON") from None


def request_error(status: int, reason: str, body: bytes) -> SandboxRequestError:
    code = message = ""
    written: Optional[int] = None
    try:
        err = field_of(json.loads(body.decode("utf-8")), "error")
        code = str_of(field_of(err, "code"))
        message = str_of(field_of(err, "message"))
        w = field_of(err, "written")
        if isinstance(w, int) and not isinstance(w, bool) and 0 <= w <= 2**53 - 1:
            written = w
    except (ValueError, UnicodeDecodeError):
        pass  # not our error body (a proxy's page, say): keep the status alone
    code = code or f"http_{status}"
    message = message or f"HTTP {status}{' ' + reason if reason else ''}"
    if status == 409 and code == "not_enabled":
        return SandboxNotEnabledError(message)
    return SandboxRequestError(status, code, message, written)


def field_of(obj: object, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def str_of(v: object) -> str:
    return v if isinstance(v, str) else ""


def int_of(v: object) -> int:
    if isinstance(v, bool):
        return 0
    if isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return int(v)
    return 0


def non_negative(v: object, fallback: int) -> int:
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2**53 - 1:
        return v
    return fallback


def strings(v: object) -> list[str]:
    return [s if isinstance(s, str) else json.dumps(s) for s in v] if isinstance(v, list) else []


def _network(body: object) -> dict[str, Any]:
    n = field_of(body, "network")
    return {"network": n} if n in ("nat", "none") else {}


def _image(body: object) -> dict[str, Any]:
    i = field_of(body, "image")
    return {"image": i} if isinstance(i, str) and i else {}


def to_handle(body: object) -> SandboxHandle:
    endpoint = field_of(body, "endpoint")
    if not isinstance(endpoint, str) or not re.match(r"(?i)https?://", endpoint):
        raise bad_response("attach: bad endpoint")
    try:
        origin_of(endpoint)
    except ValueError:
        raise bad_response("attach: bad endpoint") from None
    headers = field_of(body, "headers")
    clean: dict[str, str] = {}
    if isinstance(headers, dict):
        for k, v in headers.items():
            if isinstance(v, str):
                if not _header_ok(k, v):
                    raise bad_response("attach: a header that cannot be sent")
                clean[k] = v
    return SandboxHandle(
        name=str_of(field_of(body, "name")),
        sandbox_class=str_of(field_of(body, "class")) or "default",
        state=str_of(field_of(body, "state")) or "running",
        endpoint=endpoint.rstrip("/"),
        headers=clean,
        expires_at=str_of(field_of(body, "expiresAt")),
        **_network(body),
        **_image(body),
    )


def _header_ok(name: str, value: str) -> bool:
    return bool(re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name)) and not re.search(r"[\x00-\x08\x0a-\x1f\x7f]", value)


def copy_handle(h: SandboxHandle) -> SandboxHandle:
    from dataclasses import replace

    return replace(h, headers=dict(h.headers))


def to_record(body: object) -> SandboxRecord:
    ceiling = field_of(body, "ceilingAt")
    return SandboxRecord(
        name=str_of(field_of(body, "name")),
        sandbox_class=str_of(field_of(body, "class")),
        state=str_of(field_of(body, "state")),
        created_at=str_of(field_of(body, "createdAt")),
        last_active_at=str_of(field_of(body, "lastActiveAt")),
        ceiling_at=ceiling if isinstance(ceiling, str) else None,
        **_network(body),
        **_image(body),
    )


def to_records(body: object, key: str, what: str) -> list[Any]:
    rows = field_of(body, key)
    if not isinstance(rows, list):
        raise bad_response(f"{what}: no {key} array")
    return rows


def to_exec_result(body: object) -> ExecResult:
    return ExecResult(
        exit_code=int_of(field_of(body, "exitCode")),
        stdout=str_of(field_of(body, "stdout")),
        stderr=str_of(field_of(body, "stderr")),
        duration_ms=int_of(field_of(body, "durationMs")),
        timed_out=field_of(body, "timedOut") is True,
        truncated=field_of(body, "truncated") is True,
    )


def status_fields(body: object) -> dict[str, Any]:
    pid = field_of(body, "processId")
    if not isinstance(pid, str) or not pid:
        raise bad_response("no processId")
    out: dict[str, Any] = {
        "process_id": pid,
        "command": strings(field_of(body, "command")),
        "state": "exited" if field_of(body, "state") == "exited" else "running",
        "started_at": str_of(field_of(body, "startedAt")),
    }
    code = field_of(body, "exitCode")
    if isinstance(code, int) and not isinstance(code, bool):
        out["exit_code"] = code
    exited = field_of(body, "exitedAt")
    if isinstance(exited, str):
        out["exited_at"] = exited
    if field_of(body, "exec") is True:
        out["exec"] = True
        out["timed_out"] = field_of(body, "timedOut") is True
        out["truncated"] = field_of(body, "truncated") is True
    out["pty"] = field_of(body, "pty") is True
    out["lossless"] = field_of(body, "lossless") is True
    return out


def to_status(body: object) -> ProcessStatus:
    return ProcessStatus(**status_fields(body))


def to_output(body: object) -> ProcessOutput:
    return ProcessOutput(
        **status_fields(body),
        stdout=str_of(field_of(body, "stdout")),
        stderr=str_of(field_of(body, "stderr")),
        stdout_next=int_of(field_of(body, "stdoutNext")),
        stderr_next=int_of(field_of(body, "stderrNext")),
        stdout_dropped=int_of(field_of(body, "stdoutDropped")),
        stderr_dropped=int_of(field_of(body, "stderrDropped")),
    )


def to_entries(body: object) -> list[DirEntry]:
    return [
        DirEntry(str_of(field_of(r, "name")), field_of(r, "isDirectory") is True)
        for r in to_records(body, "entries", "list_dir")
    ]


def to_image(r: object) -> ImageInfo:
    return ImageInfo(
        name=str_of(field_of(r, "name")),
        size_bytes=int_of(field_of(r, "sizeBytes")),
        built_at=str_of(field_of(r, "builtAt")),
        source=str_of(field_of(r, "source")),
        layers=int_of(field_of(r, "layers")),
    )


def to_snapshot(r: object) -> SnapshotInfo:
    return SnapshotInfo(
        image=str_of(field_of(r, "image")),
        size_bytes=int_of(field_of(r, "sizeBytes")),
        copied_bytes=int_of(field_of(r, "copiedBytes")),
        linked_files=int_of(field_of(r, "linkedFiles")),
        duration_ms=int_of(field_of(r, "durationMs")),
        created_at=str_of(field_of(r, "createdAt")),
    )


def to_checkpoint(r: object) -> CheckpointInfo:
    return CheckpointInfo(
        size_bytes=int_of(field_of(r, "sizeBytes")),
        duration_ms=int_of(field_of(r, "durationMs")),
        created_at=str_of(field_of(r, "createdAt")),
        running=field_of(r, "running") is True,
    )


_GREP_LINE = re.compile(r"(.*?):(\d+):(.*)", re.S)


def grep_command(pattern: str, path: str) -> list[str]:
    # -H so a single file operand still prints its path; -- so a pattern or
    # path starting with '-' is not taken as an option.
    return ["grep", "-rnH", "--", pattern, path]


def grep_result(r: ExecResult) -> list[GrepMatch]:
    text = r.stdout
    if r.truncated and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    matches = []
    for line in text.split("\n"):
        m = _GREP_LINE.fullmatch(line)
        if m:  # not "Binary file ... matches" and the like
            matches.append(GrepMatch(m.group(1), int(m.group(2)), m.group(3)))
    if r.exit_code in (0, 1) or matches:
        return matches
    message = r.stderr.strip() or f"grep exited with {r.exit_code}"
    if re.search(r"(?i)no such file|not found|permission denied", message):
        raise SandboxRequestError(404, "file_not_found", message)
    raise SandboxRequestError(400, "invalid_argument", message)


def combined_command(line: str) -> list[str]:
    # `exec 2>&1` first, rather than appending `2>&1`, so the redirection covers
    # every command of a list or pipeline and the shell's own syntax errors.
    return ["/bin/sh", "-c", f"exec 2>&1\n{line}"]


# ------------------------------------------------------------------ egress


def egress_active(policy: Optional[Mapping[str, Any]]) -> bool:
    """Whether a policy restricts anything: an allow list (even empty) or a deny entry."""
    if not policy:
        return False
    return policy.get("allow") is not None or bool(policy.get("deny"))


def to_network_policy(body: object) -> dict[str, Any]:
    """``{"mode": ..., "egress": {"allow": [...] | None, "deny": [...]}}`` as the server answered it."""
    egress = field_of(body, "egress")
    allow = field_of(egress, "allow")
    deny = field_of(egress, "deny")
    return {
        "mode": str_of(field_of(body, "mode")),
        "egress": {
            "allow": None if allow is None else [str_of(a) for a in allow] if isinstance(allow, list) else None,
            "deny": [str_of(d) for d in deny] if isinstance(deny, list) else [],
        },
    }


def to_egress_events(body: object) -> list[dict[str, Any]]:
    """The egress log's events, oldest first, as dicts of the API's fields."""
    return [dict(r) for r in to_records(body, "events", "network_log") if isinstance(r, dict)]
