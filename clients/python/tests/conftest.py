"""The real sandboxd for the tests: started once per session, as
tests/integration/lib/daemon.mjs starts it, and torn down the same way.

``SANDBOXD_BIN`` (default ``<repo>/build/sandboxd``), ``SANDBOXD_IMAGES``
(default ``/var/lib/sandboxd/images``) and ``SANDBOXD_TEST_CLASS`` (``ns``
unless set) choose what runs. Tests talk to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import shutil
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator, Optional

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parent / "src"))

BIN = os.environ.get("SANDBOXD_BIN") or str(ROOT / "build" / "sandboxd")
IMAGES = os.environ.get("SANDBOXD_IMAGES") or "/var/lib/sandboxd/images"
CLASS = os.environ.get("SANDBOXD_TEST_CLASS") or "ns"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """One sandboxd process with its own state directory and port."""

    def __init__(self, args: Optional[list[str]] = None) -> None:
        self.state = tempfile.mkdtemp(prefix="sandboxd-py-")
        self.port = free_port()
        self.args = args or []
        self.minted: dict[str, str] = {}
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log_path = os.path.join(self.state, "daemon.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Daemon":
        args = [BIN, "serve", "--listen", f"127.0.0.1:{self.port}", "--state", self.state,
                "--images", IMAGES, "--default-image", "tiny"]
        if CLASS != "ns":
            args += ["--default-class", CLASS]
        args += self.args
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sandboxd exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sandboxd did not come up:\n{self.log()}")
            time.sleep(0.03)

    def log(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def token(self, deployment: str = "dep-py", account: str = "acct-py") -> str:
        self.minted[deployment] = account
        out = subprocess.run([BIN, "token", "--state", self.state, "--url", self.url, "--deployment", deployment,
                              "--account", account], check=True, capture_output=True, text=True)
        return out.stdout.strip().splitlines()[-1]

    def cli(self, *args: str) -> str:
        return subprocess.run([BIN, *args, "--state", self.state], check=True, capture_output=True,
                              text=True).stdout

    def _delete_all(self) -> None:
        for dep, acct in list(self.minted.items()):
            try:
                h = {"Authorization": f"Bearer {self.token(dep, acct)}"}
                req = urllib.request.Request(f"{self.url}/v1/sandboxes", headers=h)
                with urllib.request.urlopen(req, timeout=30) as r:
                    rows = json.load(r)["sandboxes"]
                for sb in rows:
                    d = urllib.request.Request(f"{self.url}/v1/sandboxes/{sb['name']}", method="DELETE", headers=h)
                    with urllib.request.urlopen(d, timeout=30):
                        pass
            except (OSError, ValueError, KeyError, subprocess.CalledProcessError):
                pass

    def stop(self) -> int:
        """SIGTERM by pid; the exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def destroy(self) -> int:
        """Deletes every sandbox made, stops the daemon, removes its cgroups and state."""
        if self.proc is not None and self.proc.poll() is None:
            self._delete_all()
        code = self.stop()
        log = self.log()
        remove_cgroups(self.state)
        shutil.rmtree(self.state, ignore_errors=True)
        if code != 0:
            raise AssertionError(f"sandboxd exited with {code}:\n{log}")
        return code


def remove_cgroups(state: str) -> None:
    """A daemon's (empty) cgroup dirs, sandboxd/<instance-id> under each hierarchy."""
    try:
        inst = Path(state, "instance-id").read_text().strip()
    except OSError:
        return
    if not inst:
        return
    for h in Path("/sys/fs/cgroup").iterdir():
        d = h / "sandboxd" / inst
        if not d.is_dir():
            continue
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            try:
                sub.rmdir()
            except OSError:
                pass
        try:
            d.rmdir()
        except OSError:
            pass


def _missing() -> Optional[str]:
    if not os.access(BIN, os.X_OK):
        return f"no sandboxd binary at {BIN} (build it, or set SANDBOXD_BIN)"
    if not Path(IMAGES, "tiny", "image.json").exists():
        return f"no 'tiny' image in {IMAGES}"
    return None


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    why = _missing()
    if why:
        pytest.skip(why)
    d = Daemon().start()
    try:
        yield d
    finally:
        d.destroy()


@pytest.fixture(scope="session")
def token(daemon: Daemon) -> str:
    return daemon.token()


@pytest.fixture(scope="session")
def client(token: str):  # type: ignore[no-untyped-def]
    from sandboxd import SandboxClient

    with SandboxClient(token=token) as cl:
        yield cl


@pytest.fixture(scope="session")
def sandbox(client) -> str:  # type: ignore[no-untyped-def]
    """One sandbox most tests share (attached once)."""
    name = unique("shared")
    client.attach(name)
    return name


def unique(prefix: str = "t") -> str:
    return f"py-{prefix}-{uuid.uuid4().hex[:10]}"


class Spy:
    """Records every exchange a client makes (method, path, status), by
    wrapping its transport: the server is the real one, only watched."""

    def __init__(self, client) -> None:  # type: ignore[no-untyped-def]
        self.calls: list[tuple[str, str, int]] = []
        transport = client._http
        inner = transport.request

        if hasattr(transport, "aclose"):
            async def request(spec, timeout_s):  # type: ignore[no-untyped-def]
                res = await inner(spec, timeout_s)
                self.calls.append((spec.method, spec.url.split("?")[0], res.status))
                return res
        else:
            def request(spec, timeout_s):  # type: ignore[no-untyped-def]
                res = inner(spec, timeout_s)
                self.calls.append((spec.method, spec.url.split("?")[0], res.status))
                return res

        transport.request = request

    @property
    def attaches(self) -> int:
        return sum(1 for m, u, _ in self.calls if m == "POST" and u.endswith("/attach"))

    @property
    def unauthorized(self) -> int:
        return sum(1 for _, _, s in self.calls if s == 401)
