"""TabICLImputer and TabICLOutlierDetector: the chain rule's factors are TabICL's in-context predictions.

The estimators run with the test-time settings of every estimator
(``skicml.utils._test_common.TEST_PARAMS``): the shipped small networks, two
members per conditional, float64. What is checked: a column's imputation and
a factor's density equal a direct in-context prediction with the same
members; the density of a quantile function is the official one; fitting,
pickling and cloning are exact; bad input gets a clear error or the
documented fallback; and the official ``tabicl`` 2.2.0 gives the same factors
on the same random v2 network.
"""

import pickle

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.linear_model import Ridge

from skicml.tabicl import TabICLImputer, TabICLOutlierDetector, TabICLRegressor, TabICLv2Model
from skicml.tabicl._quantiles import QuantileDistribution, quantile_levels
from skicml.tabicl._unsupervised import _PROBES, LOG_FLOOR, quantile_log_density
from skicml.utils._test_common import TEST_PARAMS

# two members, so that the members' averaging is part of what is checked
IMPUTER = {**TEST_PARAMS["TabICLImputer"], "n_estimators": 2}
DETECTOR = {**TEST_PARAMS["TabICLOutlierDetector"], "n_estimators": 2}


def _table(n=80, seed=0):
    """Three numeric columns (the third the sum of the first two) and a categorical one."""
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, 4))
    X[:, 2] = X[:, 0] + X[:, 1] + 0.1 * rng.normal(size=n)
    X[:, 3] = (X[:, 0] > 0).astype(float) + (X[:, 1] > 0)
    return X


@pytest.fixture(scope="module")
def imputed():
    X = _table()
    X_missing = X.copy()
    X_missing[np.random.RandomState(1).rand(*X.shape) < 0.15] = np.nan
    return TabICLImputer(**IMPUTER).fit(X_missing), X, X_missing


@pytest.fixture(scope="module")
def detector():
    X = _table()[:, :3]
    return TabICLOutlierDetector(**DETECTOR).fit(X), X


# -- the density of a quantile function -----------------------------------------
def test_quantile_log_density_of_a_normal_matches_the_official_values():
    levels = quantile_levels(999, dtype=torch.float64)
    dist = QuantileDistribution(torch.distributions.Normal(0.0, 1.0).icdf(levels).double().expand(5, -1))
    z = torch.tensor([0.0, 3.0, -3.0, 5.0, -40.0], dtype=torch.float64)
    out = quantile_log_density(dist, z).numpy()
    # the values the spec measured on the official QuantileDistribution.log_prob
    np.testing.assert_allclose(out[:4], [-0.919, -5.357, -5.357, -11.30], atol=6e-3)  # printed to 2 decimals
    assert np.isfinite(out[4]) and out[4] >= -np.log(1e6) - 1e-9  # the slope clamp bounds it


def test_quantile_log_density_equals_the_official_log_prob():
    from _official_v2 import official_or_skip

    official = official_or_skip()
    rng = np.random.RandomState(0)
    q = torch.from_numpy(np.sort(rng.standard_t(3, size=(6, 999)), axis=1) * rng.uniform(0.5, 3, (6, 1)))
    z = torch.from_numpy(rng.normal(scale=4, size=6))
    with official.active():
        expected = official.QuantileDistribution(q).log_prob(z.unsqueeze(-1)).squeeze(-1)
    np.testing.assert_allclose(quantile_log_density(QuantileDistribution(q), z).numpy(), expected.numpy(),
                               rtol=1e-9, atol=1e-9)


# -- the imputer ----------------------------------------------------------------
def test_a_column_is_imputed_by_a_direct_in_context_prediction(imputed):
    imputer, X, X_missing = imputed
    # only column 2 missing in the rows transformed, one round: its cells are the regressor's
    query = X[:10].copy()
    query[:, 2] = np.nan
    out = clone(imputer).set_params(max_iter=1).fit(X_missing).transform(query)
    assert imputer.n_estimators == 2
    context = ~np.isnan(X_missing[:, 2])
    direct = TabICLRegressor(**{**IMPUTER, "n_estimators": 2}).fit(
        X_missing[context][:, [0, 1, 3]], X_missing[context, 2])
    np.testing.assert_allclose(out[:, 2], direct.predict(query[:, [0, 1, 3]]), rtol=1e-10)
    np.testing.assert_array_equal(out[:, [0, 1, 3]], query[:, [0, 1, 3]])


def test_imputation_beats_the_column_median_and_keeps_levels(imputed):
    imputer, X, X_missing = imputed
    out = imputer.transform(X_missing)
    missing = np.isnan(X_missing)
    assert not np.isnan(out).any()
    error = np.sqrt(((out - X)[:, 2][missing[:, 2]] ** 2).mean())
    baseline = np.sqrt(((np.nanmedian(X_missing[:, 2]) - X[:, 2])[missing[:, 2]] ** 2).mean())
    assert error < 0.8 * baseline
    assert set(np.unique(out[:, 3])) <= {0.0, 1.0, 2.0}
    assert imputer.categorical_.tolist() == [False, False, False, True]


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.0, 0.6))
def test_observed_cells_are_never_changed_and_complete_rows_come_back(imputed, seed, rate):
    imputer, X, _ = imputed
    rng = np.random.RandomState(seed)
    rows = X[rng.choice(len(X), 6)]
    holes = rows.copy()
    holes[rng.rand(*rows.shape) < rate] = np.nan
    out = imputer.transform(holes)
    observed = ~np.isnan(holes)
    np.testing.assert_array_equal(out[observed], holes[observed])
    assert not np.isnan(out).any()
    np.testing.assert_array_equal(imputer.transform(rows), rows)


