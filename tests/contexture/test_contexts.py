"""The contexts: their matrices, marginals, operators and bad input."""

import pickle

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from skicml.contexture import (
    ContextureEmbedding,
    ConvolutionContext,
    CutmixContext,
    FeatureCorruptionContext,
    GaussianNoiseContext,
    GraphContext,
    KNNContext,
    LabelContext,
    MaskedContext,
    MixtureContext,
    RandomCropContext,
    RBFContext,
    TeacherFeatureContext,
)
from skicml.contexture import _contexts


def dense(W):
    return W.toarray() if sp.issparse(W) else np.asarray(W @ np.eye(W.shape[1]) if hasattr(W, "matmat") else W)


def rows(n=40, p=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, p))


EXACT = [
    lambda: KNNContext(5),
    lambda: KNNContext(5, include_self=False),
    lambda: RBFContext(1.0),
    lambda: RBFContext(1.0, truncate=7),
    lambda: MaskedContext(KNNContext(5), n_masks=4, random_state=0),
    lambda: MaskedContext(RBFContext(1.0), n_masks=4, random_state=0),
    lambda: MixtureContext([KNNContext(5), RBFContext(1.0)], weights=[2, 1]),
    lambda: MixtureContext([KNNContext(5), RBFContext(1.0)], mode="shared"),
    lambda: ConvolutionContext(KNNContext(5), RBFContext(1.0)),
]


