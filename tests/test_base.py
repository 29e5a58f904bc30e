import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.utils import get_tags

from skicml.base import (
    SkicmlTags,
    fit_module,
    progress,
    resolve_device,
    resolve_dtype,
    seed_from_random_state,
    seeded,
    to_tensor,
)
from skicml.utils._testing import _TinyMLPClassifier


def test_resolve_device():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device(None).type == expected
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="not a device"):
        resolve_device("gpu-please")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no GPU"):
            resolve_device("cuda")


def test_seed_from_random_state():
    assert seed_from_random_state(3) == seed_from_random_state(3)
    rng = np.random.RandomState(0)
    assert seed_from_random_state(rng) != seed_from_random_state(rng)


def test_seeded_is_reproducible_and_restores_global_state():
    before = torch.random.get_rng_state()
    np_before = np.random.get_state()[1].copy()
    with seeded(5):
        first = torch.rand(3)
        np.random.rand()
    with seeded(5):
        second = torch.rand(3)
    torch.testing.assert_close(first, second)
    assert torch.equal(torch.random.get_rng_state(), before)
    np.testing.assert_array_equal(np.random.get_state()[1], np_before)


@pytest.mark.parametrize("spec, expected", [
    ("float32", torch.float32), (np.float64, torch.float64),
    (torch.bfloat16, torch.bfloat16), ("float16", torch.float16),
])
def test_resolve_dtype(spec, expected):
    assert resolve_dtype(spec) is expected


def test_resolve_dtype_rejects_integers():
    with pytest.raises(ValueError, match="not supported"):
        resolve_dtype("int64")


def test_to_tensor_copies_readonly_input():
    array = np.arange(6, dtype=np.float64).reshape(2, 3)
    array.setflags(write=False)
    tensor = to_tensor(array, dtype="float32")
    assert tensor.dtype == torch.float32 and tensor.shape == (2, 3)
    tensors = to_tensor({"a": array, "b": np.arange(2)}, dtype="float32")
    assert tensors["b"].dtype == torch.int64  # integer inputs keep their dtype


def test_tags_carry_expected_failed_checks():
    tags = get_tags(_TinyMLPClassifier())
    assert isinstance(tags, SkicmlTags)
    assert tags.expected_failed_checks == {}
    assert tags.estimator_type == "classifier"


def test_progress_is_silent_at_verbose_zero(capsys):
    assert list(progress(range(3), verbose=0)) == [0, 1, 2]
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_progress_shows_at_verbose_one(capsys):
    list(progress(range(3), verbose=1, desc="work"))
    assert "work" in capsys.readouterr().err


def _blobs(n=200, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 4).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    return torch.from_numpy(X), torch.from_numpy(y)


def _mlp(seed=0):
    with seeded(seed):
        return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


def test_fit_module_learns_and_is_deterministic():
    X, y = _blobs()
    module, history = fit_module(_mlp(), X, y, max_epochs=15, batch_size=32, lr=1e-2, seed=1)
    again, _ = fit_module(_mlp(), X, y, max_epochs=15, batch_size=32, lr=1e-2, seed=1)
    assert not module.training
    assert history.n_epochs == 15 and history.train_loss[-1] < history.train_loss[0]
    with torch.no_grad():
        accuracy = (module(X).argmax(1) == y).float().mean()
        torch.testing.assert_close(module(X), again(X))
    assert accuracy > 0.9


def test_fit_module_early_stopping_restores_best():
    X, y = _blobs()
    y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(0))]  # pure noise
    module, history = fit_module(
        _mlp(), X, y, max_epochs=200, batch_size=32, lr=5e-2, validation_fraction=0.25,
        stratify=True, n_iter_no_change=3, seed=0,
    )
    assert history.n_epochs < 200
    assert len(history.valid_loss) == history.n_epochs
    assert history.best_epoch == int(np.argmin(history.valid_loss)) + 1


def test_fit_module_self_supervised_loss_from_forward():
    class Autoencoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Linear(2, 4))

        def forward(self, X):
            return ((self.net(X) - X) ** 2).mean(dim=1)

    X, _ = _blobs()
    with seeded(0):
        model = Autoencoder()
    model, history = fit_module(model, X, None, loss=None, max_epochs=20, lr=1e-2, seed=0)
    assert history.train_loss[-1] < 0.7 * history.train_loss[0]


def test_fit_module_warmup_cosine_schedule_and_clipping():
    X, y = _blobs(64)
    lrs = []

    class Spy(torch.optim.AdamW):
        def step(self, closure=None):
            lrs.append(self.param_groups[0]["lr"])
            return super().step(closure)

    fit_module(_mlp(), X, y, optimizer=Spy, lr=1.0, max_epochs=4, batch_size=16,
               warmup_fraction=0.25, grad_clip=1.0, seed=0)
    assert len(lrs) == 16
    assert lrs[0] == pytest.approx(0.25) and lrs[3] == pytest.approx(1.0)
    assert lrs[-1] < 0.05 and all(a >= b for a, b in zip(lrs[3:], lrs[4:]))


def test_fit_module_resumes_from_checkpoint(tmp_path):
    X, y = _blobs()
    kwargs = dict(max_epochs=6, batch_size=50, lr=1e-2, seed=3)
    _, full_history = fit_module(_mlp(), X, y, **kwargs)

    class Interrupt(Exception):
        pass

    batches = {"n": 0, "crash_after": 3 * 4}  # 4 batches per epoch

    class Crashing(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, X):
            batches["n"] += 1
            if batches["crash_after"] is not None and batches["n"] > batches["crash_after"]:
                raise Interrupt
            return self.inner(X)

    with pytest.raises(Interrupt):
        fit_module(Crashing(_mlp()), X, y, checkpoint_dir=tmp_path, **kwargs)
    batches.update(n=0, crash_after=None)
    _, history = fit_module(Crashing(_mlp()), X, y, checkpoint_dir=tmp_path, **kwargs)
    assert history.n_epochs == 6
    assert batches["n"] == 3 * 4  # only the three remaining epochs ran
    np.testing.assert_allclose(history.train_loss[:3], full_history.train_loss[:3], rtol=1e-6)


def test_fit_module_rejects_bad_arguments():
    X, y = _blobs(20)
    with pytest.raises(ValueError, match="validation_fraction"):
        fit_module(_mlp(), X, y, n_iter_no_change=2)
    with pytest.raises(ValueError, match="optimizer"):
        fit_module(_mlp(), X, y, optimizer="lion")
    with pytest.raises(ValueError, match="loss"):
        fit_module(_mlp(), X, y, loss="hinge")


def test_pickled_modules_live_on_cpu():
    X, y = _blobs(60)
    est = _TinyMLPClassifier(max_epochs=2, random_state=0, device="cpu").fit(X.numpy(), y.numpy())
    state = est.__getstate__()
    assert all(p.device.type == "cpu" for p in state["module_"].parameters())
    clone = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(clone.predict_proba(X.numpy()), est.predict_proba(X.numpy()))


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(2, 40), d=st.integers(1, 6),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_to_tensor_round_trip(n, d, dtype):
    array = np.random.RandomState(n * d).randn(n, d).astype(dtype)
    tensor = to_tensor(array)
    assert tensor.shape == (n, d) and tensor.numpy().dtype == dtype
    np.testing.assert_array_equal(tensor.numpy(), array)
