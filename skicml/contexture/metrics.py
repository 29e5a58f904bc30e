"""Spectrum, context score and diagnostics of contexts (contexture spec, section 4.4).

A context is judged by the singular values ``1 = s_0 >= s_1 >= s_2 >= ...``
of its expectation operator ``T``; the functions here take the squares
``s_i^2`` (``s_0`` excluded), which is what
:class:`~skicml.contexture.ContextureEmbedding` stores as ``eigenvalues_``.

- :func:`context_spectrum` computes them for a context on data;
  :func:`context_tau` turns them into the label-free score tau of the paper
  (Eq. 4; lower is better) and :func:`make_context_scorer` into a
  ``scoring=`` callable for :class:`~sklearn.model_selection.GridSearchCV`;
  :func:`spectral_decay_rate` fits ``s_i^2 = exp(-lambda i)`` (a large
  ``lambda`` means a weak association between ``X`` and the context).
- :func:`kernel_deviation` and :func:`kernel_lipschitz` look at the
  positive-pair kernel ``k_X^+`` itself (small deviation: weak association;
  large Lipschitz constant: strong association).
- :func:`ratio_trace` and :func:`trace_gap_upper` measure how close an
  arbitrary encoder comes to the contexture (paper, Appendix C).
- :func:`cca_alignment` and :func:`mutual_knn_alignment` compare two
  representations of the same rows, e.g. a neural encoder against the exact
  singular functions.

The context-based functions fit a clone of the context on ``X`` and read the
three attributes every exact context has after ``fit``: ``fit_operator_``
(the matrix ``Q[j, k] = sqrt(P_X(x_j)) W[j, k] / sqrt(p_k)``, as an array,
a sparse matrix or a :class:`~scipy.sparse.linalg.LinearOperator`),
``row_marginal_`` (``P_X``) and ``anchor_marginal_`` (``p``).

Examples
--------
>>> from skicml.contexture.metrics import context_tau
>>> tau, d_star = context_tau([0.5, 0.25, 0.125, 0.0])
>>> round(tau, 4), d_star
(1.9048, 1)
"""

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator
from scipy.spatial.distance import pdist
from sklearn.base import clone
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, check_is_fitted

from ..utils.param_validation import HasMethods, Integral, Interval, Real, StrOptions, validate_params
from ._contexts import _resolve_context
from ._embedding import ContextureEmbedding
from ._spectrum import ContextScoreAbstainWarning, _check_eigenvalues, context_tau, spectral_decay_rate

__all__ = [
    "ContextScoreAbstainWarning",
    "cca_alignment",
    "context_spectrum",
    "context_tau",
    "kernel_deviation",
    "kernel_lipschitz",
    "make_context_scorer",
    "mutual_knn_alignment",
    "ratio_trace",
    "spectral_decay_rate",
    "trace_gap_upper",
]

_CONTEXT = [HasMethods(["fit"]), str]


def _check_pair(F1, F2):
    F1 = check_array(F1, dtype=np.float64, ensure_min_samples=2, input_name="F1")
    F2 = check_array(F2, dtype=np.float64, ensure_min_samples=2, input_name="F2")
    if F1.shape[0] != F2.shape[0]:
        raise ValueError(
            f"F1 and F2 must describe the same rows, got {F1.shape[0]} and {F2.shape[0]} rows."
        )
    return F1, F2


def _orthonormal_basis(Z, scale):
    """Orthonormal basis of the column span of ``Z``, rank judged against ``scale``.

    ``scale`` is the size of the data before centring, so a column that
    centring reduced to rounding noise counts as zero.
    """
    if Z.size == 0:
        return Z[:, :0]
    U, s, _ = np.linalg.svd(Z, full_matrices=False)
    tol = max(Z.shape) * np.finfo(np.float64).eps * max(scale, s[0] if s.size else 0.0)
    return U[:, s > tol]


def _centred_basis(F, name):
    basis = _orthonormal_basis(F - F.mean(axis=0), np.linalg.norm(F))
    if basis.shape[1] == 0:
        raise ValueError(f"{name} is constant: its rows cannot be compared.")
    return basis


