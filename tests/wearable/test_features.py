"""WeeklySummaryFeatures and evaluate_probes."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.wearable import WeeklySummaryFeatures, evaluate_probes


def test_summary_statistics_match_numpy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 168, 2))
    X[rng.random(X.shape) < 0.2] = np.nan
    features = WeeklySummaryFeatures(channel_names=["steps", "hr"]).fit(X)
    F = features.transform(X)
    names = list(features.get_feature_names_out())
    assert F.shape == (5, 18) and names[0] == "steps_mean" and names[9] == "hr_mean"
    np.testing.assert_allclose(F[:, names.index("hr_std")], np.nanstd(X[..., 1], axis=1))
    np.testing.assert_allclose(F[:, names.index("steps_observed")], (~np.isnan(X[..., 0])).mean(1))
    night = np.arange(168) % 24 < 6
    np.testing.assert_allclose(F[:, names.index("hr_night_mean")], np.nanmean(X[:, night, 1], axis=1))
    weekend = np.arange(168) >= 120
    np.testing.assert_allclose(F[:, names.index("steps_weekend_mean")], np.nanmean(X[:, weekend, 0], axis=1))


def test_missing_variable_takes_the_training_mean():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 24, 2))
    features = WeeklySummaryFeatures().fit(X)
    X_test = X[:2].copy()
    X_test[0, :, 1] = np.nan
    F = features.transform(X_test)
    assert np.isfinite(F).all()
    assert F[0, 9 + 4] == 0  # observed fraction flags the missing variable
    np.testing.assert_allclose(F[0, 9], features.fill_values_[9])


def test_channel_names_must_match():
    with pytest.raises(ValueError, match="channel_names has 1 names for 2 variables"):
        WeeklySummaryFeatures(channel_names=["a"]).fit(np.zeros((3, 4, 2)))


def test_probes_find_a_planted_signal_and_report_counts():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(60), 4)
    static = (groups % 3 == 0).astype(float)
    weekly = rng.normal(size=len(groups))
    embeddings = np.column_stack([static + 0.3 * rng.normal(size=len(groups)), weekly, rng.normal(size=len(groups))])
    labels = pd.DataFrame({"static": static, "weekly": weekly + 0.1 * rng.normal(size=len(groups))})
    labels.loc[::7, "weekly"] = np.nan
    report = evaluate_probes(embeddings, labels, groups).set_index("task")
    assert report.loc["static", "level"] == "person" and report.loc["static", "n_samples"] == 60
    assert report.loc["static", "score"] > 0.9
    assert abs(report.loc["static", "prevalence"] - 1 / 3) < 1e-9
    assert report.loc["weekly", "level"] == "week" and report.loc["weekly", "metric"] == "mae"
    assert report.loc["weekly", "r2"] > 0.9
    assert report.loc["weekly", "n_samples"] == (~labels["weekly"].isna()).sum()


def test_probe_splits_never_share_a_person(monkeypatch):
    from sklearn.model_selection import GroupKFold

    seen = []
    original = GroupKFold.split

    def spy(self, X, y=None, groups=None):
        for train, test in original(self, X, y, groups):
            seen.append(set(groups[train]) & set(groups[test]))
            yield train, test

    monkeypatch.setattr(GroupKFold, "split", spy)
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(30), 3)
    evaluate_probes(rng.normal(size=(90, 2)), {"w": rng.normal(size=90)}, groups)
    assert seen and all(not overlap for overlap in seen)


def test_probe_input_errors():
    with pytest.raises(ValueError, match="groups must have one entry"):
        evaluate_probes(np.zeros((4, 2)), [0, 1, 0, 1], [0, 1])
    with pytest.raises(ValueError, match="fewer than n_splits"):
        evaluate_probes(np.zeros((4, 2)), [0, 1, 0, 1], [0, 1, 2, 3])


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 40), st.booleans())
def test_weighted_auroc_matches_sklearn_on_repeated_rows(seed, n, coarse):
    from sklearn.metrics import roc_auc_score

    from skicml.wearable._evaluation import _weighted_auroc

    rng = np.random.default_rng(seed)
    y = np.r_[0.0, 1.0, rng.integers(0, 2, n - 2)]
    score = rng.integers(0, 3, n).astype(float) if coarse else rng.normal(size=n)  # coarse: many ties
    counts = rng.integers(0, 4, (3, n))
    counts[:, :2] = np.maximum(counts[:, :2], 1)  # every draw keeps both classes
    auroc = _weighted_auroc(y, score, counts.astype(float))
    for draw, weights in zip(auroc, counts):
        expected = roc_auc_score(np.repeat(y, weights), np.repeat(score, weights))
        assert abs(draw - expected) < 1e-12


def _planted(seed=0, n_people=120):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_people), 3)
    static = (groups % 2).astype(float)
    weekly = rng.normal(size=len(groups))
    signal = np.column_stack([static + 1.0 * rng.normal(size=len(groups)), weekly])
    labels = pd.DataFrame({"static": static, "weekly": weekly + 0.3 * rng.normal(size=len(groups))})
    return signal, labels, groups, rng


def test_bootstrap_interval_brackets_the_score_and_is_reproducible():
    embeddings, labels, groups, _ = _planted()
    report = evaluate_probes(embeddings, labels, groups, n_bootstraps=300).set_index("task")
    assert (report["ci_low"] < report["score"]).all() and (report["score"] < report["ci_high"]).all()
    again = evaluate_probes(embeddings, labels, groups, n_bootstraps=300).set_index("task")
    pd.testing.assert_frame_equal(report, again)
    plain = evaluate_probes(embeddings, labels, groups).set_index("task")
    assert plain["ci_low"].isna().all()
    np.testing.assert_allclose(plain["score"], report["score"])  # the bootstrap leaves the scores alone


def test_gain_over_a_baseline_is_paired_and_signed_by_metric():
    embeddings, labels, groups, rng = _planted()
    noise = rng.normal(size=embeddings.shape)
    report = evaluate_probes(embeddings, labels, groups, baseline=noise, n_bootstraps=300).set_index("task")
    # Better is higher AUROC and lower MAE, and gain is positive for both.
    assert report.loc["static", "gain"] == pytest.approx(report.loc["static", "score"] - report.loc["static", "baseline_score"])
    assert report.loc["weekly", "gain"] == pytest.approx(report.loc["weekly", "baseline_score"] - report.loc["weekly", "score"])
    assert (report["gain_ci_low"] > 0).all()
    # Against itself the paired difference is exactly zero in every draw.
    itself = evaluate_probes(embeddings, labels, groups, baseline=embeddings, n_bootstraps=100)
    assert (itself[["gain", "gain_ci_low", "gain_ci_high"]].to_numpy() == 0).all()
    reverse = evaluate_probes(noise, labels, groups, baseline=embeddings, n_bootstraps=300).set_index("task")
    assert (reverse["gain_ci_high"] < 0).all()


def test_bootstrap_input_errors():
    embeddings, labels, groups, _ = _planted()
    with pytest.raises(ValueError, match="baseline has 5 rows for 360 embeddings"):
        evaluate_probes(embeddings, labels, groups, baseline=np.zeros((5, 2)))
    with pytest.raises(ValueError, match="n_bootstraps=-1"):
        evaluate_probes(embeddings, labels, groups, n_bootstraps=-1)
    with pytest.raises(ValueError, match="n_bootstraps=2.5"):
        evaluate_probes(embeddings, labels, groups, n_bootstraps=2.5)
    with pytest.raises(ValueError, match="confidence=1.0"):
        evaluate_probes(embeddings, labels, groups, confidence=1.0)
    baseline = np.zeros((360, 2))
    baseline[0, 0] = np.nan
    with pytest.raises(ValueError, match="baseline"):
        evaluate_probes(embeddings, labels, groups, baseline=baseline)


def test_large_float32_weeks_give_finite_float64_features():
    # Issue 28, item 3: float32 sums and squares of 1e20 overflow (inf features).
    rng = np.random.default_rng(0)
    X = (rng.random((4, 168, 3)) * 1e20).astype(np.float32)
    X[rng.random(X.shape) < 0.2] = np.nan
    F32 = WeeklySummaryFeatures().fit(X).transform(X)
    F64 = WeeklySummaryFeatures().fit(X.astype(np.float64)).transform(X.astype(np.float64))
    assert np.isfinite(F32).all()
    np.testing.assert_array_equal(F32, F64)


def test_values_too_large_even_for_float64_are_a_clear_error():
    X = np.full((2, 168, 1), 1e300)
    with pytest.raises(ValueError, match=r"values of X are too large.*rescale X"):
        WeeklySummaryFeatures().fit(X)
