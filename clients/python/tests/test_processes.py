"""spawn, poll, processes, stdin, signal, kill, stream, and run over the stream."""

from __future__ import annotations

import hashlib

import pytest

from sandboxd import ProcessChunk, RunResult, SandboxRequestError


def wait_exited(client, name, pid):
    out_from = err_from = 0
    out, err = [], []
    while True:
        p = client.poll(name, pid, stdout_from=out_from, stderr_from=err_from, wait_ms=5000)
        out.append(p.stdout)
        err.append(p.stderr)
        out_from, err_from = p.stdout_next, p.stderr_next
        if p.state == "exited":
            return p, "".join(out), "".join(err)


def test_spawn_then_poll_to_exit(client, sandbox):
    proc = client.spawn(sandbox, ["/bin/sh", "-c", "echo out; echo err >&2; exit 7"])
    assert proc.process_id and proc.command[0] == "/bin/sh"
    last, out, err = wait_exited(client, sandbox, proc.process_id)
    assert (last.exit_code, out, err) == (7, "out\n", "err\n")
    assert last.stdout_next == 4 and last.stderr_next == 4
    assert last.stdout_dropped == 0 and last.exited_at
    client.kill(sandbox, proc.process_id)


def test_processes_lists_and_kill_forgets(client, sandbox):
    proc = client.spawn(sandbox, ["sleep", "30"])
    running = {p.process_id: p for p in client.processes(sandbox)}
    assert running[proc.process_id].state == "running"
    client.kill(sandbox, proc.process_id)
    assert proc.process_id not in {p.process_id for p in client.processes(sandbox)}
    with pytest.raises(SandboxRequestError) as e:
        client.poll(sandbox, proc.process_id)
    assert (e.value.status, e.value.code) == (404, "process_not_found")


def test_signal_reaches_the_process_group(client, sandbox):
    # The shell waits on a child: TERM to the group ends both.
    proc = client.spawn(sandbox, ["/bin/sh", "-c", "trap 'exit 42' TERM; sleep 30 & echo ready; wait"])
    # The trap must be set before the signal: wait for the shell to say so.
    seen = ""
    while "ready" not in seen:
        p = client.poll(sandbox, proc.process_id, wait_ms=5000)
        assert p.state == "running", p
        seen = p.stdout
    client.signal(sandbox, proc.process_id, "TERM")
    last, _, _ = wait_exited(client, sandbox, proc.process_id)
    assert last.exit_code == 42
    client.kill(sandbox, proc.process_id)


def test_kill_signal(client, sandbox):
    proc = client.spawn(sandbox, ["sleep", "30"])
    client.signal(sandbox, proc.process_id, "KILL")
    last, _, _ = wait_exited(client, sandbox, proc.process_id)
    assert last.exit_code == 137
    client.kill(sandbox, proc.process_id)


def test_unknown_signal_is_refused_before_sending(client, sandbox):
    with pytest.raises(SandboxRequestError) as e:
        client.signal(sandbox, "p1-0", "BOGUS")  # type: ignore[arg-type]
    assert (e.value.status, e.value.code) == (400, "invalid_argument")


def test_stdin_and_stream(client, sandbox):
    proc = client.spawn(sandbox, ["cat"], stdin=True, lossless=True)
    client.stdin(sandbox, proc.process_id, "hello\n")
    client.stdin(sandbox, proc.process_id, b"\x00\xff\x01", close=True)
    with client.stream(sandbox, proc.process_id) as stream:
        chunks = list(stream)
    assert all(isinstance(ch, ProcessChunk) and ch.stream == "stdout" for ch in chunks)
    assert b"".join(ch.data for ch in chunks) == b"hello\n\x00\xff\x01"
    assert stream.exit is not None and stream.exit.exit_code == 0
    assert stream.exit.stdout_next == 9 == stream.stdout_next
    assert stream.start is not None and stream.start.stdout_from == 0
    client.kill(sandbox, proc.process_id)


def test_stdin_without_a_pipe_is_409(client, sandbox):
    proc = client.spawn(sandbox, ["sleep", "30"])
    with pytest.raises(SandboxRequestError) as e:
        client.stdin(sandbox, proc.process_id, "x")
    assert (e.value.status, e.value.code) == (409, "invalid_state")
    client.kill(sandbox, proc.process_id)