@validate_params({"F1": ["array-like"], "F2": ["array-like"]}, prefer_skip_nested_validation=True)
def cca_alignment(F1, F2):
    """Mean squared canonical correlation of two representations (R²_CCA).

    The canonical correlations ``rho_1 >= rho_2 >= ...`` of the centred
    ``F1`` and ``F2`` are the cosines of the principal angles between their
    column spans; the score is the mean of ``rho_i^2`` over the
    ``min(rank F1, rank F2)`` of them. Columns that depend linearly on the
    others (or are constant) are ignored, so duplicated or collapsed
    features do not break it. 1 when one span contains the other, 0 when
    they are orthogonal; invariant to invertible linear maps of either side.
    With fewer rows than ``rank F1 + rank F2`` the spans overlap by
    construction and the score is near 1 whatever the data.

    Parameters
    ----------
    F1 : array-like of shape (n_samples, n_features_1)
    F2 : array-like of shape (n_samples, n_features_2)
        Two representations of the same rows.

    Returns
    -------
    score : float
        In [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture.metrics import cca_alignment
    >>> rng = np.random.default_rng(0)
    >>> F = rng.standard_normal((100, 3))
    >>> round(cca_alignment(F, F @ rng.standard_normal((3, 3)) + 5.0), 6)
    1.0
    >>> bool(cca_alignment(F, rng.standard_normal((100, 3))) < 0.1)
    True
    """
    F1, F2 = _check_pair(F1, F2)
    U1, U2 = _centred_basis(F1, "F1"), _centred_basis(F2, "F2")
    rho = np.linalg.svd(U1.T @ U2, compute_uv=False)[: min(U1.shape[1], U2.shape[1])]
    return float(np.mean(np.clip(rho, 0.0, 1.0) ** 2))


@validate_params(
    {
        "F1": ["array-like"],
        "F2": ["array-like"],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "whiten": ["boolean"],
        "mode": [StrOptions({"iou", "fraction"})],
    },
    prefer_skip_nested_validation=True,
)
def mutual_knn_alignment(F1, F2, n_neighbors=10, whiten=True, mode="iou"):
    """Overlap of the nearest-neighbour sets of two representations.

    For each row, its ``n_neighbors`` nearest other rows (Euclidean) are
    found in ``F1`` and in ``F2``, and the two sets compared; the score is
    the mean over rows.

    Parameters
    ----------
    F1 : array-like of shape (n_samples, n_features_1)
    F2 : array-like of shape (n_samples, n_features_2)
        Two representations of the same rows.
    n_neighbors : int, default=10
        Neighbours per row (the paper's 10); at most ``n_samples - 1``.
    whiten : bool, default=True
        Whether to centre each representation and map it to identity
        covariance first (on its column span, so a rank-deficient one is
        fine), as the paper does. Whitened scores are invariant to
        invertible linear maps of either side.
    mode : {"iou", "fraction"}, default="iou"
        ``"iou"``: intersection over union of the two sets (the paper's
        wording); ``"fraction"``: ``|N_1 & N_2| / n_neighbors`` (Huh et al.'s
        mutual-kNN). Both are 1 for identical sets and 0 for disjoint ones.

    Returns
    -------
    score : float
        In [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture.metrics import mutual_knn_alignment
    >>> rng = np.random.default_rng(0)
    >>> F = rng.standard_normal((200, 4))
    >>> mutual_knn_alignment(F, F @ np.diag([1.0, 2.0, 3.0, 4.0]))
    1.0
    >>> bool(mutual_knn_alignment(F, F @ np.diag([1.0, 2.0, 3.0, 4.0]), whiten=False) < 1.0)
    True
    """
    F1, F2 = _check_pair(F1, F2)
    n = F1.shape[0]
    if n_neighbors > n - 1:
        raise ValueError(f"n_neighbors={n_neighbors} must be at most n_samples - 1 = {n - 1}.")
    sets = []
    for F, name in ((F1, "F1"), (F2, "F2")):
        if whiten:
            F = _centred_basis(F, name) * math.sqrt(n)
        neighbours = NearestNeighbors(n_neighbors=n_neighbors).fit(F).kneighbors(return_distance=False)
        rows = np.repeat(np.arange(n), n_neighbors)
        sets.append(sp.csr_matrix((np.ones(rows.size), (rows, neighbours.ravel())), shape=(n, n)))
    shared = np.asarray(sets[0].multiply(sets[1]).sum(axis=1)).ravel()
    if mode == "iou":
        return float(np.mean(shared / (2 * n_neighbors - shared)))
    return float(np.mean(shared / n_neighbors))


