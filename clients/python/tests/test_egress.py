"""Egress policies through the client: on attach, get/set_network,
network_log, a hostile policy refused, a re-attach that keeps the policy in
force; the async client the same. Nothing is resolved or reached from the
sandbox (the daemon's forwarder points at a closed port on loopback):
tests/integration's egress tests check the enforcement itself."""

from __future__ import annotations

import asyncio
from typing import Iterator

import pytest

from conftest import Daemon, unique
from sandboxd import SandboxClient, SandboxRequestError
from sandboxd.aio import AsyncSandboxClient


@pytest.fixture(scope="module")
def nat_daemon() -> Iterator[Daemon]:
    d = Daemon(["--network", "nat", "--pool-size", "0", "--dns-upstream", "127.0.0.1:9"]).start()
    try:
        yield d
    finally:
        d.destroy()


def test_policy_on_attach_set_and_log(nat_daemon: Daemon) -> None:
    client = SandboxClient(token=nat_daemon.token())
    name = unique("egress")
    client.attach(name, network="nat", egress={"allow": ["API.example.com.", "203.0.113.7"]})
    assert client.get_network(name) == {
        "mode": "nat", "egress": {"allow": ["api.example.com", "203.0.113.7/32"], "deny": []}}
    p = client.set_network(name, {"allow": ["*.example.org"], "deny": ["bad.example.org"]})
    assert p["egress"] == {"allow": ["*.example.org"], "deny": ["bad.example.org"]}
    assert client.attach(name).network == "nat"  # the policy in force is named: no 409
    assert isinstance(client.network_log(name), list)
    with pytest.raises(SandboxRequestError) as e:
        client.set_network(name, {"allow": ["10.0.0.1/8"]})
    assert e.value.status == 400 and "10.0.0.1/8" in str(e.value)
    assert client.get_network(name)["egress"]["allow"] == ["*.example.org"]
    assert client.set_network(name, {})["egress"] == {"allow": None, "deny": []}
    client.delete(name)


def test_async_client(nat_daemon: Daemon) -> None:
    async def run() -> None:
        async with AsyncSandboxClient(token=nat_daemon.token()) as client:
            name = unique("egress-aio")
            await client.attach(name, network="nat", egress={"deny": ["198.51.100.0/24"]})
            assert (await client.get_network(name))["egress"] == {"allow": None, "deny": ["198.51.100.0/24"]}
            await client.set_network(name, {"allow": []})
            assert (await client.get_network(name))["egress"]["allow"] == []
            assert await client.network_log(name) == []
            await client.delete(name)
    asyncio.run(run())
