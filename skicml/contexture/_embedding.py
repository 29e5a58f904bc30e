"""ContextureEmbedding: the top singular functions of a context, exactly."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import LinearOperator, aslinearoperator, eigsh, lobpcg
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils.extmath import svd_flip
from sklearn.utils.validation import check_is_fitted, validate_data

from ..base import warn_user
from ..utils.param_validation import HasMethods, Interval, StrOptions, fit_context
from ._contexts import GraphContext, _MatmatOperator, _resolve_context
from ._spectrum import _fitted_score, spectral_decay_rate

__all__ = ["ContextureEmbedding"]

# solver="auto" takes the dense SVD up to this many rows or anchors when it
# needs a long spectrum, and ARPACK above _ARPACK_MIN for a few components.
_DENSE_LIMIT = 2000
_ARPACK_MIN = 300
# LOBPCG's residual tolerance on the Gram operator (eigenvalues in [0, 1]): at
# 4,000 kNN rows it gets the top 16 eigenvalues to 3e-15 in 47 iterations.
_LOBPCG_TOL = 1e-8
_LOBPCG_MAXITER = 1000
# solver="auto" takes ARPACK, and LOBPCG where values repeat: on an operator
# in several pieces, and on graphs (symmetries) up to this many components.
# LOBPCG is the slower: at 4,000 kNN rows 1.1 s for 32 components and 6.3 s
# for 128 (ARPACK 0.2 s and 1.0 s), 71 s for 16 at 64,000 (ARPACK 21 s).
_LOBPCG_MAX = 32


def _n_pieces(Q):
    """Connected components of the bipartite graph of rows and anchors of a sparse ``Q`` (1 otherwise)."""
    if not sp.issparse(Q):
        return 1
    n, m = Q.shape
    Q = sp.csr_matrix(Q)
    graph = sp.bmat([[None, Q], [Q.T, None]], format="csr")
    return int(connected_components(graph, directed=False)[0])


class _Deflated(_MatmatOperator):
    """``Q - U diag(s) V^T``: the operator without the modes already found (the constant one first)."""

    def __init__(self, Q, U, s, V):
        super().__init__(dtype=np.float64, shape=Q.shape)
        self.Q = aslinearoperator(Q)
        self.QH = self.Q.H
        self.U, self.s, self.V = U, s, V

    def _matmat(self, X):
        return self.Q @ X - self.U @ (self.s[:, None] * (self.V.T @ X))

    def _rmatmat(self, Y):
        return self.QH @ Y - self.V @ (self.s[:, None] * (self.U.T @ Y))


def _dense(Q):
    if isinstance(Q, LinearOperator):
        return Q @ np.eye(Q.shape[1])
    return Q.toarray() if sp.issparse(Q) else np.asarray(Q)


def _randomized_svd(A, k, n_iter, rng, oversamples=None):
    """Halko-Martinsson-Tropp randomized SVD of any operator with ``@`` and ``.H``.

    scikit-learn's ``randomized_svd`` needs an array or a sparse matrix;
    the implicit RBF operator is neither. Contexts have clustered singular
    values near 1, where 10 extra directions leave the 32nd eigenvalue of a
    kNN context 4e-3 off; ``k`` extra directions (the default, at least
    32) bring it to 1e-4 for 1.5 times the time. The floor matters for few
    components: 5 + 10 directions left the top singular values of a kNN
    context 1e-3 off.
    """
    n, m = A.shape
    size = min(k + (max(32, k) if oversamples is None else oversamples), n, m)
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


def _arpack_svd(A, k, rng):
    """Top ``k`` singular triplets by ARPACK's Lanczos on the Gram operator of the smaller side.

    What :func:`scipy.sparse.linalg.svds` does, without its checks and
    copies: ``eigsh`` on ``A^H A`` (or ``A A^H``), then a Rayleigh-Ritz SVD
    of ``A`` on the Ritz vectors, which gets small singular values to
    rounding rather than to its square root.
    """
    n, m = A.shape
    A = aslinearoperator(A)
    AH = A.H
    if m <= n:
        outer, inner, size = AH, A, m
    else:
        outer, inner, size = A, AH, n
    gram = LinearOperator((size, size), matvec=lambda x: outer @ (inner @ x),
                          matmat=lambda X: outer @ (inner @ X), dtype=np.float64)
    _, vectors = eigsh(gram, k=k, which="LA", v0=rng.uniform(-1, 1, size=size))
    u, s, wt = np.linalg.svd(inner @ vectors, full_matrices=False)
    if m <= n:
        return u, s, vectors @ wt.T
    return vectors @ wt.T, s, u


def _gram(A):
    """``(gram, inner, size, right)``: the Gram operator of ``A``'s smaller side as a block callable."""
    n, m = A.shape
    A = aslinearoperator(A)
    AH = A.H
    outer, inner, size = (AH, A, m) if m <= n else (A, AH, n)
    return (lambda X: outer @ (inner @ X)), inner, size, m <= n