def _fit_context(X, context, y):
    """Fit a clone of ``context`` on ``X``; return ``(Q, P_X, p)`` checked against the contract."""
    if isinstance(context, str):
        context = _resolve_context(context)
    name = type(context).__name__
    if getattr(context, "exact", True) is False:
        raise ValueError(
            f"{name} is a sampling context: it has no exact operator for these metrics. Use an exact "
            "context (KNNContext, RBFContext, ...), or NeuralContexture's estimates of the spectrum."
        )
    fitted = clone(context).fit(X, y)
    missing = [a for a in ("fit_operator_", "row_marginal_", "anchor_marginal_") if not hasattr(fitted, a)]
    if missing:
        raise ValueError(
            f"{name} does not follow the context contract: after fit it lacks {', '.join(missing)}."
        )
    Q = fitted.fit_operator_
    if sp.issparse(Q):
        Q = sp.csr_matrix(Q, dtype=np.float64)
    elif not isinstance(Q, LinearOperator):
        Q = np.asarray(Q, dtype=np.float64)
    P = np.asarray(fitted.row_marginal_, dtype=np.float64)
    p = np.asarray(fitted.anchor_marginal_, dtype=np.float64)
    n_rows = X.shape[0] if hasattr(X, "shape") else len(X)
    if len(Q.shape) != 2 or Q.shape[0] != n_rows or P.shape != (n_rows,) or p.shape != (Q.shape[1],):
        raise ValueError(
            f"{name} does not follow the context contract: for {n_rows} rows, fit_operator_ has shape "
            f"{Q.shape}, row_marginal_ {P.shape} and anchor_marginal_ {p.shape}; expected (n_rows, m), "
            "(n_rows,) and (m,)."
        )
    return Q, P, p


def _unit_columns(n, rows):
    E = np.zeros((n, len(rows)))
    E[rows, np.arange(len(rows))] = 1.0
    return E


def _gram_rows(Q, rows):
    """Rows ``rows`` of ``Q Q^T``, dense, whatever form ``Q`` has."""
    if isinstance(Q, LinearOperator):
        return Q.matmat(Q.rmatmat(_unit_columns(Q.shape[0], rows))).T
    block = Q[rows] @ Q.T
    return block.toarray() if sp.issparse(block) else np.asarray(block)


def _transpose_times(Q, Z):
    """``Q^T Z`` as a dense array."""
    if isinstance(Q, LinearOperator):
        return np.asarray(Q.rmatmat(Z))
    return np.asarray(Q.T @ Z)


