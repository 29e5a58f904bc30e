"""Tests of skicml.contexture.metrics: tau, decay rate, alignments, kernel diagnostics,
ratio trace, spectrum and scorer (contexture spec, sections 2.3, 2.4, 4.4 and 6)."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.linalg import aslinearoperator
from sklearn.base import BaseEstimator
from sklearn.datasets import make_blobs
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, ShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skicml.contexture import ContextureEmbedding, KNNContext
from skicml.contexture.metrics import (
    ContextScoreAbstainWarning,
    cca_alignment,
    context_spectrum,
    context_tau,
    kernel_deviation,
    kernel_lipschitz,
    make_context_scorer,
    mutual_knn_alignment,
    ratio_trace,
    spectral_decay_rate,
    trace_gap_upper,
)
from skicml.datasets import make_planted_spectrum


class FakeContext(BaseEstimator):
    """The context contract around a given conditional ``W`` (rows of the fit data)."""

    def __init__(self, W=None, row_marginal=None, form="dense"):
        self.W = W
        self.row_marginal = row_marginal
        self.form = form

    def fit(self, X, y=None):
        W = np.asarray(self.W, dtype=np.float64)
        assert W.shape[0] == len(X)
        P = np.full(len(W), 1.0 / len(W)) if self.row_marginal is None else np.asarray(self.row_marginal)
        p = P @ W
        Q = np.sqrt(P)[:, None] * W / np.sqrt(p)
        self.fit_operator_ = {"dense": Q, "sparse": sp.csr_matrix(Q), "linop": aslinearoperator(Q)}[self.form]
        self.row_marginal_, self.anchor_marginal_ = P, p
        self.n_anchors_ = W.shape[1]
        return self


def random_conditional(rng, n, m, sparsity=0.0):
    W = rng.random((n, m)) * (rng.random((n, m)) >= sparsity)
    # Every row and every anchor gets some mass.
    W[np.arange(n), rng.integers(m, size=n)] += 0.1
    W[rng.integers(n, size=m), np.arange(m)] += 0.1
    return W / W.sum(axis=1, keepdims=True)


def kernel_matrix(W, P):
    """``k_X+(x_i, x_j) = sum_k W[i, k] W[j, k] / p_k`` straight from the definition."""
    p = P @ W
    return (W / p) @ W.T


def literal_ratio_trace(Phi, W, P):
    """``Tr(C^-1 B)`` with C = Cov_PX[Phi], B = Cov_PA[T* Phi], from W (full-rank Phi)."""
    p = P @ W
    centred = Phi - P @ Phi
    C = centred.T @ (P[:, None] * centred)
    adjoint = (W * P[:, None]).T @ Phi / p[:, None]
    adjoint -= p @ adjoint
    B = adjoint.T @ (p[:, None] * adjoint)
    return np.trace(np.linalg.solve(C, B))


@pytest.fixture(scope="module")
def planted():
    W, s, mu, nu = make_planted_spectrum(48, 24, (0.9, 0.7, 0.4, 0.2, 0.1), random_state=0)
    X = np.random.default_rng(0).standard_normal((48, 3))
    return W, s, mu, X


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(120, centers=2, cluster_std=2.0, random_state=0)
    return X


def quiet_tau(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ContextScoreAbstainWarning)
        return context_tau(*args, **kwargs)


# context_tau --------------------------------------------------------------------------------------


def test_tau_reference_values():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tau, d_star, curve = context_tau([0.5, 0.25, 0.125, 0.0], max_components=4, beta=1.0, return_curve=True)
    np.testing.assert_allclose(curve, [1 / 0.75 + 0.5 / 0.875, 1 / 0.875 + 0.75 / 0.875, 2.0], rtol=1e-14)
    assert round(tau, 4) == 1.9048 and d_star == 1
    assert context_tau([0.5, 0.25, 0.125, 0.0]) == (tau, d_star)


def test_tau_uses_the_first_d0_values_and_sorts():
    lam = [0.5, 0.25, 0.125, 0.0, 0.0]
    tau, _, curve = context_tau(lam, max_components=3, return_curve=True)
    np.testing.assert_allclose(curve, [1 / 0.75 + 0.5 / 0.875, 1 / 0.875 + 0.75 / 0.875])
    assert context_tau([0.125, 0.5, 0.0, 0.25]) == context_tau([0.5, 0.25, 0.125, 0.0])
    # Rounding just outside [0, 1] is clipped, not refused.
    clipped = quiet_tau([1 + 1e-9, 0.5, -1e-9], return_curve=True)[2]
    np.testing.assert_array_equal(clipped, quiet_tau([1.0, 0.5, 0.0], return_curve=True)[2])


def test_tau_is_infinite_exactly_at_unit_values():
    tau, d_star, curve = quiet_tau([1.0, 1.0 - 1e-13, 0.5, 0.1], return_curve=True)
    assert np.isinf(curve[0]) and np.all(np.isfinite(curve[1:]))
    assert d_star >= 2 and tau == curve[d_star - 1]
    assert np.isfinite(quiet_tau([1.0, 1.0 - 1e-9, 0.5], return_curve=True)[2][0])
    tau, d_star, curve = context_tau([1.0, 1.0, 1.0], return_curve=True)
    assert tau == np.inf and d_star == 0 and np.all(np.isinf(curve))


def test_tau_abstains():
    with pytest.warns(ContextScoreAbstainWarning, match="abstain"):
        tau, d_star, curve = context_tau([0.0, 0.0, 0.0], beta=2.5, return_curve=True)
    assert (tau, d_star) == (3.5, 1) and np.all(curve == 3.5)
    # All the mass in s_1: tau_1 = 1 / (1 - 1e-6) + 0.5 * 0.01 / 0.010002 is just below beta + 1 = 1.5.
    with pytest.warns(ContextScoreAbstainWarning, match="abstain"):
        context_tau([0.01, 1e-6, 1e-6], beta=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        context_tau([0.01, 1e-6, 1e-6], beta=0.5, abstain_tol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"eigenvalues": [0.5]}, "at least 2"),
        ({"eigenvalues": [[0.5, 0.2]]}, "1-D"),
        ({"eigenvalues": [0.5, np.nan]}, "NaN"),
        ({"eigenvalues": [1.5, 0.2]}, r"\[0, 1\]"),
        ({"eigenvalues": [0.5, -0.1]}, r"\[0, 1\]"),
        ({"eigenvalues": ["a", "b"]}, "numbers"),
        ({"eigenvalues": [0.5, 0.2], "beta": -1.0}, "beta"),
        ({"eigenvalues": [0.5, 0.2], "max_components": 1}, "max_components"),
        ({"eigenvalues": [0.5, 0.2], "abstain_tol": -0.1}, "abstain_tol"),
    ],
)
def test_tau_refuses_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        context_tau(**kwargs)


spectra = st.lists(st.floats(0.0, 1.0), min_size=2, max_size=30).map(lambda v: sorted(v, reverse=True))


@settings(max_examples=60, deadline=None)
@given(lam=spectra, beta=st.floats(0.0, 5.0), d0=st.integers(2, 40))
def test_tau_properties(lam, beta, d0):
    tau, d_star, curve = quiet_tau(lam, max_components=d0, beta=beta, return_curve=True)
    lam = np.asarray(lam)[:d0]
    assert curve.shape == (lam.size - 1,)
    assert np.all(curve >= 1.0)
    np.testing.assert_array_equal(np.isinf(curve), lam[1:] >= 1 - 1e-12)
    if np.all(np.isinf(curve)):
        assert tau == np.inf and d_star == 0
    else:
        assert tau == curve.min() == curve[d_star - 1] and np.all(curve[: d_star - 1] > tau)


@settings(max_examples=60, deadline=None)
@given(lam=spectra)
def test_tau_without_beta_is_non_increasing(lam):
    tau, d_star, curve = quiet_tau(lam, beta=0.0, return_curve=True)
    finite = curve[np.isfinite(curve)]
    assert np.all(np.diff(finite) <= 0)
    assert np.all(np.isinf(curve[: curve.size - finite.size]))
    if finite.size:
        # The smallest d of the (last, lowest) plateau.
        assert tau == curve[-1] and np.all(curve[: d_star - 1] > tau)


@settings(max_examples=60, deadline=None)
@given(lam=spectra, beta=st.floats(0.0, 3.0), more=st.floats(0.0, 3.0))
def test_more_beta_never_raises_d_star(lam, beta, more):
    _, d1, _ = quiet_tau(lam, beta=beta, return_curve=True)
    _, d2, curve2 = quiet_tau(lam, beta=beta + more, return_curve=True)
    if d1 == 0:
        assert d2 == 0
    else:
        # Up to rounding of an exact tie between d1 and a larger d.
        assert d2 <= d1 or curve2[d1 - 1] <= curve2[d2 - 1] + 1e-12


# spectral_decay_rate ------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.01, 5.0), n=st.integers(2, 60))
def test_decay_rate_recovers_an_exponential_spectrum(rate, n):
    assert spectral_decay_rate(np.exp(-rate * np.arange(1, n + 1))) == pytest.approx(rate, rel=1e-6)


def test_decay_rate_limits():
    assert spectral_decay_rate([1.0, 1.0, 1.0]) == 0.0
    assert spectral_decay_rate([0.0, 0.0]) == np.inf
    assert spectral_decay_rate([0.9, 0.8, 0.7]) < spectral_decay_rate([0.3, 0.1, 0.01])
    with pytest.raises(ValueError, match="NaN"):
        spectral_decay_rate([0.5, np.nan])


@settings(max_examples=40, deadline=None)
@given(lam=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30))
def test_decay_rate_is_the_least_squares_optimum(lam):
    rate = spectral_decay_rate(lam)
    y = np.concatenate([[1.0], np.sort(lam)[::-1]])
    i = np.arange(y.size)

    def loss(r):
        return np.sum((np.exp(-r * i) - y) ** 2)

    if np.isinf(rate):
        assert not np.any(np.asarray(lam) > 0)
        return
    grid = np.concatenate([np.linspace(0, 3, 3001), np.geomspace(3, 1e3, 500)])
    assert loss(rate) <= min(loss(r) for r in grid) + 1e-10


# cca_alignment ------------------------------------------------------------------------------------


def centred_orthonormal(rng, n, k):
    Z = rng.standard_normal((n, k))
    Z -= Z.mean(axis=0)
    return np.linalg.qr(Z)[0]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), d=st.integers(1, 5))
def test_cca_is_invariant_to_invertible_maps(seed, d):
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((60, d))
    A = rng.standard_normal((d, d)) + 3 * np.eye(d)
    assert cca_alignment(F, F @ A - 7.0) == pytest.approx(1.0, abs=1e-10)
    G = rng.standard_normal((60, d + 1))
    score = cca_alignment(F, G)
    assert 0.0 <= score <= 1.0 and score == pytest.approx(cca_alignment(G, F), abs=1e-12)


def test_cca_known_values_and_rank_deficiency():
    rng = np.random.default_rng(0)
    a, b, c, e = centred_orthonormal(rng, 50, 4).T
    assert cca_alignment(np.c_[a, b], np.c_[c, e]) == pytest.approx(0.0, abs=1e-12)
    assert cca_alignment(np.c_[a, b], np.c_[a, c]) == pytest.approx(0.5, abs=1e-12)
    # A duplicated and a constant column change nothing.
    assert cca_alignment(np.c_[a, b, a, np.full(50, 0.1)], np.c_[a, c]) == pytest.approx(0.5, abs=1e-12)
    # Contained span: every canonical correlation of the smaller side is 1.
    assert cca_alignment(a[:, None], np.c_[a + b, b, c]) == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError, match="constant"):
        cca_alignment(np.ones((50, 2)) * 0.1, np.c_[a, b])
    with pytest.raises(ValueError, match="same rows"):
        cca_alignment(np.c_[a, b], np.c_[a, b][:40])


# mutual_knn_alignment -----------------------------------------------------------------------------


def brute_neighbours(F, k):
    D = np.linalg.norm(F[:, None] - F[None], axis=-1)
    np.fill_diagonal(D, np.inf)
    return [set(row) for row in np.argsort(D, axis=1)[:, :k]]


@pytest.mark.parametrize("k", [1, 3, 8])
def test_mutual_knn_matches_brute_force(k):
    rng = np.random.default_rng(k)
    F1, F2 = rng.standard_normal((40, 3)), rng.standard_normal((40, 5))
    N1, N2 = brute_neighbours(F1, k), brute_neighbours(F2, k)
    iou = np.mean([len(a & b) / len(a | b) for a, b in zip(N1, N2)])
    fraction = np.mean([len(a & b) / k for a, b in zip(N1, N2)])
    assert mutual_knn_alignment(F1, F2, n_neighbors=k, whiten=False) == pytest.approx(iou, abs=1e-12)
    assert mutual_knn_alignment(F1, F2, n_neighbors=k, whiten=False, mode="fraction") == pytest.approx(fraction)
    assert iou <= fraction


def test_mutual_knn_whitening():
    rng = np.random.default_rng(0)
    F = rng.standard_normal((150, 3))
    A = np.array([[1.0, 5.0, 0.0], [0.0, 1.0, 0.0], [0.0, 2.0, 0.1]])
    assert mutual_knn_alignment(F, F) == 1.0
    assert mutual_knn_alignment(F, F @ A + 3.0) > 0.99
    assert mutual_knn_alignment(F, F @ A, whiten=False) < 0.9
    # A rank-deficient side is whitened on its span.
    assert mutual_knn_alignment(np.c_[F, F[:, :1]], F, mode="fraction") > 0.99
    assert mutual_knn_alignment(F, rng.standard_normal((150, 3))) < 0.2


def test_mutual_knn_refuses_bad_input():
    F = np.random.default_rng(0).standard_normal((10, 2))
    with pytest.raises(ValueError, match="n_neighbors"):
        mutual_knn_alignment(F, F, n_neighbors=10)
    with pytest.raises(ValueError, match="mode"):
        mutual_knn_alignment(F, F, mode="jaccard")
    with pytest.raises(ValueError, match="constant"):
        mutual_knn_alignment(np.ones((10, 2)), F, n_neighbors=3)


# kernel_deviation and kernel_lipschitz ------------------------------------------------------------


@pytest.mark.parametrize("form", ["dense", "sparse", "linop"])
def test_kernel_deviation_matches_the_definition(form):
    rng = np.random.default_rng(1)
    W = random_conditional(rng, 30, 12, sparsity=0.6)
    P = rng.random(30) + 0.1
    P /= P.sum()
    X = rng.standard_normal((30, 2))
    expected = P @ np.abs(kernel_matrix(W, P) - 1) @ P
    assert kernel_deviation(X, FakeContext(W, P, form)) == pytest.approx(expected, rel=1e-12)


def test_kernel_deviation_limits():
    X = np.zeros((20, 1))
    assert kernel_deviation(X, FakeContext(np.full((20, 7), 1 / 7))) == pytest.approx(0.0, abs=1e-12)
    # A = X: k = n on the diagonal and 0 elsewhere.
    assert kernel_deviation(X, FakeContext(np.eye(20))) == pytest.approx(2 * 19 / 20)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(3, 25), m=st.integers(2, 25))
def test_kernel_deviation_bounds_the_spectrum(seed, n, m):
    # Lemma 17: sum_{i>0} s_i^2 = E[k(x, x)] - 1 <= max |k - 1|; the mean deviation is at most the max.
    rng = np.random.default_rng(seed)
    W = random_conditional(rng, n, m, sparsity=0.5)
    P = np.full(n, 1 / n)
    K = kernel_matrix(W, P)
    Q = np.sqrt(P)[:, None] * W / np.sqrt(P @ W)
    s = np.linalg.svd(Q, compute_uv=False)
    assert s[0] == pytest.approx(1.0)
    assert np.sum(s[1:] ** 2) <= np.abs(K - 1).max() + 1e-10
    assert kernel_deviation(np.zeros((n, 1)), FakeContext(W)) <= np.abs(K - 1).max() + 1e-10


def brute_lipschitz(K, X):
    best = 0.0
    n = len(X)
    for i in range(n):
        for j in range(i + 1, n):
            gap = np.linalg.norm(X[i] - X[j])
            if gap > 0:
                best = max(best, np.max(np.abs(K[:, i] - K[:, j])) / gap)
    return best


@pytest.mark.parametrize("form", ["dense", "sparse", "linop"])
def test_kernel_lipschitz_matches_the_definition(form):
    rng = np.random.default_rng(2)
    W = random_conditional(rng, 15, 9)
    X = rng.standard_normal((15, 3))
    X[7] = X[3]  # a duplicated row is skipped, not divided by 0
    expected = brute_lipschitz(kernel_matrix(W, np.full(15, 1 / 15)), X)
    assert kernel_lipschitz(X, FakeContext(W, form=form)) == pytest.approx(expected, rel=1e-12)


def test_kernel_lipschitz_subsample():
    rng = np.random.default_rng(3)
    W = random_conditional(rng, 40, 10)
    X = rng.standard_normal((40, 2))
    full = kernel_lipschitz(X, FakeContext(W))
    part = kernel_lipschitz(X, FakeContext(W), n_samples=10, random_state=0)
    assert part <= full
    assert part == kernel_lipschitz(X, FakeContext(W), n_samples=10, random_state=0)
    assert kernel_lipschitz(X, FakeContext(np.full((40, 5), 0.2))) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="n_samples"):
        kernel_lipschitz(X, FakeContext(W), n_samples=1)


def test_kernel_diagnostics_order_contexts(blobs):
    # Larger K = weaker association: smaller deviation and Lipschitz constant.
    weak, strong = KNNContext(n_neighbors=80), KNNContext(n_neighbors=4)
    assert kernel_deviation(blobs, weak) < kernel_deviation(blobs, strong)
    assert kernel_lipschitz(blobs, weak) < kernel_lipschitz(blobs, strong)
    # The real context agrees with the definition on its own operator.
    Q = KNNContext(n_neighbors=6).fit(blobs).fit_operator_
    Q = Q.toarray() if sp.issparse(Q) else np.asarray(Q)
    K = len(blobs) * Q @ Q.T
    assert kernel_deviation(blobs, KNNContext(n_neighbors=6)) == pytest.approx(np.mean(np.abs(K - 1)), rel=1e-10)
    assert kernel_deviation(blobs, "knn") == pytest.approx(kernel_deviation(blobs, KNNContext()))


# ratio_trace and trace_gap_upper ------------------------------------------------------------------


@pytest.mark.parametrize("form", ["dense", "sparse", "linop"])
def test_ratio_trace_of_the_contexture_is_maximal(planted, form):
    W, s, mu, X = planted
    context = FakeContext(W, form=form)
    for d in range(1, len(s) + 1):
        assert ratio_trace(mu[:, :d], X, context) == pytest.approx(np.sum(s[:d] ** 2), abs=1e-10)
        gap = trace_gap_upper(mu[:, :d], X, context, eigenvalues=np.r_[s**2, 0.0])
        assert gap == pytest.approx((np.r_[s, 0.0][d]) ** 2, abs=1e-10)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), d=st.integers(1, 4))
def test_ratio_trace_invariance_and_bound(planted, seed, d):
    W, s, mu, X = planted
    rng = np.random.default_rng(seed)
    Phi = rng.standard_normal((len(W), d))
    A = rng.standard_normal((d, d)) + 3 * np.eye(d)
    rt = ratio_trace(Phi, X, FakeContext(W))
    assert 0.0 <= rt <= np.sum(s[:d] ** 2) + 1e-12
    assert ratio_trace(Phi @ A + 2.0, X, FakeContext(W)) == pytest.approx(rt, abs=1e-10)
    # A redundant column (C singular) counts once.
    assert ratio_trace(np.c_[Phi, Phi[:, :1] - Phi[:, -1:]] if d > 1 else np.c_[Phi, 2 * Phi], X,
                       FakeContext(W)) == pytest.approx(rt, abs=1e-10)
    gap = trace_gap_upper(Phi, X, FakeContext(W), eigenvalues=np.r_[s**2, np.zeros(5)])
    assert gap >= np.r_[s, np.zeros(5)][d] ** 2 - 1e-12


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), n=st.integers(6, 25), m=st.integers(3, 15), d=st.integers(1, 3))
def test_ratio_trace_matches_the_definition(seed, n, m, d):
    # Non-uniform P_X (a graph's degree weighting) and the W-form of T*.
    rng = np.random.default_rng(seed)
    W = random_conditional(rng, n, m)
    P = rng.random(n) + 0.2
    P /= P.sum()
    Phi = rng.standard_normal((n, d))
    expected = literal_ratio_trace(Phi, W, P)
    assert ratio_trace(Phi, np.zeros((n, 1)), FakeContext(W, P)) == pytest.approx(expected, rel=1e-8, abs=1e-12)


def test_ratio_trace_edge_cases(planted):
    W, s, mu, X = planted
    assert ratio_trace(np.full(len(W), 3.0), X, FakeContext(W)) == 0.0
    assert ratio_trace(mu[:, 0], X, FakeContext(W)) == pytest.approx(s[0] ** 2)
    with pytest.raises(ValueError, match="shape"):
        ratio_trace(mu[:10], X, FakeContext(W))
    with pytest.raises(ValueError, match="constant"):
        trace_gap_upper(np.ones(len(W)), X, FakeContext(W), eigenvalues=s**2)
    with pytest.raises(ValueError, match="needs s_1"):
        trace_gap_upper(mu[:, :3], X, FakeContext(W), eigenvalues=s[:3] ** 2)


def test_trace_gap_computes_the_spectrum(blobs):
    context = KNNContext(n_neighbors=8)
    embedding = ContextureEmbedding(context, n_components=3, max_components=10).fit(blobs)
    Phi = embedding.embedding_
    assert ratio_trace(Phi, blobs, context) == pytest.approx(embedding.eigenvalues_[:3].sum(), abs=1e-8)
    assert trace_gap_upper(Phi, blobs, context) == pytest.approx(embedding.eigenvalues_[3], abs=1e-8)
    noisy = Phi + 0.3 * np.random.default_rng(0).standard_normal(Phi.shape)
    assert trace_gap_upper(noisy, blobs, context) > embedding.eigenvalues_[3]


# the context contract -----------------------------------------------------------------------------


class NoOperator(BaseEstimator):
    def fit(self, X, y=None):
        self.row_marginal_ = np.full(len(X), 1 / len(X))
        return self


class Sampling(FakeContext):
    exact = False


class WrongRows(FakeContext):
    def fit(self, X, y=None):
        super().fit(X, y)
        self.fit_operator_ = self.fit_operator_[:10]
        return self


def test_contract_violations_are_named(planted):
    W, s, mu, X = planted
    with pytest.raises(ValueError, match="fit_operator_, anchor_marginal_"):
        kernel_deviation(X, NoOperator())
    with pytest.raises(ValueError, match="sampling context"):
        ratio_trace(mu, X, Sampling(W))
    with pytest.raises(ValueError, match="contract"):
        kernel_lipschitz(X, WrongRows(W))
    with pytest.raises(ValueError, match="context"):
        kernel_deviation(X, 3)


# context_spectrum and the scorer ------------------------------------------------------------------


def test_context_spectrum_is_the_operator_spectrum(blobs):
    Q = KNNContext(n_neighbors=8).fit(blobs).fit_operator_
    Q = Q.toarray() if sp.issparse(Q) else np.asarray(Q)
    expected = np.linalg.svd(Q, compute_uv=False)[1:13] ** 2
    spectrum = context_spectrum(blobs, KNNContext(n_neighbors=8), max_components=12)
    np.testing.assert_allclose(spectrum, expected, atol=1e-10)
    sub = context_spectrum(blobs, KNNContext(n_neighbors=8), max_components=12, subsample=60, random_state=0)
    assert sub.shape == (12,) and np.all((sub >= 0) & (sub <= 1 + 1e-12))


@pytest.mark.filterwarnings("ignore::skicml.contexture.metrics.ContextScoreAbstainWarning")
def test_scorer_returns_minus_tau(blobs):
    scorer = make_context_scorer(beta=0.5, max_components=20)
    embedding = ContextureEmbedding(KNNContext(n_neighbors=8), n_components=2, max_components=40).fit(blobs)
    expected = -quiet_tau(embedding.eigenvalues_, max_components=20, beta=0.5)[0]
    assert scorer(embedding, blobs) == pytest.approx(expected)
    assert scorer(embedding, None) != make_context_scorer()(embedding, None)
    pipeline = make_pipeline(StandardScaler(), ContextureEmbedding(KNNContext(n_neighbors=8), n_components=2,
                                                                   max_components=40)).fit(blobs)
    assert scorer(pipeline, blobs) == pytest.approx(-quiet_tau(pipeline[-1].eigenvalues_, max_components=20,
                                                                beta=0.5)[0])
    restored = pickle.loads(pickle.dumps(scorer))
    assert restored(embedding, blobs) == scorer(embedding, blobs)
    assert "beta=0.5" in repr(scorer)
    with pytest.raises(NotFittedError):
        scorer(ContextureEmbedding(), blobs)
    with pytest.raises(ValueError, match="eigenvalues_"):
        scorer(PCA(2).fit(blobs), blobs)
    with pytest.raises(ValueError, match="beta"):
        make_context_scorer(beta=-1)


def test_scorer_selects_the_context_with_lowest_tau(blobs):
    grid = [4, 15, 60]
    cv = ShuffleSplit(n_splits=1, test_size=0.25, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ContextScoreAbstainWarning)
        search = GridSearchCV(
            ContextureEmbedding(KNNContext(), n_components=2, max_components=30),
            {"context__n_neighbors": grid},
            scoring=make_context_scorer(max_components=30),
            cv=cv,
        ).fit(blobs)
    train = next(cv.split(blobs))[0]
    taus = [
        quiet_tau(context_spectrum(blobs[train], KNNContext(n_neighbors=k), max_components=30), max_components=30)[0]
        for k in grid
    ]
    assert search.best_params_["context__n_neighbors"] == grid[int(np.argmin(taus))]
    np.testing.assert_allclose(-search.cv_results_["mean_test_score"], taus)


def test_tau_warns_when_its_minimum_sits_at_d0_minus_one():
    # A slowly decaying spectrum (a strong context): tau_d keeps falling to the last d.
    slow = 1.0 - np.linspace(0.01, 0.2, 100)
    with pytest.warns(ContextScoreAbstainWarning, match="end of the d = 1 .. 99"):
        tau, d_star = context_tau(slow)
    assert d_star >= 95 and tau > 2.05
    # A fast-decaying one has its minimum early and stays silent.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert context_tau(np.exp(-0.5 * np.arange(1, 101)))[1] < 10


def test_the_boundary_is_the_last_five_percent_and_at_least_the_last_d():
    from skicml.contexture._spectrum import _tau_at_boundary

    assert _tau_at_boundary(3, 3) and not _tau_at_boundary(2, 3)
    assert _tau_at_boundary(255, 255) and _tau_at_boundary(244, 255) and not _tau_at_boundary(243, 255)
    assert not _tau_at_boundary(0, 255) and not _tau_at_boundary(1, 1)
