"""The test suite's network guard, a pytest plugin (the root conftest loads it).

The suite never touches the network: published models are read from caches
laid out on disk (the ``hub_cache`` fixture). :func:`install` makes every
socket connection to another machine fail, and the autouse fixture
``_no_network`` fails the test that tried, even when the caller swallowed the
error (as huggingface_hub does when it falls back to its cache). Loopback and
local sockets stay allowed: the distributed tests talk to their own processes.
"""

import ipaddress
import socket

import pytest

#: Addresses of other machines tried since the current test started.
CONNECTIONS = []


def _is_local(sock, address):
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return True  # AF_UNIX and friends never leave the machine
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a host name that would be resolved: outside


def _guarded(real):
    def connect(self, address):
        if not _is_local(self, address):
            CONNECTIONS.append(address)
            raise ConnectionRefusedError(f"the test suite makes no network connection (tried {address!r})")
        return real(self, address)

    connect.skicml_network_guard = True
    return connect


def install():
    """Guard ``socket.socket.connect`` and ``connect_ex`` (once per process)."""
    if getattr(socket.socket.connect, "skicml_network_guard", False):
        return
    socket.socket.connect = _guarded(socket.socket.connect)
    socket.socket.connect_ex = _guarded(socket.socket.connect_ex)


@pytest.fixture(autouse=True)
def _no_network():
    """Fail the test that tried to reach another machine."""
    CONNECTIONS.clear()
    yield
    if CONNECTIONS:
        tried = list(CONNECTIONS)
        CONNECTIONS.clear()
        pytest.fail(f"the test tried to connect to {tried}; tests never touch the network", pytrace=False)
