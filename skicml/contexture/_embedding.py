"""ContextureEmbedding: the top singular functions of a context, exactly."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator, eigsh, svds
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils.extmath import svd_flip
from sklearn.utils.validation import check_is_fitted, validate_data

from ..base import warn_user
from ..utils.param_validation import HasMethods, Interval, StrOptions, fit_context
from ._contexts import GraphContext, _MatmatOperator, _resolve_context
from ._spectrum import _fitted_score, spectral_decay_rate

__all__ = ["ContextureEmbedding"]

# solver="auto" takes the dense SVD up to this many rows or anchors.
_DENSE_LIMIT = 2000


class _Deflated(_MatmatOperator):
    """``Q - u0 v0^T``: the operator without its trivial (constant) mode."""

    def __init__(self, Q, u0, v0):
        super().__init__(dtype=np.float64, shape=Q.shape)
        self.Q, self.u0, self.v0 = aslinearoperator(Q), u0, v0

    def _matmat(self, V):
        return self.Q @ V - np.outer(self.u0, self.v0 @ V)

    def _rmatmat(self, U):
        return self.Q.H @ U - np.outer(self.v0, self.u0 @ U)


def _dense(Q):
    if isinstance(Q, LinearOperator):
        return Q @ np.eye(Q.shape[1])
    return Q.toarray() if sp.issparse(Q) else np.asarray(Q)


def _randomized_svd(A, k, n_iter, rng, oversamples=None):
    """Halko-Martinsson-Tropp randomized SVD of any operator with ``@`` and ``.H``.

    scikit-learn's ``randomized_svd`` needs an array or a sparse matrix;
    the implicit RBF operator is neither. Contexts have clustered singular
    values near 1, where 10 extra directions leave the 32nd eigenvalue of a
    kNN context 4e-3 off; ``k`` extra directions (the default) bring it to
    1e-4 for 1.5 times the time.
    """
    n, m = A.shape
    size = min(k + (max(10, k) if oversamples is None else oversamples), n, m)
    basis = A @ rng.standard_normal((m, size))
    basis, _ = np.linalg.qr(basis)
    for _ in range(n_iter):
        # Re-orthonormalising after each product keeps small singular
        # directions from drowning in rounding error.
        basis, _ = np.linalg.qr(A.H @ basis)
        basis, _ = np.linalg.qr(A @ basis)
    small = (A.H @ basis).T
    u_small, s, vt = np.linalg.svd(small, full_matrices=False)
    return (basis @ u_small)[:, :k], s[:k], vt[:k]


class ContextureEmbedding(TransformerMixin, BaseEstimator):
    """Embed rows by the top singular functions of a context (exact contexture).

    A context ``P+(a | x)`` (neighbours, a kernel, masks, labels, a graph)
    defines the expectation operator ``(T g)(x) = E[g(A) | x]``; the
    contexture of the paper is the span of its top singular functions
    ``mu_1 .. mu_d`` after the constant ``mu_0``. This estimator computes
    them exactly from the context's operator ``Q`` (contexture spec, section
    2.5: kernel PCA on the dual kernel ``k_X+`` without forming it), embeds
    new rows by the average-encoder formula
    ``mu_i(x) = s_i^-1 sum_k P+(a_k | x) nu_i(a_k)`` (the Nystrom extension,
    which :class:`~sklearn.manifold.SpectralEmbedding` lacks), and scores
    the context without labels by the spectrum-only metric ``tau`` (lower
    is better; :meth:`score` returns ``-tau`` so that a grid search over
    context parameters picks the best context).

    Parameters
    ----------
    context : context or str, default="knn"
        A context of :mod:`skicml.contexture` (``KNNContext``,
        ``RBFContext``, ``MaskedContext``, ``LabelContext``,
        ``GraphContext``, ``TeacherFeatureContext``, ``MixtureContext``,
        ``ConvolutionContext``), or one of the shortcuts ``"knn"``,
        ``"rbf"``, ``"masked_knn"``, ``"masked_rbf"``, ``"label"`` for their
        defaults. Sampling contexts (augmentations) have no exact operator.
    n_components : int, default=32
        ``d``, the width of the embedding.
    max_components : int, default=512
        ``d_0``, how many singular values are computed for the spectrum and
        the score (capped at what the operator has: ``min(n_rows,
        n_anchors) - 1`` after the trivial mode).
    scale : {"unit", "singular"}, default="unit"
        ``"unit"``: the singular functions ``mu_i`` (mean 0, identity
        covariance over the fit rows); ``"singular"``: ``s_i mu_i``, the
        average encoder ``T nu_i``.
    solver : {"auto", "dense", "randomized", "arpack"}, default="auto"
        ``"dense"``: full SVD (LAPACK); ``"randomized"``: randomized SVD
        with 7 power iterations on the sparse or implicit operator;
        ``"arpack"``: :func:`scipy.sparse.linalg.svds`. ``"auto"`` takes
        ``"dense"`` up to 2,000 rows or anchors, else ``"randomized"``.
    subsample : int or None, default=None
        Fit the context and its spectrum on this many random rows (appendix
        D of the paper: ``d_0 log d_0`` rows estimate the spectrum well);
        the other rows are embedded by the out-of-sample formula.
    beta : float, default=1.0
        Weight of the second term of ``tau`` (the paper uses 1).
    graph_mode : {"contexture", "laplacian"}, default="contexture"
        For symmetric operators (graph contexts): ``"contexture"`` ranks
        components by singular value (``|eigenvalue|``); ``"laplacian"``
        by signed eigenvalue, as Laplacian eigenmaps do. The two differ on
        near-bipartite graphs.
    random_state : int, RandomState instance or None, default=None
        Seeds the randomized solvers and ``subsample``.

    Attributes
    ----------
    context_ : context
        The fitted context (a clone of ``context``).
    singular_values_ : ndarray of shape (n_singular_values,)
        ``s_1 >= s_2 >= ...`` (``s_0 = 1`` excluded), in [0, 1]; signed
        eigenvalues with ``graph_mode="laplacian"``.
    eigenvalues_ : ndarray of shape (n_singular_values,)
        ``s_i ** 2``, the eigenvalues of the dual kernel's operator.
    anchor_functions_ : ndarray of shape (n_anchors, n_singular_values)
        ``nu_i`` on the anchors.
    embedding_ : ndarray of shape (n_samples, n_components)
        The embedding of the fit rows (what ``fit_transform`` returns).
    tau_ : float
        The context score ``min_d tau_d`` (lower is better; ``inf`` when the
        context disconnects the data).
    tau_curve_ : ndarray of shape (n_singular_values - 1,)
        ``tau_d`` for ``d = 1, 2, ...``.
    optimal_n_components_ : int
        ``argmin_d tau_d``, the metric's suggested ``n_components``.
    decay_rate_ : float
        ``lambda`` of the fit ``s_i^2 = exp(-lambda i)``: large for weak
        contexts.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    See Also
    --------
    sklearn.manifold.SpectralEmbedding : Laplacian eigenmaps without ``transform``.
    sklearn.decomposition.KernelPCA : kernel PCA for symmetric kernels.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from skicml.contexture import ContextureEmbedding, KNNContext
    >>> X, _ = load_digits(return_X_y=True)
    >>> embedding = ContextureEmbedding(KNNContext(n_neighbors=10), n_components=8, max_components=64)
    >>> Z = embedding.fit_transform(X[:1500])
    >>> Z.shape, embedding.transform(X[1500:]).shape
    ((1500, 8), (297, 8))
    >>> bool(embedding.singular_values_[0] <= 1), embedding.optimal_n_components_ >= 1
    (True, True)
    """

    _parameter_constraints = {
        "context": [HasMethods(["fit"]), StrOptions({"knn", "rbf", "masked_knn", "masked_rbf", "label"})],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "max_components": [Interval(Integral, 1, None, closed="left")],
        "scale": [StrOptions({"unit", "singular"})],
        "solver": [StrOptions({"auto", "dense", "randomized", "arpack"})],
        "subsample": [Interval(Integral, 3, None, closed="left"), None],
        "beta": [Interval(Real, 0, None, closed="left")],
        "graph_mode": [StrOptions({"contexture", "laplacian"})],
        "random_state": ["random_state"],
    }

    def __init__(self, context="knn", n_components=32, *, max_components=512, scale="unit", solver="auto",
                 subsample=None, beta=1.0, graph_mode="contexture", random_state=None):
        self.context = context
        self.n_components = n_components
        self.max_components = max_components
        self.scale = scale
        self.solver = solver
        self.subsample = subsample
        self.beta = beta
        self.graph_mode = graph_mode
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            context = _resolve_context(self.context)
            tags.input_tags.sparse = bool(context._input_rules()["accept_sparse"])
            if isinstance(context, GraphContext):
                tags.input_tags.two_d_array = False
                tags.input_tags.categorical = True
            tags.target_tags.required = type(context).__name__ == "LabelContext"
        except (TypeError, ValueError):
            pass
        return tags

    def _validate(self, X, context, reset):
        rules = context._input_rules()
        if isinstance(context, GraphContext):
            if reset:
                self.n_features_in_ = 1
            return X
        return validate_data(self, X, reset=reset, accept_sparse=rules["accept_sparse"], dtype=rules["dtype"],
                             ensure_min_samples=3 if reset else 1)

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Fit the context and compute its singular functions.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Rows to embed (node identifiers for a graph context).
        y : array-like of shape (n_samples,) or None
            Labels, for a label context (and teacher contexts that use them).

        Returns
        -------
        self
        """
        self._fit(X, y)
        return self

    def fit_transform(self, X, y=None):
        """Fit and return the embedding of the fit rows (``embedding_``).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or None

        Returns
        -------
        embedding : ndarray of shape (n_samples, n_components)
        """
        return self.fit(X, y).embedding_

    def _fit(self, X, y):
        context = _resolve_context(self.context)
        if not context.exact:
            raise ValueError(
                f"{type(context).__name__} draws random views and has no exact operator; ContextureEmbedding "
                "needs an exact context (kNN, RBF, masked, label, graph, teacher, mixture, convolution)."
            )
        X = self._validate(X, context, reset=True)
        n = X.shape[0] if hasattr(X, "shape") else len(X)
        rng = check_random_state(self.random_state)
        rows = None
        if self.subsample is not None and self.subsample < n:
            rows = np.sort(rng.choice(n, size=self.subsample, replace=False))
        X_fit = X if rows is None else X[rows]
        y_fit = y if (rows is None or y is None) else np.asarray(y)[rows]
        self.context_ = clone(context).fit(X_fit, y_fit)

        U, s, V = self._spectrum(self.context_, rng)
        if self.n_components > s.size:
            raise ValueError(
                f"n_components={self.n_components} is more than the {s.size} singular functions this context "
                f"has on {self.context_.fit_operator_.shape[0]} rows and {self.context_.n_anchors_} anchors "
                f"(after the constant one); pass n_components <= {s.size}."
            )
        if np.any(np.abs(s[: self.n_components]) <= 1e-12):
            warn_user(
                f"singular values of components {np.flatnonzero(np.abs(s[: self.n_components]) <= 1e-12).tolist()}"
                " are zero: the context carries no information there and new rows get 0 in those columns.",
                UserWarning,
            )
        self.singular_values_ = s
        self.eigenvalues_ = s**2
        self.anchor_functions_ = V * self.context_.anchor_scale_[:, None]
        self.tau_, self.optimal_n_components_, self.tau_curve_ = _fitted_score(
            self.eigenvalues_, self.max_components, self.beta)
        self.decay_rate_ = float(spectral_decay_rate(self.eigenvalues_))
        if rows is None:
            # The out-of-sample formula on the fit rows, rather than U itself,
            # so that transform(X) repeats fit_transform(X) whatever the solver;
            # with an exact SVD the two agree to rounding.
            unit = U[:, : self.n_components] / np.sqrt(self.context_.row_marginal_)[:, None]
            self.embedding_ = self._average_encoder(self.context_.fit_conditional_, fallback=unit)
        else:
            self.embedding_ = self.transform(X)
        return self

    def _spectrum(self, context, rng):
        """``(U, s, V)``: the non-trivial singular triplets of the context's operator."""
        Q = context.fit_operator_
        trivial = context.trivial_mode_
        n, m = Q.shape
        rank = min(n, m) - (1 if trivial is not None else 0)
        k = min(self.max_components, rank)
        if k < 1:
            raise ValueError(f"the context's operator of shape {Q.shape} has no singular function beyond the "
                             "constant one; give it more rows.")
        symmetric = self.graph_mode == "laplacian"
        if symmetric and not isinstance(context, GraphContext):
            raise ValueError("graph_mode='laplacian' needs a GraphContext (a symmetric operator).")
        solver = self.solver
        if solver == "auto":
            solver = "dense" if min(n, m) <= _DENSE_LIMIT else "randomized"
        if solver == "arpack" and k >= min(n, m) - 1:
            solver = "dense"  # ARPACK cannot return all singular values.

        if solver == "dense":
            A = _dense(Q)
            if trivial is not None:
                A = A - np.outer(*trivial)
            if symmetric:
                values, vectors = scipy.linalg.eigh((A + A.T) / 2)
                order = np.argsort(values)[::-1][:k]
                s, U = values[order], vectors[:, order]
                V = U.copy()
            else:
                U, s, Vt = scipy.linalg.svd(A, full_matrices=False, lapack_driver="gesdd")
                U, s, V = U[:, :k], s[:k], Vt[:k].T
        else:
            A = aslinearoperator(Q) if trivial is None else _Deflated(Q, *trivial)
            if symmetric:
                v0 = rng.uniform(-1, 1, size=n)
                values, U = eigsh(A, k=k, which="LA", v0=v0)
                order = np.argsort(values)[::-1]
                s, U = values[order], U[:, order]
                V = U.copy()
            elif solver == "arpack":
                v0 = rng.uniform(-1, 1, size=min(n, m))
                U, s, Vt = svds(A, k=k, solver="arpack", v0=v0)
                order = np.argsort(s)[::-1]
                U, s, V = U[:, order], s[order], Vt[order].T
            else:
                U, s, Vt = _randomized_svd(A, k, n_iter=7, rng=rng)
                V = Vt.T
        # Deterministic signs: the largest entry of each left vector is positive.
        U, Vt = svd_flip(U, V.T, u_based_decision=True)
        s = np.clip(s, -1.0, 1.0) if symmetric else np.clip(s, 0.0, 1.0)
        return U, s, Vt.T

    def transform(self, X):
        """Embed rows by the average-encoder formula.

        ``mu_i(x) = s_i^-1 sum_k P+(a_k | x) nu_i(a_k)``: on the fit rows of
        a deterministic context that counts each row in its own context
        (kNN with ``include_self``, RBF), this reproduces ``embedding_``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)

        Returns
        -------
        embedding : ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self, "context_")
        X = self._validate(X, self.context_, reset=False)
        return self._average_encoder(self.context_.conditional(X))

    def _average_encoder(self, W, fallback=None):
        d = self.n_components
        s = self.singular_values_[:d]
        projected = np.asarray(W @ self.anchor_functions_[:, :d])
        if self.scale == "singular":
            return projected
        zero = np.abs(s) <= 1e-12
        unit = projected / np.where(zero, np.inf, s)
        if fallback is not None and zero.any():
            unit[:, zero] = fallback[:, zero]
        return unit

    def score(self, X=None, y=None):
        """``-tau_``: the context score of the fit, higher is better.

        The score depends only on the spectrum of the fit rows, so in a
        cross-validated grid search every candidate context is scored on its
        training fold and no labels are needed; ``X`` and ``y`` are ignored.

        Parameters
        ----------
        X : ignored
        y : ignored

        Returns
        -------
        score : float
        """
        check_is_fitted(self, "context_")
        if X is not None:
            self._validate(X, self.context_, reset=False)
        return -self.tau_

    def get_feature_names_out(self, input_features=None):
        """Names of the embedding's columns: ``contexture0``, ``contexture1``, ...

        Parameters
        ----------
        input_features : ignored

        Returns
        -------
        feature_names_out : ndarray of str objects
        """
        check_is_fitted(self, "context_")
        return np.asarray([f"contexture{i}" for i in range(self.n_components)], dtype=object)
