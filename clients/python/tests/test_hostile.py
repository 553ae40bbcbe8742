"""Hostile answers are clear errors, never hangs: a scripted loopback server
(the real daemon does not send bad JSON or bad frames on demand)."""

from __future__ import annotations

import asyncio

import pytest

from scripted import (
    END_CHUNKS,
    ScriptedServer,
    chunk,
    exit_,
    frame,
    response,
    start,
    stream_head,
)
from sandboxd import AsyncSandboxClient, SandboxClient, SandboxRequestError, SandboxUnavailableError


@pytest.fixture
def server():
    s = ScriptedServer()
    yield s
    s.close()


@pytest.fixture
def client(server):
    with SandboxClient(token=server.token(), timeout_seconds=3) as c:
        yield c


def test_the_token_iss_is_the_url(server, client):
    assert client.base_url == server.url


def test_bad_json_is_502_invalid_response(server, client):
    server.script = lambda r: response(200, b"{not json")
    with pytest.raises(SandboxRequestError) as e:
        client.exec("sb", ["true"])
    assert (e.value.status, e.value.code) == (502, "invalid_response")
    server.script = lambda r: response(200, b'{"processes": "not a list"}')
    with pytest.raises(SandboxRequestError) as e:
        client.processes("sb")
    assert (e.value.status, e.value.code) == (502, "invalid_response")
    server.script = lambda r: response(200, b'{"no": "processId"}')
    with pytest.raises(SandboxRequestError) as e:
        client.spawn("sb", ["x"])
    assert e.value.code == "invalid_response"


def test_an_error_body_that_is_not_the_apis_keeps_the_status(server, client):
    server.script = lambda r: response(418, b"<html>teapot</html>", "text/html")
    with pytest.raises(SandboxRequestError) as e:
        client.exec("sb", ["true"])
    assert (e.value.status, e.value.code) == (418, "http_418")


def test_a_bad_attach_answer_is_502(server, client):
    import json

    for bad in ({"endpoint": "ftp://elsewhere", "headers": {}},
                {"endpoint": server.url, "headers": {"Authorization": "x\r\nInjected: 1"}},
                {"headers": {}}):
        server.attach_answer = response(200, json.dumps(bad).encode())
        with pytest.raises(SandboxRequestError) as e:
            client.exec("sb", ["true"])
        assert (e.value.status, e.value.code) == (502, "invalid_response")
    assert not any(r.path.endswith("/exec") for r in server.requests)


