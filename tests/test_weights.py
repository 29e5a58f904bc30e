import collections
import os

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


def test_unknown_name_is_neither_shipped_nor_published():
    with pytest.raises(FileNotFoundError, match="No shipped or published model named 'no-such-model'.*"
                                                "tabicl-classifier-v2-20260212.ckpt"):
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


# ------------------------------------------------------------ load_module / save_module
@pytest.fixture(autouse=True)
def _empty_cache(monkeypatch):
    monkeypatch.setattr(_weights, "_CACHE", collections.OrderedDict())


def _linear(config):
    return torch.nn.Linear(config["n_in"], config["n_out"])


def _save_linear(path, seed=0, n_out=3):
    torch.manual_seed(seed)
    return _weights.save_module(path, _linear({"n_in": 2, "n_out": n_out}), {"n_in": 2, "n_out": n_out},
                                {"seed": seed})


def _count(monkeypatch, name):
    calls = []
    original = getattr(_weights, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(_weights, name, counted)
    return calls


def test_save_module_and_load_module_round_trip(tmp_path):
    torch.manual_seed(0)
    source = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    path = tmp_path / "mlp.pt"
    digest = _weights.save_module(path, source, {"width": 4}, {"steps": 7})
    built = []

    def build(config):
        built.append(dict(config))
        return torch.nn.Sequential(torch.nn.Linear(2, config["width"]), torch.nn.ReLU(),
                                   torch.nn.Linear(config["width"], 1))

    module, config, provenance = _weights.load_module(path, build)
    assert built == [{"width": 4}] and config == {"width": 4}
    assert not module.training
    assert provenance["sha256"] == digest and provenance["steps"] == 7 and provenance["path"] == str(path)
    x = torch.randn(5, 2)
    torch.testing.assert_close(module(x), source(x), rtol=0, atol=0)


def test_save_module_casts_floating_tensors_only_when_asked(tmp_path):
    module = torch.nn.Linear(2, 3).double()
    module.register_buffer("steps", torch.tensor([3]))
    _weights.save_module(tmp_path / "kept.pt", module, {}, {})
    _weights.save_module(tmp_path / "cast.pt", module, {}, {}, dtype=torch.float32)
    kept = _weights.load_weights(tmp_path / "kept.pt")["state_dict"]
    cast = _weights.load_weights(tmp_path / "cast.pt")["state_dict"]
    assert kept["weight"].dtype == torch.float64 and cast["weight"].dtype == torch.float32
    assert cast["steps"].dtype == torch.int64


def test_unchanged_file_is_read_once_and_changed_file_again(tmp_path, monkeypatch):
    path = tmp_path / "m.pt"
    _save_linear(path, seed=0)
    reads = _count(monkeypatch, "_read")
    first = _weights.load_module(path, _linear).module
    again = _weights.load_module(str(path), _linear).module
    _weights.load_weights(path)
    assert len(reads) == 1
    torch.testing.assert_close(first.weight, again.weight)

    # Rewritten behind skicml's back, same size: only the modification time tells.
    torch.manual_seed(1)
    state = _linear({"n_in": 2, "n_out": 3}).state_dict()
    torch.save({"state_dict": state, "config": {"n_in": 2, "n_out": 3}, "provenance": {}}, path)
    stamp = os.stat(path)
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))
    changed = _weights.load_module(path, _linear).module
    assert len(reads) == 2
    torch.testing.assert_close(changed.weight, state["weight"])
    assert not torch.equal(changed.weight, first.weight)

    # A different size is read again too (save_weights also forgets what it overwrites).
    _save_linear(path, seed=2, n_out=5)
    assert _weights.load_module(path, _linear).module.out_features == 5
    assert len(reads) == 3