def _lobpcg_svd(A, k, rng, symmetric=False):
    """Top ``k`` singular triplets (eigenpairs with ``symmetric``) by LOBPCG.

    A block method, so repeated singular values (a graph in several
    pieces, a cycle) come with their whole multiplicity where single-vector
    Lanczos can return one copy. Block products with the Gram operator of the
    smaller side, then the Rayleigh-Ritz SVD of :func:`_arpack_svd`. Falls
    back to ARPACK when LOBPCG stops short of its tolerance.
    """
    n, m = A.shape
    if symmetric:
        A = aslinearoperator(A)
        operator, size = (lambda X: A @ X), n
    else:
        operator, inner, size, right = _gram(A)
    start = rng.standard_normal((size, k))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values, vectors = lobpcg(operator, start, largest=True, tol=_LOBPCG_TOL, maxiter=_LOBPCG_MAXITER)
    if any(issubclass(w.category, UserWarning) for w in caught):
        if symmetric:
            values, vectors = eigsh(A, k=k, which="LA", v0=rng.uniform(-1, 1, size=n))
            order = np.argsort(values)[::-1]
            return vectors[:, order], values[order], vectors[:, order]
        return _arpack_svd(A, k, rng)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    if symmetric:
        return vectors, values, vectors
    u, s, wt = np.linalg.svd(inner @ vectors, full_matrices=False)
    return (u, s, vectors @ wt.T) if right else (vectors @ wt.T, s, u)