def test_garbage_http_is_unavailable(server, client):
    server.script = lambda r: b"SMTP ready\r\n\r\n"
    with pytest.raises(SandboxUnavailableError):
        client.exec("sb", ["true"])
    server.script = lambda r: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
    with pytest.raises(SandboxUnavailableError):
        client.exec("sb", ["true"])
    server.script = lambda r: [b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", "close"]
    with pytest.raises(SandboxUnavailableError):
        client.exec("sb", ["true"])
    server.script = lambda r: response(200, b"{}", extra="X-Pad: " + "a" * 70000 + "\r\n")
    with pytest.raises(SandboxUnavailableError):
        client.exec("sb", ["true"])


def test_no_answer_is_unavailable_after_the_timeout_and_sent_once(server):
    server.script = lambda r: [30.0]
    c = SandboxClient(token=server.token(), timeout_seconds=0.5)
    with pytest.raises(SandboxUnavailableError) as e:
        c.exec("sb", ["sleep", "1"])
    assert "no answer within 500 ms" in str(e.value)
    assert [r.path for r in server.requests].count("/v1/sandboxes/sb/exec") == 1


def test_a_body_that_never_ends_is_bounded_by_the_timeout(server):
    server.script = lambda r: [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{", 30.0]
    c = SandboxClient(token=server.token(), timeout_seconds=0.5)
    with pytest.raises(SandboxUnavailableError):
        c.exec("sb", ["true"])


def test_a_401_reattaches_once_then_raises(server, client):
    server.script = lambda r: response(401, b'{"error":{"code":"credential_stale","message":"gone"}}')
    with pytest.raises(SandboxRequestError) as e:
        client.exec("sb", ["true"])
    assert (e.value.status, e.value.code) == (401, "credential_stale")
    assert server.attaches == 2
    execs = [r for r in server.requests if r.path.endswith("/exec")]
    assert [r.headers["authorization"] for r in execs] == ["Bearer cred-1", "Bearer cred-2"]


def stream_of(*frames: bytes, end: bool = True):
    body = [stream_head(), *[chunk(f) for f in frames]]
    if end:
        body.append(END_CHUNKS)
    return body


def test_frames_split_at_every_byte_parse(server, client):
    data = start() + frame(2, "hello", 0) + frame(6) + frame(99, "unknown") + frame(3, "err", 0) + exit_(
        stdoutNext=5, stderrNext=3)
    server.script = lambda r: [stream_head(), *[chunk(data[i:i + 1]) for i in range(len(data))], END_CHUNKS]
    with client.stream("sb", "p1") as s:
        got = [(c.stream, c.offset, c.data) for c in s]
    assert got == [("stdout", 0, b"hello"), ("stderr", 0, b"err")]
    assert s.exit is not None and (s.exit.stdout_next, s.exit.stderr_next) == (5, 3)


def test_an_oversize_frame_is_502_not_retried(server, client):
    head = bytes([2, 0, 0, 0]) + (9 * 1024 * 1024).to_bytes(4, "big") + bytes(8)
    server.script = lambda r: [stream_head(), chunk(start()), chunk(head), 30.0]
    with pytest.raises(SandboxRequestError) as e:
        list(client.stream("sb", "p1"))
    assert (e.value.status, e.value.code) == (502, "invalid_response")
    assert sum(r.path.endswith("/stream") for r in server.requests) == 1


def test_a_start_frame_that_is_not_json_is_502(server, client):
    server.script = lambda r: stream_of(frame(1, "{nope"))
    with pytest.raises(SandboxRequestError) as e:
        list(client.stream("sb", "p1"))
    assert e.value.code == "invalid_response"


def test_a_stream_of_another_content_type_is_502(server, client):
    server.script = lambda r: response(200, b"{}")
    with pytest.raises(SandboxRequestError) as e:
        list(client.stream("sb", "p1"))
    assert e.value.code == "invalid_response"


def test_an_error_frame_is_raised_with_its_code(server, client):
    server.script = lambda r: stream_of(start(), frame(5, {"error": {"code": "process_not_found", "message": "gone"}}))
    with pytest.raises(SandboxRequestError) as e:
        list(client.stream("sb", "p1"))
    assert (e.value.status, e.value.code) == (404, "process_not_found")


def test_a_cut_body_is_resumed_from_the_next_offsets(server, client):
    answers = [
        stream_of(start(), frame(2, "abc", 0), end=False) + ["close"],
        # A server that sends again what was had: old bytes are skipped, not repeated.
        stream_of(start(stdoutFrom=3), frame(2, "ab", 0), frame(2, "bcdef", 1), exit_(stdoutNext=6, stderrNext=0)),
    ]
    server.script = lambda r: answers.pop(0)
    with client.stream("sb", "p1") as s:
        chunks = [(c.offset, c.data) for c in s]
    assert chunks == [(0, b"abc"), (3, b"def")]
    queries = [r.query for r in server.requests if r.path.endswith("/stream")]
    assert queries == ["stdoutFrom=0&stderrFrom=0", "stdoutFrom=3&stderrFrom=0"]


def test_no_reconnect_means_a_cut_is_unavailable(server, client):
    server.script = lambda r: stream_of(start(), frame(2, "ab", 0), end=False) + ["close"]
    with pytest.raises(SandboxUnavailableError):
        list(client.stream("sb", "p1", reconnect=False))


def test_run_decodes_utf8_split_across_frames_and_reaps(server, client):
    smile = "\U0001f600".encode()

    def script(r):
        if r.method == "POST" and r.path.endswith("/processes"):
            return response(200, b'{"processId":"p1","command":["x"],"state":"running","startedAt":"t"}')
        if r.path.endswith("/stream"):
            return stream_of(start(), *[frame(2, smile[i:i + 1], i) for i in range(4)], frame(3, "!", 0),
                             exit_(stdoutNext=4, stderrNext=1, exitCode=3))
        return response(204)

    server.script = script
    seen = []
    r = client.run("sb", ["x"], on_output=lambda o: seen.append((o.stdout, o.stderr)))
    assert r.stdout == "\U0001f600" and r.stderr == "!" and r.exit_code == 3
    assert seen == [("\U0001f600", ""), ("", "!")]
    spawned = [r for r in server.requests if r.path.endswith("/processes")]
    assert b'"lossless":true' in spawned[0].body
    assert any(r.method == "DELETE" and r.path.endswith("/processes/p1") for r in server.requests)


def test_async_hostile_answers(server):
    async def main():
        async with AsyncSandboxClient(token=server.token(), timeout_seconds=0.5) as ac:
            server.script = lambda r: response(200, b"[[[")
            with pytest.raises(SandboxRequestError) as e:
                await ac.exec("sb", ["true"])
            assert e.value.code == "invalid_response"
            head = bytes([2, 0, 0, 0]) + (9 * 1024 * 1024).to_bytes(4, "big") + bytes(8)
            server.script = lambda r: [stream_head(), chunk(start()), chunk(head), 30.0]
            with pytest.raises(SandboxRequestError) as e:
                async for _ in ac.stream("sb", "p1"):
                    pass
            assert e.value.code == "invalid_response"
            server.script = lambda r: [30.0]
            with pytest.raises(SandboxUnavailableError):
                await ac.list()
            server.script = lambda r: b"garbage\r\n\r\n"
            with pytest.raises(SandboxUnavailableError):
                await ac.images()
    asyncio.run(main())
