"""TabICLv2Model's own properties: its cache, chunking, column orders, loading, errors, quantiles.

Agreement with the official network is in ``test_model_v2_parity.py``.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.tabicl import TabICLModel, TabICLv2Model
from skicml.tabicl import _model_v2
from skicml.tabicl._model_v2 import load_tabicl_network, mixed_radix_bases
from skicml.tabicl._quantiles import QuantileDistribution, quantile_levels

TINY = dict(embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=4, row_num_blocks=1, row_nhead=2,
            row_num_cls=2, icl_num_blocks=2, icl_nhead=2)


def _model(seed=0, **config):
    torch.manual_seed(seed)
    model = TabICLv2Model(**{**TINY, **config})
    with torch.no_grad():
        for name, param in model.named_parameters():
            if not name.endswith("rope.freqs"):
                param.add_(0.2 * torch.randn_like(param))
    return model.eval()


def _table(n_train, n_test, n_features, n_classes, batch=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(batch, n_train + n_test, n_features, generator=g)
    if n_classes == 0:
        return X, torch.randn(batch, n_train, generator=g)
    return X, torch.stack([torch.randperm(n_train, generator=g) % n_classes for _ in range(batch)])


def _close(got, expected):
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), n_classes=st.sampled_from([0, 2, 5, 13]))
def test_test_rows_are_independent_and_training_rows_a_set(seed, n_classes):
    # test rows never see each other; no stage knows the order of the training rows
    model = _model(max_classes=0 if n_classes == 0 else 5, num_quantiles=7)
    X, y = _table(30, 6, 4, n_classes, batch=1, seed=seed)
    predict = model.predict_quantiles if n_classes == 0 else model.predict_logits
    with torch.no_grad():
        full = predict(X, y)
        alone = predict(torch.cat([X[:, :30], X[:, 33:34]], dim=1), y)
        order = torch.randperm(30, generator=torch.Generator().manual_seed(seed))
        shuffled = predict(torch.cat([X[:, order], X[:, 30:]], dim=1), y[:, order])
    _close(alone[:, 0], full[:, 3])
    torch.testing.assert_close(shuffled, full, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("config, n_classes", [(dict(), 3), (dict(max_classes=3), 7), (dict(max_classes=0), 0),
                                               (dict(col_feature_group="valid"), 4)])
def test_chunked_passes_and_cache_give_the_same_outputs(monkeypatch, config, n_classes):
    model = _model(num_quantiles=5, **config)
    X, y = _table(24, 9, 5, n_classes)
    predict = model.predict_quantiles if n_classes == 0 else model.predict_logits
    with torch.no_grad():
        expected = predict(X, y)
        monkeypatch.setattr(_model_v2, "COLUMN_CELLS", 50)  # two columns per pass
        monkeypatch.setattr(_model_v2, "ROW_TOKENS", 40)  # a few rows per pass
        monkeypatch.setattr(_model_v2, "ROW_CHUNK", 4)  # three chunks of test rows
        chunked = predict(X, y)
        cached = model.predict_with_context(model.build_context(X[:, :24], y), X[:, 24:])
        uncached = model.predict_with_context(model.build_context(X[:, :24], y, cache=False), X[:, 24:])
    for got in (chunked, cached, uncached):
        _close(got, expected)


def test_context_reads_columns_in_its_permutation():
    model = _model()
    X, y = _table(20, 5, 6, 3)
    permutation = np.array([3, 0, 5, 1, 4, 2])
    with torch.no_grad():
        context = model.build_context(X[:, :20], y, permutation=permutation)
        got = model.predict_with_context(context, X[:, 20:])
        expected = model.predict_logits(X[:, :, permutation], y)
        unpermuted = model.predict_logits(X, y)
    _close(got, expected)
    assert not torch.allclose(got, unpermuted, atol=1e-3)  # the order matters (feature groups, rotary)
    assert context.n_train == 20 and context.n_classes == 3 and len(context.icl) == 2
    assert model.context_nbytes(20) == 2 * 2 * 20 * model.row_dim * 4


def test_column_stage_passes_and_bases():
    assert mixed_radix_bases(7, 10) == [7]
    assert mixed_radix_bases(25, 10) == [5, 5]
    assert mixed_radix_bases(17, 4) == [3, 3, 3]
    for n_classes, max_classes in [(11, 10), (101, 10), (1000, 10), (30, 4)]:
        bases = mixed_radix_bases(n_classes, max_classes)
        assert max(bases) <= max_classes and np.prod(bases) >= n_classes
    model = _model(max_classes=4)
    digits = model.col_embedder.label_passes(torch.arange(9).unsqueeze(0))
    # 9 classes with 4 natively: two digits of base 3, labels decoded uniquely
    assert [d.tolist() for d in digits] == [[[0, 0, 0, 1, 1, 1, 2, 2, 2]], [[0, 1, 2, 0, 1, 2, 0, 1, 2]]]
    context = model.build_context(*_table(27, 0, 3, 9))
    assert len(context.columns) == 2 and context.icl is None


def test_feature_groups():
    model = _model(col_feature_group_size=3)
    X = torch.arange(5.0).view(1, 1, 5)
    same = model.col_embedder.groups(X)[0, :, 0]
    # group j reads columns j + 1, j + 2, j + 4 (mod 5), as officially: every column is in three groups
    assert same.tolist() == [[1, 2, 4], [2, 3, 0], [3, 4, 1], [4, 0, 2], [0, 1, 3]]
    valid = _model(col_feature_group="valid", col_feature_group_size=2).col_embedder.groups(X)[0, :, 0]
    assert valid.tolist() == [[0, 1], [2, 3], [4, 0]]


def test_training_forward_shapes_and_padded_tables():
    model = _model(col_feature_group=False).train()
    X, y = _table(16, 4, 5, 3, batch=3)
    n_features = torch.tensor([5, 3, 1])
    X = X * (torch.arange(5) < n_features.view(3, 1, 1))
    out = model(X, y, n_features=n_features)
    assert out.shape == (3, 4, 10)
    # padded columns are invisible: dropping them gives the same outputs
    _close(model(X[1:2, :, :3], y[1:2])[0], out[1])
    regression = _model(max_classes=0, num_quantiles=9).train()
    assert regression(X, y.float()).shape == (3, 4, 9)


def test_recompute_gives_the_same_gradients():
    X, y = _table(12, 4, 3, 2)
    grads = []
    for recompute in (False, True):
        model = _model(recompute=recompute).train()
        model(X, y).square().sum().backward()
        grads.append(model.icl_predictor.tf_icl.blocks[0].linear1.weight.grad)
    _close(grads[1], grads[0])


def test_float64_and_config_round_trip():
    model = _model(max_classes=0, num_quantiles=5)
    X, y = _table(10, 3, 2, 0)
    with torch.no_grad():
        single = model.predict_quantiles(X, y)
        double = model.double().predict_quantiles(X.double(), y.double())
    torch.testing.assert_close(double.float(), single, atol=1e-4, rtol=1e-4)
    again = TabICLv2Model(**model.config)
    assert again.config == model.config
    again.load_state_dict(model.state_dict())


def test_load_tabicl_network_picks_v1_or_v2(tmp_path):
    v2 = _model(max_classes=0, num_quantiles=5)
    v1 = TabICLModel(embed_dim=16, col_num_blocks=1, col_num_inds=4, row_num_blocks=1, row_nhead=2, row_num_cls=2,
                     icl_num_blocks=1, icl_nhead=2).eval()
    for model, network in ((v2, TabICLv2Model), (v1, TabICLModel)):
        checkpoint = {"config": model.config, "state_dict": model.state_dict()}
        path = tmp_path / f"{network.__name__}.ckpt"
        torch.save(checkpoint, path)
        for source in (path, str(path), checkpoint):
            loaded = load_tabicl_network(source)
            assert type(loaded) is network and not loaded.training
            for name, tensor in model.state_dict().items():
                assert torch.equal(loaded.state_dict()[name], tensor)
    # a v1 architecture described by a v2 config (the official 2.x files of the v1 weights) loads as v2
    v1_in_v2 = {**TINY, "col_affine": True, "col_feature_group": False, "col_target_aware": False,
                "col_ssmax": "none", "icl_ssmax": "none"}
    assert type(load_tabicl_network({"config": v1_in_v2, "state_dict": TabICLv2Model(**v1_in_v2).state_dict()})) \
        is TabICLv2Model


def test_load_tabicl_network_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="No TabICL checkpoint"):
        load_tabicl_network(tmp_path / "missing.ckpt")
    with pytest.raises(ValueError, match="'config' and 'state_dict'"):
        load_tabicl_network({"state_dict": {}})
    with pytest.raises(ValueError, match="Unknown TabICL config keys"):
        load_tabicl_network({"config": {**TINY, "col_magic": 3}, "state_dict": {}})
    with pytest.raises(RuntimeError, match="size mismatch|Missing key"):
        load_tabicl_network({"config": {**TINY, "num_quantiles": 3},
                             "state_dict": TabICLv2Model(**{**TINY, "embed_dim": 8}).state_dict()})


def test_bad_inputs_are_named():
    model = _model()
    X, y = _table(10, 2, 3, 3)
    with pytest.raises(ValueError, match="integers 0..K-1"):
        model.predict_logits(X, y + 1)
    with pytest.raises(ValueError, match="same number of classes"):
        model.predict_logits(X, torch.stack([y[0], y[1] % 2]))
    with pytest.raises(ValueError, match="regression model"):
        _model(max_classes=0).predict_logits(X, y.float())
    with pytest.raises(ValueError, match="classifier"):
        model.predict_quantiles(X, y)
    with pytest.raises(ValueError, match="shape \\(B, rows, H\\)"):
        model.build_context(X[0], y)
    with pytest.raises(ValueError, match="10 labels"):
        model.build_context(X, y)
    context = model.build_context(X[:, :10], y)
    with pytest.raises(ValueError, match="4 columns"):
        model.predict_with_context(context, torch.randn(2, 2, 4))
    with pytest.raises(ValueError, match="col_feature_group=False"):
        model.train()(X, y, n_features=torch.tensor([3, 2]))
    with pytest.raises(ValueError, match="col_feature_group must be"):
        TabICLv2Model(**TINY, col_feature_group="pairs")
    with pytest.raises(ValueError, match="col_affine"):
        TabICLv2Model(**TINY, col_affine=True)
    with pytest.raises(ValueError, match="Unknown scalable softmax"):
        TabICLv2Model(**TINY, icl_ssmax="fast")
    with pytest.raises(ValueError, match="num_quantiles > 0"):
        TabICLv2Model(**TINY, max_classes=0, num_quantiles=0)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.sampled_from([8, 19, 99]), scale=st.floats(0.01, 100.0))
def test_quantile_function_is_monotone_and_meets_the_knots(seed, n, scale):
    g = torch.Generator().manual_seed(seed)
    raw = scale * torch.randn(3, n, generator=g, dtype=torch.float64)  # crossing quantiles
    dist = QuantileDistribution(raw)
    alphas = torch.linspace(0, 1, 513, dtype=torch.float64)
    values = dist.icdf(alphas)
    assert bool((values.diff(dim=-1) >= -1e-9 * scale).all())
    torch.testing.assert_close(dist.icdf(quantile_levels(n, torch.float64)), raw.sort(-1).values)
    assert bool((dist.analytical_variance() >= 0).all())
    sorted_raw = raw.sort(-1).values
    assert bool((dist.mean() >= sorted_raw[:, 0]).all() and (dist.mean() <= sorted_raw[:, -1]).all())
    assert dist.median().shape == (3,)
    # sorted by NumPy on the CPU, lazily: the same values as torch's sort; mean and variance need no order
    assert torch.equal(dist.quantiles, sorted_raw)
    assert torch.equal(QuantileDistribution(raw.float()).quantiles, raw.float().sort(-1).values)
    _close(dist.mean(), sorted_raw.mean(-1))
    _close(dist.variance(), sorted_raw.var(-1))


@pytest.mark.parametrize("cache", [True, False])
def test_quantile_mean_is_the_mean_of_the_quantiles(cache):
    # the decoder's last layer averaged over its outputs gives the mean without the quantiles
    model = _model(max_classes=0, num_quantiles=31)
    X, y = _table(25, 7, 4, 0)
    with torch.no_grad():
        context = model.build_context(X[:, :25], y, cache=cache)
        quantiles = model.predict_with_context(context, X[:, 25:])
        means = model.predict_with_context(context, X[:, 25:], quantile_mean=True)
    assert means.shape == (2, 7)
    _close(means, quantiles.mean(-1))
    assert float(means.std()) > 1e-3  # rows differ: not a constant that would match anything
    with pytest.raises(ValueError, match="regression model"):
        classifier = _model()
        classifier.predict_with_context(classifier.build_context(X[:, :25], (y > 0).long()), X[:, 25:],
                                        quantile_mean=True)


def test_quantile_distribution_errors():
    with pytest.raises(ValueError, match="At least 8 quantiles"):
        QuantileDistribution(torch.randn(2, 5))
    with pytest.raises(ValueError, match="levels has shape"):
        QuantileDistribution(torch.randn(2, 9), levels=torch.rand(4))


def test_v1_weights_run_in_a_v1_like_v2_network():
    # v2 with the affine, label-free column stage and no query scaling is v1: same names, same outputs
    v1 = TabICLModel(embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=4, row_num_blocks=1, row_nhead=2,
                     row_num_cls=2, icl_num_blocks=2, icl_nhead=2).eval()
    with torch.no_grad():
        for param in v1.parameters():
            param.add_(0.2 * torch.randn_like(param))
    v2 = TabICLv2Model(**TINY, col_affine=True, col_feature_group=False, col_target_aware=False, col_ssmax=False,
                       icl_ssmax=False).eval()
    v2.load_state_dict(v1.state_dict(), strict=True)
    X, y = _table(20, 6, 4, 3)
    with torch.no_grad():
        torch.testing.assert_close(v2.predict_logits(X, y), v1.predict_logits(X, y.float()), atol=1e-5, rtol=1e-5)
