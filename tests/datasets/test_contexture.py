"""Tests of the contexture generators: make_context_blobs and make_planted_spectrum
(contexture spec, section 5, items 1 and 2)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.neighbors import NearestNeighbors

from skicml.datasets import make_context_blobs, make_planted_spectrum

SHAPES = {"blobs": 2, "circle": 2, "swiss_roll": 3}


# make_context_blobs -------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    shape=st.sampled_from(sorted(SHAPES)),
    n=st.integers(1, 60),
    extra=st.integers(0, 3),
    noise=st.floats(0.0, 0.5),
    frequency=st.floats(1.0, 20.0),
    n_centers=st.integers(2, 6),
    seed=st.integers(0, 2**16),
)
def test_blobs_shapes_and_ranges(shape, n, extra, noise, frequency, n_centers, seed):
    X, y_smooth, y_rough = make_context_blobs(n, SHAPES[shape] + extra, shape=shape, n_centers=n_centers,
                                              noise=noise, frequency=frequency, random_state=seed)
    assert X.shape == (n, SHAPES[shape] + extra) and X.dtype == np.float64 and np.all(np.isfinite(X))
    assert y_smooth.shape == y_rough.shape == (n,)
    for y in (y_smooth, y_rough):
        assert np.all((-1 <= y) & (y <= 1))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_blobs_seeds_reproduce(shape):
    a = make_context_blobs(50, shape=shape, random_state=3)
    b = make_context_blobs(50, shape=shape, random_state=3)
    c = make_context_blobs(50, shape=shape, random_state=4)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])
    assert make_context_blobs(10, shape=shape)[0].shape == (10, SHAPES[shape])


def test_blobs_latent_coordinates_without_noise():
    X, y_smooth, _ = make_context_blobs(200, 4, shape="blobs", n_centers=5, noise=0.0, random_state=0)
    # Each point sits on its centre, on the unit circle; the smooth target is one value per centre.
    np.testing.assert_allclose(np.linalg.norm(X[:, :2], axis=1), 1.0)
    assert np.all(X[:, 2:] == 0)
    centres, which = np.unique(X.round(12), axis=0, return_inverse=True)
    assert len(centres) == len(np.unique(y_smooth)) <= 5
    for k in range(len(centres)):
        assert len(np.unique(y_smooth[which.ravel() == k])) == 1
    X, y_smooth, y_rough = make_context_blobs(200, shape="circle", noise=0.0, frequency=3, random_state=0)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0)
    np.testing.assert_allclose(y_smooth, X[:, 0])
    theta = np.arctan2(X[:, 1], X[:, 0])
    np.testing.assert_allclose(y_rough, np.cos(3 * theta), atol=1e-12)
    X, y_smooth, y_rough = make_context_blobs(200, shape="swiss_roll", noise=0.0, random_state=0)
    t = np.hypot(X[:, 0], X[:, 2])
    assert np.all((t >= 1.5 * np.pi - 1e-12) & (t <= 4.5 * np.pi + 1e-12))
    assert np.all((X[:, 1] >= 0) & (X[:, 1] <= 21))
    np.testing.assert_allclose(y_smooth, np.cos(np.pi * (t - 1.5 * np.pi) / (3 * np.pi)), atol=1e-12)


def knn_top_span(X, n_neighbors, d):
    """Orthonormal basis of the constant and the top d singular functions of a kNN context."""
    n = len(X)
    neighbours = NearestNeighbors(n_neighbors=n_neighbors).fit(X).kneighbors(X, return_distance=False)
    W = np.zeros((n, n))
    W[np.repeat(np.arange(n), n_neighbors), neighbours.ravel()] = 1 / n_neighbors
    p = W.mean(axis=0)
    W, p = W[:, p > 0], p[p > 0]
    # The top singular space may be degenerate (blobs): keep the constant inside it.
    return np.linalg.svd(W / np.sqrt(n * p), full_matrices=False)[0][:, : d + 1]


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("seed", [0, 1])
def test_smooth_target_is_compatible_and_rough_is_not(shape, seed):
    X, y_smooth, y_rough = make_context_blobs(300, shape=shape, random_state=seed)
    basis = knn_top_span(X, 10, 8)

    def explained(y):
        y = y - y.mean()
        return np.sum((basis.T @ y) ** 2) / np.sum(y**2)

    assert explained(y_smooth) > 0.85
    assert explained(y_rough) < 0.2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_samples": 0}, "n_samples"),
        ({"n_samples": True}, "n_samples"),
        ({"n_features": 1}, "n_features"),
        ({"n_features": 2, "shape": "swiss_roll"}, "n_features"),
        ({"shape": "cube"}, "shape"),
        ({"n_centers": 1}, "n_centers"),
        ({"noise": -0.1}, "noise"),
        ({"noise": math.inf}, "noise"),
        ({"frequency": 0.5}, "frequency"),
    ],
)
def test_blobs_refuse_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_context_blobs(**kwargs)


# make_planted_spectrum ----------------------------------------------------------------------------


@st.composite
def planted_settings(draw):
    shared = draw(st.integers(2, 8))
    n, m = shared * draw(st.integers(1, 6)), shared * draw(st.integers(1, 6))
    r = draw(st.integers(1, shared - 1))
    values = draw(st.lists(st.floats(0.0, 1.0), min_size=r, max_size=r))
    return n, m, values, draw(st.integers(0, 2**16))


@settings(max_examples=60, deadline=None)
@given(planted_settings())
def test_planted_spectrum_is_exact(case):
    n, m, values, seed = case
    W, s, mu, nu = make_planted_spectrum(n, m, values, random_state=seed)
    r = len(values)
    assert W.shape == (n, m) and mu.shape == (n, r) and nu.shape == (m, r)
    np.testing.assert_array_equal(s, np.sort(values)[::-1])
    assert W.min() >= 0
    np.testing.assert_allclose(W.sum(axis=1), 1.0, atol=1e-12)
    p = W.mean(axis=0)
    np.testing.assert_allclose(p, 1 / m, atol=1e-12)
    for f, size in ((mu, n), (nu, m)):
        np.testing.assert_allclose(f.mean(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(f.T @ f / size, np.eye(r), atol=1e-12)
    np.testing.assert_allclose(W, (1 + (mu * s) @ nu.T) / m, atol=1e-15)
    Q = W / np.sqrt(n * p)
    expected = np.zeros(min(n, m))
    expected[0], expected[1: r + 1] = 1.0, s
    np.testing.assert_allclose(np.linalg.svd(Q, compute_uv=False), np.sort(expected)[::-1], atol=1e-10)
    # mu_i / sqrt(n) and nu_i / sqrt(m) are singular pairs with value s_i.
    np.testing.assert_allclose(Q @ nu / math.sqrt(m), mu * s / math.sqrt(n), atol=1e-12)
    np.testing.assert_allclose(Q.T @ mu / math.sqrt(n), nu * s / math.sqrt(m), atol=1e-12)


def test_planted_span_is_recovered():
    W, s, mu, _ = make_planted_spectrum(60, 30, (0.95, 0.7, 0.5, 0.25, 0.05), random_state=0)
    U = np.linalg.svd(W / np.sqrt(60 * W.mean(axis=0)), full_matrices=False)[0][:, 1:6]
    # Principal angles between span(U) and span(mu) are 0: all cosines are 1.
    cosines = np.linalg.svd(U.T @ (mu / math.sqrt(60)), compute_uv=False)
    np.testing.assert_allclose(cosines, 1.0, atol=1e-10)


def test_planted_extremes_and_seeds():
    for values in ([1.0, 1.0, 1.0], [0.0, 0.0], [1.0, 0.0, 1.0, 0.5]):
        W, s, _, _ = make_planted_spectrum(20, 10, values, random_state=0)
        assert W.min() >= 0
        np.testing.assert_allclose(np.linalg.svd(W / np.sqrt(20 * W.mean(axis=0)), compute_uv=False)[1: len(s) + 1], s,
                                   atol=1e-10)
    a = make_planted_spectrum(30, random_state=1)
    b = make_planted_spectrum(30, random_state=1)
    c = make_planted_spectrum(30, random_state=2)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert a[0].shape == (30, 30) and not np.array_equal(a[0], c[0])
    np.testing.assert_array_equal(a[1], c[1])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_samples": 1}, "n_samples"),
        ({"n_samples": 10, "n_anchors": 1}, "n_anchors"),
        ({"n_samples": 12, "n_anchors": 9, "singular_values": (0.5, 0.4, 0.3)}, "gcd"),
        ({"singular_values": (1.2, 0.5)}, r"\[0, 1\]"),
        ({"singular_values": (0.5, -0.1)}, r"\[0, 1\]"),
        ({"singular_values": (0.5, np.nan)}, r"\[0, 1\]"),
        ({"singular_values": [[0.5, 0.2]]}, "1-D"),
        ({"singular_values": ()}, "non-empty"),
        ({"singular_values": ("a",)}, "numbers"),
    ],
)
def test_planted_refuses_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_planted_spectrum(**kwargs)