def test_loads_never_share_a_module_or_tensors(tmp_path):
    path = tmp_path / "m.pt"
    _save_linear(path)
    a = _weights.load_module(path, _linear)
    b = _weights.load_module(path, _linear)
    assert a.module is not b.module
    original = b.module.weight.detach().clone()
    with torch.no_grad():
        a.module.weight.add_(1.0)
    a.config["n_out"] = 99
    a.provenance["seed"] = 99
    payload = _weights.load_weights(path)
    payload["state_dict"]["weight"].add_(1.0)
    payload["config"]["n_in"] = 99
    c = _weights.load_module(path, _linear)
    for module in (b.module, c.module):
        torch.testing.assert_close(module.weight, original, rtol=0, atol=0)
    assert c.config == {"n_in": 2, "n_out": 3} and c.provenance["seed"] == 0


def test_shipped_file_is_hashed_once(tmp_path, monkeypatch):
    monkeypatch.setattr(_weights, "_REGISTRY", {})
    package = tmp_path / "fakeshipped"
    (package / "_weights").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    digest = _save_linear(package / "_weights" / "m.pt")
    monkeypatch.syspath_prepend(str(tmp_path))
    _weights.register_weights("fake-linear", "fakeshipped", "_weights/m.pt", digest)
    hashes = _count(monkeypatch, "_sha256")
    modules = [_weights.load_module("fake-linear", _linear) for _ in range(3)]
    assert len(hashes) == 1
    assert all(m.provenance["sha256"] == digest and "path" not in m.provenance for m in modules)
    assert modules[0].module is not modules[1].module


def test_build_errors_reach_the_caller(tmp_path):
    path = tmp_path / "m.pt"
    _save_linear(path)

    def refuse(config):
        raise ValueError(f"needs 4 inputs, the file has {config['n_in']}")

    with pytest.raises(ValueError, match="needs 4 inputs, the file has 2"):
        _weights.load_module(path, refuse)
    with pytest.raises(RuntimeError, match="size mismatch"):
        _weights.load_module(path, lambda config: torch.nn.Linear(4, 3))


@pytest.mark.parametrize("name", ["hf-hub:laion/CLIP-ViT-B-32", "hf://org/model",
                                  "https://example.com/model.pt", "s3://bucket/model.pt"])
def test_hub_names_and_urls_are_refused(name):
    for load in (_weights.load_weights, lambda n: _weights.load_module(n, _linear)):
        with pytest.raises(FileNotFoundError, match="skicml never downloads weights other than its published models") as caught:
            load(name)
        assert isinstance(caught.value, ValueError)
        assert repr(name) in str(caught.value) and "pass its local path" in str(caught.value)


def test_check_local_rules():
    with pytest.raises(ValueError, match="model_name='hf-hub:x/y' is a Hugging Face hub name.*local-dir"):
        _weights.check_local("hf-hub:x/y", "model_name", instead="model_name='local-dir:<folder>'")
    with pytest.raises(FileNotFoundError, match="'openai' is an open_clip download tag; pass model_name"):
        _weights.check_local("openai", download_tag="an open_clip download tag", instead="model_name=... with it")
    # What might be a local file name or a shipped name is the caller's to judge.
    for fine in (None, "openai", "/no/such/file.pt", "tabicl-small", 3):
        _weights.check_local(fine)


def test_a_local_file_wins_over_the_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hf-hub:local").mkdir()
    _save_linear(tmp_path / "hf-hub:local" / "m.pt")
    assert _weights.load_module("hf-hub:local/m.pt", _linear).config == {"n_in": 2, "n_out": 3}


def test_recipe_command_drops_directories_and_a_rewrite_drops_the_load_path(tmp_path):
    command = _weights.recipe_command("wearable", ["--checkpoint-dir", str(tmp_path / "runs"),
                                                   f"--export={tmp_path / 'm.pt'}", "--epochs", "2"])
    assert command == "skicml pretrain wearable --checkpoint-dir runs --export=m.pt --epochs 2"
    path = tmp_path / "m.pt"
    _weights.save_weights(path, {"w": torch.ones(1)}, {}, {"seed": 0})
    payload = _weights.load_weights(path)
    assert payload["provenance"]["path"] == str(path)
    _weights.save_weights(path, payload["state_dict"], payload["config"], payload["provenance"])
    assert "path" not in torch.load(path, weights_only=True)["provenance"]
