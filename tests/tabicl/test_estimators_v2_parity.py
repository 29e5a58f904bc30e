"""skicml's TabICLRegressor and TabICLClassifier against the official ``tabicl==2.2.0`` estimators.

Both load the same randomly initialised (and perturbed) v2 network from one
checkpoint file and fit the same small tables with the same integer
``random_state``, so everything between the table and the network must agree:
the encoding, the member draw (column orders, the class shifts of
``Shuffler(method="shift")`` in the official order), the per-member
preprocessing, the target standardisation, the class-shift undo and the
averaging. The official estimators run with their fit-time KV cache where they
have one (not beyond ``max_classes``, where they refuse it) and without AMP;
ours with their own cache, ``softmax_temperature=0.9`` (the official value;
ours defaults to a fitted one) and ``pca_components=None`` (the principal
view is skicml's addition).

One deliberate difference is not tested: when every column is constant the
official estimators keep the first one and let the network guess the
target's marginal distribution; ours return the empirical one (class prior,
training targets' quantiles) without running the network.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from _official_v2 import official_or_skip
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml import TabICLClassifier, TabICLRegressor
from skicml.tabicl import TabICLv2Model
from skicml.tabicl._ensemble import EnsembleGenerator

OFFICIAL = official_or_skip()

SMALL = dict(embed_dim=16, col_num_blocks=2, col_nhead=2, col_num_inds=4, row_num_blocks=2, row_nhead=2,
             row_num_cls=2, icl_num_blocks=2, icl_nhead=2)
N_TRAIN = 70


def _checkpoint(folder, **config):
    torch.manual_seed(0)
    model = TabICLv2Model(**SMALL, **config)
    with torch.no_grad():  # away from the zero initialisation: every block matters
        for parameter in model.parameters():
            parameter.add_(0.2 * torch.randn_like(parameter))
    path = folder / f"v2-{config['max_classes']}.ckpt"
    torch.save({"config": model.config, "state_dict": model.state_dict()}, path)
    return path


@pytest.fixture(scope="module")
def networks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("v2")
    return {"classification": _checkpoint(folder, max_classes=4),
            "regression": _checkpoint(folder, max_classes=0, num_quantiles=63)}


def _table(n_classes=None):
    """90 rows: numeric columns with missing values, a rounded one, a constant one, a categorical one."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(90, 5))
    X[:, 3] = np.round(X[:, 3])
    X[:, 4] = 1.0
    y = X[:, :4] @ rng.normal(size=4) + 0.3 * rng.normal(size=90)
    X[rng.rand(90) < 0.1, 1] = np.nan
    frame = pd.DataFrame(X, columns=list("abcde"))
    frame.insert(1, "kind", pd.Categorical(rng.choice(["x", "y", "z"], 90)))
    if n_classes is not None:
        y = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return frame.iloc[:N_TRAIN], frame.iloc[N_TRAIN:], y[:N_TRAIN]


def _official(name, path, **options):
    settings = dict(model_path=path, allow_auto_download=False, n_estimators=5, kv_cache=True, device="cpu",
                    use_amp=False, use_fa3=False, random_state=3)
    return getattr(OFFICIAL, name)(**{**settings, **options})


def test_regressor_matches_official(networks):
    X_train, X_test, y = _table()
    y = 40 * y + 300  # a target far from standard: the standardisation must match too
    alphas = [0.05, 0.3, 0.5, 0.93]
    outputs = ["mean", "median", "quantiles", "raw_quantiles"]
    with OFFICIAL.active(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _official("TabICLRegressor", networks["regression"]).fit(X_train, y)
        expected = theirs.predict(X_test, output_type=outputs, alphas=alphas)
    ours = TabICLRegressor(pretrained=networks["regression"], n_estimators=5, random_state=3, device="cpu")
    got = ours.fit(X_train, y).predict(X_test, output=outputs, alphas=alphas)
    assert ours.n_estimators_ == 5 and got["quantiles"].shape == (20, 4)
    for name in outputs:
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=1e-4 * y.std(), err_msg=name)
    # the mean alone takes a shorter path (no quantiles computed): the same numbers
    np.testing.assert_allclose(ours.predict(X_test), expected["mean"], rtol=0, atol=1e-4 * y.std())
    # and they are not all the same number: the members and the rows differ
    assert np.ptp(got["mean"]) > 0.01 * y.std()


CLASSIFIER_CASES = {
    "three classes": (3, {}),
    "probabilities averaged, other normalisations": (
        3, dict(average_logits=False, norm_methods=["quantile", "robust", "power"], feat_shuffle_method="random",
                n_estimators=7)),
    "temperature 0.6, shifted columns": (4, dict(softmax_temperature=0.6, feat_shuffle_method="shift")),
    # beyond max_classes=4: mixed-radix column stage and the class tree (the official refuses its cache)
    "seven classes": (7, dict(kv_cache=False)),
}


@pytest.mark.parametrize("case", CLASSIFIER_CASES)
def test_classifier_matches_official(networks, case):
    n_classes, options = CLASSIFIER_CASES[case]
    X_train, X_test, y = _table(n_classes)
    with OFFICIAL.active(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = _official("TabICLClassifier", networks["classification"], **options).fit(
            X_train, y).predict_proba(X_test)
    ours_options = {key: value for key, value in options.items() if key != "kv_cache"}
    ours = TabICLClassifier(**{**dict(pretrained=networks["classification"], n_estimators=5, random_state=3,
                                      device="cpu", softmax_temperature=0.9, pca_components=None),
                               **ours_options}).fit(X_train, y)
    got = ours.predict_proba(X_test)
    assert got.shape == (20, n_classes)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)
    assert np.abs(got - 1 / n_classes).max() > 0.02  # not uniform: the members' classes are aligned


def _official_draw(X, y, **options):
    with OFFICIAL.active():
        from tabicl._sklearn.preprocessing import EnsembleGenerator as Official

        return Official(classification=True, **options).fit(X, y).ensemble_configs_


@settings(max_examples=25, deadline=None)
@given(n_features=st.integers(1, 7), n_classes=st.integers(2, 6), n_estimators=st.integers(1, 40),
       seed=st.integers(0, 2**31 - 1), shuffle=st.sampled_from(["latin", "shift", "random", "none"]),
       methods=st.sampled_from([["none", "power"], ["power"], ["robust", "none", "power"]]))
def test_member_draw_v2_is_the_official_2_2_draw(n_features, n_classes, n_estimators, seed, shuffle, methods):
    rng = np.random.RandomState(seed % 1000)
    X = rng.normal(size=(3 * n_classes, n_features))
    y = np.arange(3 * n_classes) % n_classes
    options = dict(n_estimators=n_estimators, norm_methods=methods, feat_shuffle_method=shuffle, random_state=seed)
    expected = _official_draw(X, y, **options)
    ours = EnsembleGenerator(**options, member_draw="v2").fit(X, y)
    assert set(ours.members_by_method_) == set(expected)
    for method, members in ours.members_by_method_.items():
        # the official shuffle pattern p relabels class c as p[c]: ours shifts c to (c + offset) mod K
        got = [(ours.configs_[i][1].tolist(), [(c + ours.configs_[i][2]) % n_classes for c in range(n_classes)])
               for i in members]
        assert got == [(list(columns), list(classes)) for columns, classes in expected[method]]


def test_an_unknown_member_draw_is_refused():
    with pytest.raises(ValueError, match="member_draw must be one of"):
        EnsembleGenerator(member_draw="v3").fit(np.eye(4), [0, 1, 0, 1])