def test_options_initial_strategy_order_and_median():
    X = _table()
    X[::5, 0] = np.nan
    X[::3, 2] = np.nan
    zero = TabICLImputer(max_iter=0, initial_strategy="mean", **IMPUTER).fit(X).transform(X)
    np.testing.assert_allclose(zero[::5, 0], np.nanmean(X[:, 0]))
    median = TabICLImputer(estimate="median", imputation_order="roman", **IMPUTER).fit(X).transform(X)
    mean = TabICLImputer(**IMPUTER).fit(X).transform(X)
    assert not np.allclose(median[::3, 2], mean[::3, 2])


def test_pipeline_and_pandas_in_and_out():
    X = _table()
    frame = pd.DataFrame(X[:, :3], columns=["a", "b", "c"])
    frame["kind"] = pd.Categorical(np.where(X[:, 3] > 0, "up", "down"))
    frame.iloc[::4, 2] = np.nan
    frame.iloc[1::6, 3] = np.nan
    imputer = TabICLImputer(**IMPUTER).fit(frame)
    out = imputer.transform(frame)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["a", "b", "c", "kind"]
    assert out["kind"].dtype == frame["kind"].dtype and out.notna().all().all()
    assert set(out["kind"]) <= {"up", "down"}
    assert imputer.get_feature_names_out().tolist() == ["a", "b", "c", "kind"]

    numeric = frame[["a", "b", "c"]]
    as_frame = TabICLImputer(**IMPUTER).set_output(transform="pandas").fit_transform(numeric)
    assert isinstance(as_frame, pd.DataFrame) and list(as_frame.columns) == ["a", "b", "c"]
    y = X[:, 0] - X[:, 1]
    score = make_pipeline(TabICLImputer(**IMPUTER), Ridge()).fit(numeric, y).score(numeric, y)
    assert score > 0.5


def test_pickle_clone_and_refit_are_exact(imputed, detector):
    imputer, _, X_missing = imputed
    expected = imputer.transform(X_missing)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(imputer)).transform(X_missing), expected)
    np.testing.assert_array_equal(clone(imputer).fit(X_missing).transform(X_missing), expected)
    model, X = detector
    scores = model.score_samples(X)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(model)).score_samples(X), scores)
    np.testing.assert_array_equal(clone(model).fit(X).score_samples(X), scores)
    # the conditionals share one network: it is pickled once
    assert len(pickle.dumps(model)) < 3 * len(pickle.dumps(model.conditionals_[0, ()].estimator.model_))


def test_bad_input_all_missing_constant_and_unseen_categories():
    X = _table()
    X[:, 1] = np.nan
    with pytest.raises(ValueError, match="missing in every row"):
        TabICLImputer(**IMPUTER).fit(X)
    X = _table()
    X[:, 1] = 7.0
    X[::4, 1] = np.nan
    out = TabICLImputer(**IMPUTER).fit(X).transform(X)
    np.testing.assert_array_equal(out[:, 1], 7.0)
    detector = TabICLOutlierDetector(**DETECTOR).fit(X)
    other = X[:3].copy()
    other[:, 1] = [7.0, 8.0, np.nan]
    other[:, [0, 2, 3]] = X[0, [0, 2, 3]]
    # another value of the constant column costs log(1e-10); a missing one nothing
    scores = detector.score_samples(other)
    np.testing.assert_allclose(scores - scores[0], [0.0, LOG_FLOOR, 0.0], atol=1e-9)

    frame = pd.DataFrame({"x": _table()[:, 0], "kind": np.where(_table()[:, 0] > 0, "up", "down")})
    imputer = TabICLImputer(**IMPUTER).fit(frame)
    new = pd.DataFrame({"x": [0.5, np.nan], "kind": ["sideways", "up"]})
    out = imputer.transform(new)
    assert out["kind"].tolist() == ["sideways", "up"] and out["x"].notna().all()
    detector = TabICLOutlierDetector(**DETECTOR).fit(frame)
    seen, unseen = detector.score_samples(pd.DataFrame({"x": [0.5, 0.5], "kind": ["up", "sideways"]}))
    assert unseen < seen + LOG_FLOOR / 2


