"""Errors and credentials: typed errors with status and code, a disabled
account, bad tokens, a daemon that is down, a stale credential re-attached
once, a credential refreshed before it expires, the token's iss as the URL."""

from __future__ import annotations

import socket
import time

import pytest

from conftest import Daemon, Spy, free_port, unique
from sandboxd import (
    SandboxClient,
    SandboxError,
    SandboxNotEnabledError,
    SandboxRequestError,
    SandboxUnavailableError,
)


def documented_handler(sandboxes, command):
    """The error handling the documented client shows, verbatim in Python."""
    try:
        sandboxes.exec("thread-42", command)
    except SandboxNotEnabledError:
        return "run_without_sandbox"
    except SandboxRequestError as err:
        if err.status == 402:
            return "cap"
        raise
    except SandboxUnavailableError:
        return "retry_next_turn"
    return "ran"


def test_bad_name_is_refused_before_sending(client):
    spy = Spy(client)
    for bad in ["", "-leading-dash", "has space", "x" * 129, "slash/inside", "trailing\n"]:
        with pytest.raises(SandboxRequestError) as e:
            client.exec(bad, ["true"])
        assert (e.value.status, e.value.code) == (400, "invalid_argument")
        assert isinstance(e.value, SandboxError) and not isinstance(e.value, SandboxNotEnabledError)
    assert spy.calls == []


def test_server_errors_carry_status_code_and_message(client, sandbox):
    with pytest.raises(SandboxRequestError) as e:
        client.get(unique("never-made"))
    assert (e.value.status, e.value.code) == (404, "sandbox_not_found")
    assert e.value.message and "404" in str(e.value)
    with pytest.raises(SandboxRequestError) as e:
        client.poll(sandbox, "p999-0000")
    assert (e.value.status, e.value.code) == (404, "process_not_found")
    with pytest.raises(SandboxRequestError) as e:
        client.attach(unique("gpu"), "gpu-xl")
    assert (e.value.status, e.value.code) == (409, "unsupported_class")
    assert not isinstance(e.value, SandboxNotEnabledError)


def test_disabled_account_is_not_enabled(daemon):
    daemon.cli("account", "disable", "acct-off")
    off = SandboxClient(token=daemon.token("dep-off", "acct-off"))
    with pytest.raises(SandboxNotEnabledError) as e:
        off.attach("thread-42")
    assert isinstance(e.value, SandboxRequestError)
    assert (e.value.status, e.value.code) == (409, "not_enabled")
    assert documented_handler(off, ["true"]) == "run_without_sandbox"


def test_bad_tokens_are_401(daemon, token):
    forged = SandboxClient(token="e30.e30.AAAA", base_url=daemon.url)
    with pytest.raises(SandboxRequestError) as e:
        forged.list()
    assert (e.value.status, e.value.code) == (401, "unauthenticated")
    # A real token with its signature broken: the URL still comes from iss.
    head, claims, sig = token.split(".")
    tampered = SandboxClient(token=f"{head}.{claims}.{sig[:-4]}AAAA")
    assert tampered.base_url == daemon.url
    with pytest.raises(SandboxRequestError) as e:
        tampered.exec(unique(), ["true"])
    assert e.value.status == 401 and not isinstance(e.value, SandboxNotEnabledError)


def test_no_token_is_401_at_the_first_call(monkeypatch):
    monkeypatch.delenv("ASTRO_AUTHZ_TOKEN", raising=False)
    monkeypatch.delenv("SANDBOXD_TOKEN", raising=False)
    bare = SandboxClient()
    assert bare.base_url is None
    with pytest.raises(SandboxRequestError) as e:
        bare.list()
    assert (e.value.status, e.value.code) == (401, "unauthenticated")


