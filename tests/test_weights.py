import pytest
import torch

from skicml import _weights


def test_save_and_load_by_path(tmp_path):
    state = {"layer.weight": torch.randn(3, 2)}
    path = tmp_path / "model.pt"
    digest = _weights.save_weights(path, state, {"width": 2}, {"seed": 0, "steps": 10})
    payload = _weights.load_weights(path)
    torch.testing.assert_close(payload["state_dict"]["layer.weight"], state["layer.weight"])
    assert payload["config"] == {"width": 2}
    assert payload["provenance"]["sha256"] == digest and payload["provenance"]["steps"] == 10


def test_bare_state_dict_loads(tmp_path):
    path = tmp_path / "official.ckpt"
    torch.save({"w": torch.ones(2)}, path)
    payload = _weights.load_weights(str(path))
    assert set(payload["state_dict"]) == {"w"} and payload["config"] == {}


def test_unknown_name_never_downloads():
    with pytest.raises(FileNotFoundError, match="never downloads"):
        _weights.load_weights("no-such-model")


def test_shipped_file_is_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(_weights, "_REGISTRY", {})
    package = tmp_path / "fakepkg"
    (package / "_weights").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    digest = _weights.save_weights(package / "_weights" / "m.pt", {"w": torch.ones(1)}, {}, {"seed": 1})
    monkeypatch.syspath_prepend(str(tmp_path))
    _weights.register_weights("fake-good", "fakepkg", "_weights/m.pt", digest, "a test model")
    _weights.register_weights("fake-bad", "fakepkg", "_weights/m.pt", "0" * 64)
    _weights.register_weights("fake-missing", "fakepkg", "_weights/none.pt", "")
    assert _weights.load_weights("fake-good")["provenance"]["seed"] == 1
    assert list(_weights.available_weights()) == ["fake-bad", "fake-good", "fake-missing"]
    with pytest.raises(ValueError, match="corrupted"):
        _weights.load_weights("fake-bad")
    with pytest.raises(FileNotFoundError, match="reinstall"):
        _weights.load_weights("fake-missing")


def test_loading_runs_no_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"state_dict": {}, "config": Evil()}, path)
    with pytest.raises(Exception, match="(?i)weights_only|unsupported|global"):
        _weights.load_weights(path)
