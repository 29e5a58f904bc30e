"""WeeklySummaryFeatures and evaluate_probes."""

import numpy as np
import pandas as pd
import pytest

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
