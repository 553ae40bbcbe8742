"""The blocking client: :class:`SandboxClient` and :class:`ProcessStream`."""

from __future__ import annotations

import builtins
import threading
import time
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, TypeVar, Union
from urllib.parse import urlencode

from . import _common as c
from ._http1 import ProtocolError
from ._stream import (
    BACKOFF_FIRST_S,
    BACKOFF_MAX_S,
    EXIT,
    FRAME_START,
    IDLE_S,
    RECONNECT_WINDOW_S,
    FrameParser,
    RunState,
    StreamState,
    retryable,
)
from ._sync_http import BodyTooLarge, Response, Transport
from .errors import SandboxRequestError, SandboxUnavailableError
from .types import (
    CheckpointInfo,
    CombinedResult,
    DirEntry,
    ExecResult,
    GrepMatch,
    ImageInfo,
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

T = TypeVar("T")
Reader = Callable[[Response], T]
Command = Sequence[str]
Env = Optional[Mapping[str, str]]
Pty = Union[PtySize, Sequence[int], Mapping[str, int], None]


class _Tick:
    """What the internal stream iterator yields when a caller's deadline passed."""


TICK = _Tick()


class SandboxClient:
    """Client of a sandboxd server (blocking; safe to share between threads).

    Every method takes the sandbox name first. Data-plane methods attach on
    first use; the handle is cached per name, refreshed before it expires,
    and fetched again once when the sandbox rejects its credentials (401).

    ``token`` defaults to ``$ASTRO_AUTHZ_TOKEN``, then ``$SANDBOXD_TOKEN``;
    ``base_url`` to the token's ``iss`` claim. ``timeout_seconds`` bounds
    every HTTP request (a stream's wait for its first answer only).
    """

    def __init__(self, token: Optional[str] = None, base_url: Optional[str] = None,
                 timeout_seconds: float = c.DEFAULT_TIMEOUT_SECONDS) -> None:
        self._token = c.token_from(token)
        self._base_url = c.base_url_of(base_url, self._token)
        self._timeout = c.timeout_of(timeout_seconds)
        self._http = Transport()
        self._handles: dict[str, c.CachedHandle] = {}
        self._generation: dict[str, int] = {}
        self._lock = threading.Lock()
        self._attach_locks: dict[str, threading.Lock] = {}

    @property
    def base_url(self) -> Optional[str]:
        """The control plane's URL (from ``base_url`` or the token's ``iss``)."""
        return self._base_url

    def close(self) -> None:
        """Closes the pooled connections. The client stays usable."""
        self._http.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ control plane

    def attach(self, name: str, sandbox_class: Optional[str] = None, *, network: Optional[str] = None,
               image: Optional[str] = None, egress: Optional[Mapping[str, Any]] = None) -> SandboxHandle:
        """Creates the sandbox on first call, reuses a running one, resumes a suspended one."""
        c.check_name(name)
        entry = self._attach_now(name, sandbox_class or "default", network, image,
                                  dict(egress) if c.egress_active(egress) else None)
        return c.copy_handle(entry.handle)

    def get_network(self, name: str) -> dict[str, Any]:
        """The sandbox's egress policy in force: ``{"mode", "egress": {"allow", "deny"}}``."""
        return c.to_network_policy(self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/network"), self._read_json))

    def set_network(self, name: str, policy: Mapping[str, Any]) -> dict[str, Any]:
        """Replaces its egress policy (``{"allow": [...], "deny": [...]}``; ``{}`` removes it), for new
        connections at once; answers the policy now in force."""
        body = self._data(name, lambda ep: c.json_spec("PUT", f"{ep}/network", dict(policy)), self._read_json)
        with self._lock:
            cur = self._handles.get(name)
            if cur is not None:
                cur.egress = dict(policy) if c.egress_active(policy) else None
        return c.to_network_policy(body)

    def network_log(self, name: str) -> builtins.list[dict[str, Any]]:
        """Its recent egress events, oldest first: refused connections, DNS answers and refusals."""
        return c.to_egress_events(self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/network/log"), self._read_json))

    def get(self, name: str) -> SandboxRecord:
        """The sandbox's record. Carries no credentials."""
        c.check_name(name)
        return c.to_record(self._control("GET", f"/v1/sandboxes/{c.q(name)}", None, self._read_json))

    def list(self) -> builtins.list[SandboxRecord]:
        """Every sandbox of the deployment."""
        body = self._control("GET", "/v1/sandboxes", None, self._read_json)
        return [c.to_record(r) for r in c.to_records(body, "sandboxes", "list")]

    def images(self) -> builtins.list[ImageInfo]:
        """The images a sandbox can be made from (``attach``'s ``image``)."""
        body = self._control("GET", "/v1/images", None, self._read_json)
        return [c.to_image(r) for r in c.to_records(body, "images", "images")]

    def stop(self, name: str) -> None:
        """Suspends the sandbox's compute early. The next use resumes it."""
        c.check_name(name)
        self._forget(name)
        self._control("POST", f"/v1/sandboxes/{c.q(name)}/stop", None, self._discard)
        self._forget(name)

    def delete(self, name: str) -> None:
        """Drops the sandbox and its filesystem."""
        c.check_name(name)
        self._forget(name)
        self._control("DELETE", f"/v1/sandboxes/{c.q(name)}", None, self._discard)
        self._forget(name)

    def snapshot(self, name: str, image: str) -> SnapshotInfo:
        """The sandbox's files, now, as a new image ``image`` (409 ``already_exists`` when taken)."""
        c.check_image(image)
        body = self._data(name, lambda ep: c.json_spec("POST", f"{ep}/snapshot", {"image": image}), self._read_json)
        return c.to_snapshot(body)

    def checkpoint(self, name: str, *, keep_running: Optional[bool] = None) -> CheckpointInfo:
        """Saves the sandbox's processes, memory and files (``gvisor``; ``ns`` answers 409)."""
        if keep_running is not None and not isinstance(keep_running, bool):
            raise TypeError("keep_running: expected a bool")
        req = {} if keep_running is None else {"keepRunning": keep_running}
        return c.to_checkpoint(self._data(name, lambda ep: c.json_spec("POST", f"{ep}/checkpoint", req), self._read_json))

    def fork(self, name: str, new_name: str) -> SandboxHandle:
        """A new sandbox ``new_name`` started from ``name`` (its checkpoint, or under ``ns`` its files)."""
        c.check_name(new_name)
        body = self._data(name, lambda ep: c.json_spec("POST", f"{ep}/fork", {"name": new_name}), self._read_json)
        handle = c.to_handle(body)
        entry = c.CachedHandle(handle, handle.sandbox_class, handle.network, handle.image,
                               c.refresh_time(handle.expires_at, time.time(), None))
        with self._lock:
            self._handles[new_name] = entry
        return c.copy_handle(handle)

    # ------------------------------------------------------------ commands

    def exec(self, name: str, command: Command, *, cwd: Optional[str] = None, env: Env = None,
             user: Optional[str] = None, timeout_ms: Optional[float] = None) -> ExecResult:
        """Runs argv to completion in one request; output buffered up to 1 MiB per stream.

        The command's deadline is ``min(timeout_ms, timeout_seconds * 1000 - 1000)``.
        """
        body = c.exec_body(command, cwd, env, user, timeout_ms, self._timeout)
        return c.to_exec_result(self._data(name, lambda ep: c.json_spec("POST", f"{ep}/exec", body), self._read_json))

    def exec_combined(self, name: str, command: str, timeout_ms: Optional[float] = None) -> CombinedResult:
        """Runs a shell line with stderr folded into stdout, through ``run`` (no output cap)."""
        t = timeout_ms if timeout_ms and timeout_ms > 0 else max(1, int(self._timeout * 1000) - 1000)
        r = self.run(name, c.combined_command(command), timeout_ms=t)
        return CombinedResult(output=r.stdout, exit_code=r.exit_code if r.exit_code is not None else -1, truncated=False)

    def run(self, name: str, command: Command, *, cwd: Optional[str] = None, env: Env = None,
            user: Optional[str] = None, stdin: bool = False, pty: Pty = None,
            on_output: Optional[Callable[[ProcessOutput], Any]] = None, timeout_ms: Optional[float] = None,
            interval_ms: Optional[float] = None) -> RunResult:
        """Spawns the command ``lossless`` and reads its output as a stream until it exits.

        No output cap, nothing dropped, no request timeout. ``on_output`` is
        called with each piece of output as it arrives; ``timeout_ms`` kills
        the process once it has passed (``timed_out`` and ``killed`` then).
        ``interval_ms`` is accepted for compatibility and not used.
        """
        del interval_ms
        proc = self.spawn(name, command, cwd=cwd, env=env, user=user, stdin=stdin, lossless=True, pty=pty)
        pid = proc.process_id
        stream = self.stream(name, pid)
        run = RunState(proc, stream._state, on_output)
        ended: Optional[str] = None
        kill_failed: Optional[BaseException] = None
        if timeout_ms is not None and timeout_ms >= 0:
            stream._deadline = time.monotonic() + timeout_ms / 1000
        try:
            try:
                for item in stream._iterate():
                    if isinstance(item, _Tick):
                        if ended is not None:
                            break  # the drain after the kill is over
                        ended = "timeout"
                        kill_failed = self._kill_quietly(name, pid)
                        stream._deadline = time.monotonic() + c.RUN_DRAIN_S
                        continue
                    run.add(item)
                    run.pending.clear()
            except SandboxRequestError:
                # Once killed, a stream that ends short of the exit (the
                # process is gone) still makes a result.
                if ended is None:
                    raise
            finally:
                stream.close()
            if kill_failed is not None:
                raise kill_failed
        except BaseException as err:
            # Do not leave the process running behind a failed run, unless the
            # server is unreachable anyway.
            if not isinstance(err, SandboxUnavailableError):
                self._reap(name, pid)
            raise
        self._reap(name, pid)
        return run.result(ended == "timeout", ended is not None)

    def spawn(self, name: str, command: Command, *, cwd: Optional[str] = None, env: Env = None,
              user: Optional[str] = None, stdin: bool = False, lossless: bool = False, pty: Pty = None) -> ProcessStatus:
        """Starts a command and returns at once; read its output with ``poll`` or ``stream``."""
        body = c.spawn_body(command, cwd, env, user, stdin, lossless, pty)
        return c.to_status(self._data(name, lambda ep: c.json_spec("POST", f"{ep}/processes", body), self._read_json))

    def poll(self, name: str, process_id: str, *, stdout_from: int = 0, stderr_from: int = 0,
             wait_ms: float = 0) -> ProcessOutput:
        """A process's status and the output after the offsets asked from.

        ``wait_ms`` makes it a long poll (bounded one second under the request timeout).
        """
        pid = c.check_process_id(process_id)
        query = c.poll_query(stdout_from, stderr_from, wait_ms, max(0, int(self._timeout * 1000) - 1000))
        body = self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/processes/{pid}?{query}"), self._read_json)
        return c.to_output(body)

    def processes(self, name: str) -> builtins.list[ProcessStatus]:
        """Every process the sandbox holds: running, or exited and not yet killed."""
        body = self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/processes"), self._read_json)
        return [c.to_status(r) for r in c.to_records(body, "processes", "processes")]

    def signal(self, name: str, process_id: str, signal: Signal = "TERM") -> None:
        """Sends a signal (default TERM) to the process's group."""
        pid = c.check_process_id(process_id)
        sig = c.check_signal(signal)
        self._data(name, lambda ep: c.json_spec("POST", f"{ep}/processes/{pid}/signal", {"signal": sig}), self._discard)

    def kill(self, name: str, process_id: str) -> None:
        """Stops the process if still running, then forgets it."""
        pid = c.check_process_id(process_id)
        self._data(name, lambda ep: c.bare_spec("DELETE", f"{ep}/processes/{pid}"), self._discard)

    def stdin(self, name: str, process_id: str, data: Union[str, bytes], *, close: bool = False) -> None:
        """Writes to the stdin of a process spawned with ``stdin=True``; ``close`` ends it.

        A process that does not take all of it within 10 s: 408 ``timeout``,
        with ``written`` on the error (the rest was discarded).
        """
        pid = c.check_process_id(process_id)
        raw = c.to_bytes(data)
        query = "?close=true" if close else ""
        self._data(name, lambda ep: c.bytes_spec("POST", f"{ep}/processes/{pid}/stdin{query}", raw), self._discard)

    def resize(self, name: str, process_id: str, cols: int, rows: int) -> None:
        """Resizes the terminal of a process spawned with ``pty``."""
        pid = c.check_process_id(process_id)
        size = c.check_pty((cols, rows))
        self._data(name, lambda ep: c.json_spec("POST", f"{ep}/processes/{pid}/resize", size), self._discard)

    def stream(self, name: str, process_id: str, *, stdout_from: int = 0, stderr_from: int = 0,
               reconnect: bool = True) -> ProcessStream:
        """A process's output as it is produced, then its exit. Sends nothing until iterated."""
        c.check_name(name)
        pid = c.check_process_id(process_id)
        so, se = c.check_offset(stdout_from), c.check_offset(stderr_from)
        if not isinstance(reconnect, bool):
            raise TypeError("reconnect: expected a bool")

        def open_(so: int, se: int) -> Response:
            query = urlencode({"stdoutFrom": str(so), "stderrFrom": str(se)})

            def build(ep: str) -> c.RequestSpec:
                spec = c.bare_spec("GET", f"{ep}/processes/{pid}/stream?{query}")
                spec.untimed_body = True
                spec.accept = f"{c.STREAM_TYPE}, application/json"
                return spec

            return self._data(name, build, _read_stream)

        return ProcessStream(open_, so, se, reconnect)

    # ------------------------------------------------------------ files

    def read_file(self, name: str, path: str) -> str:
        """A file as text (UTF-8, a byte-order mark kept). 404 when the path cannot be read."""
        return self.read_file_bytes(name, path).decode("utf-8", "replace")

    def read_file_bytes(self, name: str, path: str) -> bytes:
        """A file's bytes. 404 when the path cannot be read."""
        query = c.path_query(path)
        return self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/files?{query}"), _read_bytes)

    def write_file(self, name: str, path: str, contents: str) -> None:
        """Writes text (UTF-8), creating parent directories."""
        self.write_file_bytes(name, path, contents.encode("utf-8"))

    def write_file_bytes(self, name: str, path: str, contents: Union[bytes, bytearray, memoryview]) -> None:
        """Writes bytes, creating parent directories."""
        query = c.path_query(path)
        raw = c.to_bytes(contents)
        self._data(name, lambda ep: c.bytes_spec("PUT", f"{ep}/files?{query}", raw), self._discard)

    def list_dir(self, name: str, path: str = ".") -> builtins.list[DirEntry]:
        """A directory's entries; ``path`` defaults to ``.`` (the working directory)."""
        query = c.path_query(path)
        body = self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/files/list?{query}"), self._read_json)
        return c.to_entries(body)

    def grep(self, name: str, pattern: str, path: str = ".") -> builtins.list[GrepMatch]:
        """``grep -rnH`` for a pattern under a path; empty when nothing matches."""
        return c.grep_result(self.exec(name, c.grep_command(pattern, path)))

    # ------------------------------------------------------------ internals

    def _kill_quietly(self, name: str, pid: str) -> Optional[BaseException]:
        try:
            self.signal(name, pid, "KILL")
        except SandboxRequestError:
            pass  # already exited or gone: nothing left to stop
        except Exception as err:  # noqa: BLE001 - raised once the run has its result
            return err
        return None

    def _reap(self, name: str, pid: str) -> None:
        """Best-effort kill-and-forget, so finished runs do not crowd the sandbox's table."""
        try:
            self.kill(name, pid)
        except Exception:  # noqa: BLE001 - the result is known; a failed clean-up must not hide it
            pass

    def _control(self, method: str, path: str, body: object, read: Reader[T]) -> T:
        token = self._identity_token()
        base = self._base()
        spec = c.RequestSpec(method, base + path) if body is None else c.json_spec(method, base + path, body)
        spec.headers["Authorization"] = f"Bearer {token}"
        return self._call(spec, read)

    def _data(self, name: str, build: Callable[[str], c.RequestSpec], read: Reader[T]) -> T:
        """A data-plane request: attaches on first use; re-attaches and retries once on a 401.

        A 401 is answered before anything runs, so the retry cannot run a
        command twice.
        """
        c.check_name(name)
        first = self._handle(name)
        try:
            return self._call(c.with_headers(build(first.handle.endpoint), first.handle.headers), read)
        except SandboxRequestError as err:
            if err.status != 401:
                raise
        second = self._handle(name, failed=first)
        return self._call(c.with_headers(build(second.handle.endpoint), second.handle.headers), read)

    def _handle(self, name: str, failed: Optional[c.CachedHandle] = None) -> c.CachedHandle:
        """A usable handle: the cached one unless due for refresh (or the one that just failed)."""
        with self._lock:
            lock = self._attach_locks.setdefault(name, threading.Lock())
        # Concurrent callers for one name share one attach: the second waits
        # for the first and takes what it cached.
        with lock:
            with self._lock:
                cur = self._handles.get(name)
                if cur is not None and cur is not failed and time.time() < cur.refresh_at:
                    return cur
                if cur is not None and cur is failed:
                    del self._handles[name]
            was = cur or failed
            return self._attach_now(name, was.sandbox_class if was else "default",
                                    was.network if was else None, was.image if was else None,
                                    was.egress if was else None)

    def _attach_now(self, name: str, sandbox_class: str, network: Optional[str], image: Optional[str],
                    egress: Optional[dict[str, Any]] = None) -> c.CachedHandle:
        with self._lock:
            generation = self._generation.get(name, 0)
        req: dict[str, Any] = {"class": sandbox_class}
        if egress:
            req["egress"] = egress
        if network:
            req["network"] = network
        if image is not None:
            req["image"] = image

        def read(res: Response) -> tuple[Any, float, Optional[str]]:
            return self._read_json(res), time.time(), res.header("date")

        body, received, server_date = self._control("POST", f"/v1/sandboxes/{c.q(name)}/attach", req, read)
        handle = c.to_handle(body)
        entry = c.CachedHandle(handle, sandbox_class, handle.network or network, handle.image or image,
                               c.refresh_time(handle.expires_at, received, server_date), egress)
        with self._lock:
            if self._generation.get(name, 0) == generation:
                self._handles[name] = entry
        return entry

    def _forget(self, name: str) -> None:
        with self._lock:
            self._handles.pop(name, None)
            self._generation[name] = self._generation.get(name, 0) + 1

    def _identity_token(self) -> str:
        if self._token is None:
            raise c.no_token()
        return self._token

    def _base(self) -> str:
        if self._base_url is None:
            raise c.no_base_url()
        return self._base_url

    def _call(self, spec: c.RequestSpec, read: Reader[T]) -> T:
        """One HTTP exchange, bounded by the timeout (body included, but for a stream).

        Non-2xx becomes SandboxRequestError; no answer becomes
        SandboxUnavailableError and is never retried.
        """
        res: Optional[Response] = None
        try:
            res = self._http.request(spec, self._timeout)
            if not 200 <= res.status < 300:
                raise _error_of(res)
            out = read(res)
            if not spec.untimed_body:
                res.close()  # a no-op once the body was read to its end
            return out
        except SandboxRequestError:
            if res is not None:
                res.close()
            raise
        except (OSError, ProtocolError, ValueError) as err:
            if res is not None:
                res.close()
            why = f"no answer within {int(self._timeout * 1000)} ms" if isinstance(err, TimeoutError) else _describe(err)
            raise SandboxUnavailableError(f"{spec.method} {c.redact(spec.url)}: {why}", err) from err
        except BaseException:
            if res is not None:
                res.close()
            raise

    @staticmethod
    def _read_json(res: Response) -> Any:
        try:
            data = res.read_all(c.MAX_JSON_BYTES)
        except BodyTooLarge:
            raise c.bad_response(f"a JSON answer over {c.MAX_JSON_BYTES} bytes") from None
        return c.parse_json(data, res.status)

    @staticmethod
    def _discard(res: Response) -> None:
        try:
            res.read_all(c.MAX_JSON_BYTES)
        except BodyTooLarge:
            pass  # the connection is closed; the answer was a success all the same


def _read_bytes(res: Response) -> bytes:
    return res.read_all()


def _read_stream(res: Response) -> Response:
    ctype = (res.header("content-type") or "").split(";")[0].strip().lower()
    if ctype != c.STREAM_TYPE:
        res.close()
        raise c.bad_response(f"a process stream answered with Content-Type {ctype or '(none)'}")
    return res


def _error_of(res: Response) -> SandboxRequestError:
    try:
        body = res.read_all(c.MAX_ERROR_BYTES)
    except (BodyTooLarge, OSError, ProtocolError):
        body = b""
    return c.request_error(res.status, res.reason, body)


def _describe(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    cause = err.__cause__ or err.__context__
    if cause is not None and str(cause) and str(cause) != text:
        text += f": {cause}"
    return text


class ProcessStream:
    """A process's output as it is produced, then its exit: an iterator of
    :class:`ProcessChunk` (iterate it once; ``close()`` or leaving a ``with``
    block closes the connection).

    A connection that breaks, ends without the process's exit, or brings
    nothing for 45 s is reconnected from ``stdout_next``/``stderr_next``
    (unless ``reconnect=False``), for up to 30 s after the last frame that
    was not a ``start``; then the iterator raises SandboxUnavailableError.
    An ``error`` frame is raised as SandboxRequestError.
    """

    def __init__(self, open_: Callable[[int, int], Response], stdout_from: int, stderr_from: int,
                 reconnect: bool) -> None:
        self._open = open_
        self._state = StreamState(stdout_from, stderr_from)
        self._reconnect = reconnect
        self._iterated = False
        self._res: Optional[Response] = None
        self._closed = False
        self._deadline: Optional[float] = None  # run's: yield TICK once it passes

    @property
    def stdout_next(self) -> int:
        """The offset after the last stdout byte yielded: where a new stream would start."""
        return self._state.stdout_next

    @property
    def stderr_next(self) -> int:
        return self._state.stderr_next

    @property
    def start(self) -> Optional[StreamStart]:
        """The latest ``start`` frame (dropped counts summed over every connection)."""
        return self._state.start

    @property
    def exit(self) -> Optional[StreamExit]:
        """The exited status with the final offsets, once the iterator has read it."""
        return self._state.exit

    def __iter__(self) -> Iterator[ProcessChunk]:
        for item in self._iterate():
            if isinstance(item, ProcessChunk):
                yield item

    def __enter__(self) -> ProcessStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection; iterating further ends at once."""
        self._closed = True
        res, self._res = self._res, None
        if res is not None:
            res.close()

    def _wait(self, res: Response, waiting_since: float) -> Union[bytes, _Tick]:
        """The next bytes of the body, TICK when the deadline passed first, or IdleError."""
        while True:
            now = time.monotonic()
            idle_left = waiting_since + IDLE_S - now
            if idle_left <= 0:
                raise _IdleError()
            timeout = idle_left
            if self._deadline is not None:
                if self._deadline <= now:
                    self._deadline = None
                    return TICK
                timeout = min(timeout, self._deadline - now)
            try:
                return res.read_some(timeout)
            except TimeoutError:
                continue

    def _iterate(self) -> Iterator[Union[ProcessChunk, _Tick]]:
        if self._iterated:
            raise TypeError("a ProcessStream can be iterated only once")
        self._iterated = True
        st = self._state
        progress_at = time.monotonic()
        backoff = BACKOFF_FIRST_S
        connected = False
        try:
            while not self._closed:
                fatal: Optional[BaseException] = None
                try:
                    res = self._open(st.stdout_next, st.stderr_next)
                    self._res = res
                    connected = True
                    parser = FrameParser()
                    waiting_since = time.monotonic()
                    while True:
                        frame = parser.next()
                        if frame is None:
                            data = self._wait(res, waiting_since)
                            if isinstance(data, _Tick):
                                yield data
                                continue
                            if not data:
                                break  # the body ended
                            parser.push(data)
                            continue
                        waiting_since = time.monotonic()
                        if frame.type != FRAME_START:
                            # Progress past a start frame: a server that answers
                            # and then cuts every time does not keep it alive.
                            progress_at = time.monotonic()
                            backoff = BACKOFF_FIRST_S
                        out = st.take(frame)
                        if out is EXIT:
                            return
                        if isinstance(out, SandboxRequestError):
                            fatal = out
                            raise out
                        if isinstance(out, ProcessChunk):
                            yield out
                            waiting_since = time.monotonic()
                    where = "inside a frame" if parser.buffered else "between frames"
                    cause: BaseException = ProtocolError(f"the stream ended without the process's exit ({where})")
                except _IdleError as err:
                    progress_at = time.monotonic()
                    cause = err
                except (OSError, ProtocolError, SandboxRequestError, SandboxUnavailableError) as err:
                    if self._closed:
                        return
                    if not connected or err is fatal or not retryable(err):
                        raise
                    cause = err
                finally:
                    if self._res is not None:
                        self._res.close()
                        self._res = None
                if self._closed:
                    return
                # Cut, failed, or silent: reconnect from the next offsets.
                if not self._reconnect or time.monotonic() - progress_at >= RECONNECT_WINDOW_S:
                    raise SandboxUnavailableError(f"process stream: {_describe(cause)}", cause)
                time.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
        finally:
            self.close()


class _IdleError(Exception):
    def __init__(self) -> None:
        super().__init__(f"no frame for {IDLE_S:g} s")
