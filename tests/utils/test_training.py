"""The training loops: the epoch loop (fit_module), the mixin that feeds it an
estimator's settings, and the step loop (pretrain) with its exact resume."""

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator

from skicml import base
from skicml.base import TorchEstimatorMixin, seed_from_random_state, seeded, to_tensor
from skicml.utils._testing import _TinyMLPClassifier
from skicml.utils.training import fit_module, pretrain, warmup_cosine


def _blobs(n=200, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 4).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    return torch.from_numpy(X), torch.from_numpy(y)


def _mlp(seed=0):
    with seeded(seed):
        return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


# --------------------------------------------------------------------------
# the epoch loop
# --------------------------------------------------------------------------
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


def test_fit_module_exempts_the_chosen_parameters_from_weight_decay():
    class Idle(torch.nn.Module):
        """Zero loss: AdamW's step is then its weight decay alone."""

        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)
            self.cls_token = torch.nn.Parameter(torch.ones(1, 1, 3))

        def forward(self, X):
            return 0.0 * (self.linear(X).sum(dim=1) + self.cls_token.sum())

    def run(rule):
        with seeded(0):
            model = Idle()
        start = {name: p.detach().clone() for name, p in model.named_parameters()}
        model, _ = fit_module(model, _blobs()[0], None, loss=None, max_epochs=3, lr=0.1, weight_decay=0.5,
                              no_weight_decay=rule, lr_schedule=None, seed=0)
        return {name: bool((p.detach() != start[name]).any()) for name, p in model.named_parameters()}

    assert run(None) == {"linear.weight": True, "linear.bias": True, "cls_token": True}
    exempt = run(lambda name, parameter: parameter.ndim <= 1 or "token" in name)
    assert exempt == {"linear.weight": True, "linear.bias": False, "cls_token": False}


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


def test_warmup_cosine_rises_then_decays_to_the_final_factor():
    factor = warmup_cosine(total_steps=20, warmup_steps=4, final_factor=0.1)
    assert [factor(step) for step in range(4)] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    decay = [factor(step) for step in range(4, 21)]
    assert all(a >= b for a, b in zip(decay, decay[1:]))
    assert factor(20) == pytest.approx(0.1) and factor(100) == pytest.approx(0.1)


# --------------------------------------------------------------------------
# the mixin's one call
# --------------------------------------------------------------------------
class _Settings(TorchEstimatorMixin, BaseEstimator):
    def __init__(self, max_epochs=3, batch_size=7, lr=0.5, warmup_fraction=0.1, tol=0.01,
                 checkpoint_dir="ckpt", device="cpu", random_state=None, verbose=0):
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.warmup_fraction = warmup_fraction
        self.tol = tol
        self.checkpoint_dir = checkpoint_dir
        self.device = device
        self.random_state = random_state
        self.verbose = verbose


def test_mixin_hands_the_estimators_settings_and_overrides_win(monkeypatch):
    calls = []
    monkeypatch.setattr(base, "fit_module", lambda module, X, y, **kwargs: calls.append((module, X, y, kwargs)))
    estimator = _Settings(random_state=4)
    estimator._fit_module("module", "X")
    module, X, y, kwargs = calls[-1]
    assert (module, X, y) == ("module", "X", None)
    assert kwargs == {
        "max_epochs": 3, "batch_size": 7, "lr": 0.5, "warmup_fraction": 0.1, "tol": 0.01,
        "checkpoint_dir": "ckpt", "verbose": 0, "device": torch.device("cpu"),
        "seed": seed_from_random_state(4), "desc": "_Settings",
    }  # settings the estimator lacks (weight_decay...) keep fit_module's defaults

    rng = np.random.RandomState(0)
    state = rng.get_state()[1].copy()
    _Settings(random_state=rng)._fit_module("module", "X", "y", max_epochs=9, seed=11, loss=None, desc="mine")
    kwargs = calls[-1][3]
    assert calls[-1][2] == "y"
    assert (kwargs["max_epochs"], kwargs["seed"], kwargs["loss"], kwargs["desc"]) == (9, 11, None, "mine")
    assert kwargs["batch_size"] == 7
    np.testing.assert_array_equal(rng.get_state()[1], state)  # a given seed draws none


def test_mixin_call_trains_as_the_explicit_call_did():
    # _TinyMLPClassifier trains through the mixin; the same numbers come out
    # of the explicit fit_module call it used to write.
    X, y = _blobs(80)
    X, y = X.double().numpy(), y.numpy()
    estimator = _TinyMLPClassifier(max_epochs=3, batch_size=16, validation_fraction=0.25, random_state=5,
                                   device="cpu").fit(X, y)
    seed = seed_from_random_state(5)
    with seeded(seed):
        module = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).double()
    module, history = fit_module(
        module, to_tensor((X - estimator.mean_) / estimator.scale_, dtype="float64"),
        torch.as_tensor(y, dtype=torch.long), loss="cross_entropy", max_epochs=3, batch_size=16, lr=1e-2,
        validation_fraction=0.25, stratify=True, n_iter_no_change=None, device="cpu", seed=seed,
    )
    assert estimator.loss_curve_ == history.train_loss
    for a, b in zip(estimator.module_.parameters(), module.parameters()):
        assert torch.equal(a, b)


# --------------------------------------------------------------------------
# the step loop
# --------------------------------------------------------------------------
class _Stream:
    """Noisy linear rows drawn batch by batch from the stream's own generator."""

    def __init__(self, seed, batch_size=8):
        self.generator = torch.Generator().manual_seed(seed)
        self.batch_size = batch_size

    def sample(self):
        X = torch.randn(self.batch_size, 4, generator=self.generator)
        noise = 0.1 * torch.randn(self.batch_size, generator=self.generator)
        return X, X @ torch.tensor([1.0, -2.0, 0.5, 0.0]) + noise

    def state_dict(self):
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state):
        self.generator.set_state(state["generator"])


def _mse(model, batch):
    X, y = batch
    return torch.nn.functional.mse_loss(model(X).squeeze(1), y)


def _run(steps, checkpoint=None, max_seconds=None, seed=0):
    torch.manual_seed(seed)
    # Dropout draws from the global generator, so its state must resume too.
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(16, 1))
    history = pretrain(model, _Stream(seed), _mse, steps=steps, lr=3e-3, checkpoint_path=checkpoint,
                       checkpoint_every=1, max_seconds=max_seconds, verbose=0, device="cpu")
    return model, history


def test_resumed_run_equals_uninterrupted_run(tmp_path):
    straight, straight_history = _run(4, checkpoint=tmp_path / "a.ckpt")
    # Stop after the first step (time budget 0), then resume from the file.
    _, first = _run(4, checkpoint=tmp_path / "b.ckpt", max_seconds=0)
    assert first["step"] == 1
    resumed, history = _run(4, checkpoint=tmp_path / "b.ckpt", seed=123)  # seed is overridden by the checkpoint
    assert history["step"] == 4
    assert history["loss"] == straight_history["loss"]
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name
