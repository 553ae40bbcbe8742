"""attach, get, list, stop, delete, images, snapshot, fork."""

from __future__ import annotations

import subprocess

import pytest

from conftest import BIN, CLASS, IMAGES, unique
from sandboxd import SandboxHandle, SandboxRecord, SandboxRequestError


def test_attach_get_list_stop_delete(client):
    name = unique("life")
    h = client.attach(name)
    assert isinstance(h, SandboxHandle)
    assert (h.name, h.state, h.sandbox_class) == (name, "running", "default")
    assert h.endpoint.startswith("http://127.0.0.1:") and h.headers and h.expires_at
    assert h.image == "tiny"
    rec = client.get(name)
    assert isinstance(rec, SandboxRecord) and rec.state == "running" and rec.created_at
    assert name in {r.name for r in client.list()}
    client.write_file(name, "kept", "yes")
    client.stop(name)
    assert client.get(name).state in ("suspended", "stopped")
    assert client.read_file(name, "kept") == "yes", "the next use resumes it, files intact"
    client.delete(name)
    with pytest.raises(SandboxRequestError) as e:
        client.get(name)
    assert e.value.status == 404
    assert name not in {r.name for r in client.list()}


def test_images(client):
    names = {i.name: i for i in client.images()}
    assert "tiny" in names
    assert names["tiny"].size_bytes > 0 and names["tiny"].layers >= 1 and names["tiny"].source


def test_snapshot_becomes_an_image(client, daemon):
    src, dst = unique("snap-src"), unique("snap-dst")
    image = unique("img").lower().replace(".", "-")[:60]
    client.write_file(src, "state.txt", "from the snapshot")
    info = client.snapshot(src, image)
    try:
        assert info.image == image and info.size_bytes > 0 and info.created_at
        assert image in {i.name for i in client.images()}
        with pytest.raises(SandboxRequestError) as e:
            client.snapshot(src, image)
        assert (e.value.status, e.value.code) == (409, "already_exists")
        h = client.attach(dst, image=image)
        assert h.image == image
        assert client.read_file(dst, "state.txt") == "from the snapshot"
    finally:
        for n in (src, dst):
            try:
                client.delete(n)
            except SandboxRequestError:
                pass
        subprocess.run([BIN, "image", "rm", image, "--images", IMAGES, "--state", daemon.state],
                       capture_output=True, check=False)
    assert image not in {i.name for i in client.images()}


def test_bad_image_name_is_refused_before_sending(client, sandbox):
    with pytest.raises(SandboxRequestError) as e:
        client.snapshot(sandbox, "Not An Image")
    assert (e.value.status, e.value.code) == (400, "invalid_argument")


def test_fork(client):
    src, dst = unique("fork-src"), unique("fork-dst")
    # network "none": a sandbox of its own, never one of the warm pool's
    # (whose fork the daemon refuses today with 400 "network: nat or none").
    h = client.attach(src, network="none")
    assert h.network == "none"
    client.write_file(src, "f.txt", "forked")
    try:
        if CLASS == "gvisor":
            # gvisor forks from the last checkpoint: none yet is a 409.
            with pytest.raises(SandboxRequestError) as e:
                client.fork(src, dst)
            assert (e.value.status, e.value.code) == (409, "no_checkpoint")
            info = client.checkpoint(src)
            assert info.running is True and info.size_bytes > 0
        h = client.fork(src, dst)
        assert (h.name, h.network) == (dst, "none")
        assert client.read_file(dst, "f.txt") == "forked"
        client.write_file(dst, "f.txt", "changed")
        assert client.read_file(src, "f.txt") == "forked", "each has its own files"
    finally:
        for n in (dst, src):
            try:
                client.delete(n)
            except SandboxRequestError:
                pass


@pytest.mark.skipif(CLASS != "ns", reason="checkpoints are gvisor's")
def test_checkpoint_under_ns_is_unsupported(client, sandbox):
    with pytest.raises(SandboxRequestError) as e:
        client.checkpoint(sandbox, keep_running=True)
    assert (e.value.status, e.value.code) == (409, "unsupported_class")
    with pytest.raises(TypeError):
        client.checkpoint(sandbox, keep_running="yes")  # type: ignore[arg-type]
