"""Test-session settings that must be in place before skicml is imported."""

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
# Any connection to another machine fails the test that made it (see _network_guard.py).
from _network_guard import _no_network, install  # noqa: E402, F401 - the autouse fixture, by its name here

install()


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face hub cache and torch.hub folder, offline; ``.put(name, write)`` fills them."""
    from _fake_hub import FakeHub
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
