"""NeuralContexture: the variational contexture against the exact one."""

import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import GridSearchCV, ShuffleSplit
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from skicml.contexture import (
    ContextureEmbedding,
    CutmixContext,
    FeatureCorruptionContext,
    GaussianNoiseContext,
    GraphContext,
    KNNContext,
    LabelContext,
    RBFContext,
)
from skicml.contexture._contexts import BaseContext
from skicml.contexture._model import ContextureMLP, lowrank_loss, spectral_contrastive_loss, vicreg_loss
from skicml.contexture._neural import NeuralContexture
from skicml.contexture.metrics import cca_alignment, context_tau
from skicml.utils._test_common import expected_failed_checks

TINY = dict(hidden_sizes=(16,), max_epochs=2, random_state=0)


@pytest.fixture(scope="module")
def digits():
    X = StandardScaler().fit_transform(load_digits().data[:500])
    exact = ContextureEmbedding(KNNContext(n_neighbors=30), n_components=8, max_components=64).fit(X)
    return X, exact


def table2_error(neural, exact, d=8):
    return float(np.mean(np.abs(neural.eigenvalues_[:d] - exact.eigenvalues_[:d])))


# ---------------------------------------------------------------- acceptance
@pytest.mark.parametrize("objective", ["lowrank", "vicreg"])
def test_spectrum_and_span_match_the_exact_contexture(digits, objective):
    # Spec section 6: kNN on 500 points, top-8 eigenvalues within ~0.1 mean
    # absolute error, CCA alignment with the exact mu above 0.8 for d = 8.
    X, exact = digits
    neural = NeuralContexture(KNNContext(n_neighbors=30), n_components=8, objective=objective,
                              hidden_sizes=(512,), max_epochs=300, batch_size=500, lr=3e-3, random_state=0)
    Z = neural.fit_transform(X)
    assert table2_error(neural, exact) < 0.1
    assert cca_alignment(Z, exact.embedding_) > 0.8
    # Training is what gets there: the random network's outputs fall short.
    untrained = NeuralContexture(KNNContext(n_neighbors=30), n_components=8, hidden_sizes=(512,), max_epochs=0,
                                 random_state=0).fit(X)
    assert table2_error(untrained, exact) > table2_error(neural, exact) + 0.05
    assert cca_alignment(untrained.transform(X), exact.embedding_) < cca_alignment(Z, exact.embedding_) - 0.1


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["spectral_contrastive", "lowrank", "vicreg"])
def test_spectrum_on_breast_cancer_and_every_objective(objective):
    X = StandardScaler().fit_transform(load_breast_cancer().data)
    exact = ContextureEmbedding(KNNContext(n_neighbors=30), n_components=8, max_components=64).fit(X)
    # VICReg's variance hinge leaves the last of 32 outputs collapsed here; 64 are enough.
    neural = NeuralContexture(KNNContext(n_neighbors=30), n_components=8, n_outputs=64, objective=objective,
                              hidden_sizes=(512,), max_epochs=300, batch_size=569, lr=3e-3, random_state=0).fit(X)
    assert table2_error(neural, exact) < 0.1
    assert cca_alignment(neural.transform(X), exact.embedding_) > 0.8


# --------------------------------------------------------------- post-hoc step
class _Lookup(torch.nn.Module):
    """An encoder that returns a fixed table's row for each fit row."""

    def __init__(self, X, table):
        super().__init__()
        self.X = torch.as_tensor(X, dtype=torch.float64)
        self.table = torch.as_tensor(table, dtype=torch.float64)

    def forward(self, x):
        return self.table[torch.cdist(x.double(), self.X).argmin(dim=1)]


def test_post_hoc_step_recovers_the_spectrum_of_a_span_that_holds_it(digits):
    X, exact = digits
    rng = np.random.default_rng(0)
    k = 6
    mixed = exact.embedding_[:, :k] @ rng.standard_normal((k, k))
    table = np.hstack([mixed, rng.standard_normal((500, 2)), np.full((500, 1), 3.0)])
    neural = NeuralContexture(KNNContext(n_neighbors=30), n_components=k, n_outputs=table.shape[1],
                              dtype="float64", **{**TINY, "max_epochs": 0}).fit(X)
    neural.module_ = _Lookup(X, table)
    neural._post_hoc(X, True, 0)
    # Up to the ridge (1e-6 of the mean variance) that keeps C invertible.
    np.testing.assert_allclose(neural.eigenvalues_[:k], exact.eigenvalues_[:k], atol=1e-4)
    Z = neural.transform(X)
    assert cca_alignment(Z, exact.embedding_[:, :k]) > 1 - 1e-8
    np.testing.assert_allclose(np.cov(Z.T, bias=True), np.eye(k), atol=1e-4)


