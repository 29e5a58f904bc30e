"""Our TabICLv2Model against the official ``tabicl==2.2.0`` network.

The official package is imported beside the ``tabicl`` 0.1.4 of the v1 parity
tests by :mod:`_official_v2` (its own folder, swapped into ``sys.modules``
while its code runs). Randomly initialised official models at small configs
are perturbed away from their zero initialisations, loaded into ours, and
must agree to 1e-4.
"""

import sys

import pytest
import torch
from _official_v2 import VERSION, dist_version, is_tabicl, official_or_skip

from skicml.tabicl._model_v2 import TabICLv2Model, load_tabicl_network
from skicml.tabicl._quantiles import QuantileDistribution

OFFICIAL = official_or_skip()

SMALL = dict(embed_dim=16, col_num_blocks=2, col_nhead=2, col_num_inds=4, row_num_blocks=2, row_nhead=2,
             row_num_cls=2, icl_num_blocks=2, icl_nhead=2)


def _randomised_official(config, seed=0):
    with OFFICIAL.active():
        torch.manual_seed(seed)
        model = OFFICIAL.TabICL(**config)
        # Blocks (and the query-aware scaling) start at zero; perturb every
        # weight so the test exercises every path.
        with torch.no_grad():
            for name, param in model.named_parameters():
                if not name.endswith("rope.freqs"):
                    param.add_(0.2 * torch.randn_like(param))
    return model.eval()


def _pair(config, seed=0):
    theirs = _randomised_official(config, seed)
    ours = TabICLv2Model(**config).eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    return theirs, ours


def _table(n_train, n_test, n_features, n_classes, batch=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(batch, n_train + n_test, n_features, generator=g)
    if n_classes == 0:
        return X, torch.randn(batch, n_train, generator=g)
    return X, torch.stack([torch.randperm(n_train, generator=g) % n_classes for _ in range(batch)]).float()


def _official_predict(theirs, X, y, **kwargs):
    with OFFICIAL.active(), torch.no_grad():
        return theirs(X, y, inference_config=OFFICIAL.inference_config(), **kwargs)


def _close(got, expected):
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_official_is_2_2_0_and_v1_is_untouched():
    assert dist_version(OFFICIAL.path) == VERSION
    assert OFFICIAL.TabICL.__module__ == "tabicl._model.tabicl"
    # outside the swap, ``tabicl`` is whatever the environment has (0.1.4 for the v1 tests)
    assert not any(module is OFFICIAL.modules.get(name) for name, module in sys.modules.items() if is_tabicl(name))


def test_state_dict_names_and_shapes_match_official_default():
    with OFFICIAL.active():
        theirs = OFFICIAL.TabICL()
    ours = TabICLv2Model()
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters()) == 27_552_258
    ours.load_state_dict(theirs.state_dict(), strict=True)