# -- the outlier detector ---------------------------------------------------------
def test_score_is_the_sum_of_direct_in_context_factors():
    X = _table()[:, :2]
    detector = TabICLOutlierDetector(**{**DETECTOR, "n_permutations": 1}).fit(X)
    assert detector.orderings_.tolist() == [[0, 1]]
    query = X[:7] + 0.3
    direct = dict(n_estimators=DETECTOR["n_estimators"], inference_precision="float64", random_state=0,
                  device="cpu")
    mean, scale = X.mean(0), X.std(0)
    # p(x1 | x0): the regressor on column 0
    conditional = TabICLRegressor(**direct).fit(X[:, [0]], X[:, 1])
    q1 = conditional.predict(query[:, [0]], output="raw_quantiles")
    # p(x0): the regressor on the noise column, read at the fixed probes
    noise = np.random.RandomState(0).standard_normal((len(X), 1))
    q0 = TabICLRegressor(**direct).fit(noise, X[:, 0]).predict(_PROBES[:, None], output="raw_quantiles").mean(0)
    q0 = np.tile(q0, (len(query), 1))

    def term(q, column):
        dist = QuantileDistribution(torch.from_numpy((q - mean[column]) / scale[column]))
        return quantile_log_density(dist, torch.from_numpy((query[:, column] - mean[column]) / scale[column]))

    expected = (term(q0, 0) + term(q1, 1)).numpy()
    np.testing.assert_allclose(detector.score_samples(query), expected, rtol=1e-10)


def test_decision_predict_and_contamination(detector):
    model, X = detector
    scores = model.score_samples(X)
    np.testing.assert_allclose(model.decision_function(X), scores - model.offset_)
    assert (model.predict(X) == -1).sum() == round(0.1 * len(X))
    far = np.array([[6.0, -6.0, 0.0]])
    assert model.score_samples(far)[0] < np.percentile(scores, 5)
    assert model.predict(far).tolist() == [-1]
    assert model.score(X) == pytest.approx(scores.mean())
    assert model.orderings_.shape == (2, 3) and len({tuple(o) for o in model.orderings_}) == 2


def test_missing_cells_contribute_nothing_and_scores_are_unit_free(detector):
    model, X = detector
    holes = X[:5].copy()
    holes[:, 2] = np.nan
    factor = model.conditionals_[2, (0, 1)]
    np.testing.assert_array_equal(factor.log_density(holes, holes[:, 2]), 0.0)
    assert np.isfinite(model.score_samples(holes)).all()
    rescaled = X.copy()
    rescaled[:, 1] *= 1000.0
    refit = clone(model).fit(rescaled)
    # equal up to the tolerance of the members' preprocessing (the Yeo-Johnson fit); in raw
    # units (the official scale) the scores would differ by log(1000) = 6.9
    np.testing.assert_allclose(refit.score_samples(rescaled), model.score_samples(X), atol=1e-3)


def test_samples_follow_the_table():
    X = _table(n=120)
    detector = TabICLOutlierDetector(**DETECTOR).fit(X)
    samples = detector.sample(200, random_state=0)
    np.testing.assert_array_equal(samples, detector.sample(200, random_state=0))
    assert samples.shape == (200, 4) and set(np.unique(samples[:, 3])) <= {0.0, 1.0, 2.0}
    # the third column stays about the sum of the first two
    assert np.corrcoef(samples[:, 2], samples[:, 0] + samples[:, 1])[0, 1] > 0.7
    np.testing.assert_allclose(samples[:, :3].mean(0), X[:, :3].mean(0), atol=0.4)


# -- the official tabicl 2.2.0 on the same random v2 network ------------------------
SMALL_V2 = dict(embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=4, row_num_blocks=1, row_nhead=2,
                row_num_cls=2, icl_num_blocks=2, icl_nhead=2, max_classes=0, num_quantiles=999)


def test_factors_equal_the_official_tabicl_2_2_0(tmp_path):
    from _official_v2 import official_or_skip

    official = official_or_skip()
    torch.manual_seed(0)
    network = TabICLv2Model(**SMALL_V2)
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.add_(0.2 * torch.randn_like(parameter))
    path = tmp_path / "v2-regressor.ckpt"
    torch.save({"config": network.config, "state_dict": network.state_dict()}, path)
    X = _table(n=60)[:, :3] * [1.0, 3.0, 0.5]
    ours = TabICLOutlierDetector(n_permutations=1, n_estimators=3, pretrained_regressor=path, random_state=42,
                                 device="cpu").fit(X)
    with official.active():
        from tabicl import TabICLUnsupervised

        theirs = TabICLUnsupervised(n_estimators=3, random_state=42, device="cpu", estimator_params=dict(
            model_path=str(path), allow_auto_download=False, use_amp=False, use_fa3=False)).fit(X)
        expected = {}
        for target, features in ((1, [0]), (2, [0, 1])):
            estimator, _ = theirs._fit_conditional_estimator(target, X[:, features], X[:, target])
            expected[target] = theirs._log_prob_numerical(estimator, X[:, features].astype(np.float32),
                                                          X[:, target].astype(np.float32))
    for target, features in ((1, (0,)), (2, (0, 1))):
        ours_raw = ours.conditionals_[target, features].log_density(X, X[:, target]) - np.log(X[:, target].std())
        np.testing.assert_allclose(ours_raw, expected[target], atol=2e-3)
