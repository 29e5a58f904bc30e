"""Tests of the vectorised TabICL synthetic prior (``skicml.tabicl.prior``)."""

import io
import itertools
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skicml.tabicl.prior import ACTIVATIONS, PriorConfig, TabularPrior

torch.set_num_threads(1)

SMALL = PriorConfig(max_features=8, max_classes=5, min_rows=32, max_rows=96)


def check_batch(batch, config, batch_size, n_rows=None):
    """Every documented invariant of one batch."""
    X, y = batch["X"], batch["y"]
    n_features, n_classes, n_train = batch["n_features"], batch["n_classes"], batch["n_train"]
    B, T, H = X.shape
    assert B == batch_size and H == config.max_features
    if n_rows is not None:
        assert T == n_rows
    assert X.dtype == torch.float32 and y.dtype == torch.int64
    assert n_features.dtype == torch.int64 and n_classes.dtype == torch.int64
    assert y.shape == (B, T) and n_features.shape == (B,) and n_classes.shape == (B,)
    assert isinstance(n_train, int) and 2 <= n_train <= T - 2
    assert torch.isfinite(X).all()
    assert ((n_features >= 1) & (n_features <= H)).all()
    assert ((n_classes >= 2) & (n_classes <= config.max_classes)).all()
    for b in range(B):
        d, k = int(n_features[b]), int(n_classes[b])
        assert (X[b, :, d:] == 0).all(), "padding columns must be exactly zero"
        real = X[b, :, :d].double()
        assert (real.amax(0) > real.amin(0)).all(), "real columns must not be constant"
        # standardised (ddof=1) before the column permutation
        assert torch.allclose(real.mean(0), torch.zeros(d, dtype=torch.float64), atol=1e-3)
        assert torch.allclose(real.std(0), torch.ones(d, dtype=torch.float64), atol=1e-3)
        assert real.abs().max() <= config.clip_value
        classes = set(range(k))
        assert set(y[b, :n_train].tolist()) == classes
        assert set(y[b, n_train:].tolist()) == classes


def test_shapes_dtypes_and_invariants():
    prior = TabularPrior(SMALL, seed=0)
    batch = prior.sample(12, n_rows=64)
    check_batch(batch, SMALL, 12, n_rows=64)
    assert set(batch) == {"X", "y", "n_features", "n_classes", "n_train"}


def test_default_config_mixes_tables_in_one_batch():
    config = PriorConfig()
    batch = TabularPrior(config, seed=1).sample(32, n_rows=128)
    check_batch(batch, config, 32, n_rows=128)
    assert len(set(batch["n_features"].tolist())) > 1
    assert len(set(batch["n_classes"].tolist())) > 1


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    batch_size=st.integers(1, 9),
    n_rows=st.integers(24, 120),
    max_features=st.integers(1, 12),
    max_classes=st.integers(2, 10),
    mlp_scm_prob=st.sampled_from([0.0, 0.5, 1.0]),
    categorical_prob=st.sampled_from([0.0, 0.2, 1.0]),
    group_size=st.integers(1, 5),
)
def test_invariants_property(seed, batch_size, n_rows, max_features, max_classes, mlp_scm_prob,
                             categorical_prob, group_size):
    config = PriorConfig(min_features=1, max_features=max_features, max_classes=max_classes, min_rows=24,
                         max_rows=128, mlp_scm_prob=mlp_scm_prob, categorical_prob=categorical_prob,
                         group_size=group_size)
    batch = TabularPrior(config, seed=seed).sample(batch_size, n_rows=n_rows)
    check_batch(batch, config, batch_size, n_rows=n_rows)


def _assert_same(a, b):
    assert a["n_train"] == b["n_train"]
    for key in ("X", "y", "n_features", "n_classes"):
        assert torch.equal(a[key], b[key]), key


def _differ(a, b):
    return a["X"].shape != b["X"].shape or not torch.equal(a["X"], b["X"])


