"""The README's first example, as written: zero-argument construction from
the environment, python3 in a sandbox (the debian image)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import IMAGES, unique
from sandboxd import SandboxClient


@pytest.mark.skipif(not Path(IMAGES, "debian", "image.json").exists(), reason="no 'debian' image (python3)")
def test_exec_python3_from_the_environment(token, monkeypatch, client):
    monkeypatch.delenv("ASTRO_AUTHZ_TOKEN", raising=False)
    monkeypatch.setenv("SANDBOXD_TOKEN", token)
    name = unique("thread")
    sandboxes = SandboxClient()
    sandboxes.attach(name, image="debian")
    result = sandboxes.exec(name, command=["python3", "-c", "print(2 + 2)"])
    assert result.stdout == "4\n"
    client.delete(name)