def _top_triplets(Q, deflation, k, solver, symmetric, rng):
    """``(U, s, V)``: the top ``k`` singular triplets of ``Q - sum U_j diag(s_j) V_j^T``.

    ``deflation`` lists the ``(U_j, s_j, V_j)`` blocks taken out first (the
    constant mode, the components already found). With ``symmetric`` the
    eigenpairs of largest signed eigenvalue, ``V = U``.
    """
    n, m = Q.shape
    if solver in ("arpack", "lobpcg") and k >= min(n, m) - 1:
        solver = "dense"  # ARPACK cannot return all singular values.
    if solver == "dense":
        A = _dense(Q)
        for U_j, s_j, V_j in deflation:
            A = A - (U_j * s_j) @ V_j.T
        if symmetric:
            values, vectors = scipy.linalg.eigh((A + A.T) / 2)
            order = np.argsort(values)[::-1][:k]
            s, U = values[order], vectors[:, order]
            V = U.copy()
        else:
            U, s, Vt = scipy.linalg.svd(A, full_matrices=False, lapack_driver="gesdd")
            U, s, V = U[:, :k], s[:k], Vt[:k].T
    else:
        if deflation:
            U_all = np.hstack([U_j for U_j, _, _ in deflation])
            s_all = np.concatenate([s_j for _, s_j, _ in deflation])
            V_all = np.hstack([V_j for _, _, V_j in deflation])
            A = _Deflated(Q, U_all, s_all, V_all)
        else:
            A = aslinearoperator(Q)
        if solver == "lobpcg":
            U, s, V = _lobpcg_svd(A, k, rng, symmetric=symmetric)
        elif symmetric:
            values, U = eigsh(A, k=k, which="LA", v0=rng.uniform(-1, 1, size=n))
            order = np.argsort(values)[::-1]
            s, U = values[order], U[:, order]
            V = U.copy()
        elif solver == "arpack":
            U, s, V = _arpack_svd(A, k, rng)
        else:
            U, s, Vt = _randomized_svd(A, k, n_iter=7, rng=rng)
            V = Vt.T
    # Deterministic signs: the largest entry of each left vector is positive.
    U, Vt = svd_flip(U, V.T, u_based_decision=True)
    s = np.clip(s, -1.0, 1.0) if symmetric else np.clip(s, 0.0, 1.0)
    return U, s, Vt.T


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
        ``d_0``, how many singular values the spectrum attributes and the
        score hold (capped at what the operator has: ``min(n_rows,
        n_anchors) - 1`` after the trivial mode). ``fit`` solves only the
        ``n_components`` the embedding needs (except with the dense solver,
        which gets them all at once); the rest is solved the first time a
        spectrum attribute, the score or ``tau_`` is read, then cached.
    scale : {"unit", "singular"}, default="unit"
        ``"unit"``: the singular functions ``mu_i`` (mean 0, identity
        covariance over the fit rows); ``"singular"``: ``s_i mu_i``, the
        average encoder ``T nu_i``.
    solver : {"auto", "dense", "randomized", "arpack", "lobpcg"}, default="auto"
        ``"dense"``: full SVD (LAPACK); ``"randomized"``: randomized SVD
        with 7 power iterations on the sparse or implicit operator;
        ``"arpack"``: ARPACK's Lanczos (:func:`scipy.sparse.linalg.eigsh`)
        on the Gram operator, as :func:`scipy.sparse.linalg.svds` does;
        ``"lobpcg"``: :func:`scipy.sparse.linalg.lobpcg` on the same
        operator, a block method that keeps repeated singular values (a
        graph in several pieces) where Lanczos may return one copy (it falls
        back to ARPACK when it stops short of its tolerance). ``"auto"``
        takes ``"arpack"`` for up to 32 singular values of a sparse or dense
        operator above 300 rows and anchors (up to a fifth of them above
        2,000 rows), and ``"lobpcg"`` for up to 32 where singular values
        repeat (a sparse operator in several pieces, a graph): the
        eigensolvers of :class:`~sklearn.manifold.SpectralEmbedding` without
        its AMG preconditioner; else ``"dense"`` up to 2,000 rows or anchors and
        ``"randomized"`` beyond (and for the implicit RBF operator); it
        chooses separately for the ``n_components`` of ``fit`` and for the
        rest of the spectrum.
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
        eigenvalues with ``graph_mode="laplacian"``. ``n_singular_values =
        min(max_components, rank)``. This attribute, ``eigenvalues_``,
        ``anchor_functions_``, ``tau_``, ``tau_curve_``,
        ``optimal_n_components_`` and ``decay_rate_`` are computed on first
        access (beyond the first ``n_components``) and cached.
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
        "solver": [StrOptions({"auto", "dense", "randomized", "arpack", "lobpcg"})],
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
        # What the spectrum solved on demand uses: the settings of this fit,
        # not whatever set_params says when it is first read.
        self._fit_settings = {"max_components": self.max_components, "solver": self.solver, "beta": self.beta,
                              "graph_mode": self.graph_mode}
        n = X.shape[0] if hasattr(X, "shape") else len(X)
        rng = check_random_state(self.random_state)
        rows = None
        if self.subsample is not None and self.subsample < n:
            rows = np.sort(rng.choice(n, size=self.subsample, replace=False))
        X_fit = X if rows is None else X[rows]
        y_fit = y if (rows is None or y is None) else np.asarray(y)[rows]
        self.context_ = clone(context).fit(X_fit, y_fit)
        # The longer spectrum is solved on demand with its own generator, seeded
        # here so that it does not depend on when it is first asked for.
        self._spectrum_seed = int(rng.randint(np.iinfo(np.int32).max))
        self._full_spectrum = None
        self._cached_score = None

        U, s, V = self._leading_spectrum(self.context_, rng)
        if np.any(np.abs(s) <= 1e-12):
            warn_user(
                f"singular values of components {np.flatnonzero(np.abs(s) <= 1e-12).tolist()}"
                " are zero: the context carries no information there and new rows get 0 in those columns.",
                UserWarning,
            )
        self._fit_triplets = (U, s, V)
        self._components_singular_values = s
        self._components_anchor_functions = V * self.context_.anchor_scale_[:, None]
        if rows is None:
            # The out-of-sample formula on the fit rows, rather than U itself,
            # so that transform(X) repeats fit_transform(X) whatever the solver;
            # with an exact SVD the two agree to rounding.
            unit = U / np.sqrt(self.context_.row_marginal_)[:, None]
            self.embedding_ = self._average_encoder(self.context_.fit_conditional_, fallback=unit)
        else:
            self.embedding_ = self.transform(X)
        return self

    # The spectrum ------------------------------------------------------
    def _n_singular_values(self, Q, trivial):
        """``min(max_components, rank)``: how long the spectrum attributes are."""
        rank = min(Q.shape) - (1 if trivial is not None else 0)
        k = min(self._fit_settings["max_components"], rank)
        if k < 1:
            raise ValueError(f"the context's operator of shape {Q.shape} has no singular function beyond the "
                             "constant one; give it more rows.")
        return k

    def _choose_solver(self, Q, k, graph=False):
        """The solver for the top ``k`` singular triplets of ``Q``.

        ``"auto"`` follows :class:`~sklearn.manifold.SpectralEmbedding`'s
        eigensolvers when few components of a sparse or dense operator are
        asked for: ARPACK (Lanczos on the Gram operator, two products with
        ``Q`` a step), or LOBPCG (block products, which keep repeated
        singular values) on an operator in several pieces and on graphs; the
        dense SVD for small operators or long spectra; the randomized SVD for long spectra of large operators and for implicit
        operators (the RBF op), whose block products amortise a pass over the
        kernel.
        """
        n, m = Q.shape
        solver = self._fit_settings["solver"]
        if solver == "auto":
            solver = "dense" if min(n, m) <= _DENSE_LIMIT else "randomized"
            if min(n, m) > _ARPACK_MIN and k <= min(n, m) // 5 and not isinstance(Q, LinearOperator):
                # Lanczos can return one copy of a repeated singular value,
                # and a graph in c pieces has c - 1 of them equal to 1: there
                # a block method (LOBPCG for a few components, else the dense
                # or randomized SVD). Up to 2,000 rows the dense SVD beats
                # Lanczos for more than a few components.
                repeats = graph or _n_pieces(Q) > 1
                if k <= _LOBPCG_MAX:
                    solver = "lobpcg" if repeats else "arpack"
                elif not repeats and min(n, m) > _DENSE_LIMIT:
                    solver = "arpack"
        return solver

    def _leading_spectrum(self, context, rng):
        """``(U, s, V)`` of the first ``n_components`` non-trivial singular triplets.

        With the dense solver the whole spectrum (up to ``max_components``)
        comes at no extra cost and is kept; other solvers compute only what
        the embedding needs, and the rest waits for :meth:`_spectrum`.
        """
        Q = context.fit_operator_
        trivial = context.trivial_mode_
        limit = self._n_singular_values(Q, trivial)
        if self.n_components > limit:
            raise ValueError(
                f"n_components={self.n_components} is more than the {limit} singular functions this context "
                f"has on {Q.shape[0]} rows and {context.n_anchors_} anchors "
                f"(after the constant one, up to max_components={self.max_components}); "
                f"pass n_components <= {limit}."
            )
        symmetric = self._fit_settings["graph_mode"] == "laplacian"
        if symmetric and not isinstance(context, GraphContext):
            raise ValueError("graph_mode='laplacian' needs a GraphContext (a symmetric operator).")
        d = self.n_components
        solver = self._choose_solver(Q, d, graph=isinstance(context, GraphContext))
        deflation = [] if trivial is None else [(trivial[0][:, None], np.ones(1), trivial[1][:, None])]
        if solver == "dense" or (solver in ("arpack", "lobpcg") and d >= min(Q.shape) - 1):
            U, s, V = _top_triplets(Q, deflation, limit, "dense", symmetric, rng)
            self._full_spectrum = (s, V * context.anchor_scale_[:, None])
            return U[:, :d], s[:d], V[:, :d]
        return _top_triplets(Q, deflation, d, solver, symmetric, rng)

    def _spectrum(self):
        """``(s, nu)`` up to ``max_components``: the fit's components, then the rest (solved once, cached).

        The rest is the top of the operator deflated by the constant mode
        and the fit's triplets, so the fit's components stay what
        ``embedding_`` and ``transform`` use.
        """
        check_is_fitted(self, "context_")
        if self._full_spectrum is None:
            context = self.context_
            Q = context.fit_operator_
            trivial = context.trivial_mode_
            limit = self._n_singular_values(Q, trivial)
            U, s, V = self._fit_triplets
            nu = self._components_anchor_functions
            if limit > s.size:
                symmetric = self._fit_settings["graph_mode"] == "laplacian"
                deflation = [] if trivial is None else [(trivial[0][:, None], np.ones(1), trivial[1][:, None])]
                # Symmetric: send the found eigenvalues to -2, below the
                # spectrum [-1, 1], so that the largest ones left are the next.
                deflation.append((U, s + 2.0 if symmetric else s, V))
                rest = limit - s.size
                solver = self._choose_solver(Q, rest, graph=isinstance(context, GraphContext))
                _, s_rest, V_rest = _top_triplets(Q, deflation, rest, solver, symmetric,
                                                  np.random.RandomState(self._spectrum_seed))
                # Rounding can put a deflated value a hair above the last found one.
                bound = s[-1] if s.size else 1.0
                s = np.concatenate([s, np.minimum(s_rest, bound)])
                nu = np.hstack([nu, V_rest * context.anchor_scale_[:, None]])
            self._full_spectrum = (s, nu)
        return self._full_spectrum

    @property
    def singular_values_(self):
        """``s_1 >= s_2 >= ...`` up to ``max_components`` (computed on first access, then cached)."""
        return self._spectrum()[0]

    @property
    def eigenvalues_(self):
        """``s_i ** 2`` (computed on first access, then cached)."""
        return self._spectrum()[0] ** 2

    @property
    def anchor_functions_(self):
        """``nu_i`` on the anchors up to ``max_components`` (computed on first access, then cached)."""
        return self._spectrum()[1]

    def _score(self):
        check_is_fitted(self, "context_")
        if getattr(self, "_cached_score", None) is None or self._cached_score[0] is not self._spectrum():
            eigenvalues = self.eigenvalues_
            settings = self._fit_settings
            tau, d_star, curve = _fitted_score(eigenvalues, settings["max_components"], settings["beta"])
            self._cached_score = (self._spectrum(), tau, d_star, curve, float(spectral_decay_rate(eigenvalues)))
        return self._cached_score[1:]

    @property
    def tau_(self):
        """The context score ``min_d tau_d`` (needs the spectrum up to ``max_components``)."""
        return self._score()[0]

    @property
    def optimal_n_components_(self):
        """``argmin_d tau_d`` (needs the spectrum up to ``max_components``)."""
        return self._score()[1]

    @property
    def tau_curve_(self):
        """``tau_d`` for ``d = 1, 2, ...`` (needs the spectrum up to ``max_components``)."""
        return self._score()[2]

    @property
    def decay_rate_(self):
        """``lambda`` of the fit ``s_i^2 = exp(-lambda i)`` (needs the spectrum up to ``max_components``)."""
        return self._score()[3]

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
        s = self._components_singular_values
        projected = np.asarray(W @ self._components_anchor_functions)
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