def test_same_seed_same_batches_different_seed_differs():
    p1, p2, p3 = (TabularPrior(SMALL, seed=s) for s in (5, 5, 6))
    for _ in range(2):
        a, b, c = p1.sample(6), p2.sample(6), p3.sample(6)
        _assert_same(a, b)
        assert _differ(a, c)
    # consecutive batches of one stream differ
    assert _differ(p1.sample(6, n_rows=48), p1.sample(6, n_rows=48))


def test_state_dict_resumes_identical_stream():
    prior = TabularPrior(SMALL, seed=3)
    prior.sample(5)
    state = prior.state_dict()
    calls = [(5, None), (7, 40), (3, None)]
    expected = [prior.sample(size, n_rows=rows) for size, rows in calls]
    # through a weights_only checkpoint round trip, as the pretraining loop stores it
    buffer = io.BytesIO()
    torch.save({"source": state}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, map_location="cpu", weights_only=True)["source"]
    resumed = TabularPrior(SMALL, seed=12345)
    resumed.load_state_dict(loaded)
    for want, (size, rows) in zip(expected, calls):
        _assert_same(want, resumed.sample(size, n_rows=rows))
    assert resumed.state_dict()["batches_drawn"] == prior.state_dict()["batches_drawn"]
    assert resumed.state_dict()["tables_generated"] == prior.state_dict()["tables_generated"]


def test_n_rows_none_draws_within_bounds():
    config = PriorConfig(max_features=4, max_classes=3, min_rows=20, max_rows=80)
    prior = TabularPrior(config, seed=0)
    rows = []
    for _ in range(12):
        batch = prior.sample(2)
        T = batch["X"].shape[1]
        assert config.min_rows <= T <= config.max_rows
        assert batch["y"].shape[1] == T
        assert int(config.min_train_fraction * T) - 1 <= batch["n_train"] <= int(config.max_train_fraction * T) + 1
        rows.append(T)
    assert len(set(rows)) > 3


@pytest.mark.parametrize("mlp_scm_prob, used, unused", [(1.0, "_mlp_scm", "_tree_scm"),
                                                          (0.0, "_tree_scm", "_mlp_scm")])
def test_both_scm_branches(mlp_scm_prob, used, unused):
    config = PriorConfig(max_features=10, min_rows=32, max_rows=96, mlp_scm_prob=mlp_scm_prob)
    prior = TabularPrior(config, seed=4)
    with mock.patch.object(prior, used, wraps=getattr(prior, used)) as spy_used, \
            mock.patch.object(prior, unused, wraps=getattr(prior, unused)) as spy_unused:
        batch = prior.sample(10, n_rows=80)
    assert spy_used.call_count >= 3 and spy_unused.call_count == 0
    check_batch(batch, config, 10, n_rows=80)


def _base_mlp_hp(prior):
    while True:
        hp = prior._group_hyperparameters()
        if hp["prior"] == "mlp":
            return hp


def test_mlp_scm_modes():
    prior = TabularPrior(PriorConfig(max_features=6), seed=2)
    base = dict(_base_mlp_hp(prior), n_features=5, num_layers=3, hidden_dim=8, num_causes=3)
    combos = itertools.product([True, False], [True, False], [True, False], [True, False],
                               ["normal", "mixed", "uniform"])
    for causal, clique, effect, block, sampling in combos:
        hp = dict(base, is_causal=causal, in_clique=clique, y_is_effect=effect, block_wise_dropout=block,
                  sampling=sampling, sort_features=clique, pre_sample_cause_stats=effect,
                  pre_sample_noise_std=block)
        X, y = prior._mlp_scm(hp, 3, 40)
        assert X.shape == (3, 40, 5) and y.shape == (3, 40)
        assert torch.isfinite(X).all() and torch.isfinite(y).all()


def test_causes_samplers():
    prior = TabularPrior(seed=0)
    hp = {"sampling": "mixed", "pre_sample_cause_stats": False}
    causes = prior._causes(hp, 4, 200, 30)
    assert causes.shape == (4, 200, 30) and torch.isfinite(causes).all()
    # mixed columns include discrete ones (multinomial / Zipf) and continuous ones
    distinct = [torch.unique(causes[b, :, j]).numel() for b in range(4) for j in range(30)]
    assert min(distinct) <= 20 and max(distinct) == 200
    uniform = prior._causes({"sampling": "uniform", "pre_sample_cause_stats": False}, 2, 100, 3)
    assert ((uniform >= 0) & (uniform < 1)).all()
    normal = prior._causes({"sampling": "normal", "pre_sample_cause_stats": True}, 2, 100, 3)
    assert normal.shape == (2, 100, 3) and torch.isfinite(normal).all()