def test_stream_from_an_offset_and_interleaved(client, sandbox):
    proc = client.spawn(sandbox, ["/bin/sh", "-c", "printf abcdef; printf XY >&2"], lossless=True)
    # An offset past what was written so far is a 400: start once it exited.
    wait_exited(client, sandbox, proc.process_id)
    with client.stream(sandbox, proc.process_id, stdout_from=2) as stream:
        got = {"stdout": b"", "stderr": b""}
        for ch in stream:
            got[ch.stream] += ch.data
    assert got == {"stdout": b"cdef", "stderr": b"XY"}
    client.kill(sandbox, proc.process_id)


def test_run_streams_a_burst_over_1_mib_whole(client, sandbox):
    client.exec(sandbox, ["/bin/sh", "-c", "head -c 1500000 /dev/urandom | base64 > burst.txt"])
    want = client.exec(sandbox, ["sha256sum", "burst.txt"]).stdout.split()[0]
    size = int(client.exec(sandbox, ["/bin/sh", "-c", "wc -c < burst.txt"]).stdout)
    assert size > 1024 * 1024
    pieces: list[str] = []
    r = client.run(sandbox, ["cat", "burst.txt"], on_output=lambda o: pieces.append(o.stdout))
    assert isinstance(r, RunResult)
    assert len(pieces) > 1, "on_output is called per frame, not once at the end"
    assert hashlib.sha256("".join(pieces).encode()).hexdigest() == want
    assert hashlib.sha256(r.stdout.encode()).hexdigest() == want
    assert (r.exit_code, r.stdout_next, r.stdout_dropped, r.killed, r.timed_out) == (0, size, 0, False, False)
    # run reaps its process.
    assert r.process_id not in {p.process_id for p in client.processes(sandbox)}


def test_run_calls_on_output_while_the_process_runs(client, sandbox):
    # The process waits for a file that only the callback creates: a run that
    # handed output over at the end alone would hit its timeout instead.
    client.exec(sandbox, ["rm", "-f", "go"])

    def on_output(o):
        if "ready" in o.stdout:
            client.write_file(sandbox, "go", "")

    r = client.run(sandbox, ["/bin/sh", "-c", "echo ready; while [ ! -e go ]; do sleep 0.05; done; echo done"],
                   on_output=on_output, timeout_ms=20000)
    assert r.timed_out is False
    assert r.stdout == "ready\ndone\n"


def test_run_timeout_kills(client, sandbox):
    r = client.run(sandbox, ["/bin/sh", "-c", "echo started; sleep 30"], timeout_ms=500)
    assert r.timed_out is True and r.killed is True
    assert r.stdout == "started\n"
    assert r.exit_code == 137


def test_run_decodes_utf8_split_across_frames(client, sandbox):
    # 4-byte characters written one byte at a time still decode whole.
    r = client.run(sandbox, ["/bin/sh", "-c", r"for b in '\360' '\237' '\230' '\200'; do printf $b; sleep 0.05; done"])
    assert r.stdout == "\U0001f600"


def test_leaving_a_stream_early_and_closing_it_from_another_thread(client, sandbox):
    import threading

    proc = client.spawn(sandbox, ["/bin/sh", "-c", "echo first; sleep 30"], lossless=True)
    with client.stream(sandbox, proc.process_id) as stream:
        for ch in stream:
            assert ch.data == b"first\n"
            break
    assert stream.exit is None
    # A reader blocked on a quiet process is woken by close() from elsewhere.
    other = client.stream(sandbox, proc.process_id)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.extend(other))
    reader.start()
    while other.start is None and reader.is_alive():  # connected: its start frame was read
        threading.Event().wait(0.02)
    other.close()
    reader.join(timeout=20)
    assert not reader.is_alive(), "close() did not wake the reader"
    assert [c.data for c in got] == [b"first\n"]
    client.kill(sandbox, proc.process_id)


def test_pty_and_resize(client, sandbox):
    proc = client.spawn(sandbox, ["/bin/sh", "-i"], pty=(80, 24))
    assert proc.pty is True
    with client.stream(sandbox, proc.process_id) as screen:
        seen = b""
        client.stdin(sandbox, proc.process_id, "stty size\n")
        chunks = iter(screen)
        while b"24 80" not in seen:
            seen += next(chunks).data
        client.resize(sandbox, proc.process_id, 120, 40)
        client.stdin(sandbox, proc.process_id, "stty size; exit\n")
        for ch in chunks:
            seen += ch.data
    assert b"40 120" in seen
    assert screen.exit is not None and screen.exit.exit_code == 0
    with pytest.raises(SandboxRequestError) as e:
        client.spawn(sandbox, ["true"], pty=(0, 24))
    assert (e.value.status, e.value.code) == (400, "invalid_argument")
    client.kill(sandbox, proc.process_id)