@pytest.mark.parametrize("make", EXACT)
def test_conditional_contexts_are_distributions_with_consistent_marginals(make):
    X = rows()
    context = make().fit(X)
    W = dense(context.fit_conditional_)
    assert W.min() >= 0
    np.testing.assert_allclose(W.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(context.row_marginal_, 1 / len(X))
    np.testing.assert_allclose(context.anchor_marginal_, W.T @ context.row_marginal_, atol=1e-14)
    assert context.anchor_marginal_.sum() == pytest.approx(1.0)
    # Q has the trivial mode: Q v0 = u0 with unit vectors, singular value 1 on top.
    Q = dense(context.fit_operator_)
    u0, v0 = context.trivial_mode_
    np.testing.assert_allclose(Q @ v0, u0, atol=1e-12)
    assert np.linalg.svd(Q, compute_uv=False)[0] == pytest.approx(1.0, abs=1e-10)
    # The same rule for new rows.
    new = dense(context.conditional(rows(7, seed=1)))
    assert new.shape == (7, context.n_anchors_)
    np.testing.assert_allclose(new.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("make", [m for i, m in enumerate(EXACT) if i != 1])
def test_conditional_of_the_fit_rows_is_the_fit_matrix(make):
    X = rows()
    context = make().fit(X)
    np.testing.assert_allclose(dense(context.conditional(X)), dense(context.fit_conditional_), atol=1e-12)


def test_knn_without_self_leaves_each_row_out_of_its_fit_context():
    X = rows()
    context = KNNContext(4, include_self=False).fit(X)
    W = np.zeros((40, 40))
    W[:, context.anchor_support_] = dense(context.fit_conditional_)
    assert np.all(np.diag(W) == 0)
    assert np.all((W > 0).sum(axis=1) == 4)


def test_rbf_matches_the_normalised_gaussian_kernel_and_gamma_scale():
    X = rows(30, 2)
    context = RBFContext(gamma=0.7).fit(X)
    K = np.exp(-0.7 * ((X[:, None] - X[None]) ** 2).sum(-1))
    np.testing.assert_allclose(dense(context.fit_conditional_), K / K.sum(1, keepdims=True), rtol=1e-10)
    assert RBFContext().fit(X).gamma_ == pytest.approx(1 / (2 * X.var()))


def test_rbf_far_rows_do_not_underflow():
    X = rows(20, 2)
    W = dense(RBFContext(gamma=50.0).fit(X).conditional(X[:2] + 1e3))
    np.testing.assert_allclose(W.sum(axis=1), 1.0)


def test_rbf_implicit_operator_matches_the_dense_one(monkeypatch):
    X = rows(120, 4)
    dense_context = RBFContext(gamma=0.5).fit(X)
    monkeypatch.setattr(_contexts, "_MAX_DENSE_ENTRIES", 100)
    implicit = RBFContext(gamma=0.5).fit(X)
    assert isinstance(implicit.fit_conditional_, _contexts.LinearOperator)
    np.testing.assert_allclose(dense(implicit.fit_operator_), dense(dense_context.fit_operator_), atol=1e-12)
    np.testing.assert_allclose(implicit.anchor_marginal_, dense_context.anchor_marginal_, atol=1e-14)
    masked_dense = MaskedContext(RBFContext(0.5), n_masks=3, random_state=0)
    monkeypatch.setattr(_contexts, "_MAX_DENSE_ENTRIES", 2**25)
    reference = dense(masked_dense.fit(X).fit_conditional_)
    monkeypatch.setattr(_contexts, "_MAX_DENSE_ENTRIES", 100)
    np.testing.assert_allclose(dense(clone(masked_dense).fit(X).fit_conditional_), reference, atol=1e-12)


def test_masks_hide_the_requested_share_and_keep_a_feature():
    X = rows(30, 10)
    context = MaskedContext(KNNContext(5), mask_rate=0.3, n_masks=6, random_state=0).fit(X)
    assert context.masks_.shape == (6, 10)
    assert np.all(context.masks_.sum(axis=1) == 7)
    one = MaskedContext(KNNContext(5), mask_rate=0.9, n_masks=2, random_state=0).fit(X[:, :1])
    assert np.all(one.masks_.sum(axis=1) == 1)


def test_masked_knn_averages_the_masked_neighbourhoods():
    X = rows(30, 4)
    context = MaskedContext(KNNContext(5), n_masks=3, random_state=0).fit(X)
    expected = np.mean([dense(KNNContext(5).fit(X[:, m]).fit_conditional_) for m in context.masks_], axis=0)
    np.testing.assert_allclose(dense(context.fit_conditional_), expected)


def test_disjoint_mixture_sums_the_dual_kernels_and_shared_mixture_averages_w():
    X = rows(30)
    first, second = KNNContext(5).fit(X), RBFContext(1.0).fit(X)
    mixture = MixtureContext([KNNContext(5), RBFContext(1.0)], weights=[3, 1]).fit(X)
    Q = dense(mixture.fit_operator_)
    Q1, Q2 = dense(first.fit_operator_), dense(second.fit_operator_)
    np.testing.assert_allclose(Q @ Q.T, 0.75 * Q1 @ Q1.T + 0.25 * Q2 @ Q2.T, atol=1e-12)
    shared = MixtureContext([KNNContext(5), RBFContext(1.0)], weights=[3, 1], mode="shared").fit(X)
    np.testing.assert_allclose(dense(shared.fit_conditional_),
                               0.75 * dense(first.fit_conditional_) + 0.25 * dense(second.fit_conditional_))


def test_convolution_chains_the_two_conditionals():
    X = rows(30)
    W1 = dense(KNNContext(5).fit(X).fit_conditional_)
    W2 = dense(RBFContext(1.0).fit(X).fit_conditional_)
    context = ConvolutionContext(KNNContext(5), RBFContext(1.0)).fit(X)
    np.testing.assert_allclose(dense(context.fit_conditional_), W1 @ W2, atol=1e-12)


def test_label_context_gives_unit_singular_values_and_a_teacher_for_new_rows():
    X, y = rows(30), np.repeat(["a", "b", "c"], 10)
    context = LabelContext().fit(X, y)
    np.testing.assert_allclose(np.linalg.svd(dense(context.fit_operator_), compute_uv=False), 1.0)
    with pytest.raises(ValueError, match="teacher="):
        context.conditional(X)
    taught = LabelContext(teacher=LogisticRegression()).fit(X, y)
    W = taught.conditional(X[:5])
    np.testing.assert_allclose(W.sum(axis=1), 1.0)
    smooth = LabelContext(smoothing=0.3).fit(X, y)
    assert dense(smooth.fit_conditional_).min() == pytest.approx(0.1)


def test_unbalanced_labels_weight_classes_by_size():
    X, y = rows(40), np.r_[np.zeros(30), np.ones(10)]
    context = LabelContext(balanced=False).fit(X, y)
    assert context.trivial_mode_ is None
    s = np.linalg.svd(dense(context.fit_operator_), compute_uv=False)
    np.testing.assert_allclose(np.sort(s**2), [0.25, 0.75])


def test_graph_context_is_the_normalised_adjacency_with_degree_weights():
    graph = nx.karate_club_graph()
    nodes = np.arange(34)
    context = GraphContext(graph).fit(nodes)
    A = nx.to_numpy_array(graph, nodelist=range(34))
    d = A.sum(1)
    np.testing.assert_allclose(dense(context.fit_operator_), A / np.sqrt(np.outer(d, d)), atol=1e-12)
    np.testing.assert_allclose(context.row_marginal_, d / d.sum())
    # Sparse adjacency and networkx agree.
    from_matrix = GraphContext(sp.csr_matrix(A)).fit(nodes.reshape(-1, 1))
    np.testing.assert_allclose(dense(from_matrix.fit_operator_), dense(context.fit_operator_))


def test_graph_context_embeds_nodes_left_out_of_the_fit():
    graph = nx.karate_club_graph()
    fit_nodes = [n for n in graph if n not in (9, 26)]
    context = GraphContext(graph).fit(fit_nodes)
    W = context.conditional([9, 26])
    np.testing.assert_allclose(W.sum(axis=1), 1.0)


def test_graph_context_with_string_nodes_and_the_lazy_walk():
    graph = nx.les_miserables_graph()
    names = list(graph)
    context = GraphContext(graph, lazy=True).fit(np.array(names, dtype=object))
    eigenvalues = np.linalg.eigvalsh(dense(context.fit_operator_))
    assert eigenvalues.min() >= -1e-12
    np.testing.assert_allclose(dense(context.conditional(names[:3])), dense(context.fit_conditional_)[:3])


def test_graph_context_refuses_bad_graphs_and_nodes():
    graph = nx.path_graph(6)
    with pytest.raises(ValueError, match="graph="):
        GraphContext().fit(np.arange(6))
    with pytest.raises(ValueError, match="does not have"):
        GraphContext(graph).fit([0, 1, 2, 99])
    with pytest.raises(ValueError, match="not a node"):
        GraphContext(nx.to_scipy_sparse_array(graph)).fit([0, 1, 2, 7])
    with pytest.raises(ValueError, match="no edge"):
        GraphContext(graph).fit([0, 1, 3, 5])
    with pytest.raises(ValueError, match="undirected"):
        GraphContext(nx.DiGraph(graph)).fit(np.arange(6))
    with pytest.raises(ValueError, match="symmetric"):
        GraphContext(np.triu(np.ones((4, 4)))).fit(np.arange(4))
    with pytest.raises(ValueError, match="distinct"):
        GraphContext(graph).fit([0, 1, 1, 2])
    context = GraphContext(graph).fit([0, 1, 2])
    with pytest.raises(ValueError, match="no edge to a fit node"):
        context.conditional([5])


def test_graph_context_survives_clone_pickle_and_a_grid_search():
    from sklearn.model_selection import GridSearchCV, KFold

    graph = nx.ring_of_cliques(4, 6)
    nodes = np.arange(24).reshape(-1, 1)
    context = GraphContext(graph)
    assert nx.utils.graphs_equal(clone(context).get_params()["graph"], graph)
    fitted = context.fit(nodes)
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_allclose(dense(restored.fit_operator_), dense(fitted.fit_operator_))
    search = GridSearchCV(ContextureEmbedding(GraphContext(graph), n_components=2, max_components=8),
                          {"context__lazy": [False, True]}, cv=KFold(2, shuffle=True, random_state=0))
    search.fit(nodes)
    assert search.best_params_["context__lazy"] in (False, True)


def test_teacher_features_normalise_the_spectrum_and_threshold_projects():
    from sklearn.decomposition import PCA

    X = rows(50, 5) * [5, 3, 1, 1, 0.1]
    context = TeacherFeatureContext().fit(X)
    s = np.linalg.svd(dense(context.fit_operator_), compute_uv=False)
    assert (s**2).sum() == pytest.approx(1.0)
    projected = TeacherFeatureContext(threshold=0.9).fit(X)
    s = np.linalg.svd(dense(projected.fit_operator_), compute_uv=False)
    assert set(np.round(s, 8)) <= {0.0, 1.0} and np.round(s, 8).max() == 1.0
    np.testing.assert_allclose(projected.conditional(X), projected.fit_conditional_, atol=1e-12)
    taught = TeacherFeatureContext(features=PCA(2)).fit(X)
    assert taught.n_anchors_ == 2


def test_sampling_contexts_draw_views_of_the_rows():
    X = rows(50, 6)
    views = FeatureCorruptionContext(0.5).fit(X).sample(X, n_views=3, random_state=0)
    assert views.shape == (50, 3, 6)
    changed = np.mean(views != X[:, None])
    assert 0.4 < changed < 0.6
    lo, hi = X.min(0), X.max(0)
    assert np.all((views >= lo) & (views <= hi))
    for distribution in ("marginal", "gaussian"):
        views = FeatureCorruptionContext(1.0, distribution=distribution).fit(X).sample(X, random_state=0)
        assert views.shape == (50, 2, 6)
    mixed = CutmixContext(0.5).fit(X).sample(X, random_state=0)
    assert np.all(np.isin(mixed[:, :, 0], X[:, 0]))
    noisy = GaussianNoiseContext(0.1).fit(X).sample(X, n_views=50, random_state=0)
    np.testing.assert_allclose((noisy - X[:, None]).std(axis=(0, 1)), 0.1 * X.std(0), rtol=0.1)
    first = FeatureCorruptionContext().fit(X).sample(X, random_state=3)
    np.testing.assert_array_equal(first, FeatureCorruptionContext().fit(X).sample(X, random_state=3))


def test_random_crops_of_images_and_sequences():
    images = np.random.default_rng(0).random((4, 64))
    context = RandomCropContext(0.25, image_shape=(8, 8)).fit(images)
    views = context.sample(images, n_views=2, random_state=0)
    assert views.shape == (4, 2, 64)
    assert not np.allclose(views[:, 0], images)
    whole = RandomCropContext(1.0, image_shape=(8, 8)).fit(images).sample(images, random_state=0)
    np.testing.assert_allclose(whole[:, 0], images, atol=1e-12)
    sequences = RandomCropContext(0.5).fit(images).sample(images, random_state=0)
    assert sequences.shape == (4, 2, 64)
    with pytest.raises(ValueError, match="image_shape"):
        RandomCropContext(image_shape=(7, 7)).fit(images)


def test_sampling_contexts_are_refused_by_the_exact_embedding():
    with pytest.raises(ValueError, match="exact"):
        ContextureEmbedding(FeatureCorruptionContext()).fit(rows())


@pytest.mark.parametrize("make, X, message", [
    (lambda: KNNContext(50), rows(30), "n_neighbors=50"),
    (lambda: KNNContext(30, include_self=False), rows(30), "without include_self"),
    (lambda: RBFContext(truncate=40), rows(30), "truncate=40"),
    (lambda: KNNContext(5), rows(2), "2 sample"),
    (lambda: KNNContext(5), np.r_[rows(10), [[np.nan, 0, 0]]], "NaN"),
    (lambda: MixtureContext([]), rows(10), "at least one context"),
    (lambda: MixtureContext([KNNContext(5)], weights=[-1]), rows(10), "non-negative"),
    (lambda: MixtureContext([KNNContext(5), LabelContext()], mode="shared"), rows(10), "requires y"),
])
def test_bad_input_gets_a_clear_error(make, X, message):
    with pytest.raises(ValueError, match=message):
        make().fit(X)


def test_label_context_errors():
    with pytest.raises(ValueError, match="requires y"):
        LabelContext().fit(rows(10))
    with pytest.raises(ValueError, match="2 classes"):
        LabelContext().fit(rows(10), np.zeros(10))
    with pytest.raises(ValueError, match="Unknown label type"):
        LabelContext().fit(rows(10), np.linspace(0, 1, 10))


def test_combinations_refuse_contexts_they_cannot_combine():
    with pytest.raises(TypeError, match="uniform row weights"):
        MixtureContext([KNNContext(5), TeacherFeatureContext()]).fit(rows(20))
    with pytest.raises(TypeError, match="first context"):
        ConvolutionContext(LabelContext(), KNNContext(5)).fit(rows(20), np.arange(20) % 2)
    with pytest.raises(TypeError, match="KNNContext or an RBFContext"):
        MaskedContext(LabelContext()).fit(rows(20))


def test_new_rows_with_the_wrong_width_are_refused():
    context = KNNContext(5).fit(rows(20, 3))
    with pytest.raises(ValueError, match="features"):
        context.conditional(rows(5, 2))


def test_sparse_rows_for_knn_contexts():
    X = rows(40, 6)
    X[X < -1.5] = 0
    sparse = KNNContext(5).fit(sp.csr_matrix(X))
    np.testing.assert_allclose(dense(sparse.fit_conditional_), dense(KNNContext(5).fit(X).fit_conditional_))
    with pytest.raises(TypeError, match="[Ss]parse"):
        RBFContext().fit(sp.csr_matrix(X))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(5, 60), p=st.integers(1, 5), k=st.integers(1, 60), seed=st.integers(0, 1000))
def test_knn_context_property(n, p, k, seed):
    k = min(k, n)
    X = np.random.default_rng(seed).normal(size=(n, p))
    context = KNNContext(k).fit(X)
    W = dense(context.fit_conditional_)
    np.testing.assert_allclose(W.sum(axis=1), 1.0)
    assert np.all((W > 0).sum(axis=1) == k)
    s = np.linalg.svd(dense(context.fit_operator_), compute_uv=False)
    assert s[0] == pytest.approx(1.0) and np.all(s <= 1 + 1e-10)
