"""ContextureEmbedding: exact spectra, out-of-sample embedding, the score."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import subspace_angles
from sklearn.linear_model import Ridge
from sklearn.manifold import SpectralEmbedding
from sklearn.model_selection import GridSearchCV, ShuffleSplit
from sklearn.pipeline import make_pipeline

from skicml.contexture import (
    ContextureEmbedding,
    GraphContext,
    KNNContext,
    LabelContext,
    MaskedContext,
    RBFContext,
    TeacherFeatureContext,
)
from skicml.contexture._contexts import _ConditionalContext
from skicml.datasets import make_planted_spectrum


class PlantedContext(_ConditionalContext):
    """A context given by its matrix: row ``j`` of ``X`` names row ``j`` of ``W``."""

    _parameter_constraints = {"W": ["array-like"]}

    def __init__(self, W=None):
        self.W = W

    def _fit_anchors(self, X, y):
        pass

    def _raw_conditional(self, X):
        return self.W[X[:, 0].astype(int)]


def centred(F):
    return F - F.mean(axis=0)


def same_span(A, B, tol=1e-8):
    return np.max(subspace_angles(centred(A), centred(B))) < tol


def blobs(n_per=20, centers=((0, 0), (50, 0), (0, 50)), seed=0):
    rng = np.random.default_rng(seed)
    return np.vstack([rng.normal(size=(n_per, 2)) + c for c in centers])


@pytest.mark.parametrize("solver", ["dense", "arpack", "randomized"])
def test_planted_spectrum_is_recovered_exactly(solver):
    W, s, mu, nu = make_planted_spectrum(60, 60, (0.9, 0.6, 0.3, 0.1), random_state=0)
    rows = np.arange(60).reshape(-1, 1)
    embedding = ContextureEmbedding(PlantedContext(W), n_components=4, max_components=10, solver=solver,
                                    random_state=0).fit(rows)
    np.testing.assert_allclose(embedding.singular_values_[:5], [0.9, 0.6, 0.3, 0.1, 0.0], atol=1e-10)
    assert same_span(embedding.embedding_, mu)
    # Each mu_i is unique (distinct singular values): equal up to sign.
    np.testing.assert_allclose(np.abs(embedding.embedding_), np.abs(mu), atol=1e-8)
    np.testing.assert_allclose(np.abs(embedding.anchor_functions_[:, :4]), np.abs(nu), atol=1e-8)


def test_disconnected_knn_graph_gives_one_unit_singular_value_per_component():
    X = blobs()
    embedding = ContextureEmbedding(KNNContext(8), n_components=2, max_components=20).fit(X)
    s = embedding.singular_values_
    # Three components: s_0 (excluded) and two more exactly 1.
    np.testing.assert_allclose(s[:2], 1.0, atol=1e-12)
    assert s[2] < 1 - 1e-6
    assert embedding.tau_curve_[0] == np.inf and np.isfinite(embedding.tau_)
    # The unit components are the centred cluster indicators.
    indicators = np.kron(np.eye(3), np.ones((20, 1)))
    assert same_span(embedding.embedding_, indicators[:, :2] - indicators[:, :2].mean(0) + 0 * indicators[:, 2:])


@pytest.mark.parametrize("graph_mode", ["contexture", "laplacian"])
def test_disconnected_graph_gives_one_unit_singular_value_per_component(graph_mode):
    # Three non-bipartite components (odd cycle, cliques): exactly k = 3 unit
    # values counting s_0, in both modes.
    graph = nx.disjoint_union_all([nx.cycle_graph(7), nx.complete_graph(5), nx.complete_graph(6)])
    embedding = ContextureEmbedding(GraphContext(graph), n_components=2, max_components=12,
                                    graph_mode=graph_mode).fit(np.arange(18))
    s = embedding.singular_values_
    np.testing.assert_allclose(s[:2], 1.0, atol=1e-12)
    assert abs(s[2]) < 1 - 1e-6
    assert embedding.tau_ == np.inf or embedding.optimal_n_components_ >= 2


def test_bipartite_graphs_separate_the_two_graph_modes():
    # A path is bipartite: eigenvalue -1 is a singular value 1 for the
    # contexture but last for Laplacian eigenmaps.
    nodes = np.arange(8)
    contexture = ContextureEmbedding(GraphContext(nx.path_graph(8)), n_components=1, max_components=6).fit(nodes)
    laplacian = ContextureEmbedding(GraphContext(nx.path_graph(8)), n_components=1, max_components=6,
                                    graph_mode="laplacian").fit(nodes)
    assert contexture.singular_values_[0] == pytest.approx(1.0)
    assert laplacian.singular_values_[0] == pytest.approx(np.cos(np.pi / 7))


def test_laplacian_mode_spans_what_spectral_embedding_finds():
    graph = nx.karate_club_graph()
    A = nx.to_numpy_array(graph, nodelist=range(34))
    ours = ContextureEmbedding(GraphContext(graph), n_components=3, max_components=10, graph_mode="laplacian")
    theirs = SpectralEmbedding(n_components=3, affinity="precomputed", random_state=0).fit_transform(A)
    assert np.max(subspace_angles(centred(ours.fit_transform(np.arange(34))), centred(theirs))) < 1e-4


@settings(max_examples=30, deadline=None)
@given(n=st.integers(5, 60), p=st.integers(1, 5), k=st.integers(1, 60), seed=st.integers(0, 10_000))
def test_knn_embedding_properties(n, p, k, seed):
    X = np.random.default_rng(seed).normal(size=(n, p))
    k = min(k, n)
    d = 2 if n > 4 else 1
    embedding = ContextureEmbedding(KNNContext(k), n_components=d, max_components=n).fit(X)
    s = embedding.singular_values_
    assert np.all(np.diff(s) <= 1e-12) and s.min() >= 0 and s.max() <= 1
    Z = embedding.embedding_
    nonzero = s[:d] > 1e-8
    Z = Z[:, nonzero]
    np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-8)
    np.testing.assert_allclose(Z.T @ Z / n, np.eye(Z.shape[1]), atol=1e-8)
    np.testing.assert_allclose(embedding.transform(X)[:, nonzero], Z, atol=1e-8)
    # Duality: T nu_i = s_i mu_i and T* mu_i = s_i nu_i on the anchors.
    context = embedding.context_
    W = context.fit_conditional_.toarray()
    nu = embedding.anchor_functions_[:, :d][:, nonzero]
    np.testing.assert_allclose(W @ nu, Z * s[:d][nonzero], atol=1e-8)
    adjoint = (W * context.row_marginal_[:, None]).T @ Z / context.anchor_marginal_[:, None]
    np.testing.assert_allclose(adjoint, nu * s[:d][nonzero], atol=1e-8)


@pytest.mark.parametrize("context", [KNNContext(8), RBFContext(), MaskedContext(KNNContext(8), n_masks=5,
                                                                                  random_state=0)])
def test_fit_then_transform_repeats_fit_transform(context):
    X = np.random.default_rng(0).normal(size=(80, 4))
    embedding = ContextureEmbedding(context, n_components=6, max_components=30)
    np.testing.assert_allclose(embedding.fit(X).transform(X), embedding.fit_transform(X), atol=1e-8)


def test_spectrum_invariances():
    X = np.random.default_rng(0).normal(size=(60, 3))

    def spectrum(context, data):
        return ContextureEmbedding(context, n_components=3, max_components=20).fit(data).singular_values_

    for context in (KNNContext(6), RBFContext()):
        np.testing.assert_allclose(spectrum(context, X + 7.0), spectrum(context, X), atol=1e-10)
        np.testing.assert_allclose(spectrum(context, 13.0 * X), spectrum(context, X), atol=1e-10)


def test_permuting_rows_permutes_the_embedding():
    X = np.random.default_rng(0).normal(size=(50, 3))
    order = np.random.default_rng(1).permutation(50)
    first = ContextureEmbedding(RBFContext(2.0), n_components=3, max_components=10).fit_transform(X)
    second = ContextureEmbedding(RBFContext(2.0), n_components=3, max_components=10).fit_transform(X[order])
    np.testing.assert_allclose(np.abs(second), np.abs(first[order]), atol=1e-8)


def test_limits_of_the_association():
    X = np.random.default_rng(0).normal(size=(40, 2))
    assert ContextureEmbedding(RBFContext(1e-8), n_components=2, max_components=5).fit(
        X).singular_values_.max() < 1e-6
    np.testing.assert_allclose(ContextureEmbedding(RBFContext(1e8), n_components=2, max_components=5).fit(
        X).singular_values_, 1.0, atol=1e-8)
    np.testing.assert_allclose(ContextureEmbedding(KNNContext(1), n_components=2, max_components=5).fit(
        X).singular_values_, 1.0)
    with pytest.warns(UserWarning, match="zero"):
        everything = ContextureEmbedding(KNNContext(40), n_components=2, max_components=5).fit(X)
    assert everything.singular_values_.max() < 1e-12


def test_label_context_spans_the_centred_class_indicators():
    X = np.random.default_rng(0).normal(size=(30, 3))
    y = np.repeat([0, 1, 2], 10)
    embedding = ContextureEmbedding(LabelContext(), n_components=2, max_components=5).fit(X, y)
    np.testing.assert_allclose(embedding.singular_values_, 1.0)
    assert same_span(embedding.embedding_, np.eye(3)[y])
    assert embedding.tau_ == np.inf


def test_unbalanced_labels_span_what_an_unbiased_mse_head_learns():
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = np.r_[np.zeros(25, int), np.ones(10, int), 2 * np.ones(5, int)]
    onehot = np.eye(3)[y]
    embedding = ContextureEmbedding(LabelContext(balanced=False), n_components=2, max_components=3).fit(X, y)
    # Theorem 6: the top eigenvectors of T Lambda T* with class-size weights,
    # here the left singular vectors of onehot * sqrt(p).
    p = onehot.mean(axis=0)
    U = np.linalg.svd(onehot * np.sqrt(p), full_matrices=False)[0][:, :2]
    assert np.max(subspace_angles(embedding.embedding_, U)) < 1e-8


def test_teacher_features_without_a_teacher_are_pca():
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    X = np.random.default_rng(0).normal(size=(60, 5)) * [4, 3, 2, 1, 0.5] @ np.random.default_rng(1).normal(
        size=(5, 5))
    ours = ContextureEmbedding(TeacherFeatureContext(), n_components=2, max_components=5).fit_transform(X)
    pca = PCA(2).fit_transform(StandardScaler().fit_transform(X))
    assert np.max(subspace_angles(ours, pca)) < 1e-8


def test_solvers_agree_on_the_leading_spectrum():
    X = np.random.default_rng(0).normal(size=(300, 4))
    values = {
        solver: ContextureEmbedding(KNNContext(10), n_components=5, max_components=20, solver=solver,
                                    random_state=0).fit(X).singular_values_[:8]
        for solver in ("dense", "randomized", "arpack")
    }
    np.testing.assert_allclose(values["randomized"], values["dense"], atol=1e-5)
    np.testing.assert_allclose(values["arpack"], values["dense"], atol=1e-10)


def test_subsample_fits_the_spectrum_on_fewer_rows_and_embeds_all():
    X = np.random.default_rng(0).normal(size=(200, 3))
    embedding = ContextureEmbedding(KNNContext(10), n_components=4, max_components=20, subsample=80,
                                    random_state=0).fit(X)
    assert embedding.context_.fit_conditional_.shape[0] == 80
    assert embedding.embedding_.shape == (200, 4)
    np.testing.assert_allclose(embedding.transform(X), embedding.embedding_)


def test_grid_search_picks_a_context_without_labels():
    X = np.random.default_rng(0).normal(size=(150, 3))
    search = GridSearchCV(ContextureEmbedding(KNNContext(), n_components=4, max_components=60),
                          {"context__n_neighbors": [3, 10, 40]},
                          cv=ShuffleSplit(n_splits=1, test_size=0.2, random_state=0))
    search.fit(X)
    taus = {}
    for k in (3, 10, 40):
        train = next(ShuffleSplit(n_splits=1, test_size=0.2, random_state=0).split(X))[0]
        taus[k] = ContextureEmbedding(KNNContext(k), n_components=4, max_components=60).fit(X[train]).tau_
    assert search.best_params_["context__n_neighbors"] == min(taus, key=taus.get)
    assert search.best_score_ == pytest.approx(-min(taus.values()))


def test_in_a_pipeline_with_a_probe():
    from skicml.datasets import make_context_blobs

    X, y, _ = make_context_blobs(300, shape="circle", noise=0.05, random_state=0)
    pipeline = make_pipeline(ContextureEmbedding(KNNContext(15), n_components=4, max_components=30), Ridge(1e-3))
    pipeline.fit(X[:200], y[:200])
    assert pipeline.score(X[200:], y[200:]) > 0.95


def test_scale_singular_is_the_average_encoder():
    X = np.random.default_rng(0).normal(size=(50, 3))
    unit = ContextureEmbedding(KNNContext(5), n_components=3, max_components=10).fit(X)
    singular = ContextureEmbedding(KNNContext(5), n_components=3, max_components=10, scale="singular").fit(X)
    np.testing.assert_allclose(singular.embedding_, unit.embedding_ * unit.singular_values_[:3], atol=1e-12)
    np.testing.assert_allclose(singular.transform(X[:5]), unit.transform(X[:5]) * unit.singular_values_[:3])


def test_feature_names_score_and_shortcuts():
    import pandas as pd

    X = pd.DataFrame(np.random.default_rng(0).normal(size=(40, 3)), columns=["a", "b", "c"])
    embedding = ContextureEmbedding("rbf", n_components=3, max_components=10).fit(X)
    assert embedding.get_feature_names_out().tolist() == ["contexture0", "contexture1", "contexture2"]
    assert embedding.feature_names_in_.tolist() == ["a", "b", "c"]
    assert embedding.score(X) == -embedding.tau_
    for shortcut in ("knn", "masked_knn", "masked_rbf"):
        assert ContextureEmbedding(shortcut, n_components=2, max_components=5).fit(
            np.random.default_rng(0).normal(size=(60, 3))).singular_values_.size == 5


def test_float32_and_sparse_input_are_computed_in_float64():
    X = np.random.default_rng(0).normal(size=(60, 4))
    reference = ContextureEmbedding(KNNContext(5), n_components=3, max_components=10).fit(X)
    single = ContextureEmbedding(KNNContext(5), n_components=3, max_components=10).fit(X.astype(np.float32))
    assert single.embedding_.dtype == np.float64
    np.testing.assert_allclose(single.singular_values_, reference.singular_values_, atol=1e-6)
    sparse = ContextureEmbedding(KNNContext(5), n_components=3, max_components=10).fit(sp.csr_matrix(X))
    np.testing.assert_allclose(sparse.singular_values_, reference.singular_values_, atol=1e-12)


@pytest.mark.parametrize("make, X, y, message", [
    (lambda: ContextureEmbedding(KNNContext(5), n_components=20, max_components=50), np.eye(10), None,
     "n_components=20"),
    (lambda: ContextureEmbedding(KNNContext(2)), np.ones((2, 2)), None, "2 sample"),
    (lambda: ContextureEmbedding(KNNContext(2)), np.array([[0.0, np.nan]] * 5), None, "NaN"),
    (lambda: ContextureEmbedding("label", n_components=1), np.eye(6), None, "requires y"),
    (lambda: ContextureEmbedding("label", n_components=1), np.eye(6), np.zeros(6), "2 classes"),
    (lambda: ContextureEmbedding(KNNContext(5), graph_mode="laplacian", n_components=1), np.eye(10), None,
     "GraphContext"),
    (lambda: ContextureEmbedding("nearest"), np.eye(10), None, "context"),
])
def test_bad_input_gets_a_clear_error(make, X, y, message):
    with pytest.raises(ValueError, match=message):
        make().fit(X, y)


def test_transform_refuses_a_different_width():
    embedding = ContextureEmbedding(KNNContext(5), n_components=2, max_components=5).fit(np.eye(10))
    with pytest.raises(ValueError, match="features"):
        embedding.transform(np.eye(10)[:, :3])


def test_a_context_that_leaves_a_row_without_context_is_refused():
    W, *_ = make_planted_spectrum(12, 12, (0.5,), random_state=0)
    W[3] = 0.0
    with pytest.raises(ValueError, match="no context"):
        ContextureEmbedding(PlantedContext(W), n_components=1, max_components=3).fit(np.arange(12).reshape(-1, 1))


def test_anchors_no_row_reaches_are_dropped():
    W, *_ = make_planted_spectrum(12, 12, (0.5,), random_state=0)
    W = np.hstack([W, np.zeros((12, 2))])
    embedding = ContextureEmbedding(PlantedContext(W), n_components=1, max_components=3).fit(
        np.arange(12).reshape(-1, 1))
    assert embedding.context_.n_anchors_ == 12 and embedding.anchor_functions_.shape[0] == 12
    assert embedding.singular_values_[0] == pytest.approx(0.5)


def _recording_solves(monkeypatch):
    from skicml.contexture import _embedding

    calls = []
    solve = _embedding._top_triplets

    def record(Q, deflation, k, solver, symmetric, rng):
        calls.append((k, solver))
        return solve(Q, deflation, k, solver, symmetric, rng)

    monkeypatch.setattr(_embedding, "_top_triplets", record)
    return calls


def test_fit_solves_only_the_components_asked_for(monkeypatch):
    calls = _recording_solves(monkeypatch)
    X = np.random.default_rng(0).normal(size=(1200, 4))
    embedding = ContextureEmbedding(KNNContext(10), n_components=6, random_state=0).fit(X)
    # A sparse kNN context takes ARPACK, as SpectralEmbedding does, for 6 components only.
    assert calls == [(6, "arpack")]
    Z = embedding.transform(X[:50])
    assert calls == [(6, "arpack")] and Z.shape == (50, 6)
    # The spectrum attributes solve the rest once, on first access.
    assert embedding.singular_values_.size == 512 and np.isfinite(embedding.tau_)
    assert [k for k, _ in calls] == [6, 506]
    embedding.anchor_functions_, embedding.decay_rate_, embedding.score()
    assert len(calls) == 2


@pytest.mark.parametrize("solver", ["arpack", "lobpcg", "randomized"])
def test_spectrum_solved_on_demand_matches_the_dense_solve(solver):
    X = np.random.default_rng(0).normal(size=(400, 3))
    dense = ContextureEmbedding(KNNContext(12), n_components=4, max_components=40, solver="dense").fit(X)
    lazy = ContextureEmbedding(KNNContext(12), n_components=4, max_components=40, solver=solver,
                               random_state=0).fit(X)
    atol = 1e-4 if solver == "randomized" else 1e-10
    np.testing.assert_allclose(lazy.singular_values_, dense.singular_values_, atol=atol)
    assert np.all(np.diff(lazy.singular_values_) <= 0)
    assert lazy.tau_ == pytest.approx(dense.tau_, abs=10 * atol)
    # The functions found on demand are orthogonal to the fit's (deflation) in P_X.
    context = lazy.context_
    nu = lazy.anchor_functions_
    gram = (nu * context.anchor_marginal_[:, None]).T @ nu
    np.testing.assert_allclose(gram, np.eye(40), atol=1e-3 if solver == "randomized" else 1e-6)
    np.testing.assert_allclose(lazy.transform(X), lazy.embedding_, atol=1e-8)


def test_laplacian_mode_solved_on_demand_matches_the_dense_solve():
    graph = nx.connected_watts_strogatz_graph(120, 6, 0.2, seed=0)
    nodes = np.arange(120)
    kwargs = dict(n_components=3, max_components=15, graph_mode="laplacian")
    dense = ContextureEmbedding(GraphContext(graph), solver="dense", **kwargs).fit(nodes)
    lazy = ContextureEmbedding(GraphContext(graph), solver="arpack", random_state=0, **kwargs).fit(nodes)
    np.testing.assert_allclose(lazy.singular_values_, dense.singular_values_, atol=1e-10)


def test_a_refit_forgets_the_spectrum_of_the_last_fit():
    X = np.random.default_rng(0).normal(size=(400, 3))
    embedding = ContextureEmbedding(KNNContext(12), n_components=4, max_components=30, solver="arpack",
                                    random_state=0)
    first = embedding.fit(X).singular_values_.copy()
    second = embedding.fit(X[:300]).singular_values_
    assert not np.allclose(first, second)
    np.testing.assert_allclose(second, ContextureEmbedding(KNNContext(12), n_components=4, max_components=30)
                               .fit(X[:300]).singular_values_, atol=1e-10)


def test_the_spectrum_solved_on_demand_uses_the_settings_of_the_fit():
    X = np.random.default_rng(0).normal(size=(400, 3))
    embedding = ContextureEmbedding(KNNContext(12), n_components=4, max_components=30, solver="arpack",
                                    random_state=0).fit(X)
    embedding.set_params(max_components=10, beta=0.0)
    assert embedding.singular_values_.size == 30
    reference = ContextureEmbedding(KNNContext(12), n_components=4, max_components=30, solver="arpack",
                                    random_state=0).fit(X)
    assert embedding.tau_ == pytest.approx(reference.tau_)


@pytest.mark.parametrize("solver", ["auto", "lobpcg"])
def test_a_knn_graph_in_six_pieces_keeps_its_five_unit_singular_values(solver):
    # Single-vector Lanczos (ARPACK) returned four of the five; the block solver keeps them all.
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(150, 2)) + [60 * i, 0] for i in range(6)])
    ours = ContextureEmbedding(KNNContext(8), n_components=8, max_components=20, solver=solver,
                               random_state=0).fit(X)
    dense = ContextureEmbedding(KNNContext(8), n_components=8, max_components=20, solver="dense").fit(X)
    np.testing.assert_allclose(ours.singular_values_[:5], 1.0, atol=1e-10)
    np.testing.assert_allclose(ours.singular_values_, dense.singular_values_, atol=1e-8)
    indicators = np.kron(np.eye(6), np.ones((150, 1)))
    assert same_span(ours.embedding_[:, :5], indicators[:, :5] - indicators[:, :5].mean(0) + 0 * indicators[:, 5:],
                     tol=1e-6)


def test_laplacian_mode_by_lobpcg_keeps_the_double_eigenvalues_of_a_cycle():
    graph = nx.cycle_graph(400)
    kwargs = dict(n_components=6, max_components=12, graph_mode="laplacian")
    ours = ContextureEmbedding(GraphContext(graph), solver="lobpcg", random_state=0, **kwargs).fit(np.arange(400))
    dense = ContextureEmbedding(GraphContext(graph), solver="dense", **kwargs).fit(np.arange(400))
    np.testing.assert_allclose(ours.singular_values_, dense.singular_values_, atol=1e-8)


def test_auto_takes_lobpcg_where_singular_values_repeat(monkeypatch):
    calls = _recording_solves(monkeypatch)
    X = np.random.default_rng(0).normal(size=(2500, 3))
    ContextureEmbedding(KNNContext(10), n_components=40, max_components=60, random_state=0).fit(X)
    # Many components: ARPACK above 2,000 rows, the dense SVD below.
    ContextureEmbedding(KNNContext(10), n_components=40, max_components=60, random_state=0).fit(X[:600])
    assert calls == [(40, "arpack"), (60, "dense")]
    calls.clear()
    ContextureEmbedding(GraphContext(nx.cycle_graph(400)), n_components=6, max_components=12).fit(np.arange(400))
    assert calls == [(6, "lobpcg")]
    rng = np.random.default_rng(0)
    pieces = np.vstack([rng.normal(size=(200, 2)) + [60 * i, 0] for i in range(3)])
    calls.clear()
    ContextureEmbedding(KNNContext(8), n_components=8, max_components=60, random_state=0).fit(pieces)
    assert calls == [(8, "lobpcg")]
