"""Tests of WhiteningLikelihood: the properties of the spec's section 6."""

import doctest
import importlib
import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import multivariate_normal
from sklearn.covariance import ledoit_wolf_shrinkage
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV, KFold

from skicml.clip import WhiteningLikelihood

LOG_2PI = math.log(2 * math.pi)


def mixing(rng, d, cond=30.0):
    """A random d x d matrix with condition number ``cond``."""
    q1, _ = np.linalg.qr(rng.normal(size=(d, d)))
    q2, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return q1 @ np.diag(np.logspace(0, -np.log10(cond), d)) @ q2


def gaussian_data(seed, n, d, cond=30.0):
    rng = np.random.default_rng(seed)
    A = mixing(rng, d, cond)
    return rng.normal(size=(n, d)) @ A.T + rng.normal(scale=3.0, size=d)


@st.composite
def datasets(draw):
    d = draw(st.integers(1, 12))
    n = draw(st.integers(d + 5, 300))
    seed = draw(st.integers(0, 2**16))
    return gaussian_data(seed, n, d), seed


@pytest.mark.parametrize("name", ["skicml.clip._whitening", "skicml.clip._scorer", "skicml.clip._analysis"])
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0


@settings(max_examples=25, deadline=None)
@given(data=datasets(), method=st.sampled_from(["pca", "zca", "cholesky"]), ddof=st.sampled_from([0, 1]))
def test_whitened_training_data_has_identity_covariance(data, method, ddof):
    X, _ = data
    n, d = X.shape
    model = WhiteningLikelihood(method=method, ddof=ddof).fit(X)
    Z = model.transform(X)
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-8)
    np.testing.assert_allclose(Z.T @ Z / (n - ddof), np.eye(d), atol=1e-8)
    # The exact identity: mean squared norm is d (N - ddof') / N.
    np.testing.assert_allclose(model.squared_norm(X).mean(), d * (n - ddof) / n, rtol=1e-8)


