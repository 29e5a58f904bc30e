"""Tests of WhitenedLikelihoodOutlierDetector and the analysis helpers."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import roc_auc_score

from skicml.clip import (
    WhitenedLikelihoodOutlierDetector,
    WhiteningLikelihood,
    full_circle,
    normality_report,
    slerp,
)

LOG_2PI = math.log(2 * math.pi)


def gaussian_data(seed, n, d):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d)


@pytest.mark.parametrize("contamination", [0.01, 0.05, 0.1, 0.25, 0.5])
def test_contamination_share_on_training_data(contamination):
    X = gaussian_data(0, 1000, 6)
    detector = WhitenedLikelihoodOutlierDetector(contamination=contamination).fit(X)
    share = np.mean(detector.predict(X) == -1)
    assert abs(share - contamination) <= 1.5 / len(X)
    np.testing.assert_array_equal(detector.fit_predict(X), detector.predict(X))


def test_decision_function_predict_and_transform_agree_with_the_core():
    X = gaussian_data(1, 300, 5)
    detector = WhitenedLikelihoodOutlierDetector(method="zca").fit(X)
    core = WhiteningLikelihood(method="zca").fit(X)
    np.testing.assert_allclose(detector.score_samples(X), core.score_samples(X))
    np.testing.assert_allclose(detector.transform(X), core.transform(X))
    decision = detector.decision_function(X)
    np.testing.assert_allclose(decision, detector.score_samples(X) - detector.offset_)
    np.testing.assert_array_equal(detector.predict(X), np.where(decision < 0, -1, 1))
    assert set(np.unique(detector.predict(X))) == {-1, 1}


def test_chi2_threshold():
    d, alpha = 8, 0.025
    X = gaussian_data(2, 4000, d)
    detector = WhitenedLikelihoodOutlierDetector(contamination="auto", alpha=alpha).fit(X)
    expected = -0.5 * (d * LOG_2PI + stats.chi2.ppf(1 - alpha, d))
    assert detector.offset_ == pytest.approx(expected)
    share = np.mean(detector.predict(gaussian_data(2, 4000, d)) == -1)
    assert 0.01 < share < 0.045
    # The threshold follows the score's conventions.
    with_det = WhitenedLikelihoodOutlierDetector(contamination="auto", include_log_det=True).fit(X)
    np.testing.assert_array_equal(with_det.predict(X), detector.predict(X))


def test_detects_shifted_and_scaled_embeddings():
    X = gaussian_data(3, 2000, 16)
    detector = WhitenedLikelihoodOutlierDetector().fit(X[:1000])
    inliers = X[1000:]
    # A shift along the smallest-variance direction is invisible in raw distances but not here.
    direction = detector.components_[:, -1] * np.sqrt(detector.eigenvalues_[-1])
    shifted = inliers + 5.0 * direction
    scaled = detector.mean_ + 1.5 * (inliers - detector.mean_)
    labels = np.r_[np.ones(len(inliers)), np.zeros(len(inliers))]
    for outliers in (shifted, scaled):
        scores = detector.decision_function(np.vstack([inliers, outliers]))
        assert roc_auc_score(labels, scores) > 0.9
    raw_distance = -np.linalg.norm(np.vstack([inliers, shifted]) - detector.mean_, axis=1)
    assert roc_auc_score(labels, raw_distance) < 0.6


def test_from_precomputed_detector():
    X = gaussian_data(4, 500, 4)
    fitted = WhitenedLikelihoodOutlierDetector(contamination="auto").fit(X)
    auto = WhitenedLikelihoodOutlierDetector.from_precomputed(
        fitted.mean_, fitted.whitening_matrix_, contamination="auto"
    )
    np.testing.assert_array_equal(auto.predict(X), fitted.predict(X))
    with pytest.raises(ValueError, match="X_reference"):
        WhitenedLikelihoodOutlierDetector.from_precomputed(fitted.mean_, fitted.whitening_matrix_)
    quantile = WhitenedLikelihoodOutlierDetector.from_precomputed(
        fitted.mean_, fitted.whitening_matrix_, X_reference=X, contamination=0.1
    )
    assert np.mean(quantile.predict(X) == -1) == pytest.approx(0.1, abs=0.003)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"contamination": 0.0}, "contamination"),
        ({"contamination": 0.6}, "contamination"),
        ({"contamination": "chi2"}, "contamination"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.0}, "alpha"),
        ({"method": "qr"}, "method"),
    ],
)
def test_bad_parameters_raise(params, match):
    with pytest.raises(ValueError, match=match):
        WhitenedLikelihoodOutlierDetector(**params).fit(gaussian_data(5, 30, 3))


def test_bad_inputs_raise():
    X = gaussian_data(6, 30, 3)
    with pytest.raises(ValueError, match="1 sample"):
        WhitenedLikelihoodOutlierDetector().fit(X[:1])
    X_bad = X.copy()
    X_bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        WhitenedLikelihoodOutlierDetector().fit(X_bad)
    detector = WhitenedLikelihoodOutlierDetector().fit(X)
    with pytest.raises(ValueError, match="features"):
        detector.predict(X[:, :2])


# --------------------------------------------------------------------------
# normality_report
# --------------------------------------------------------------------------
def test_normality_report_on_whitened_gaussian_data():
    X = gaussian_data(7, 2000, 4)
    Z = WhiteningLikelihood().fit_transform(X)
    report = normality_report(Z, n_groups=8, group_size=250, tests=("anderson", "dagostino", "shapiro"))
    assert report.shape == (4, 3)
    assert report.index.name == "feature"
    assert report.attrs == {"n_groups": 8, "group_size": 250, "alpha": 0.05}
    assert (report.mean() > 0.8).all()



def test_standard_normal_test_tells_whitened_from_raw_gaussian_features():
    X = gaussian_data(9, 2000, 4)          # Gaussian, but not standard: shape tests pass, "standard" fails
    Z = WhiteningLikelihood().fit_transform(X)
    raw = normality_report(X, n_groups=8, group_size=250, tests=("anderson", "standard")).mean()
    whitened = normality_report(Z, n_groups=8, group_size=250, tests=("anderson", "standard")).mean()
    assert raw["anderson"] > 0.8 and whitened["anderson"] > 0.8
    assert raw["standard"] < 0.2 < 0.8 < whitened["standard"]

def test_normality_report_rejects_a_non_gaussian_shell():
    rng = np.random.default_rng(8)
    Z = rng.exponential(size=(1000, 3))
    report = normality_report(Z, n_groups=4, group_size=250)
    assert (report.mean() < 0.1).all()
    # Too few rows for 20 groups: fewer groups are used.
    assert normality_report(Z[:600], group_size=250).attrs["n_groups"] == 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"Z": np.zeros(10)}, "2-D"),
        ({"Z": np.full((300, 2), np.nan)}, "NaN"),
        ({"Z": np.zeros((100, 2))}, "group_size"),
        ({"Z": np.zeros((300, 2)), "group_size": 5}, "group_size"),
        ({"Z": np.zeros((300, 2)), "alpha": 1.5}, "alpha"),
        ({"Z": np.zeros((300, 2)), "tests": ("lilliefors",)}, "tests"),
        ({"Z": np.zeros((300, 2)), "n_groups": 0}, "n_groups"),
    ],
)
def test_normality_report_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        normality_report(**kwargs)


# --------------------------------------------------------------------------
# slerp and full_circle
# --------------------------------------------------------------------------
@st.composite
def vector_pairs(draw):
    d = draw(st.integers(2, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    a, b = rng.normal(size=d), rng.normal(size=d)
    return a, b / np.linalg.norm(b) * np.linalg.norm(a)


@settings(max_examples=40, deadline=None)
@given(pair=vector_pairs(), t=st.floats(-3.0, 3.0))
def test_slerp_properties(pair, t):
    a, b = pair
    np.testing.assert_allclose(slerp(a, b, 0.0), a, atol=1e-12)
    np.testing.assert_allclose(slerp(a, b, 1.0), b, atol=1e-10)
    # Equal norms stay equal everywhere on the circle, extrapolation included.
    assert np.linalg.norm(slerp(a, b, t)) == pytest.approx(np.linalg.norm(a), rel=1e-9)
    assert slerp(a, b, [0.0, t, 1.0]).shape == (3, a.size)


@settings(max_examples=25, deadline=None)
@given(pair=vector_pairs(), step=st.sampled_from([1.0, 5.0, 30.0, 90.0]))
def test_full_circle_returns_to_the_start(pair, step):
    a, b = pair
    path = full_circle(a, b, step_deg=step)
    assert path.shape == (int(360 / step) + 1, a.size)
    np.testing.assert_allclose(path[0], a, atol=1e-9)
    np.testing.assert_allclose(path[-1], a, atol=1e-8)
    np.testing.assert_allclose(np.linalg.norm(path, axis=1), np.linalg.norm(a), rtol=1e-9)
    assert np.isfinite(path).all()


def test_slerp_degenerate_pairs():
    a = np.array([1.0, 2.0, 3.0])
    out = slerp(a, 2 * a, [0.0, 0.5, 1.0])
    np.testing.assert_allclose(out, [a, 1.5 * a, 2 * a])
    assert np.isfinite(out).all()
    with pytest.raises(ValueError, match="opposite"):
        slerp(a, -a, 0.5)
    with pytest.raises(ValueError, match="parallel"):
        full_circle(a, a)
    with pytest.raises(ValueError, match="same length"):
        slerp(a, a[:2], 0.5)
    with pytest.raises(ValueError, match="non-zero"):
        slerp(a, 0 * a, 0.5)
    with pytest.raises(ValueError, match="step_deg"):
        full_circle(a, a[::-1], step_deg=0)


def test_full_circle_with_a_whitener_maps_back_to_raw_space():
    X = gaussian_data(9, 500, 5)
    whitener = WhiteningLikelihood().fit(X)
    a, b = X[0], X[1]
    raw_path = full_circle(a, b, step_deg=10, whitener=whitener)
    np.testing.assert_allclose(raw_path[0], a, atol=1e-9)
    np.testing.assert_allclose(raw_path[-1], a, atol=1e-8)
    z = whitener.transform(raw_path)
    np.testing.assert_allclose(z, full_circle(whitener.transform(X[:1])[0], whitener.transform(X[1:2])[0],
                                              step_deg=10), atol=1e-9)
