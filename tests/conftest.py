"""Test-session settings that must be in place before skicml is imported."""

import ipaddress
import os
import socket
import subprocess
import sys

import pytest

# One intra-op thread: torch's default of two makes scikit-learn's checks ten
# times slower on two cores (OpenMP spinning on tiny tensors).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402

# GPU kernels run on CPU tensors in Triton's interpreter when no GPU is here;
# the variable must be set before any kernel module is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

torch.set_num_threads(1)

from skicml import _weights  # noqa: E402

# Families register their shipped files when first imported, and tests swap
# the registry for an empty one; fill the real one before any test can, so a
# family first imported under a swapped registry is not lost from it.
_weights.available_weights()


@pytest.fixture
def torchrun():
    """``torchrun(script, *args)``: run ``script`` in two local processes (gloo) and return the result."""

    def run(script, *args):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr",
                   "127.0.0.1", "--master_port", str(port), str(script), *map(str, args)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    return run


# ----------------------------------------------------------------- no network
# The suite never touches the network: published models are read from caches
# laid out on disk (the hub_cache fixture). Any connection to another machine
# fails the test that made it, even when the caller swallows the error (as
# huggingface_hub does when it falls back to its cache). Loopback and local
# sockets stay allowed: the distributed tests talk to their own processes.
_CONNECTIONS = []
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


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
            _CONNECTIONS.append(address)
            raise ConnectionRefusedError(f"the test suite makes no network connection (tried {address!r})")
        return real(self, address)

    return connect


socket.socket.connect = _guarded(_real_connect)
socket.socket.connect_ex = _guarded(_real_connect_ex)


@pytest.fixture(autouse=True)
def _no_network():
    """Fail the test that tried to reach another machine."""
    _CONNECTIONS.clear()
    yield
    if _CONNECTIONS:
        tried = list(_CONNECTIONS)
        _CONNECTIONS.clear()
        pytest.fail(f"the test tried to connect to {tried}; tests never touch the network", pytrace=False)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face hub cache and torch.hub folder, offline; ``.put(name, write)`` fills them."""
    sys.path.insert(0, os.path.dirname(__file__))
    try:
        from _fake_hub import FakeHub
    finally:
        sys.path.remove(os.path.dirname(__file__))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub reads its variables once, at import: code calling it
    # without skicml (the official tabicl estimators) must see the same cache.
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(_weights, "_CACHE", type(_weights._CACHE)())
    return FakeHub(tmp_path / "hf" / "hub", tmp_path / "torch")
