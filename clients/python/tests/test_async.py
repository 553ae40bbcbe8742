"""AsyncSandboxClient: the same core things, concurrently."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

from conftest import Spy, free_port, unique
from sandboxd import AsyncSandboxClient, ProcessChunk, SandboxRequestError, SandboxUnavailableError


def run(coro):
    return asyncio.run(coro)


def test_gathered_execs_share_one_attach(token, client):
    async def main():
        name = unique("async")
        async with AsyncSandboxClient(token=token) as ac:
            spy = Spy(ac)
            results = await asyncio.gather(
                *[ac.exec(name, ["/bin/sh", "-c", f"echo {i}; echo e{i} >&2; exit {i}"]) for i in range(6)]
            )
            assert [(r.exit_code, r.stdout, r.stderr) for r in results] == [
                (i, f"{i}\n", f"e{i}\n") for i in range(6)
            ]
            assert spy.attaches == 1, "concurrent first calls share one attach"
            assert [r.name for r in await ac.list()].count(name) == 1
            await ac.delete(name)
    run(main())


def test_async_exec_env_cwd_timeout(token, sandbox):
    async def main():
        async with AsyncSandboxClient(token=token) as ac:
            r = await ac.exec(sandbox, ["/bin/sh", "-c", 'echo "$X"; pwd'], env={"X": "y"}, cwd="/tmp")
            assert r.stdout == "y\n/tmp\n"
            r = await ac.exec(sandbox, ["sleep", "30"], timeout_ms=300)
            assert r.timed_out is True
    run(main())


def test_async_run_burst_and_concurrent_runs(token, sandbox, client):
    client.exec(sandbox, ["/bin/sh", "-c", "head -c 1200000 /dev/urandom | base64 > aburst.txt"])
    want = client.exec(sandbox, ["sha256sum", "aburst.txt"]).stdout.split()[0]

    async def main():
        async with AsyncSandboxClient(token=token) as ac:
            pieces: list[str] = []
            big, *small = await asyncio.gather(
                ac.run(sandbox, ["cat", "aburst.txt"], on_output=lambda o: pieces.append(o.stdout)),
                *[ac.run(sandbox, ["/bin/sh", "-c", f"echo run{i} >&2"]) for i in range(4)],
            )
            assert len(pieces) > 1
            assert hashlib.sha256("".join(pieces).encode()).hexdigest() == want
            assert hashlib.sha256(big.stdout.encode()).hexdigest() == want
            assert [s.stderr for s in small] == [f"run{i}\n" for i in range(4)]
            # A coroutine on_output is awaited before more output is read.
            seen: list[str] = []

            async def slow(o):
                await asyncio.sleep(0.01)
                seen.append(o.stdout)

            r = await ac.run(sandbox, ["/bin/sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.05; done"], on_output=slow)
            assert "".join(seen) == r.stdout == "1\n2\n3\n"
            r = await ac.run(sandbox, ["sleep", "30"], timeout_ms=300)
            assert r.timed_out and r.killed and r.exit_code == 137
    run(main())


def test_async_spawn_stdin_stream_kill(token, sandbox):
    async def main():
        async with AsyncSandboxClient(token=token) as ac:
            proc = await ac.spawn(sandbox, ["cat"], stdin=True, lossless=True)
            await ac.stdin(sandbox, proc.process_id, b"\x00binary\xff", close=True)
            stream = ac.stream(sandbox, proc.process_id)
            got = b""
            async for ch in stream:
                assert isinstance(ch, ProcessChunk)
                got += ch.data
            assert got == b"\x00binary\xff"
            assert stream.exit is not None and stream.exit.exit_code == 0
            await ac.kill(sandbox, proc.process_id)
            sleeper = await ac.spawn(sandbox, ["sleep", "30"])
            await ac.signal(sandbox, sleeper.process_id, "KILL")
            p = await ac.poll(sandbox, sleeper.process_id, wait_ms=5000)
            while p.state != "exited":
                p = await ac.poll(sandbox, sleeper.process_id, wait_ms=5000)
            assert p.exit_code == 137
            await ac.kill(sandbox, sleeper.process_id)
            assert sleeper.process_id not in {x.process_id for x in await ac.processes(sandbox)}
    run(main())


def test_async_files_concurrently(token, sandbox):
    blobs = {f"af/{i}.bin": os.urandom(50_000 + i) for i in range(5)}

    async def main():
        async with AsyncSandboxClient(token=token) as ac:
            await asyncio.gather(*[ac.write_file_bytes(sandbox, p, b) for p, b in blobs.items()])
            back = await asyncio.gather(*[ac.read_file_bytes(sandbox, p) for p in blobs])
            assert back == list(blobs.values())
            names = {e.name for e in await ac.list_dir(sandbox, "af")}
            assert names == {f"{i}.bin" for i in range(5)}
            with pytest.raises(SandboxRequestError) as e:
                await ac.read_file(sandbox, "af/missing")
            assert e.value.status == 404
    run(main())


def test_async_errors(token):
    async def main():
        async with AsyncSandboxClient(token=token) as ac:
            with pytest.raises(SandboxRequestError) as e:
                await ac.exec("bad name", ["true"])
            assert e.value.status == 400
            with pytest.raises(SandboxRequestError) as e:
                await ac.get(unique("missing"))
            assert (e.value.status, e.value.code) == (404, "sandbox_not_found")
        down = AsyncSandboxClient(token=token, base_url=f"http://127.0.0.1:{free_port()}")
        with pytest.raises(SandboxUnavailableError):
            await down.list()
    run(main())


def test_async_stale_credential_reattached_once(token, client):
    async def main():
        async with AsyncSandboxClient(token=token) as ac:
            spy = Spy(ac)
            name = unique("astale")
            await ac.write_file(name, "mark", "old")
            client.delete(name)
            r = await ac.exec(name, ["ls", "-A"])
            assert r.stdout == "" and spy.attaches == 2 and spy.unauthorized == 1
            await ac.delete(name)
    run(main())
