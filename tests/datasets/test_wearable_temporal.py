"""Tests of the temporal-pattern labels of the synthetic wearable cohort
(``make_wearable_cohort(..., temporal_labels=True)``, issue 38): the signal
is in the timing of sleep and activity, not in weekly levels."""

import warnings

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from skicml.datasets import make_wearable_cohort, wearable_week_labels
from skicml.wearable import WeeklySummaryFeatures, evaluate_probes

TEMPORAL = ["social_jet_lag", "sleep_irregularity", "phase_shift"]


def nightly_midpoints(X):
    """Sleep midpoint (hours after midnight) of the six nights whose window
    (noon to noon) lies inside each week, from the complete asleep channel."""
    asleep = X[:, 12:156, 0].reshape(len(X), 6, 24)
    hours = np.arange(12, 156).reshape(6, 24) + 0.5
    return (asleep * hours).sum(-1) / asleep.sum(-1) - 24.0 * np.arange(1, 7)


def timing_scores(X, n_weeks):
    """Hand-made timing features, one per label: the free-day minus workday
    midpoint (per person), the night-to-night spread of workday midpoints
    (per person), and how far a week's mean midpoint sits from the person's
    median week (per week)."""
    mid = nightly_midpoints(X).reshape(len(X) // n_weeks, n_weeks, 6)
    jet_lag = (mid[..., 4:].mean(-1) - mid[..., :4].mean(-1)).mean(1)
    work = mid[..., :4]
    irregularity = (work - work.mean(-1, keepdims=True)).std(-1).mean(1)
    week = mid.mean(-1)
    phase = np.abs(week - np.median(week, 1, keepdims=True)).ravel()
    return jet_lag, irregularity, phase


def cohort(effect_size, **kwargs):
    kwargs = {**dict(n_people=500, n_weeks=2, effect_size=effect_size, temporal_labels=True,
                     random_state=0), **kwargs}
    return make_wearable_cohort(**kwargs)


def timing_aurocs(effect_size):
    kwargs = dict(missingness="none", variables=["sleep_asleep_min"])
    X, _, y_static, y_weekly = cohort(effect_size, **kwargs)
    jet_lag, irregularity, phase = timing_scores(X, 2)
    return [roc_auc_score(y_static["social_jet_lag"], jet_lag),
            roc_auc_score(y_static["sleep_irregularity"], irregularity),
            roc_auc_score(y_weekly["phase_shift"], phase)]


def weekly_mean_std(X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        F = np.concatenate([np.nanmean(X, 1), np.nanstd(X, 1)], axis=1)
    return np.where(np.isnan(F), np.nanmean(F, 0), F)


def test_columns_prevalence_and_week_labels():
    X, meta, y_static, y_weekly = cohort(1.0, n_people=400)
    assert y_static.columns.tolist()[-2:] == ["social_jet_lag", "sleep_irregularity"]
    assert y_weekly.columns.tolist()[-1] == "phase_shift"
    for frame, task, rate in ((y_static, "social_jet_lag", 0.2), (y_static, "sleep_irregularity", 0.2),
                              (y_weekly, "phase_shift", 0.1)):
        assert set(np.unique(frame[task])) == {0, 1}
        assert abs(frame[task].mean() - rate) < 0.06, task
    labels = wearable_week_labels(meta, y_static, y_weekly)
    assert labels.columns.tolist() == ["age_group", "sleep_disorder", "beta_blocker", "social_jet_lag",
                                       "sleep_irregularity", "pregnancy", "infection", "sleep_duration",
                                       "phase_shift"]
    person = meta["person_id"].to_numpy()
    np.testing.assert_array_equal(labels["social_jet_lag"], y_static["social_jet_lag"].to_numpy()[person])
    np.testing.assert_array_equal(labels["phase_shift"], y_weekly["phase_shift"].to_numpy())


def test_existing_labels_and_traits_keep_their_draws():
    kwargs = dict(n_people=300, n_weeks=3, label_noise=0.1, random_state=5)
    _, meta0, static0, weekly0 = make_wearable_cohort(**kwargs)
    _, meta1, static1, weekly1 = make_wearable_cohort(temporal_labels=True, **kwargs)
    pd.testing.assert_frame_equal(static0, static1[static0.columns])
    pd.testing.assert_frame_equal(weekly0.drop(columns="sleep_duration"),
                                  weekly1[weekly0.columns].drop(columns="sleep_duration"))
    pd.testing.assert_frame_equal(meta0[["person_id", "week"]], meta1[["person_id", "week"]])


def test_null_effect_leaves_the_data_of_a_cohort_without_them():
    # The new labels' draws come from a stream of their own and act only
    # through effect_size: at 0 the data are bit for bit those of a cohort
    # without the labels, so nothing in X can predict them.
    kwargs = dict(n_people=50, n_weeks=2, effect_size=0.0, random_state=3)
    X0 = make_wearable_cohort(**kwargs)[0]
    X1 = make_wearable_cohort(temporal_labels=True, **kwargs)[0]
    np.testing.assert_array_equal(X0, X1)
    X2 = make_wearable_cohort(temporal_labels=True, **{**kwargs, "effect_size": 1.0})[0]
    assert not np.array_equal(X1, X2, equal_nan=True)


def test_null_effect_size_gives_chance_for_every_probe():
    X, meta, y_static, y_weekly = cohort(0.0)
    labels = wearable_week_labels(meta, y_static, y_weekly)[TEMPORAL]
    groups = meta["person_id"].to_numpy()
    summary = WeeklySummaryFeatures().fit_transform(X)
    for features in (summary, weekly_mean_std(X)):
        report = evaluate_probes(features, labels, groups).set_index("task")
        for task in TEMPORAL:
            assert 0.4 <= report.loc[task, "score"] <= 0.6, (task, report.loc[task, "score"])
    for task, auroc in zip(TEMPORAL, timing_aurocs(0.0)):
        assert 0.4 <= auroc <= 0.6, (task, auroc)


def test_weekly_means_cannot_recover_what_the_timing_shows():
    X, meta, y_static, y_weekly = cohort(1.0)
    labels = wearable_week_labels(meta, y_static, y_weekly)[TEMPORAL]
    groups = meta["person_id"].to_numpy()
    mean_std = weekly_mean_std(X)
    for features in (mean_std[:, :X.shape[-1]], mean_std):
        report = evaluate_probes(features, labels, groups).set_index("task")
        for task in TEMPORAL:
            assert report.loc[task, "score"] < 0.62, (task, report.loc[task, "score"])
    for task, auroc in zip(TEMPORAL, timing_aurocs(1.0)):
        assert auroc > 0.85, (task, auroc)


def test_effect_size_scales_the_timing_effects():
    # The null sits at chance (test above); small effects are already
    # visible in the timing, and the full one more so.
    aurocs = np.array([timing_aurocs(effect) for effect in (0.15, 1.0)])
    assert np.all(aurocs[0] > 0.6), aurocs
    assert np.all(aurocs[0] < aurocs[1] - 0.1), aurocs


def test_sleep_totals_do_not_move_with_the_timing():
    # The temporal labels move when people sleep, not how long.
    X, _, y_static, y_weekly = cohort(1.0, missingness="none", variables=["sleep_asleep_min"])
    total = X[..., 0].sum(1) / 60.0 / 7.0
    person = y_weekly["person_id"].to_numpy()
    for task in ("social_jet_lag", "sleep_irregularity"):
        labelled = y_static[task].to_numpy()[person] == 1
        assert abs(total[labelled].mean() - total[~labelled].mean()) < 0.15, task
    shifted = y_weekly["phase_shift"].to_numpy() == 1
    assert abs(total[shifted].mean() - total[~shifted].mean()) < 0.15
    assert abs(y_weekly["sleep_duration"][shifted].mean() - y_weekly["sleep_duration"][~shifted].mean()) < 0.15