# every ssmax kind in both stages, every feature-group mode, both rotary layouts,
# bias-free and post-norm blocks, the v1-like column stage (affine, label-free)
CONFIGS = {
    "default": dict(),
    "valid-groups": dict(col_feature_group="valid", col_feature_group_size=2, col_ssmax="ssmax",
                         icl_ssmax="ssmax-mlp"),
    "v1-like": dict(col_feature_group=False, col_affine=True, col_target_aware=False, col_ssmax="none",
                    icl_ssmax="none"),
    "halves": dict(row_rope_interleaved=False, bias_free_ln=True, col_ssmax="ssmax-mlp-elementwise",
                   icl_ssmax="qassmax-mlp"),
    "post-norm": dict(norm_first=False, col_feature_group=True, col_ssmax="qassmax-mlp",
                      icl_ssmax="ssmax-mlp-elementwise", activation="relu"),
    "booleans": dict(col_feature_group=False, col_ssmax=True, icl_ssmax=False, max_classes=5),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_logits_match_official_inference(name):
    theirs, ours = _pair({**SMALL, **CONFIGS[name]})
    X, y = _table(40, 13, 7, 3)
    X[0, 5:9, 2] = -100.0  # official placeholder value in real cells
    expected = _official_predict(theirs, X, y)
    with torch.no_grad():
        got = ours.predict_logits(X, y)
        cached = ours.predict_with_context(ours.build_context(X[:, :40], y), X[:, 40:])
        uncached = ours.predict_with_context(ours.build_context(X[:, :40], y, cache=False), X[:, 40:])
    assert got.shape == expected.shape == (2, 13, 3)
    _close(got, expected)
    _close(cached, expected)
    _close(uncached, expected)


def test_quantiles_match_official_regression():
    config = {**SMALL, "max_classes": 0, "num_quantiles": 31}
    theirs, ours = _pair(config)
    X, y = _table(30, 9, 4, 0)
    expected = _official_predict(theirs, X, y)
    with torch.no_grad():
        got = ours.predict_quantiles(X, y)
        cached = ours.predict_with_context(ours.build_context(X[:, :30], y), X[:, 30:])
        uncached = ours.predict_with_context(ours.build_context(X[:, :30], y, cache=False), X[:, 30:])
    assert got.shape == (2, 9, 31)
    _close(got, expected)
    _close(cached, expected)
    _close(uncached, expected)
    # the official statistics of the distribution, from our raw quantiles
    with OFFICIAL.active(), torch.no_grad():
        stats = theirs.predict_stats(X, y, output_type=["mean", "variance", "median", "quantiles"],
                                     alphas=[0.01, 0.1, 0.5, 0.93, 0.999],
                                     inference_config=OFFICIAL.inference_config())
    dist = ours.distribution(got)
    _close(dist.mean(), stats["mean"])
    _close(dist.variance(), stats["variance"])
    _close(dist.median(), stats["median"])
    _close(dist.icdf(torch.tensor([0.01, 0.1, 0.5, 0.93, 0.999])), stats["quantiles"])


@pytest.mark.parametrize("n_classes", [6, 17])
def test_many_classes_match_official(n_classes):
    # beyond max_classes: mixed-radix column stage (17 -> 3 digits of base 3) and the class tree
    theirs, ours = _pair({**SMALL, "max_classes": 4})
    X, y = _table(3 * n_classes, 7, 5, n_classes, seed=n_classes)
    expected = _official_predict(theirs, X, y)
    with torch.no_grad():
        got = ours.predict_logits(X, y)
        cached = ours.predict_with_context(ours.build_context(X[:, :3 * n_classes], y), X[:, 3 * n_classes:])
    assert got.shape == (2, 7, n_classes)
    _close(got, expected)
    _close(cached, expected)


def test_training_forward_matches_official_with_padded_tables():
    config = {**SMALL, "col_feature_group": False}
    theirs, ours = _pair(config)
    theirs.train()
    ours.train()
    X, y = _table(30, 10, 7, 4, batch=3)
    n_features = torch.tensor([7, 4, 2])
    X = X * (torch.arange(7) < n_features.view(3, 1, 1))
    with OFFICIAL.active():
        expected = theirs(X, y, d=n_features)
    got = ours(X, y.long(), n_features=n_features)
    assert got.shape == (3, 10, 10)
    _close(got, expected)
    got.sum().backward()  # gradients reach every stage
    assert ours.col_embedder.tf_col.blocks[0].multihead_attn1.attn.ssmax_layer.base_mlp[0].weight.grad is not None


def test_training_forward_matches_official_regression_with_groups():
    theirs, ours = _pair({**SMALL, "max_classes": 0, "num_quantiles": 9})
    theirs.train()
    ours.train()
    X, y = _table(25, 6, 5, 0)
    with OFFICIAL.active():
        expected = theirs(X, y)
    _close(ours(X, y), expected)


def test_quantile_distribution_matches_official():
    g = torch.Generator().manual_seed(0)
    raw = torch.randn(3, 4, 99, generator=g).cumsum(-1) + 0.3 * torch.randn(3, 4, 99, generator=g)
    with OFFICIAL.active():
        theirs = OFFICIAL.QuantileDistribution(raw)
    ours = QuantileDistribution(raw)
    alphas = torch.tensor([0.0, 1e-7, 0.001, 0.005, 0.01, 0.0101, 0.37, 0.5, 0.99, 0.995, 0.9999, 1.0])
    _close(ours.quantiles, theirs.quantiles)
    _close(ours.icdf(alphas), theirs.icdf(alphas))
    _close(ours.icdf(torch.tensor(0.3)), theirs.icdf(torch.tensor(0.3)))
    _close(ours.analytical_mean(), theirs.mean())
    _close(ours.analytical_variance(), theirs.variance())
    _close(ours.beta_left, theirs.beta_l)
    _close(ours.beta_right, theirs.beta_r)


def test_official_checkpoint_loads(tmp_path):
    config = {**SMALL, "max_classes": 0, "num_quantiles": 15}
    theirs = _randomised_official(config, seed=4)
    path = tmp_path / "tabicl-regressor-v2.ckpt"
    torch.save({"config": config, "state_dict": theirs.state_dict()}, path)
    ours = load_tabicl_network(path)
    assert isinstance(ours, TabICLv2Model) and not ours.training
    X, y = _table(20, 5, 3, 0)
    with torch.no_grad():
        _close(ours.predict_quantiles(X, y), _official_predict(theirs, X, y))