def test_every_activation_is_finite():
    prior = TabularPrior(seed=0)
    x = 30.0 * torch.randn(3, 50, 7, generator=torch.Generator().manual_seed(0))
    for act in range(len(ACTIVATIONS)):
        out = prior._apply_activation(act, x)
        assert out.shape == x.shape and torch.isfinite(out).all(), ACTIVATIONS[act]
    mixed = prior._activate(x, [len(ACTIVATIONS) - 1, 0, 12])
    assert mixed.shape == x.shape and torch.isfinite(mixed).all()
    smooth = prior._random_fourier(torch.linspace(-3, 3, 200).view(1, 200, 1))
    assert smooth.std() > 0 and torch.isfinite(smooth).all()


def test_tree_layer_is_piecewise_constant():
    prior = TabularPrior(seed=0)
    x = torch.randn(2, 300, 4, generator=torch.Generator().manual_seed(1))
    out = prior._tree_layer(x, depth=3, n_trees=1, n_out=5)
    assert out.shape == (2, 300, 5)
    for b in range(2):
        assert torch.unique(out[b], dim=0).shape[0] <= 8
    out = prior._tree_layer(x, depth=2, n_trees=3, n_out=1)
    for b in range(2):
        assert 1 < torch.unique(out[b]).numel() <= 4 ** 3


def test_categorical_conversion():
    config = PriorConfig(max_features=6, categorical_prob=1.0)
    prior = TabularPrior(config, seed=0)
    X = torch.randn(16, 100, 6, generator=torch.Generator().manual_seed(2))
    real = torch.ones(16, 6, dtype=torch.bool)
    out = prior._to_categorical(X, real)
    changed = (out != X).any(1)
    assert changed.any()
    codes = out.transpose(1, 2)[changed]
    assert torch.equal(codes, codes.round()) and (codes >= 0).all()


def test_labels_carry_signal():
    """Binary tables: a random forest fitted on the train part beats the majority class on the test part."""
    from sklearn.ensemble import RandomForestClassifier

    batch = TabularPrior(PriorConfig(binary_prob=1.0), seed=11).sample(16, n_rows=200)
    n = batch["n_train"]
    majority, forest = [], []
    for b in range(16):
        d = int(batch["n_features"][b])
        X, y = batch["X"][b, :, :d].numpy(), batch["y"][b].numpy()
        assert set(np.unique(y)) == {0, 1}
        majority.append(np.mean(y[n:] == np.bincount(y[:n]).argmax()))
        forest.append(RandomForestClassifier(30, random_state=0).fit(X[:n], y[:n]).score(X[n:], y[n:]))
    assert np.mean(forest) > np.mean(majority) + 0.02


def test_invalid_config_raises():
    with pytest.raises(ValueError):
        TabularPrior(PriorConfig(min_features=5, max_features=3))
    with pytest.raises(ValueError):
        TabularPrior(PriorConfig(max_classes=1))
    with pytest.raises(ValueError):
        TabularPrior(PriorConfig(min_train_fraction=0.9, max_train_fraction=0.5))
    with pytest.raises(ValueError):
        TabularPrior(PriorConfig(min_rows=8, max_classes=10))
    with pytest.raises(ValueError):
        TabularPrior().sample(0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_batches():
    prior = TabularPrior(SMALL, seed=0, device="cuda")
    batch = prior.sample(8, n_rows=64)
    assert all(batch[k].is_cuda for k in ("X", "y", "n_features", "n_classes"))
    check_batch({k: v.cpu() if torch.is_tensor(v) else v for k, v in batch.items()}, SMALL, 8, n_rows=64)
    state = prior.state_dict()
    again = TabularPrior(SMALL, seed=1, device="cuda")
    first = prior.sample(4)
    again.load_state_dict(state)
    _assert_same(first, again.sample(4))