@settings(max_examples=8, deadline=None)
@given(n=st.integers(12, 40), p=st.integers(1, 4), k=st.integers(2, 8), seed=st.integers(0, 1000))
def test_estimates_are_ritz_values_below_the_exact_spectrum(n, p, k, seed):
    # Courant-Fischer: on any span of centred functions the generalised
    # eigenvalues do not exceed the exact ones, trained or not.
    X = np.random.default_rng(seed).normal(size=(n, p))
    exact = ContextureEmbedding(KNNContext(n_neighbors=k), n_components=1, max_components=n).fit(X)
    neural = NeuralContexture(KNNContext(n_neighbors=k), n_components=2, n_outputs=6, dtype="float64",
                              hidden_sizes=(16,), max_epochs=1, random_state=seed).fit(X)
    m = min(neural.eigenvalues_.size, exact.eigenvalues_.size)
    assert np.all(neural.eigenvalues_[:m] <= exact.eigenvalues_[:m] + 1e-8)
    assert np.all(np.diff(neural.eigenvalues_) <= 1e-12)


# ------------------------------------------------------------ sampling contexts
@pytest.mark.parametrize("context", [FeatureCorruptionContext(0.3), CutmixContext(0.3),
                                     GaussianNoiseContext(0.5)])
def test_sampling_contexts_train_on_views(context):
    X = StandardScaler().fit_transform(load_digits().data[:200])
    neural = NeuralContexture(context, n_components=4, hidden_sizes=(64,), max_epochs=20, batch_size=100,
                              n_eval_views=4, random_state=0)
    Z = neural.fit_transform(X)
    assert Z.shape == (200, 4) and np.all(np.isfinite(Z))
    assert neural.history_[-1] < neural.history_[0]
    assert np.all(np.diff(neural.eigenvalues_) <= 1e-12) and 0 <= neural.eigenvalues_[-1]
    assert neural.eigenvalues_[0] <= 1
    # The views are seeded at fit: the same rows give the same outputs.
    np.testing.assert_array_equal(neural.transform(X), Z)
    clean = neural.set_params(n_eval_views=0).transform(X)
    assert not np.allclose(clean, Z)


def test_noise_context_spectrum_follows_the_noise_level():
    # Stronger noise weakens the association: the estimated spectrum falls.
    X = StandardScaler().fit_transform(load_digits().data[:300])
    spectra = [
        NeuralContexture(GaussianNoiseContext(sigma), n_components=4, objective="lowrank", hidden_sizes=(64,),
                         max_epochs=30, batch_size=150, lr=3e-3, random_state=0).fit(X).eigenvalues_[:4].mean()
        for sigma in (0.3, 3.0)
    ]
    assert spectra[0] > spectra[1] + 0.1


def test_label_context_pairs_rows_of_one_class():
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X[:300])
    neural = NeuralContexture(LabelContext(), n_components=4, objective="lowrank", hidden_sizes=(64,),
                              max_epochs=30, batch_size=150, lr=3e-3, random_state=0).fit(X, y[:300])
    # Deterministic labels: s_1 = ... = s_9 = 1, and a trained encoder finds several of them.
    assert neural.eigenvalues_[3] > 0.8


def test_rbf_context_is_accepted():
    X = np.random.default_rng(0).normal(size=(60, 3))
    neural = NeuralContexture(RBFContext(gamma=0.5), n_components=3, **TINY).fit(X)
    assert neural.transform(X).shape == (60, 3)


# ------------------------------------------------------------------- estimator
def test_reproducible_and_picklable():
    X = np.random.default_rng(0).normal(size=(50, 4))
    a = NeuralContexture(GaussianNoiseContext(), n_components=2, n_eval_views=3, **TINY).fit(X)
    b = NeuralContexture(GaussianNoiseContext(), n_components=2, n_eval_views=3, **TINY).fit(X)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    c = NeuralContexture(GaussianNoiseContext(), n_components=2, n_eval_views=3,
                         **{**TINY, "random_state": 1}).fit(X)
    assert not np.allclose(a.transform(X), c.transform(X))
    restored = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(restored.transform(X), a.transform(X))


def test_score_names_and_attributes():
    X = np.random.default_rng(0).normal(size=(40, 3))
    neural = NeuralContexture(KNNContext(n_neighbors=5), n_components=3, **TINY).fit(X)
    assert neural.n_outputs_ == 12 and neural.eigenvalues_.shape == (12,) and neural.projection_.shape == (12, 3)
    tau, d_star = context_tau(neural.eigenvalues_, max_components=12)
    assert neural.score() == -neural.tau_ == pytest.approx(-tau)
    assert neural.optimal_n_components_ == d_star
    assert list(neural.get_feature_names_out()) == ["neuralcontexture0", "neuralcontexture1", "neuralcontexture2"]
    assert len(neural.history_) == neural.n_iter_ == 2


