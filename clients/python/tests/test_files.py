"""Files: binary round trips, text, listings, grep, errors."""

from __future__ import annotations

import os

import pytest

from sandboxd import DirEntry, GrepMatch, SandboxRequestError


def test_binary_round_trip(client, sandbox):
    data = bytes(range(256)) * 64 + os.urandom(300_000)
    client.write_file_bytes(sandbox, "bin/deep/data.bin", data)
    assert client.read_file_bytes(sandbox, "/workspace/bin/deep/data.bin") == data
    size = client.exec(sandbox, ["/bin/sh", "-c", "wc -c < bin/deep/data.bin"]).stdout
    assert int(size) == len(data)


def test_large_file_round_trip(client, sandbox, token):
    import asyncio

    from sandboxd import AsyncSandboxClient

    data = os.urandom(6 * 1024 * 1024)
    client.write_file_bytes(sandbox, "large.bin", data)
    want = client.exec(sandbox, ["sha256sum", "large.bin"]).stdout.split()[0]
    import hashlib

    assert hashlib.sha256(data).hexdigest() == want
    assert client.read_file_bytes(sandbox, "large.bin") == data

    async def main():
        async with AsyncSandboxClient(token=token) as ac:
            await ac.write_file_bytes(sandbox, "large2.bin", data[::-1])
            assert await ac.read_file_bytes(sandbox, "large2.bin") == data[::-1]
    asyncio.run(main())


def test_empty_file(client, sandbox):
    client.write_file_bytes(sandbox, "empty", b"")
    assert client.read_file_bytes(sandbox, "empty") == b""


def test_text_round_trip(client, sandbox):
    text = "print('hi')\n# gr\u00fc\u00dfe \u2713\n"
    client.write_file(sandbox, "/workspace/main.py", text)
    assert client.read_file(sandbox, "main.py") == text


def test_list_dir(client, sandbox):
    client.write_file(sandbox, "listing/a.txt", "a")
    client.write_file(sandbox, "listing/sub/b.txt", "b")
    entries = sorted(client.list_dir(sandbox, "listing"), key=lambda e: e.name)
    assert entries == [DirEntry("a.txt", False), DirEntry("sub", True)]
    assert any(e.name == "listing" and e.is_directory for e in client.list_dir(sandbox))


def test_grep(client, sandbox):
    client.write_file(sandbox, "g/one.txt", "alpha\nTODO: first\n")
    client.write_file(sandbox, "g/two.txt", "TODO: second\n")
    matches = sorted(client.grep(sandbox, "TODO", "g"), key=lambda m: m.path)
    assert matches == [GrepMatch("g/one.txt", 2, "TODO: first"), GrepMatch("g/two.txt", 1, "TODO: second")]
    assert client.grep(sandbox, "nothing-matches-this", "g") == []
    with pytest.raises(SandboxRequestError) as e:
        client.grep(sandbox, "x", "no/such/dir")
    assert e.value.status == 404


def test_unreadable_path_is_404(client, sandbox):
    for read in (client.read_file, client.read_file_bytes):
        with pytest.raises(SandboxRequestError) as e:
            read(sandbox, "/workspace/does/not/exist")
        assert (e.value.status, e.value.code) == (404, "file_not_found")


def test_empty_path_is_refused_before_sending(client, sandbox):
    with pytest.raises(SandboxRequestError) as e:
        client.read_file(sandbox, "")
    assert (e.value.status, e.value.code) == (400, "invalid_argument")