@settings(max_examples=25, deadline=None)
@given(data=datasets())
def test_squared_norm_is_invariant_to_the_method(data):
    X, _ = data
    norms = [WhiteningLikelihood(method=m).fit(X).squared_norm(X) for m in ("pca", "zca", "cholesky")]
    np.testing.assert_allclose(norms[1], norms[0], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(norms[2], norms[0], rtol=1e-8, atol=1e-10)
    # sklearn's PCA whitens with ddof=1 as well.
    reference = PCA(whiten=True).fit(X).transform(X)
    np.testing.assert_allclose((reference**2).sum(1), norms[0], rtol=1e-6, atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(data=datasets(), shift_seed=st.integers(0, 2**16))
def test_scores_are_affine_invariant(data, shift_seed):
    X, _ = data
    rng = np.random.default_rng(shift_seed)
    d = X.shape[1]
    A = mixing(rng, d, cond=10.0) * rng.uniform(0.5, 2.0)
    b = rng.normal(scale=5.0, size=d)
    Y = X @ A.T + b
    plain = WhiteningLikelihood().fit(X).score_samples(X)
    moved = WhiteningLikelihood().fit(Y).score_samples(Y)
    np.testing.assert_allclose(moved, plain, rtol=1e-7, atol=1e-7)
    logdet = WhiteningLikelihood(include_log_det=True)
    shift = np.linalg.slogdet(A)[1]
    np.testing.assert_allclose(
        logdet.fit(Y).score_samples(Y), logdet.fit(X).score_samples(X) - shift, rtol=1e-7, atol=1e-6
    )
    # Permuting features is a special case.
    perm = rng.permutation(d)
    np.testing.assert_allclose(WhiteningLikelihood().fit(X[:, perm]).score_samples(X[:, perm]), plain,
                               rtol=1e-8, atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(data=datasets(), method=st.sampled_from(["pca", "zca", "cholesky"]))
def test_inverse_transform_is_exact_at_full_rank(data, method):
    X, _ = data
    model = WhiteningLikelihood(method=method).fit(X)
    np.testing.assert_allclose(model.inverse_transform(model.transform(X)), X, rtol=1e-8, atol=1e-8)


@settings(max_examples=20, deadline=None)
@given(data=datasets(), scale=st.floats(0.1, 5.0))
def test_mean_scores_highest_and_scores_fall_along_a_ray(data, scale):
    X, seed = data
    d = X.shape[1]
    model = WhiteningLikelihood().fit(X)
    top = -0.5 * d * LOG_2PI
    assert np.all(model.score_samples(X) <= top + 1e-12)
    np.testing.assert_allclose(model.score_samples(model.mean_[None]), [top], rtol=1e-12)
    v = np.random.default_rng(seed).normal(size=d)
    steps = np.array([0.0, 0.5, 1.0, 2.0, 4.0]) * scale
    scores = model.score_samples(model.mean_ + steps[:, None] * v)
    assert np.all(np.diff(scores) < 0)


def test_matches_scipy_and_gaussian_mixture_with_log_det():
    from sklearn.mixture import GaussianMixture

    X = gaussian_data(0, 400, 6, cond=100.0)
    model = WhiteningLikelihood(include_log_det=True).fit(X)
    expected = multivariate_normal(X.mean(0), np.cov(X, rowvar=False)).logpdf(X)
    np.testing.assert_allclose(model.score_samples(X), expected, rtol=1e-9)
    np.testing.assert_allclose(model.score(X), expected.mean(), rtol=1e-9)
    gmm = GaussianMixture(1, covariance_type="full", reg_covar=0.0).fit(X)
    np.testing.assert_allclose(
        WhiteningLikelihood(include_log_det=True, ddof=0).fit(X).score_samples(X), gmm.score_samples(X),
        rtol=1e-7,
    )


def test_mahalanobis_matches_empirical_covariance():
    from sklearn.covariance import EmpiricalCovariance

    X = gaussian_data(1, 200, 5)
    n = X.shape[0]
    expected = EmpiricalCovariance().fit(X).mahalanobis(X) * (n - 1) / n
    np.testing.assert_allclose(WhiteningLikelihood().fit(X).squared_norm(X), expected, rtol=1e-8)


def test_constant_and_log_det_flags():
    X = gaussian_data(2, 100, 3)
    base = WhiteningLikelihood(include_constant=False).fit(X)
    np.testing.assert_allclose(base.score_samples(X), -0.5 * base.squared_norm(X))
    full = WhiteningLikelihood(include_log_det=True).fit(X)
    np.testing.assert_allclose(full.log_det_, -0.5 * np.log(np.linalg.eigvalsh(np.cov(X, rowvar=False))).sum())


def test_truncation():
    X = gaussian_data(3, 300, 6)
    full = WhiteningLikelihood().fit(X)
    pca = WhiteningLikelihood(n_components=3).fit(X)
    zca = WhiteningLikelihood(method="zca", n_components=3).fit(X)
    assert pca.n_components_ == 3 and pca.transform(X).shape == (300, 3)
    assert zca.transform(X).shape == (300, 6)
    np.testing.assert_allclose(pca.eigenvalues_, full.eigenvalues_[:3])
    np.testing.assert_allclose(pca.transform(X), full.transform(X)[:, :3], atol=1e-10)
    np.testing.assert_allclose(zca.squared_norm(X), pca.squared_norm(X), rtol=1e-8)
    np.testing.assert_allclose(pca.score_samples(X), -0.5 * (3 * LOG_2PI + pca.squared_norm(X)))
    # Inverse of a truncated model projects onto the kept directions.
    back = pca.inverse_transform(pca.transform(X))
    np.testing.assert_allclose(pca.transform(back), pca.transform(X), atol=1e-8)
    # A fraction of variance picks the fewest directions reaching it.
    ratio = np.cumsum(full.eigenvalues_) / full.eigenvalues_.sum()
    frac = WhiteningLikelihood(n_components=float(ratio[1])).fit(X)
    assert frac.n_components_ == 2
    assert WhiteningLikelihood(n_components=1.0).fit(X).n_components_ == 6
    assert pca.noise_variance_ == pytest.approx(full.eigenvalues_[3:].mean())
    assert np.all(np.isin(pca.get_feature_names_out(), [f"whiteninglikelihood{i}" for i in range(3)]))


def test_grid_search_picks_n_components_by_held_out_score():
    rng = np.random.default_rng(0)
    signal = rng.normal(size=(600, 3)) @ (rng.normal(size=(3, 8)) * 3.0)
    X = signal + 0.1 * rng.normal(size=(600, 8)) + 1.0
    search = GridSearchCV(WhiteningLikelihood(), {"n_components": [1, 2, 3, 5, 7]}, cv=KFold(3))
    search.fit(X)
    assert search.best_params_["n_components"] == 3


def test_shrinkage():
    X = gaussian_data(4, 60, 8, cond=100.0)
    full = WhiteningLikelihood().fit(X)
    lam = full.eigenvalues_
    half = WhiteningLikelihood(shrinkage=0.5).fit(X)
    np.testing.assert_allclose(half.eigenvalues_, 0.5 * lam + 0.5 * lam.mean(), rtol=1e-10)
    assert half.shrinkage_ == 0.5
    one = WhiteningLikelihood(shrinkage=1.0).fit(X)
    np.testing.assert_allclose(one.eigenvalues_, lam.mean(), rtol=1e-10)
    lw = WhiteningLikelihood(shrinkage="ledoit_wolf", ddof=0).fit(X)
    Xc = X - X.mean(0)
    assert lw.shrinkage_ == pytest.approx(ledoit_wolf_shrinkage(Xc, assume_centered=True))
    from sklearn.covariance import ledoit_wolf

    cov = ledoit_wolf(X)[0]
    W = lw.whitening_matrix_
    np.testing.assert_allclose(W.T @ cov @ W, np.eye(8), atol=1e-8)


def test_from_precomputed_accepts_singular_matrices():
    rng = np.random.default_rng(5)
    d = 6
    mean = rng.normal(size=d)
    W = rng.normal(size=(d, d))
    W[:, 3] = W[:, 1]  # duplicated column, as in the official text matrix
    X = rng.normal(size=(20, d))
    model = WhiteningLikelihood.from_precomputed(torch.tensor(mean, dtype=torch.float32), torch.tensor(W))
    np.testing.assert_allclose(model.mean_, mean.astype(np.float32))
    model = WhiteningLikelihood.from_precomputed(mean, W)
    z = (X - mean) @ W
    np.testing.assert_allclose(model.score_samples(X), -0.5 * (d * LOG_2PI + (z**2).sum(1)), rtol=1e-12)
    assert model.log_det_ == -math.inf
    assert np.all(model.score_samples(X) > -np.inf)
    assert np.all(WhiteningLikelihood.from_precomputed(mean, W, include_log_det=True).score_samples(X) == -np.inf)
    assert np.isfinite(model.inverse_transform(model.transform(X))).all()
    # A regular matrix round-trips and has the right log-determinant.
    R = WhiteningLikelihood.from_precomputed(mean, W + np.eye(d))
    np.testing.assert_allclose(R.inverse_transform(R.transform(X)), X, atol=1e-8)
    assert R.log_det_ == pytest.approx(np.linalg.slogdet(W + np.eye(d))[1])
    # A fitted model reloaded from its own matrices scores the same.
    fitted = WhiteningLikelihood().fit(gaussian_data(6, 100, d))
    again = WhiteningLikelihood.from_precomputed(fitted.mean_, fitted.whitening_matrix_)
    np.testing.assert_allclose(again.score_samples(X), fitted.score_samples(X))
    assert again.log_det_ == pytest.approx(fitted.log_det_)
    with pytest.raises(ValueError, match="shape"):
        WhiteningLikelihood.from_precomputed(mean, W[:3])
    with pytest.raises(ValueError, match="finite"):
        WhiteningLikelihood.from_precomputed(mean * np.nan, W)


def test_float32_input_and_batching_and_row_order():
    X = gaussian_data(7, 300, 10)
    m64 = WhiteningLikelihood().fit(X)
    m32 = WhiteningLikelihood().fit(X.astype(np.float32))
    np.testing.assert_allclose(m32.score_samples(X.astype(np.float32)), m64.score_samples(X), rtol=1e-4)
    scores = m64.score_samples(X)
    np.testing.assert_array_equal(np.concatenate([m64.score_samples(X[:7]), m64.score_samples(X[7:])]), scores)
    perm = np.random.default_rng(0).permutation(300)
    np.testing.assert_allclose(WhiteningLikelihood().fit(X[perm]).score_samples(X), scores, rtol=1e-9)


def test_normalize_input():
    X = gaussian_data(8, 200, 5)
    scaled = X * np.random.default_rng(0).uniform(0.5, 3.0, size=(200, 1))
    a = WhiteningLikelihood(normalize_input=True).fit(X)
    b = WhiteningLikelihood(normalize_input=True).fit(scaled)
    np.testing.assert_allclose(np.linalg.norm(a.mean_), np.linalg.norm((X / np.linalg.norm(X, axis=1, keepdims=True)).mean(0)))
    np.testing.assert_allclose(b.score_samples(scaled), a.score_samples(X), rtol=1e-8)


def test_corr_threshold_replaces_correlated_columns_reproducibly():
    X = np.random.default_rng(9).normal(size=(200, 4)) * [1.0, 2.0, 3.0, 4.0]
    X = np.column_stack([X, X[:, 0] * 2.0 + 1.0])
    a = WhiteningLikelihood(corr_threshold=0.9, random_state=0).fit(X)
    assert a.replaced_features_ == [4]
    b = WhiteningLikelihood(corr_threshold=0.9, random_state=0).fit(X)
    np.testing.assert_array_equal(a.whitening_matrix_, b.whitening_matrix_)
    assert WhiteningLikelihood().fit(X[:, :4]).replaced_features_ == []


def test_rank_deficient_data_warns_but_stays_finite():
    X = gaussian_data(10, 50, 4)
    X = np.column_stack([X, X[:, 0]])  # exact duplicate column
    with pytest.warns(UserWarning, match="rank-deficient"):
        model = WhiteningLikelihood().fit(X)
    assert np.isfinite(model.score_samples(X)).all()
    with pytest.warns(UserWarning, match="rank-deficient"):
        WhiteningLikelihood().fit(gaussian_data(11, 4, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WhiteningLikelihood(shrinkage=0.1).fit(X)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"method": "svd"}, "method"),
        ({"n_components": 0}, "n_components"),
        ({"n_components": 9}, "n_components"),
        ({"n_components": 1.5}, "n_components"),
        ({"n_components": "all"}, "n_components"),
        ({"method": "cholesky", "n_components": 2}, "cholesky"),
        ({"eps": -1.0}, "eps"),
        ({"shrinkage": "oas"}, "shrinkage"),
        ({"shrinkage": 1.5}, "shrinkage"),
        ({"ddof": -1}, "ddof"),
        ({"ddof": 30}, "ddof"),
        ({"corr_threshold": 2.0}, "corr_threshold"),
        ({"noise_scale": -1.0}, "noise_scale"),
    ],
)
def test_bad_parameters_raise(params, match):
    with pytest.raises(ValueError, match=match):
        WhiteningLikelihood(**params).fit(gaussian_data(12, 30, 5))


def test_bad_inputs_raise():
    X = gaussian_data(13, 30, 5)
    for bad in (np.nan, np.inf):
        X_bad = X.copy()
        X_bad[3, 2] = bad
        with pytest.raises(ValueError, match="NaN|infinity"):
            WhiteningLikelihood().fit(X_bad)
    with pytest.raises(ValueError, match="1 sample"):
        WhiteningLikelihood().fit(X[:1])
    with pytest.raises(ValueError, match="2D"):
        WhiteningLikelihood().fit(X[0])
    model = WhiteningLikelihood().fit(X)
    with pytest.raises(ValueError, match="features"):
        model.transform(X[:, :4])
    with pytest.raises(ValueError, match="features"):
        model.score_samples(X[:, :4])
    with pytest.raises(ValueError, match="features"):
        model.inverse_transform(X[:, :4])
    X_bad = X.copy()
    X_bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.score_samples(X_bad)


def test_values_too_large_for_a_covariance_are_a_clear_error():
    # Issue 28, item 8: 1e200 overflowed the covariance and numpy's eigh
    # raised LinAlgError.
    X = np.random.default_rng(0).normal(size=(30, 4)) * 1e200
    with pytest.raises(ValueError, match=r"too large to form a covariance.*rescale X"):
        WhiteningLikelihood().fit(X)