def test_grid_search_over_the_context_without_labels():
    X = StandardScaler().fit_transform(load_digits().data[:150])
    search = GridSearchCV(NeuralContexture(KNNContext(), n_components=2, **TINY),
                          {"context__n_neighbors": [5, 40]}, cv=ShuffleSplit(n_splits=1, random_state=0))
    search.fit(X)
    assert search.best_params_["context__n_neighbors"] in (5, 40)
    assert np.isfinite(search.best_score_)


@pytest.mark.parametrize("context", [KNNContext(n_neighbors=5), None], ids=["exact", "averaged_views"])
def test_check_estimator(context):
    # The exact path, and transform's average over views seeded by each row,
    # which keeps a row's output independent of its batch: no check is waived.
    estimator = NeuralContexture(context, n_components=2, n_eval_views=3, dtype="float64", **TINY)
    assert not expected_failed_checks(estimator)
    check_estimator(estimator)


class _NoOperator(BaseContext):
    exact = True

    def fit(self, X, y=None):
        return self


class _NoSampler(BaseContext):
    exact = False

    def fit(self, X, y=None):
        return self


@pytest.mark.parametrize(
    "X, params, fragment",
    [
        (np.array([[0.0, 1.0], [np.nan, 1.0], [2.0, 3.0], [1.0, 1.0]]), {}, "NaN"),
        (np.ones((2, 3)), {}, "minimum of 3"),
        (np.random.default_rng(0).normal(size=(20, 3)), {"n_components": 5, "n_outputs": 4}, "n_outputs"),
        (np.random.default_rng(0).normal(size=(5, 3)), {"n_components": 5, "n_outputs": 8}, "at least 6 rows"),
        (np.random.default_rng(0).normal(size=(20, 3)), {"context": _NoOperator()}, "fit_operator_"),
        (np.random.default_rng(0).normal(size=(20, 3)), {"context": _NoSampler()}, "sample"),
        (np.random.default_rng(0).normal(size=(20, 3)), {"context": GraphContext()}, "GraphContext"),
        (np.random.default_rng(0).normal(size=(20, 3)), {"hidden_sizes": (8, 0)}, "hidden_sizes"),
        (np.random.default_rng(0).normal(size=(20, 3)), {"vicreg_weights": (1.0, 2.0)}, "vicreg_weights"),
    ],
)
def test_bad_input_is_refused(X, params, fragment):
    with pytest.raises(ValueError, match=fragment):
        NeuralContexture(**{"n_components": 2, **TINY, **params}).fit(X)


def test_transform_checks_the_number_of_features():
    X = np.random.default_rng(0).normal(size=(20, 3))
    neural = NeuralContexture(n_components=2, **TINY).fit(X)
    with pytest.raises(ValueError, match="features"):
        neural.transform(X[:, :2])


# --------------------------------------------------------------------- model
def test_encoder_skip_connections():
    torch.manual_seed(0)
    skip = ContextureMLP(5, 3, hidden_sizes=(8, 8, 4))
    assert skip.residual == [False, True, False]
    plain = ContextureMLP(5, 3, hidden_sizes=(8, 8, 4), skip_connections=False)
    plain.load_state_dict(skip.state_dict())
    x = torch.randn(7, 5)
    assert skip(x).shape == (7, 3)
    assert not torch.allclose(skip(x), plain(x))


def _reference_terms(z):
    z = z.double().numpy()
    c = z - z.mean(axis=0)
    gram = c[:, 0] @ c[:, 1].T
    off = ~np.eye(len(z), dtype=bool)
    moments = [c[:, v].T @ c[:, v] / len(z) for v in range(2)]
    return c, gram, off, moments


def test_objectives_match_their_formulas():
    torch.manual_seed(0)
    z = torch.randn(9, 2, 4, dtype=torch.float64)
    c, gram, off, moments = _reference_terms(z)
    sc = -np.mean(np.diag(gram)) + 0.5 * np.mean(gram[off] ** 2)
    assert spectral_contrastive_loss(z).item() == pytest.approx(sc)
    lr = -2 * np.mean(np.sum(c[:, 0] * c[:, 1], axis=1)) + np.sum(moments[0] * moments[1])
    assert lowrank_loss(z).item() == pytest.approx(lr)
    inv = np.mean((z[:, 0] - z[:, 1]).numpy() ** 2)
    assert vicreg_loss(z, weights=(1.0, 0.0, 0.0)).item() == pytest.approx(inv)


def test_vicreg_terms_vanish_at_their_optimum():
    # Identical whitened views: no invariance, variance or covariance penalty.
    rng = np.random.default_rng(0)
    view = rng.standard_normal((64, 3))
    view -= view.mean(axis=0)
    view = view @ np.linalg.inv(np.linalg.cholesky(np.cov(view.T))).T * 1.01
    z = torch.as_tensor(np.stack([view, view], axis=1))
    assert vicreg_loss(z).item() == pytest.approx(0.0, abs=1e-9)
