"""The published-model resolver of ``skicml._weights``, against caches laid out on disk.

Nothing here touches the network: the hub cache is written in huggingface_hub's
own layout (``tests/_fake_hub.py``), and where a download would happen the
downloader is replaced by one that writes into the cache as the real one does.
"""

import dataclasses
import socket
import sys

import pytest
import torch

from skicml import _weights, config_context, get_config, set_config


def _bytes(data):
    return lambda path: path.write_bytes(data)


def test_hub_layout_is_found_offline_and_loads_as_a_local_file(hub_cache):
    name = "tabicl-classifier-v2-20260212.ckpt"
    entry = _weights.published_weights(name)
    assert entry.source == f"hf://jingang/TabICL/{name}" and not entry.is_cached()
    snapshot = hub_cache.put(name, lambda path: torch.save({"config": {"a": 1}, "state_dict": {"w": torch.ones(2)}},
                                                           path))
    assert "models--jingang--TabICL/snapshots/" in str(snapshot)
    assert entry.cached_path() == str(snapshot) and _weights.fetch_published(name) == str(snapshot)
    payload = _weights.load_weights(name)
    assert payload["config"] == {"a": 1}
    assert payload["provenance"]["published"] == name and payload["provenance"]["path"] == str(snapshot)


def test_revision_pinning(hub_cache):
    entry = dataclasses.replace(_weights.published_weights("tabicl-classifier-v1-20250208.ckpt"), revision="v1.0")
    hub_cache.add(entry.repo_id, entry.filenames[0], _bytes(b"main"))
    assert entry.cached_path() is None  # main is cached, the pinned revision is not
    pinned = hub_cache.add(entry.repo_id, entry.filenames[0], _bytes(b"pinned"), revision="v1.0")
    assert entry.cached_path() == str(pinned) and entry.source.endswith("@v1.0")
    # the same pin by name, as users write it (and skicml download takes it)
    by_name = _weights.published_weights("tabicl-classifier-v1-20250208.ckpt@v1.0")
    assert by_name.revision == "v1.0" and by_name.fetch() == str(pinned)
    assert _weights.published_weights("no-such-model@v1.0") is None
    text = _weights.published_weights("sentence-transformers/all-MiniLM-L6-v2@abc")
    assert text.repo_id == "sentence-transformers/all-MiniLM-L6-v2" and text.revision == "abc"