def test_token_iss_gives_the_url_and_env_order(daemon, token, monkeypatch):
    assert SandboxClient(token=token).base_url == daemon.url
    monkeypatch.setenv("SANDBOXD_TOKEN", "not-a-jwt")
    monkeypatch.setenv("ASTRO_AUTHZ_TOKEN", token)
    from_env = SandboxClient()
    assert from_env.base_url == daemon.url
    assert isinstance(from_env.list(), list)  # the ASTRO token was the one sent
    monkeypatch.delenv("ASTRO_AUTHZ_TOKEN")
    monkeypatch.setenv("SANDBOXD_TOKEN", token)
    assert SandboxClient().base_url == daemon.url
    # An explicit base_url wins over iss (a trailing slash is dropped).
    assert SandboxClient(token=token, base_url="http://127.0.0.1:1/").base_url == "http://127.0.0.1:1"


def test_unreachable_server_is_unavailable_and_tried_once(token):
    port = free_port()  # nothing listens there
    c = SandboxClient(token=token, base_url=f"http://127.0.0.1:{port}")
    spy = Spy(c)
    with pytest.raises(SandboxUnavailableError) as e:
        c.exec(unique(), ["true"])
    assert isinstance(e.value.cause, OSError)
    assert e.value.__cause__ is e.value.cause
    assert spy.calls == []  # nothing answered
    assert documented_handler(c, ["true"]) == "retry_next_turn"


def test_no_answer_within_the_timeout_is_unavailable_not_retried(token):
    # A listener that accepts and never answers.
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        url = f"http://127.0.0.1:{srv.getsockname()[1]}"
        c = SandboxClient(token=token, base_url=url, timeout_seconds=0.5)
        with pytest.raises(SandboxUnavailableError) as e:
            c.list()
        assert "no answer within 500 ms" in str(e.value)
        srv.settimeout(0)
        accepted = []
        try:
            while True:
                accepted.append(srv.accept()[0])
        except BlockingIOError:
            pass
        for s in accepted:
            s.close()
        assert len(accepted) == 1


def test_stale_credential_is_reattached_once(client, token):
    live = SandboxClient(token=token)
    spy = Spy(live)
    name = unique("stale")
    live.write_file(name, "mark", "old")
    assert spy.attaches == 1
    client.delete(name)  # another client; live's credential is now stale
    r = live.exec(name, ["ls", "-A", "/workspace"])
    assert (r.exit_code, r.stdout) == (0, ""), "a new, empty sandbox"
    assert spy.unauthorized == 1, "the stale credential was refused once"
    assert spy.attaches == 2, "and the client attached again once"
    live.delete(name)


def test_daemon_down_then_credentials_refreshed_before_expiry():
    """A second daemon, with 2 s credentials and room for one sandbox: the
    credentials are refreshed before they expire (no 401 needed), a second
    sandbox is a 402, and once the daemon is down every call is
    SandboxUnavailableError."""
    d = Daemon(["--credential-ttl", "2s", "--pool-size", "0", "--max-per-deployment", "1"]).start()
    try:
        c = SandboxClient(token=d.token())
        spy = Spy(c)
        name = unique("ttl")
        handle = c.attach(name)
        assert handle.endpoint.startswith(d.url) and handle.expires_at
        assert c.exec(name, ["true"]).exit_code == 0
        assert spy.attaches == 1
        time.sleep(2.2)  # past expiresAt
        assert c.exec(name, ["true"]).exit_code == 0
        assert spy.attaches == 2 and spy.unauthorized == 0, spy.calls

        # The deployment's cap (1 here) is a 402, as the documented handler expects.
        with pytest.raises(SandboxRequestError) as e:
            c.attach(unique("over-cap"))
        assert (e.value.status, e.value.code) == (402, "cap_reached")

        assert d.stop() == 0
        with pytest.raises(SandboxUnavailableError):
            c.exec(name, ["true"])
        with pytest.raises(SandboxUnavailableError):
            c.list()
        d.start()  # again, on the same port and state, to delete the sandbox
        c.delete(name)
    finally:
        d.destroy()