@validate_params(
    {"X": ["array-like", "sparse matrix"], "context": _CONTEXT, "y": ["array-like", None]},
    prefer_skip_nested_validation=True,
)
def kernel_deviation(X, context, y=None):
    """Expected deviation of the positive-pair kernel from 1 (paper, App. F.1).

    ``E_{x, x' ~ P_X} |k_X^+(x, x') - 1|`` over the fit rows, with
    ``k_X^+(x_i, x_j) = (Q Q^T)_ij / sqrt(P_X(x_i) P_X(x_j))``
    (``= sum_k W[i, k] W[j, k] / p_k``); for uniform ``P_X`` this is
    ``(1/n^2) sum_{i,j} |k_X^+(x_i, x_j) - 1|``. It is 0 when ``X`` and
    the context are independent and small for a weak association (if
    ``|k_X^+ - 1| < eps`` everywhere, ``s_1^2 + s_2^2 + ... < eps``, Lemma 17).

    A clone of ``context`` is fitted on ``X``. The kernel is formed in
    blocks of rows: time ``O(n^2 m)`` for a dense operator, memory
    ``O(n)`` per row of a block.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The rows.
    context : context estimator or str
        An exact context (``KNNContext(...)``, ``RBFContext(...)``...) or a
        string shortcut such as ``"knn"``.
    y : array-like of shape (n_samples,), default=None
        Passed to the context's ``fit`` (needed by a label context).

    Returns
    -------
    deviation : float
        At least 0.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from skicml.contexture import KNNContext
    >>> from skicml.contexture.metrics import kernel_deviation
    >>> X, _ = make_blobs(200, random_state=0)
    >>> weak = kernel_deviation(X, KNNContext(n_neighbors=150))
    >>> strong = kernel_deviation(X, KNNContext(n_neighbors=5))
    >>> bool(weak < strong)
    True
    """
    Q, P, _ = _fit_context(X, context, y)
    # Rows without mass carry no weight in the expectation and have no kernel value.
    rows = np.flatnonzero(P > 0)
    root = np.sqrt(P)
    block = max(1, 2**22 // max(len(rows), 1))
    total = 0.0
    for start in range(0, len(rows), block):
        idx = rows[start: start + block]
        kernel = _gram_rows(Q, idx)[:, rows] / (root[idx, None] * root[None, rows])
        total += P[idx] @ np.abs(kernel - 1.0) @ P[rows]
    return float(total)


@validate_params(
    {
        "X": ["array-like", "sparse matrix"],
        "context": _CONTEXT,
        "n_samples": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
        "y": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
def kernel_lipschitz(X, context, n_samples=1000, random_state=None, y=None):
    """Empirical Lipschitz constant of the positive-pair kernel (paper, App. F.1).

    ``max_{i < j, k} |k_X^+(x_k, x_i) - k_X^+(x_k, x_j)| / ||x_i - x_j||``
    over ``n_samples`` rows drawn at random (all rows when there are fewer),
    ``i``, ``j`` and ``k`` all among them. A large value means a strong
    association: the singular functions are not smooth (Lemma 25). The
    paper multiplies it by the number of features in its plots.

    A clone of ``context`` is fitted on all of ``X`` (the kernel is the
    context's on the whole data); only the evaluation is subsampled. Pairs
    of identical rows are skipped. Time ``O(n_samples^2 (m + n_samples))``.

    Parameters
    ----------
    X : array-like of shape (n_samples_X, n_features)
        The rows.
    context : context estimator or str
        An exact context or a string shortcut such as ``"knn"``.
    n_samples : int, default=1000
        Rows the maximum runs over (the paper's 1,000). At least 2.
    random_state : int, RandomState instance or None, default=None
        Draws the rows when there are more than ``n_samples``.
    y : array-like of shape (n_samples_X,), default=None
        Passed to the context's ``fit`` (needed by a label context).

    Returns
    -------
    lipschitz : float
        At least 0; 0 when all the drawn rows are identical.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from skicml.contexture import KNNContext
    >>> from skicml.contexture.metrics import kernel_lipschitz
    >>> X, _ = make_blobs(200, random_state=0)
    >>> weak = kernel_lipschitz(X, KNNContext(n_neighbors=150))
    >>> strong = kernel_lipschitz(X, KNNContext(n_neighbors=5))
    >>> bool(weak < strong)
    True
    """
    Xd = check_array(X, accept_sparse="csr", dtype=np.float64, input_name="X")
    Q, P, _ = _fit_context(X, context, y)
    rows = np.flatnonzero(P > 0)
    if len(rows) > n_samples:
        rows = np.sort(check_random_state(random_state).choice(rows, n_samples, replace=False))
    root = np.sqrt(P[rows])
    kernel = _gram_rows(Q, rows)[:, rows] / np.outer(root, root)
    points = Xd[rows].toarray() if sp.issparse(Xd) else Xd[rows]
    # Condensed pair lists in the same (i < j) order: the kernel's columns, then the points.
    change = pdist(kernel.T, "chebyshev")
    distance = pdist(points)
    apart = distance > 0
    if not np.any(apart):
        return 0.0
    return float(np.max(change[apart] / distance[apart]))


def _check_phi(Phi, n_rows):
    Phi = check_array(Phi, dtype=np.float64, ensure_2d=False, input_name="Phi")
    if Phi.ndim == 1:
        Phi = Phi[:, None]
    if Phi.ndim != 2 or Phi.shape[0] != n_rows:
        raise ValueError(
            f"Phi must hold the encoder's values on the {n_rows} rows of X, shape ({n_rows}, d); got "
            f"shape {Phi.shape}."
        )
    return Phi


def _ratio_trace(Phi, X, context, y):
    """``(RT(Phi), rank of the centred Phi)``."""
    Q, P, p = _fit_context(X, context, y)
    Phi = _check_phi(Phi, Q.shape[0])
    root = np.sqrt(P)[:, None]
    # RT is invariant to invertible maps of Phi, so it is computed on an
    # orthonormal basis of the span of the centred Phi (under P_X): C is then
    # the identity, and a maximal independent subset of Phi's columns spans
    # the same space, giving the same value when C_Phi is singular.
    basis = _orthonormal_basis(root * (Phi - P @ Phi), np.linalg.norm(root * Phi))
    rank = basis.shape[1]
    if rank == 0:
        return 0.0, 0
    # T* f at anchor k is sum_j P_X(x_j) W[j, k] f(x_j) / p_k = (Q^T (sqrt(P_X) f))_k / sqrt(p_k).
    adjoint = np.zeros((p.size, rank))
    mass = p > 0
    adjoint[mass] = _transpose_times(Q, basis)[mass] / np.sqrt(p[mass])[:, None]
    adjoint -= p @ adjoint
    B = adjoint.T @ (p[:, None] * adjoint)
    return float(np.trace(B)), rank


@validate_params(
    {"Phi": ["array-like"], "X": ["array-like", "sparse matrix"], "context": _CONTEXT, "y": ["array-like", None]},
    prefer_skip_nested_validation=True,
)
def ratio_trace(Phi, X, context, y=None):
    """Ratio trace ``RT(Phi) = Tr(C^-1 B)`` of an arbitrary encoder (paper, App. C).

    ``C = Cov_{P_X}[Phi]`` and ``B = Cov_{P_A}[T* Phi]``, where
    ``(T* phi)(a_k) = sum_j P_X(x_j) W[j, k] phi(x_j) / p_k`` is the average
    of ``phi`` over the rows given the anchor. ``RT`` is invariant to
    invertible linear maps of ``Phi`` (and to adding constants); it is at
    most ``s_1^2 + ... + s_d^2`` for a ``d``-dimensional ``Phi``, with
    equality when ``Phi`` learns the contexture. When ``C`` is singular,
    ``RT`` is taken on a maximal independent subset of the centred columns.

    A clone of ``context`` is fitted on ``X``; ``Phi`` holds the encoder's
    values on those rows.

    Parameters
    ----------
    Phi : array-like of shape (n_samples, d)
        The encoder's outputs on the rows of ``X`` (1-D: one feature).
    X : array-like of shape (n_samples, n_features)
        The rows.
    context : context estimator or str
        An exact context or a string shortcut such as ``"knn"``.
    y : array-like of shape (n_samples,), default=None
        Passed to the context's ``fit`` (needed by a label context).

    Returns
    -------
    rt : float
        At least 0; 0 for a constant ``Phi``.

    Examples
    --------
    A random projection of ``X`` against the exact singular functions:

    >>> import numpy as np
    >>> from sklearn.datasets import make_blobs
    >>> from skicml.contexture import ContextureEmbedding, KNNContext
    >>> from skicml.contexture.metrics import ratio_trace
    >>> X, _ = make_blobs(200, random_state=0)
    >>> embedding = ContextureEmbedding(KNNContext(n_neighbors=10), n_components=2).fit(X)
    >>> best = ratio_trace(embedding.embedding_, X, KNNContext(n_neighbors=10))
    >>> bool(np.isclose(best, embedding.eigenvalues_[:2].sum()))
    True
    >>> bool(ratio_trace(X @ np.ones((2, 2)), X, KNNContext(n_neighbors=10)) <= best)
    True
    """
    return _ratio_trace(Phi, X, context, y)[0]


@validate_params(
    {
        "Phi": ["array-like"],
        "X": ["array-like", "sparse matrix"],
        "context": _CONTEXT,
        "eigenvalues": ["array-like", None],
        "y": ["array-like", None],
    },
    prefer_skip_nested_validation=True,
)
def trace_gap_upper(Phi, X, context, eigenvalues=None, y=None):
    """Upper bound ``sum_{i <= d + 1} s_i^2 - RT(Phi)`` of the trace gap (paper, App. C).

    The trace gap ``TG(Phi)`` is an infimum over subspaces of ``span Phi``
    and dimensions ``d' <= d``; taking ``Phi`` itself, with ``d`` the rank
    of its centred columns, bounds it from above. When ``TG < s_1^2``,
    Theorem 24 bounds the worst-case error of ``Phi`` on the compatible
    tasks by ``(s_1^2 - (1 - eps)^2 + s_1 TG) / (s_1^2 - TG^2)``. The bound
    is at least ``s_{d+1}^2`` and equals it when ``Phi`` learns the
    contexture.

    Parameters
    ----------
    Phi : array-like of shape (n_samples, d)
        The encoder's outputs on the rows of ``X`` (1-D: one feature); not
        constant.
    X : array-like of shape (n_samples, n_features)
        The rows.
    context : context estimator or str
        An exact context or a string shortcut such as ``"knn"``.
    eigenvalues : array-like of shape (n_eigenvalues,), default=None
        The context's ``s_1^2, s_2^2, ...`` on ``X`` if already known (for
        example a ``ContextureEmbedding``'s ``eigenvalues_``), at least
        ``d + 1`` of them; ``None`` computes them with
        :func:`context_spectrum`.
    y : array-like of shape (n_samples,), default=None
        Passed to the context's ``fit`` (needed by a label context).

    Returns
    -------
    gap : float

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_blobs
    >>> from skicml.contexture import ContextureEmbedding, KNNContext
    >>> from skicml.contexture.metrics import trace_gap_upper
    >>> X, _ = make_blobs(200, random_state=0)
    >>> embedding = ContextureEmbedding(KNNContext(n_neighbors=10), n_components=2).fit(X)
    >>> gap = trace_gap_upper(embedding.embedding_, X, KNNContext(n_neighbors=10),
    ...                       eigenvalues=embedding.eigenvalues_)
    >>> bool(np.isclose(gap, embedding.eigenvalues_[2]))
    True
    """
    rt, rank = _ratio_trace(Phi, X, context, y)
    if rank == 0:
        raise ValueError("Phi is constant: the trace gap needs at least one non-constant feature.")
    if eigenvalues is None:
        eigenvalues = context_spectrum(X, context, y=y, max_components=rank + 1)
    lam = _check_eigenvalues(eigenvalues)
    if lam.size < rank + 1:
        raise ValueError(
            f"Phi has rank {rank}, so the bound needs s_1^2 ... s_{rank + 1}^2; got {lam.size} eigenvalues."
        )
    return float(lam[: rank + 1].sum() - rt)


@validate_params(
    {
        "X": ["array-like", "sparse matrix"],
        "context": _CONTEXT,
        "y": ["array-like", None],
        "max_components": [Interval(Integral, 1, None, closed="left")],
        "subsample": [Interval(Integral, 3, None, closed="left"), None],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def context_spectrum(X, context, y=None, max_components=512, subsample=None, random_state=None):
    """The squared singular values ``s_1^2, s_2^2, ...`` of a context on ``X``.

    Fits a :class:`~skicml.contexture.ContextureEmbedding` with
    ``n_components=1`` and returns its ``eigenvalues_`` (``s_0 = 1``
    excluded, in decreasing order). For the score alone a random subset of
    ``m ~ d0 log d0`` rows is enough (the paper, App. D): pass
    ``subsample=m``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The rows.
    context : context estimator or str
        An exact context or a string shortcut such as ``"knn"``.
    y : array-like of shape (n_samples,), default=None
        Passed to the context's ``fit`` (needed by a label context).
    max_components : int, default=512
        ``d0``, how many values to compute (capped by the estimator at the
        number of anchors minus 2).
    subsample : int or None, default=None
        Rows to compute the spectrum on (``None``: all).
    random_state : int, RandomState instance or None, default=None
        Seeds the subsample and randomized solvers.

    Returns
    -------
    eigenvalues : ndarray of shape (n_eigenvalues,)

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from skicml.contexture import KNNContext
    >>> from skicml.contexture.metrics import context_spectrum, context_tau
    >>> X, _ = make_blobs(200, random_state=0)
    >>> eigenvalues = context_spectrum(X, KNNContext(n_neighbors=10), max_components=64)
    >>> eigenvalues.shape
    (64,)
    >>> bool(1 >= eigenvalues[0] >= eigenvalues[-1] >= 0)
    True
    """
    estimator = ContextureEmbedding(
        context=context, n_components=1, max_components=max_components, subsample=subsample,
        random_state=random_state,
    )
    return estimator.fit(X, y).eigenvalues_


class _ContextScorer:
    """``-tau`` of a fitted contexture estimator, recomputed with fixed settings."""

    def __init__(self, beta, max_components):
        self.beta = beta
        self.max_components = max_components

    def __call__(self, estimator, X=None, y=None):
        final = estimator[-1] if hasattr(estimator, "steps") else estimator
        check_is_fitted(final)
        if not hasattr(final, "eigenvalues_"):
            raise ValueError(
                "The context scorer needs a fitted estimator with eigenvalues_ (a ContextureEmbedding, or a "
                f"pipeline ending in one); got {type(final).__name__}."
            )
        tau, _ = context_tau(final.eigenvalues_, max_components=self.max_components, beta=self.beta)
        return -float(tau)

    def __repr__(self):
        return f"make_context_scorer(beta={self.beta!r}, max_components={self.max_components!r})"


@validate_params(
    {
        "beta": [Interval(Real, 0, None, closed="left")],
        "max_components": [Interval(Integral, 2, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def make_context_scorer(beta=1.0, max_components=512):
    """A label-free ``scoring=`` callable: ``-tau`` of the fitted contexture.

    The scorer takes ``(estimator, X, y=None)`` like any scikit-learn
    scorer, reads ``eigenvalues_`` of ``estimator`` (or of its last step,
    for a :class:`~sklearn.pipeline.Pipeline`) and returns ``-tau`` (higher
    is better) computed by :func:`context_tau` with the given ``beta`` and
    ``max_components``. ``X`` and ``y`` are ignored: tau depends only on the
    spectrum of the fold the estimator was fitted on, so a search with a
    single split (``cv=ShuffleSplit(n_splits=1)``) selects a context without
    labels.

    Parameters
    ----------
    beta : float, default=1.0
        Weight of tau's second term. At least 0.
    max_components : int, default=512
        ``d0`` of tau (the estimator's ``max_components`` should be at least
        this large). At least 2.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y=None) -> float``; picklable.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from sklearn.model_selection import GridSearchCV, ShuffleSplit
    >>> from skicml.contexture import ContextureEmbedding, KNNContext
    >>> from skicml.contexture.metrics import make_context_scorer
    >>> X, _ = make_blobs(150, centers=1, random_state=0)
    >>> search = GridSearchCV(
    ...     ContextureEmbedding(KNNContext(), n_components=2, max_components=32),
    ...     {"context__n_neighbors": [30, 60]},
    ...     scoring=make_context_scorer(max_components=32),
    ...     cv=ShuffleSplit(n_splits=1, test_size=0.2, random_state=0),
    ... ).fit(X)
    >>> search.best_params_
    {'context__n_neighbors': 60}
    >>> search.cv_results_["mean_test_score"].round(2).tolist()
    [-1.87, -1.72]
    """
    return _ContextScorer(beta, max_components)