def test_a_missing_model_downloads_once_when_allowed(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    calls = []

    def fake_hub_download(repo_id, filename, revision=None, cache_dir=None):
        calls.append(filename)
        return str(hub_cache.add(repo_id, filename, _bytes(b"x")))

    monkeypatch.setattr("huggingface_hub.hf_hub_download", fake_hub_download)
    name = "tabicl-regressor-v2-20260212.ckpt"
    first = _weights.fetch_published(name)
    again = _weights.fetch_published(name)
    assert first == again and calls == [name]
    with pytest.raises(_weights.NotCachedError, match="download=False"):
        _weights.fetch_published("tabicl-classifier-v1-20250208.ckpt", download=False)
    assert calls == [name]


def test_offline_and_the_setting_each_switch_downloads_off(hub_cache, monkeypatch):
    name = "tabicl-classifier-v2-20260212.ckpt"
    monkeypatch.setattr(_weights.PublishedWeights, "_download", lambda self: pytest.fail("downloaded"))
    with pytest.raises(_weights.NotCachedError, match=r"HF_HUB_OFFLINE=1\).*`skicml download " + name):
        _weights.load_weights(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert get_config()["allow_download"] is True
    with config_context(allow_download=False):
        with pytest.raises(FileNotFoundError, match=r"allow_download=False.*skicml download"):
            _weights.load_module(name, lambda config: torch.nn.Linear(1, 1))
    set_config(allow_download=False)
    try:
        with pytest.raises(_weights.NotCachedError):
            _weights.fetch_published(name)
    finally:
        set_config(allow_download=True)
    with pytest.raises(ValueError, match="allow_download='no'"):
        set_config(allow_download="no")


def test_a_url_goes_through_torch_hub_with_its_hash(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    entry = dataclasses.replace(_weights.published_weights("point-mae-pretrain"), sha256="abc123")
    calls = []

    def fake_download(url, dst, hash_prefix=None, progress=True):
        calls.append((url, hash_prefix))
        with open(dst, "wb") as handle:
            handle.write(b"pth")

    monkeypatch.setattr(torch.hub, "download_url_to_file", fake_download)
    path = entry.fetch()
    assert path.startswith(str(hub_cache.torch_home)) and path.endswith("checkpoints/point-mae-pretrain")
    assert calls == [("https://github.com/Pang-Yatian/Point-MAE/releases/download/main/pretrain.pth", "abc123")]
    assert entry.fetch() == path and len(calls) == 1


def test_shipped_names_and_paths_win_over_published_ones(tmp_path, monkeypatch, hub_cache):
    monkeypatch.chdir(tmp_path)
    name = "tabicl-classifier-v2-20260212.ckpt"
    torch.save({"config": {"local": True}, "state_dict": {}}, tmp_path / name)
    payload = _weights.load_weights(name)  # a file of that name here: the local file, no cache needed
    assert payload["config"] == {"local": True} and "published" not in payload["provenance"]
    assert "published" not in _weights.load_weights("tabicl-small")["provenance"]


def test_open_clip_pairs_resolve_through_open_clip():
    pytest.importorskip("open_clip")
    entry = _weights.published_weights("laion2b_s34b_b79k", model_name="ViT-B-32")
    assert entry.repo_id == "laion/CLIP-ViT-B-32-laion2B-s34B-b79K"
    assert entry.filenames == ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
    assert _weights.published_weights("ViT-B-32:laion2b_s34b_b79k") == entry
    assert _weights.published_weights("no-such-tag", model_name="ViT-B-32") is None


def test_the_socket_guard_refuses_other_machines_and_allows_loopback():
    from _network_guard import CONNECTIONS

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5):
            pass
    with pytest.raises(OSError, match="makes no network connection"):
        socket.create_connection(("192.0.2.1", 443), timeout=1)  # TEST-NET-1: nothing would answer anyway
    assert CONNECTIONS == [("192.0.2.1", 443)]
    CONNECTIONS.clear()  # this test made it on purpose; any other test would now fail


def test_the_guard_fails_a_test_that_swallows_the_error(tmp_path, capsys, monkeypatch):
    import _network_guard

    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the inner run needs no installed plugin
    (tmp_path / "test_inner.py").write_text(
        "import socket\n"
        "def test_swallows():\n"
        "    try:\n"
        "        socket.create_connection(('192.0.2.1', 80), timeout=1)\n"
        "    except OSError:\n"
        "        pass  # as a library falling back to its cache would\n"
        "def test_stays_home():\n"
        "    assert True\n")

    class Outcomes:
        seen = []

        def pytest_runtest_logreport(self, report):
            self.seen.append((report.nodeid.rsplit("::", 1)[-1], report.when, report.outcome))

    outcomes = Outcomes()
    code = pytest.main([str(tmp_path), "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
                       plugins=[_network_guard, outcomes])
    capsys.readouterr()
    assert code == pytest.ExitCode.TESTS_FAILED
    assert ("test_swallows", "teardown", "failed") in outcomes.seen
    assert all(outcome == "passed" for name, _, outcome in outcomes.seen if name == "test_stays_home")
    assert _network_guard.CONNECTIONS == []


def test_a_cached_model_loads_without_huggingface_hub(hub_cache, monkeypatch):
    name = "tabicl-classifier-v1.1-20250506.ckpt"
    hub_cache.put(name, lambda path: torch.save({"config": {"v": 1.1}, "state_dict": {}}, path))
    for module in [m for m in sys.modules if m == "huggingface_hub" or m.startswith("huggingface_hub.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import huggingface_hub now fails
    assert _weights.load_weights(name)["config"] == {"v": 1.1}
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    with pytest.raises(ImportError, match="needs huggingface_hub"):
        _weights.fetch_published("tabicl-classifier-v2-20260212.ckpt")
