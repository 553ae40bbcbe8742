"""The asyncio client: :class:`AsyncSandboxClient` and :class:`AsyncProcessStream`.

HTTP/1.1 on ``asyncio.open_connection`` (keep-alive, chunked bodies), the
same parser and the same behaviour as the blocking :class:`SandboxClient`.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, Optional, Sequence, TypeVar, Union
from urllib.parse import urlencode

from . import _common as c
from ._async_http import AsyncResponse, AsyncTransport
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
from ._sync_http import BodyTooLarge
from .client import TICK, Pty, _describe, _IdleError, _Tick
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
    RunResult,
    SandboxHandle,
    SandboxRecord,
    Signal,
    SnapshotInfo,
    StreamExit,
    StreamStart,
)

T = TypeVar("T")
Reader = Callable[[AsyncResponse], Awaitable[T]]
Command = Sequence[str]
Env = Optional[Mapping[str, str]]


class AsyncSandboxClient:
    """The asyncio twin of :class:`~sandboxd.SandboxClient`: the same methods, as coroutines.

    ``stream()`` returns an :class:`AsyncProcessStream` (``async for``).
    Use one client per event loop; ``aclose()`` (or ``async with``) closes
    its pooled connections.
    """

    def __init__(self, token: Optional[str] = None, base_url: Optional[str] = None,
                 timeout_seconds: float = c.DEFAULT_TIMEOUT_SECONDS) -> None:
        self._token = c.token_from(token)
        self._base_url = c.base_url_of(base_url, self._token)
        self._timeout = c.timeout_of(timeout_seconds)
        self._http = AsyncTransport()
        self._handles: dict[str, c.CachedHandle] = {}
        self._generation: dict[str, int] = {}
        self._attaching: dict[str, asyncio.Task[c.CachedHandle]] = {}

    @property
    def base_url(self) -> Optional[str]:
        return self._base_url

    async def aclose(self) -> None:
        """Closes the pooled connections. The client stays usable."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------ control plane

    async def attach(self, name: str, sandbox_class: Optional[str] = None, *, network: Optional[str] = None,
                     image: Optional[str] = None, egress: Optional[Mapping[str, Any]] = None) -> SandboxHandle:
        c.check_name(name)
        entry = await self._attach_now(name, sandbox_class or "default", network, image,
                                        dict(egress) if c.egress_active(egress) else None)
        return c.copy_handle(entry.handle)

    async def get_network(self, name: str) -> dict[str, Any]:
        """The sandbox's egress policy in force: ``{"mode", "egress": {"allow", "deny"}}``."""
        return c.to_network_policy(await self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/network"), _read_json))

    async def set_network(self, name: str, policy: Mapping[str, Any]) -> dict[str, Any]:
        """Replaces its egress policy (``{"allow": [...], "deny": [...]}``; ``{}`` removes it), for new
        connections at once; answers the policy now in force."""
        body = await self._data(name, lambda ep: c.json_spec("PUT", f"{ep}/network", dict(policy)), _read_json)
        cur = self._handles.get(name)
        if cur is not None:
            cur.egress = dict(policy) if c.egress_active(policy) else None
        return c.to_network_policy(body)

    async def network_log(self, name: str) -> builtins.list[dict[str, Any]]:
        """Its recent egress events, oldest first: refused connections, DNS answers and refusals."""
        return c.to_egress_events(await self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/network/log"), _read_json))

    async def get(self, name: str) -> SandboxRecord:
        c.check_name(name)
        return c.to_record(await self._control("GET", f"/v1/sandboxes/{c.q(name)}", None, _read_json))

    async def list(self) -> builtins.list[SandboxRecord]:
        body = await self._control("GET", "/v1/sandboxes", None, _read_json)
        return [c.to_record(r) for r in c.to_records(body, "sandboxes", "list")]

    async def images(self) -> builtins.list[ImageInfo]:
        body = await self._control("GET", "/v1/images", None, _read_json)
        return [c.to_image(r) for r in c.to_records(body, "images", "images")]

    async def stop(self, name: str) -> None:
        c.check_name(name)
        self._forget(name)
        await self._control("POST", f"/v1/sandboxes/{c.q(name)}/stop", None, _discard)
        self._forget(name)

    async def delete(self, name: str) -> None:
        c.check_name(name)
        self._forget(name)
        await self._control("DELETE", f"/v1/sandboxes/{c.q(name)}", None, _discard)
        self._forget(name)

    async def snapshot(self, name: str, image: str) -> SnapshotInfo:
        c.check_image(image)
        body = await self._data(name, lambda ep: c.json_spec("POST", f"{ep}/snapshot", {"image": image}), _read_json)
        return c.to_snapshot(body)

    async def checkpoint(self, name: str, *, keep_running: Optional[bool] = None) -> CheckpointInfo:
        if keep_running is not None and not isinstance(keep_running, bool):
            raise TypeError("keep_running: expected a bool")
        req = {} if keep_running is None else {"keepRunning": keep_running}
        body = await self._data(name, lambda ep: c.json_spec("POST", f"{ep}/checkpoint", req), _read_json)
        return c.to_checkpoint(body)

    async def fork(self, name: str, new_name: str) -> SandboxHandle:
        c.check_name(new_name)
        body = await self._data(name, lambda ep: c.json_spec("POST", f"{ep}/fork", {"name": new_name}), _read_json)
        handle = c.to_handle(body)
        self._handles[new_name] = c.CachedHandle(handle, handle.sandbox_class, handle.network, handle.image,
                                                 c.refresh_time(handle.expires_at, time.time(), None))
        return c.copy_handle(handle)

    # ------------------------------------------------------------ commands

    async def exec(self, name: str, command: Command, *, cwd: Optional[str] = None, env: Env = None,
                   user: Optional[str] = None, timeout_ms: Optional[float] = None) -> ExecResult:
        body = c.exec_body(command, cwd, env, user, timeout_ms, self._timeout)
        res = await self._data(name, lambda ep: c.json_spec("POST", f"{ep}/exec", body), _read_json)
        return c.to_exec_result(res)

    async def exec_combined(self, name: str, command: str, timeout_ms: Optional[float] = None) -> CombinedResult:
        t = timeout_ms if timeout_ms and timeout_ms > 0 else max(1, int(self._timeout * 1000) - 1000)
        r = await self.run(name, c.combined_command(command), timeout_ms=t)
        return CombinedResult(output=r.stdout, exit_code=r.exit_code if r.exit_code is not None else -1, truncated=False)

    async def run(self, name: str, command: Command, *, cwd: Optional[str] = None, env: Env = None,
                  user: Optional[str] = None, stdin: bool = False, pty: Pty = None,
                  on_output: Optional[Callable[[ProcessOutput], Any]] = None, timeout_ms: Optional[float] = None,
                  interval_ms: Optional[float] = None) -> RunResult:
        """As :meth:`SandboxClient.run`. Cancelling the task kills the process.

        ``on_output`` may be a coroutine function: each call is awaited
        before more output is read.
        """
        del interval_ms
        proc = await self.spawn(name, command, cwd=cwd, env=env, user=user, stdin=stdin, lossless=True, pty=pty)
        pid = proc.process_id
        stream = self.stream(name, pid)
        run = RunState(proc, stream._state, on_output)
        ended: Optional[str] = None
        kill_failed: Optional[BaseException] = None
        if timeout_ms is not None and timeout_ms >= 0:
            stream._deadline = time.monotonic() + timeout_ms / 1000
        try:
            try:
                async for item in stream._iterate():
                    if isinstance(item, _Tick):
                        if ended is not None:
                            break
                        ended = "timeout"
                        kill_failed = await self._kill_quietly(name, pid)
                        stream._deadline = time.monotonic() + c.RUN_DRAIN_S
                        continue
                    run.add(item)
                    await _settle(run)
            except SandboxRequestError:
                if ended is None:
                    raise
            finally:
                await stream.aclose()
            if kill_failed is not None:
                raise kill_failed
        except BaseException as err:
            if not isinstance(err, SandboxUnavailableError):
                await self._reap(name, pid)
            raise
        await self._reap(name, pid)
        result = run.result(ended == "timeout", ended is not None)
        await _settle(run)
        return result

    async def spawn(self, name: str, command: Command, *, cwd: Optional[str] = None, env: Env = None,
                    user: Optional[str] = None, stdin: bool = False, lossless: bool = False,
                    pty: Pty = None) -> ProcessStatus:
        body = c.spawn_body(command, cwd, env, user, stdin, lossless, pty)
        return c.to_status(await self._data(name, lambda ep: c.json_spec("POST", f"{ep}/processes", body), _read_json))

    async def poll(self, name: str, process_id: str, *, stdout_from: int = 0, stderr_from: int = 0,
                   wait_ms: float = 0) -> ProcessOutput:
        pid = c.check_process_id(process_id)
        query = c.poll_query(stdout_from, stderr_from, wait_ms, max(0, int(self._timeout * 1000) - 1000))
        body = await self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/processes/{pid}?{query}"), _read_json)
        return c.to_output(body)

    async def processes(self, name: str) -> builtins.list[ProcessStatus]:
        body = await self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/processes"), _read_json)
        return [c.to_status(r) for r in c.to_records(body, "processes", "processes")]

    async def signal(self, name: str, process_id: str, signal: Signal = "TERM") -> None:
        pid = c.check_process_id(process_id)
        sig = c.check_signal(signal)
        await self._data(name, lambda ep: c.json_spec("POST", f"{ep}/processes/{pid}/signal", {"signal": sig}), _discard)

    async def kill(self, name: str, process_id: str) -> None:
        pid = c.check_process_id(process_id)
        await self._data(name, lambda ep: c.bare_spec("DELETE", f"{ep}/processes/{pid}"), _discard)

    async def stdin(self, name: str, process_id: str, data: Union[str, bytes], *, close: bool = False) -> None:
        pid = c.check_process_id(process_id)
        raw = c.to_bytes(data)
        query = "?close=true" if close else ""
        await self._data(name, lambda ep: c.bytes_spec("POST", f"{ep}/processes/{pid}/stdin{query}", raw), _discard)

    async def resize(self, name: str, process_id: str, cols: int, rows: int) -> None:
        pid = c.check_process_id(process_id)
        size = c.check_pty((cols, rows))
        await self._data(name, lambda ep: c.json_spec("POST", f"{ep}/processes/{pid}/resize", size), _discard)

    def stream(self, name: str, process_id: str, *, stdout_from: int = 0, stderr_from: int = 0,
               reconnect: bool = True) -> AsyncProcessStream:
        """As :meth:`SandboxClient.stream`; iterate it with ``async for``."""
        c.check_name(name)
        pid = c.check_process_id(process_id)
        so, se = c.check_offset(stdout_from), c.check_offset(stderr_from)
        if not isinstance(reconnect, bool):
            raise TypeError("reconnect: expected a bool")

        async def open_(so: int, se: int) -> AsyncResponse:
            query = urlencode({"stdoutFrom": str(so), "stderrFrom": str(se)})

            def build(ep: str) -> c.RequestSpec:
                spec = c.bare_spec("GET", f"{ep}/processes/{pid}/stream?{query}")
                spec.untimed_body = True
                spec.accept = f"{c.STREAM_TYPE}, application/json"
                return spec

            return await self._data(name, build, _read_stream)

        return AsyncProcessStream(open_, so, se, reconnect)

    # ------------------------------------------------------------ files

    async def read_file(self, name: str, path: str) -> str:
        return (await self.read_file_bytes(name, path)).decode("utf-8", "replace")

    async def read_file_bytes(self, name: str, path: str) -> bytes:
        query = c.path_query(path)
        return await self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/files?{query}"), _read_bytes)

    async def write_file(self, name: str, path: str, contents: str) -> None:
        await self.write_file_bytes(name, path, contents.encode("utf-8"))

    async def write_file_bytes(self, name: str, path: str, contents: Union[bytes, bytearray, memoryview]) -> None:
        query = c.path_query(path)
        raw = c.to_bytes(contents)
        await self._data(name, lambda ep: c.bytes_spec("PUT", f"{ep}/files?{query}", raw), _discard)

    async def list_dir(self, name: str, path: str = ".") -> builtins.list[DirEntry]:
        query = c.path_query(path)
        body = await self._data(name, lambda ep: c.bare_spec("GET", f"{ep}/files/list?{query}"), _read_json)
        return c.to_entries(body)

    async def grep(self, name: str, pattern: str, path: str = ".") -> builtins.list[GrepMatch]:
        return c.grep_result(await self.exec(name, c.grep_command(pattern, path)))

    # ------------------------------------------------------------ internals

    async def _kill_quietly(self, name: str, pid: str) -> Optional[BaseException]:
        try:
            await self.signal(name, pid, "KILL")
        except SandboxRequestError:
            pass
        except Exception as err:  # noqa: BLE001 - raised once the run has its result
            return err
        return None

    async def _reap(self, name: str, pid: str) -> None:
        try:
            await self.kill(name, pid)
        except Exception:  # noqa: BLE001 - a failed clean-up must not hide the result
            pass

    async def _control(self, method: str, path: str, body: object, read: Reader[T]) -> T:
        if self._token is None:
            raise c.no_token()
        if self._base_url is None:
            raise c.no_base_url()
        url = self._base_url + path
        spec = c.RequestSpec(method, url) if body is None else c.json_spec(method, url, body)
        spec.headers["Authorization"] = f"Bearer {self._token}"
        return await self._call(spec, read)

    async def _data(self, name: str, build: Callable[[str], c.RequestSpec], read: Reader[T]) -> T:
        c.check_name(name)
        first = await self._handle(name)
        try:
            return await self._call(c.with_headers(build(first.handle.endpoint), first.handle.headers), read)
        except SandboxRequestError as err:
            if err.status != 401:
                raise
        second = await self._handle(name, failed=first)
        return await self._call(c.with_headers(build(second.handle.endpoint), second.handle.headers), read)

    async def _handle(self, name: str, failed: Optional[c.CachedHandle] = None) -> c.CachedHandle:
        cur = self._handles.get(name)
        if cur is not None and cur is not failed and time.time() < cur.refresh_at:
            return cur
        if cur is not None and cur is failed:
            del self._handles[name]
        # Concurrent callers share one attach.
        task = self._attaching.get(name)
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            was = cur or failed
            task = asyncio.ensure_future(self._attach_now(
                name, was.sandbox_class if was else "default", was.network if was else None,
                was.image if was else None, was.egress if was else None))
            self._attaching[name] = task

            def done(t: asyncio.Task[c.CachedHandle], name: str = name) -> None:
                if self._attaching.get(name) is t:
                    del self._attaching[name]
                if not t.cancelled():
                    t.exception()  # retrieved: each waiter raises it itself

            task.add_done_callback(done)
        # Shielded: one caller's cancellation does not fail the others' attach.
        return await asyncio.shield(task)

    async def _attach_now(self, name: str, sandbox_class: str, network: Optional[str],
                          image: Optional[str], egress: Optional[dict[str, Any]] = None) -> c.CachedHandle:
        generation = self._generation.get(name, 0)
        req: dict[str, Any] = {"class": sandbox_class}
        if egress:
            req["egress"] = egress
        if network:
            req["network"] = network
        if image is not None:
            req["image"] = image

        async def read(res: AsyncResponse) -> tuple[Any, float, Optional[str]]:
            return await _read_json(res), time.time(), res.header("date")

        body, received, server_date = await self._control("POST", f"/v1/sandboxes/{c.q(name)}/attach", req, read)
        handle = c.to_handle(body)
        entry = c.CachedHandle(handle, sandbox_class, handle.network or network, handle.image or image,
                               c.refresh_time(handle.expires_at, received, server_date), egress)
        if self._generation.get(name, 0) == generation:
            self._handles[name] = entry
        return entry

    def _forget(self, name: str) -> None:
        self._handles.pop(name, None)
        self._attaching.pop(name, None)
        self._generation[name] = self._generation.get(name, 0) + 1

    async def _call(self, spec: c.RequestSpec, read: Reader[T]) -> T:
        res: Optional[AsyncResponse] = None
        try:
            res = await self._http.request(spec, self._timeout)
            if not 200 <= res.status < 300:
                raise await _error_of(res)
            out = await read(res)
            if not spec.untimed_body:
                res.close()
            return out
        except SandboxRequestError:
            if res is not None:
                res.close()
            raise
        except (OSError, ProtocolError, ValueError, asyncio.TimeoutError) as err:
            if res is not None:
                res.close()
            timed_out = isinstance(err, (TimeoutError, asyncio.TimeoutError))
            why = f"no answer within {int(self._timeout * 1000)} ms" if timed_out else _describe(err)
            raise SandboxUnavailableError(f"{spec.method} {c.redact(spec.url)}: {why}", err) from err
        except BaseException:
            if res is not None:
                res.close()
            raise


async def _settle(run: RunState) -> None:
    """Awaits what on_output returned, when it is awaitable (a coroutine function's)."""
    pending, run.pending = run.pending, []
    for p in pending:
        if inspect.isawaitable(p):
            await p


async def _read_json(res: AsyncResponse) -> Any:
    try:
        data = await res.read_all(c.MAX_JSON_BYTES)
    except BodyTooLarge:
        raise c.bad_response(f"a JSON answer over {c.MAX_JSON_BYTES} bytes") from None
    return c.parse_json(data, res.status)


async def _discard(res: AsyncResponse) -> None:
    try:
        await res.read_all(c.MAX_JSON_BYTES)
    except BodyTooLarge:
        pass


async def _read_bytes(res: AsyncResponse) -> bytes:
    return await res.read_all()


async def _read_stream(res: AsyncResponse) -> AsyncResponse:
    ctype = (res.header("content-type") or "").split(";")[0].strip().lower()
    if ctype != c.STREAM_TYPE:
        res.close()
        raise c.bad_response(f"a process stream answered with Content-Type {ctype or '(none)'}")
    return res


async def _error_of(res: AsyncResponse) -> SandboxRequestError:
    try:
        body = await res.read_all(c.MAX_ERROR_BYTES)
    except (BodyTooLarge, OSError, ProtocolError, asyncio.TimeoutError):
        body = b""
    return c.request_error(res.status, res.reason, body)


class AsyncProcessStream:
    """As :class:`~sandboxd.client.ProcessStream`, for ``async for``; ``aclose()`` ends it."""

    def __init__(self, open_: Callable[[int, int], Awaitable[AsyncResponse]], stdout_from: int,
                 stderr_from: int, reconnect: bool) -> None:
        self._open = open_
        self._state = StreamState(stdout_from, stderr_from)
        self._reconnect = reconnect
        self._iterated = False
        self._res: Optional[AsyncResponse] = None
        self._closed = False
        self._deadline: Optional[float] = None
        self._gen: Optional[AsyncIterator[Union[ProcessChunk, _Tick]]] = None

    @property
    def stdout_next(self) -> int:
        return self._state.stdout_next

    @property
    def stderr_next(self) -> int:
        return self._state.stderr_next

    @property
    def start(self) -> Optional[StreamStart]:
        return self._state.start

    @property
    def exit(self) -> Optional[StreamExit]:
        return self._state.exit

    def __aiter__(self) -> AsyncIterator[ProcessChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[ProcessChunk]:
        async for item in self._iterate():
            if isinstance(item, ProcessChunk):
                yield item

    async def __aenter__(self) -> AsyncProcessStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        res, self._res = self._res, None
        if res is not None:
            res.close()
        gen, self._gen = self._gen, None
        if gen is not None:
            await gen.aclose()  # type: ignore[attr-defined]

    async def _wait(self, res: AsyncResponse, waiting_since: float) -> Union[bytes, _Tick]:
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
                return await res.read_some(timeout)
            except (TimeoutError, asyncio.TimeoutError):
                continue

    def _iterate(self) -> AsyncIterator[Union[ProcessChunk, _Tick]]:
        if self._iterated:
            raise TypeError("an AsyncProcessStream can be iterated only once")
        self._iterated = True
        self._gen = self._run()
        return self._gen

    async def _run(self) -> AsyncIterator[Union[ProcessChunk, _Tick]]:
        st = self._state
        progress_at = time.monotonic()
        backoff = BACKOFF_FIRST_S
        connected = False
        try:
            while not self._closed:
                fatal: Optional[BaseException] = None
                try:
                    res = await self._open(st.stdout_next, st.stderr_next)
                    self._res = res
                    connected = True
                    parser = FrameParser()
                    waiting_since = time.monotonic()
                    while True:
                        frame = parser.next()
                        if frame is None:
                            data = await self._wait(res, waiting_since)
                            if isinstance(data, _Tick):
                                yield data
                                continue
                            if not data:
                                break
                            parser.push(data)
                            continue
                        waiting_since = time.monotonic()
                        if frame.type != FRAME_START:
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
                if not self._reconnect or time.monotonic() - progress_at >= RECONNECT_WINDOW_S:
                    raise SandboxUnavailableError(f"process stream: {_describe(cause)}", cause)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
        finally:
            self._closed = True
            if self._res is not None:
                self._res.close()
                self._res = None
