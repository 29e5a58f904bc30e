"""Contexts: the joint distribution of an input and its context variable.

A context says, for every input ``x``, how its context variable ``A`` is
distributed: ``P+(a | x)``. The exact contexts discretise ``A`` to a finite
set of anchors (the fit rows for kNN and RBF contexts, the classes for
labels, the nodes for graphs) and hold the matrix ``W[j, k] = P+(a_k | x_j)``
of the fit rows. From it follow the marginals ``P_X`` (the rows' weights)
and ``p = P_A`` (the anchors' weights) and the operator

    Q = diag(sqrt(P_X)) @ W @ diag(1 / sqrt(p)),

whose singular values are those of the context's expectation operator
``(T g)(x) = E[g(A) | x]`` (contexture spec, section 2.5): ``s_0 = 1`` with
the constant functions, then ``1 >= s_1 >= s_2 >= ... >= 0``.

:meth:`conditional` gives ``W`` for new rows by the same rule as for the fit
rows, which is what lets :class:`~skicml.contexture.ContextureEmbedding`
embed rows it never saw. The sampling contexts (feature corruption, cutmix,
noise, crops) have a continuous ``A``: they draw views with :meth:`sample`
and have no exact operator.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator
from sklearn.base import BaseEstimator, clone
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..utils.param_validation import HasMethods, Interval, StrOptions, fit_context

__all__ = [
    "BaseContext",
    "ConvolutionContext",
    "CutmixContext",
    "FeatureCorruptionContext",
    "GaussianNoiseContext",
    "GraphContext",
    "KNNContext",
    "LabelContext",
    "MaskedContext",
    "MixtureContext",
    "RBFContext",
    "RandomCropContext",
    "TeacherFeatureContext",
]

# Above this many kernel entries (64 MiB of float64, about 2,900 rows) the
# RBF context keeps its kernel implicit and multiplies through
# skicml::rbf_context_matmul, which is also the faster of the two from about
# 5,000 rows on (doc/performance.rst).
_MAX_DENSE_ENTRIES = 2**23
_MIN_SAMPLES = 3


class BaseContext(BaseEstimator):
    """Base class of every context.

    ``exact = True`` marks contexts with a finite anchor set, hence an exact
    operator (``fit_operator_``); sampling contexts set it to ``False`` and
    implement ``sample`` instead.
    """

    exact = True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            tags.input_tags.sparse = bool(self._input_rules()["accept_sparse"])
        except (TypeError, ValueError):
            pass
        return tags

    def _input_rules(self):
        # How ContextureEmbedding validates X before handing it over.
        return {"accept_sparse": False, "dtype": np.float64}


def _row_sums(W):
    if isinstance(W, LinearOperator):
        return W.matvec(np.ones(W.shape[1]))
    return np.asarray(W.sum(axis=1)).ravel()


def _column_weights(W, row_marginal):
    """``p = W.T @ P_X`` for any of the three kinds of ``W``."""
    if isinstance(W, LinearOperator):
        return W.rmatvec(row_marginal)
    return np.asarray(W.T @ row_marginal).ravel()


def _scale(W, rows, columns):
    """``diag(rows) @ W @ diag(columns)`` in the kind of ``W``."""
    if sp.issparse(W):
        return sp.csr_matrix(sp.diags(rows) @ W @ sp.diags(columns))
    if isinstance(W, LinearOperator):
        return _DiagonalScaled(W, rows, columns)
    return W * rows[:, None] * columns[None, :]


class _MatmatOperator(LinearOperator):
    """A LinearOperator defined by its ``_matmat`` and ``_rmatmat`` alone."""

    def _matvec(self, v):
        return self._matmat(v.reshape(-1, 1)).ravel()

    def _rmatvec(self, u):
        return self._rmatmat(u.reshape(-1, 1)).ravel()


class _DiagonalScaled(_MatmatOperator):
    """``diag(rows) @ W @ diag(columns)`` for an implicit ``W``."""

    def __init__(self, W, rows, columns):
        super().__init__(dtype=np.float64, shape=W.shape)
        self.W, self.rows, self.columns = W, rows, columns

    def _matmat(self, V):
        return self.rows[:, None] * (self.W @ (self.columns[:, None] * V))

    def _rmatmat(self, U):
        return self.columns[:, None] * (self.W.H @ (self.rows[:, None] * U))


class _ConditionalContext(BaseContext):
    """A context given by a conditional matrix ``W`` over a finite anchor set.

    Subclasses implement ``_fit_anchors(X, y)`` and ``_raw_conditional(X)``
    (``W`` over all anchors); ``_raw_fit_conditional`` defaults to the same
    rule on the fit rows. ``fit`` then derives the marginals and the
    operator, dropping anchors no fit row reaches (``p_k = 0``).
    """

    def _row_marginal(self, W):
        return np.full(W.shape[0], 1.0 / W.shape[0])

    def _raw_fit_conditional(self, X):
        return self._raw_conditional(X)

    def _validate(self, X, reset):
        return validate_data(self, X, reset=reset, accept_sparse=self._input_rules()["accept_sparse"],
                             dtype=np.float64, ensure_min_samples=_MIN_SAMPLES if reset else 1)

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Fit the anchors and the conditional matrix of the fit rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored (used by :class:`LabelContext`).

        Returns
        -------
        self
        """
        X = self._validate(X, reset=True)
        self._fit_anchors(X, y)
        self._set_conditional(self._raw_fit_conditional(X))
        return self

    def _set_conditional(self, W):
        row_marginal = self._row_marginal(W)
        p = _column_weights(W, row_marginal)
        support = p > 0
        if not support.all():
            W = W[:, np.flatnonzero(support)]
            p = p[support]
        mass = _row_sums(W)
        if not np.all(mass > 0):
            empty = np.flatnonzero(~(mass > 0))
            raise ValueError(
                f"{type(self).__name__} leaves {empty.size} fit row(s) with no context (rows "
                f"{empty[:5].tolist()}): no anchor carries weight for them. {self._empty_row_hint()}"
            )
        self.fit_conditional_ = W
        self.row_marginal_ = row_marginal
        self.anchor_marginal_ = p
        self.anchor_support_ = support
        self.n_anchors_ = int(p.size)
        return self

    def _empty_row_hint(self):
        return "Use a wider context."

    # What ContextureEmbedding needs ------------------------------------
    @property
    def anchor_scale_(self):
        """``1 / sqrt(p)``: ``Q = diag(sqrt(P_X)) @ W @ diag(anchor_scale_)``."""
        check_is_fitted(self, "fit_conditional_")
        return 1.0 / np.sqrt(self.anchor_marginal_)

    @property
    def fit_operator_(self):
        """``Q`` of the fit rows, shape (n_samples, n_anchors): an ndarray,
        a sparse matrix or a :class:`~scipy.sparse.linalg.LinearOperator`."""
        check_is_fitted(self, "fit_conditional_")
        return _scale(self.fit_conditional_, np.sqrt(self.row_marginal_), self.anchor_scale_)

    @property
    def trivial_mode_(self):
        """The pair ``(u_0, v_0)`` of unit vectors with ``Q v_0 = u_0`` and
        singular value 1 (the constant functions), or ``None``."""
        check_is_fitted(self, "fit_conditional_")
        return np.sqrt(self.row_marginal_), np.sqrt(self.anchor_marginal_)

    def conditional(self, X):
        """``W[j, k] = P+(a_k | x_j)`` for new rows, by the rule of the fit rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        W : ndarray, sparse matrix or LinearOperator of shape (n_samples, n_anchors)
            Rows sum to 1.
        """
        check_is_fitted(self, "fit_conditional_")
        X = self._validate(X, reset=False)
        W = self._raw_conditional(X)
        if not self.anchor_support_.all():
            W = W[:, np.flatnonzero(self.anchor_support_)]
            mass = _row_sums(W)
            if not np.all(mass > 0):
                raise ValueError(
                    f"{np.sum(~(mass > 0))} row(s) have context only on anchors no fit row reaches; "
                    f"they cannot be embedded. {self._empty_row_hint()}"
                )
            W = _scale(W, 1.0 / mass, np.ones(W.shape[1]))
        return W


# -------------------------------------------------------------------------
# A = X contexts: kNN, RBF, masked
# -------------------------------------------------------------------------
class KNNContext(_ConditionalContext):
    """The k-nearest-neighbour context: ``A`` is uniform over the ``n_neighbors``
    fit rows nearest to ``x``.

    ``W`` is sparse with ``n_neighbors`` entries ``1 / n_neighbors`` per row.
    Small ``n_neighbors`` means a strong association (many singular values
    near 1); a graph that falls apart into ``c`` connected components has
    ``c - 1`` non-trivial singular values equal to 1.

    Parameters
    ----------
    n_neighbors : int, default=30
        ``K``, the number of anchors each row's context spreads over; at most
        the number of fit rows (minus one without ``include_self``).
    metric : str or callable, default="euclidean"
        Distance of :class:`~sklearn.neighbors.NearestNeighbors`.
    include_self : bool, default=True
        Count a fit row among its own neighbours. Only then does
        ``conditional`` on the fit rows reproduce the fit matrix, so that an
        embedding's ``transform`` of its training rows equals ``fit_transform``.
    algorithm : {"auto", "ball_tree", "kd_tree", "brute"}, default="auto"
        Neighbour search of :class:`~sklearn.neighbors.NearestNeighbors`.
    n_jobs : int or None, default=None
        Parallel neighbour search.

    Attributes
    ----------
    fit_conditional_ : sparse matrix of shape (n_samples, n_anchors)
        ``W`` of the fit rows.
    row_marginal_ : ndarray of shape (n_samples,)
        ``P_X``: uniform.
    anchor_marginal_ : ndarray of shape (n_anchors,)
        ``p``: the anchors' in-degrees over ``n_samples * n_neighbors``.
    anchor_support_ : ndarray of shape (n_samples,) of bool
        The fit rows kept as anchors (those some row has among its neighbours).
    n_anchors_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import KNNContext
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> context = KNNContext(n_neighbors=5).fit(X)
    >>> context.fit_operator_.shape
    (50, 50)
    >>> bool(np.allclose(context.conditional(X[:3]).sum(axis=1), 1))
    True
    """

    _parameter_constraints = {
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "metric": [str, callable],
        "include_self": ["boolean"],
        "algorithm": [StrOptions({"auto", "ball_tree", "kd_tree", "brute"})],
        "n_jobs": [Integral, None],
    }

    def __init__(self, n_neighbors=30, *, metric="euclidean", include_self=True, algorithm="auto", n_jobs=None):
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.include_self = include_self
        self.algorithm = algorithm
        self.n_jobs = n_jobs

    def _input_rules(self):
        return {"accept_sparse": "csr", "dtype": np.float64}

    def _fit_anchors(self, X, y):
        n = X.shape[0]
        limit = n if self.include_self else n - 1
        if self.n_neighbors > limit:
            raise ValueError(
                f"n_neighbors={self.n_neighbors} is more than the {limit} neighbours {n} fit rows offer"
                f"{'' if self.include_self else ' without include_self'}; pass n_neighbors <= {limit}."
            )
        self.nearest_neighbors_ = NearestNeighbors(
            n_neighbors=self.n_neighbors, metric=self.metric, algorithm=self.algorithm, n_jobs=self.n_jobs
        ).fit(X)
        self._n_fit = n

    def _neighbour_matrix(self, indices):
        n, k = indices.shape
        data = np.full(n * k, 1.0 / k)
        return sp.csr_matrix((data, indices.ravel(), np.arange(0, n * k + 1, k)), shape=(n, self._n_fit))

    def _raw_conditional(self, X):
        return self._neighbour_matrix(self.nearest_neighbors_.kneighbors(X, return_distance=False))

    def _raw_fit_conditional(self, X):
        if self.include_self:
            return self._raw_conditional(X)
        return self._neighbour_matrix(self.nearest_neighbors_.kneighbors(None, return_distance=False))


def _resolve_gamma(gamma, X):
    if gamma != "scale":
        return float(gamma)
    variance = float(X.var()) if not sp.issparse(X) else float(X.power(2).mean() - X.mean() ** 2)
    return 1.0 / (X.shape[1] * variance) if variance > 0 else 1.0


def _squared_distances(X, anchors, keep=None):
    if keep is not None:
        X, anchors = X[:, keep], anchors[:, keep]
    d2 = (X**2).sum(1)[:, None] + (anchors**2).sum(1)[None, :] - 2.0 * X @ anchors.T
    return np.maximum(d2, 0.0)


class _RBFConditional(_MatmatOperator):
    """``W = mean_j diag(1 / r_j) K_j`` kept implicit, through ``skicml::rbf_context_matmul``.

    ``K_j`` is the Gaussian kernel of the rows and the anchors on the
    features mask ``j`` keeps; ``r_j`` are its row sums.
    """

    def __init__(self, X, anchors, gamma, masks=None):
        import torch

        from ..ops import rbf_context_matmul, rbf_context_row_sums

        super().__init__(dtype=np.float64, shape=(X.shape[0], anchors.shape[0]))
        self._matmul = rbf_context_matmul
        self.x = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float64)
        self.anchors = torch.as_tensor(np.ascontiguousarray(anchors), dtype=torch.float64)
        self.gamma = float(gamma)
        self.masks = None if masks is None else torch.as_tensor(masks, dtype=torch.float64)
        sums = rbf_context_row_sums(self.x, self.anchors, self.gamma, masks=self.masks)
        n_masks = sums.shape[0]
        self.row_scale = 1.0 / (n_masks * sums)

    def _matmat(self, V):
        import torch

        v = torch.as_tensor(np.ascontiguousarray(V), dtype=torch.float64)
        out = self._matmul(self.x, self.anchors, v, self.gamma, masks=self.masks, row_scale=self.row_scale)
        return out.numpy()

    def _rmatmat(self, U):
        import torch

        u = torch.as_tensor(np.ascontiguousarray(U), dtype=torch.float64)
        out = self._matmul(self.anchors, self.x, u, self.gamma, masks=self.masks, col_scale=self.row_scale)
        return out.numpy()


class RBFContext(_ConditionalContext):
    """The Gaussian-kernel context: ``P+(a_k | x)`` proportional to
    ``exp(-gamma * ||x - a_k||^2)`` over the fit rows.

    Large ``gamma`` concentrates the context on ``x`` itself (strong
    association, singular values towards 1), small ``gamma`` spreads it over
    all rows (weak association, singular values towards 0). Up to
    ``2**25`` kernel entries ``W`` is dense; beyond, it stays implicit and
    every product goes through the tiled ``skicml::rbf_context_matmul``
    op, so memory grows with ``n`` rather than ``n**2``.

    Parameters
    ----------
    gamma : float or "scale", default="scale"
        Kernel width; ``"scale"`` is ``1 / (n_features * X.var())`` as in
        :class:`~sklearn.svm.SVC`, which makes the context invariant to
        scaling ``X``.
    truncate : int or None, default=None
        Keep only the ``truncate`` largest kernel entries of each row (then
        renormalised), which makes ``W`` sparse; ``None`` keeps all.

    Attributes
    ----------
    gamma_ : float
        The kernel width used.
    anchors_ : ndarray of shape (n_samples, n_features)
        The fit rows.
    fit_conditional_ : ndarray, sparse matrix or LinearOperator of shape (n_samples, n_anchors)
    row_marginal_ : ndarray of shape (n_samples,)
    anchor_marginal_ : ndarray of shape (n_anchors,)
    anchor_support_ : ndarray of shape (n_samples,) of bool
    n_anchors_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import RBFContext
    >>> X = np.random.default_rng(0).normal(size=(40, 2))
    >>> W = RBFContext(gamma=2.0).fit(X).conditional(X[:2])
    >>> W.shape, bool(np.allclose(W.sum(axis=1), 1))
    ((2, 40), True)
    """

    _parameter_constraints = {
        "gamma": [Interval(Real, 0, None, closed="neither"), StrOptions({"scale"})],
        "truncate": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, gamma="scale", *, truncate=None):
        self.gamma = gamma
        self.truncate = truncate

    def _fit_anchors(self, X, y):
        if self.truncate is not None and self.truncate > X.shape[0]:
            raise ValueError(f"truncate={self.truncate} is more than the {X.shape[0]} fit rows.")
        self.gamma_ = _resolve_gamma(self.gamma, X)
        self.anchors_ = np.array(X, dtype=np.float64)

    def _raw_conditional(self, X):
        return self._masked_conditional(X, None)

    def _masked_conditional(self, X, masks):
        """``mean_j rownorm(K_j)`` over feature masks (``None``: all features)."""
        n, m = X.shape[0], self.anchors_.shape[0]
        if self.truncate is None and n * m > _MAX_DENSE_ENTRIES:
            return _RBFConditional(X, self.anchors_, self.gamma_, masks)
        keeps = [None] if masks is None else [np.flatnonzero(mask) for mask in masks]
        chunk = max(1, _MAX_DENSE_ENTRIES // (8 * m))
        if self.truncate is not None:
            blocks = [sum(self._rows(X[start:start + chunk], keep) for keep in keeps) / len(keeps)
                      for start in range(0, n, chunk)]
            return sp.vstack(blocks, format="csr")
        # Filled block by block in place: the dense kernel exists once.
        W = np.zeros((n, m))
        for start in range(0, n, chunk):
            block = W[start:start + chunk]
            for keep in keeps:
                block += self._rows(X[start:start + chunk], keep)
        if len(keeps) > 1:
            W /= len(keeps)
        return W

    def _rows(self, X, keep):
        """Row-normalised kernel rows of ``X`` on the features ``keep``."""
        d2 = _squared_distances(X, self.anchors_, keep)
        # Shifting by each row's nearest distance cancels in the row
        # normalisation and keeps rows far from every anchor from
        # underflowing to zero.
        K = np.exp(-self.gamma_ * (d2 - d2.min(axis=1, keepdims=True)))
        if self.truncate is not None:
            K = _keep_largest(K, self.truncate)
            return sp.csr_matrix(sp.diags(1.0 / np.asarray(K.sum(1)).ravel()) @ K)
        K /= K.sum(axis=1, keepdims=True)
        return K


def _keep_largest(K, k):
    columns = np.argpartition(-K, k - 1, axis=1)[:, :k]
    rows = np.repeat(np.arange(K.shape[0]), k)
    return sp.csr_matrix((K[rows, columns.ravel()], (rows, columns.ravel())), shape=K.shape)


class MaskedContext(_ConditionalContext):
    """A kNN or RBF context averaged over random feature masks.

    Each of ``n_masks`` masks hides a fraction ``mask_rate`` of the features;
    the base context is applied on the features left, and the conditional
    matrices are averaged on the same anchors (the paper's "kNN + mask" and
    "RBF + mask" contexts, section 5.3).

    Parameters
    ----------
    base : KNNContext or RBFContext, default=None
        The context applied under each mask; ``None`` is ``KNNContext()``.
    mask_rate : float, default=0.2
        Fraction of features each mask hides (rounded; at least one feature
        is always kept).
    n_masks : int, default=50
        Number of masks averaged.
    random_state : int, RandomState instance or None, default=None
        Draws the masks.

    Attributes
    ----------
    masks_ : ndarray of shape (n_masks, n_features) of bool
        True where a mask keeps a feature.
    base_ : KNNContext or RBFContext
        The fitted base context (on all features; the RBF width comes from it).
    fit_conditional_ : ndarray, sparse matrix or LinearOperator of shape (n_samples, n_anchors)
    row_marginal_ : ndarray of shape (n_samples,)
    anchor_marginal_ : ndarray of shape (n_anchors,)
    anchor_support_ : ndarray of shape (n_samples,) of bool
    n_anchors_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import KNNContext, MaskedContext
    >>> X = np.random.default_rng(0).normal(size=(60, 5))
    >>> context = MaskedContext(KNNContext(n_neighbors=5), n_masks=10, random_state=0).fit(X)
    >>> context.masks_.sum(axis=1)[:3]
    array([4, 4, 4])
    """

    _parameter_constraints = {
        "base": [HasMethods(["fit"]), None],
        "mask_rate": [Interval(Real, 0, 1, closed="left")],
        "n_masks": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, base=None, *, mask_rate=0.2, n_masks=50, random_state=None):
        self.base = base
        self.mask_rate = mask_rate
        self.n_masks = n_masks
        self.random_state = random_state

    def _input_rules(self):
        base = KNNContext() if self.base is None else self.base
        if isinstance(base, KNNContext):
            return base._input_rules()
        return super()._input_rules()

    def _fit_anchors(self, X, y):
        base = KNNContext() if self.base is None else self.base
        if not isinstance(base, (KNNContext, RBFContext)):
            raise TypeError(f"MaskedContext's base must be a KNNContext or an RBFContext, got {type(base).__name__}.")
        rng = check_random_state(self.random_state)
        p = X.shape[1]
        n_hidden = min(int(round(self.mask_rate * p)), p - 1)
        masks = np.ones((self.n_masks, p), dtype=bool)
        for mask in masks:
            mask[rng.choice(p, size=n_hidden, replace=False)] = False
        self.masks_ = masks
        self.base_ = clone(base).fit(X)
        if isinstance(base, KNNContext):
            self._bases = [clone(base).fit(X[:, np.flatnonzero(mask)]) for mask in masks]

    def _raw_conditional(self, X, fit=False):
        if isinstance(self.base_, RBFContext):
            return self.base_._masked_conditional(X, self.masks_)
        W = None
        for mask, base in zip(self.masks_, self._bases):
            X_masked = X[:, np.flatnonzero(mask)]
            W_j = base._raw_fit_conditional(X_masked) if fit else base._raw_conditional(X_masked)
            W = W_j if W is None else W + W_j
        return W / len(self._bases)

    def _raw_fit_conditional(self, X):
        return self._raw_conditional(X, fit=True)


# -------------------------------------------------------------------------
# Labels, graphs, teachers
# -------------------------------------------------------------------------
class LabelContext(_ConditionalContext):
    """The label context: ``A`` is the row's class (optionally smoothed).

    The anchors are the classes. Deterministic labels give ``C - 1``
    singular values equal to 1 (the centred class indicators), so the
    context score is infinite below ``C - 1`` components: this context is
    for embedding and for comparison, not for choosing contexts by score.

    Parameters
    ----------
    smoothing : float, default=0.0
        Label smoothing: ``W = (1 - smoothing) * onehot(y) + smoothing / C``.
    balanced : bool, default=True
        ``True`` is the class-balanced construction (Theorem 7 of the paper,
        the plain contexture). ``False`` is what an unbiased MSE head on
        one-hot targets learns (Theorem 6): the anchors are weighted by
        their class sizes and no trivial mode is removed.
    teacher : classifier or None, default=None
        Gives ``P(class | x)`` for rows without labels (``predict_proba``),
        fit on the labelled rows; without it, ``conditional`` is only
        defined for labelled rows and raises for new ones.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    teacher_ : classifier
        The fitted teacher (when ``teacher`` is given).
    fit_conditional_ : ndarray of shape (n_samples, n_classes)
    row_marginal_ : ndarray of shape (n_samples,)
    anchor_marginal_ : ndarray of shape (n_classes,)
        The class frequencies (after smoothing).
    anchor_support_ : ndarray of shape (n_classes,) of bool
    n_anchors_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import LabelContext
    >>> X = np.arange(12.0).reshape(6, 2)
    >>> context = LabelContext().fit(X, [0, 0, 1, 1, 2, 2])
    >>> np.round(np.linalg.svd(context.fit_operator_, compute_uv=False), 6)
    array([1., 1., 1.])
    """

    _parameter_constraints = {
        "smoothing": [Interval(Real, 0, 1, closed="left")],
        "balanced": ["boolean"],
        "teacher": [HasMethods(["fit", "predict_proba"]), None],
    }

    def __init__(self, smoothing=0.0, *, balanced=True, teacher=None):
        self.smoothing = smoothing
        self.balanced = balanced
        self.teacher = teacher

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Fit the class anchors from the labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            The labels; required.

        Returns
        -------
        self
        """
        if y is None:
            raise ValueError("LabelContext requires y to be passed, but the target y is None: its anchors are the "
                             "classes of the labels.")
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=_MIN_SAMPLES)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ValueError(f"LabelContext needs at least 2 classes, got 1 class ({self.classes_[0]!r}).")
        if self.teacher is not None:
            self.teacher_ = clone(self.teacher).fit(X, y)
        onehot = np.eye(self.classes_.size)[codes]
        return self._set_conditional(self._smooth(onehot))

    def _smooth(self, probabilities):
        return (1.0 - self.smoothing) * probabilities + self.smoothing / self.classes_.size

    @property
    def anchor_scale_(self):
        check_is_fitted(self, "fit_conditional_")
        if self.balanced:
            return 1.0 / np.sqrt(self.anchor_marginal_)
        return np.ones(self.n_anchors_)

    @property
    def trivial_mode_(self):
        return super().trivial_mode_ if self.balanced else None

    def _raw_conditional(self, X):
        if self.teacher is None:
            raise ValueError(
                "LabelContext knows the context of labelled rows only; pass teacher=<a classifier with "
                "predict_proba> to give new rows one."
            )
        proba = np.asarray(self.teacher_.predict_proba(X), dtype=np.float64)
        aligned = np.zeros((X.shape[0], self.classes_.size))
        aligned[:, np.searchsorted(self.classes_, self.teacher_.classes_)] = proba
        return self._smooth(aligned)

    def _validate(self, X, reset):
        return validate_data(self, X, reset=reset, dtype=np.float64)


class GraphContext(_ConditionalContext):
    """The graph context: ``A`` is a neighbour of the node, drawn by edge weight.

    The rows of ``X`` name nodes of ``graph`` (one column of node
    identifiers). On the subgraph those nodes induce, with weights
    ``w(u, v)`` and degrees ``d(u)``, ``P_X(u) = d(u) / sum(d)`` and
    ``P+(v | u) = w(u, v) / d(u)``, so ``Q = D^-1/2 W D^-1/2`` (section 3.3
    of the paper: its top singular functions are what Laplacian eigenmaps
    learn). ``conditional`` gives the context of any node of ``graph`` with
    an edge to a fit node, so nodes left out of the fit can be embedded.

    Parameters
    ----------
    graph : networkx.Graph, sparse matrix or ndarray of shape (n_nodes, n_nodes)
        Undirected graph with non-negative weights. For a matrix the nodes
        are ``0 .. n_nodes - 1``.
    weight : str or None, default="weight"
        Edge attribute of a networkx graph holding the weights (``None``:
        every edge weighs 1; edges without the attribute weigh 1).
    lazy : bool, default=False
        Add a self-loop of weight ``d(u)`` to every node (the lazy walk
        ``(W + D) / 2``), which makes the operator positive semi-definite
        so that singular and signed eigenvalues agree.

    Attributes
    ----------
    nodes_ : ndarray of shape (n_samples,)
        The fit nodes, in the order of the rows.
    fit_conditional_ : sparse matrix of shape (n_samples, n_anchors)
    row_marginal_ : ndarray of shape (n_samples,)
        Degree-weighted.
    anchor_marginal_ : ndarray of shape (n_anchors,)
    anchor_support_ : ndarray of shape (n_samples,) of bool
    n_anchors_ : int
    n_features_in_ : int
        Always 1 (the node column).

    Examples
    --------
    >>> import networkx as nx
    >>> import numpy as np
    >>> from skicml.contexture import GraphContext
    >>> graph = nx.karate_club_graph()
    >>> context = GraphContext(graph).fit(np.arange(34).reshape(-1, 1))
    >>> context.fit_operator_.shape
    (34, 34)
    """

    _parameter_constraints = {
        "graph": "no_validation",
        "weight": [str, None],
        "lazy": ["boolean"],
    }

    def __init__(self, graph=None, *, weight="weight", lazy=False):
        self.graph = graph
        self.weight = weight
        self.lazy = lazy

    def _input_rules(self):
        return {"accept_sparse": False, "dtype": None}

    def _adjacency(self):
        graph = self.graph
        if graph is None:
            raise ValueError("GraphContext needs graph=<a networkx graph or a square adjacency matrix>.")
        if hasattr(graph, "nodes") and hasattr(graph, "edges"):
            if graph.is_directed():
                raise ValueError("GraphContext needs an undirected graph; pass graph.to_undirected().")
            import networkx as nx

            nodes = list(graph.nodes)
            adjacency = nx.to_scipy_sparse_array(graph, nodelist=nodes, weight=self.weight, format="csr")
            return sp.csr_matrix(adjacency, dtype=np.float64), {node: i for i, node in enumerate(nodes)}
        adjacency = sp.csr_matrix(graph, dtype=np.float64)
        if adjacency.shape[0] != adjacency.shape[1]:
            raise ValueError(f"graph must be a square adjacency matrix, got shape {adjacency.shape}.")
        if abs(adjacency - adjacency.T).max() > 1e-12 * max(abs(adjacency).max(), 1.0):
            raise ValueError("graph's adjacency matrix must be symmetric (an undirected graph).")
        return adjacency, None

    def _node_positions(self, X, reset):
        X = np.asarray(X, dtype=object if reset else None)
        if X.ndim == 1:
            X = X.reshape(-1, 1)
        if X.ndim != 2 or X.shape[1] != 1:
            raise ValueError(
                f"GraphContext reads one column of node identifiers, got an array of shape {X.shape}."
            )
        if reset:
            self.n_features_in_ = 1
            if X.shape[0] < _MIN_SAMPLES:
                raise ValueError(f"GraphContext needs at least {_MIN_SAMPLES} nodes, got {X.shape[0]} sample(s).")
        adjacency, index = self._adjacency()
        values = X[:, 0].tolist()
        if index is None:
            positions = []
            for value in values:
                if not float(value).is_integer() or not 0 <= int(value) < adjacency.shape[0]:
                    raise ValueError(f"node {value!r} is not a node of the graph (0 .. {adjacency.shape[0] - 1}).")
                positions.append(int(value))
        else:
            missing = [value for value in values if value not in index]
            if missing:
                raise ValueError(f"{len(missing)} row(s) name nodes the graph does not have, e.g. {missing[:5]}.")
            positions = [index[value] for value in values]
        return adjacency, np.asarray(positions, dtype=np.intp), np.asarray(values, dtype=object)

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Fit the context of the subgraph the rows' nodes induce.

        Parameters
        ----------
        X : array-like of shape (n_samples, 1) or (n_samples,)
            Node identifiers.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        adjacency, positions, nodes = self._node_positions(X, reset=True)
        if np.unique(positions).size != positions.size:
            raise ValueError("GraphContext's rows must name distinct nodes.")
        self.nodes_ = nodes
        self._positions = positions
        self._adjacency_matrix = adjacency
        sub = adjacency[positions][:, positions]
        degree = np.asarray(sub.sum(axis=1)).ravel()
        if self.lazy:
            sub = sub + sp.diags(degree)
            degree = 2 * degree
        if np.any(sub.data < 0):
            raise ValueError("GraphContext needs non-negative edge weights.")
        isolated = np.flatnonzero(degree <= 0)
        if isolated.size:
            raise ValueError(
                f"{isolated.size} node(s) have no edge to another row's node (e.g. "
                f"{nodes[isolated[:5]].tolist()}): their context is empty. Drop them or add edges."
            )
        self._degree = degree
        return self._set_conditional(sp.csr_matrix(sp.diags(1.0 / degree) @ sub))

    def _row_marginal(self, W):
        return self._degree / self._degree.sum()

    def conditional(self, X):
        """Context of nodes of the graph (fit nodes or others), over the fit nodes.

        Parameters
        ----------
        X : array-like of shape (n_samples, 1) or (n_samples,)
            Node identifiers.

        Returns
        -------
        W : sparse matrix of shape (n_samples, n_anchors)
        """
        check_is_fitted(self, "fit_conditional_")
        _, positions, nodes = self._node_positions(X, reset=False)
        rows = self._adjacency_matrix[positions][:, self._positions]
        if self.lazy:
            own = {position: k for k, position in enumerate(self._positions)}
            degree = np.asarray(self._adjacency_matrix[positions][:, self._positions].sum(axis=1)).ravel()
            diagonal = sp.csr_matrix(
                (degree[[i for i, p in enumerate(positions) if p in own]],
                 ([i for i, p in enumerate(positions) if p in own], [own[p] for p in positions if p in own])),
                shape=rows.shape,
            )
            rows = rows + diagonal
        rows = rows[:, np.flatnonzero(self.anchor_support_)]
        mass = np.asarray(rows.sum(axis=1)).ravel()
        if not np.all(mass > 0):
            raise ValueError(
                f"{np.sum(~(mass > 0))} node(s) have no edge to a fit node (e.g. "
                f"{nodes[~(mass > 0)][:5].tolist()}) and cannot be embedded."
            )
        return sp.csr_matrix(sp.diags(1.0 / mass) @ rows)


class TeacherFeatureContext(_ConditionalContext):
    """The teacher-feature context: ``A`` is a feature vector ``Omega(x)``.

    With a linear loss kernel the contexture of ``A = Omega(X)`` is the top
    eigenspace of the centred teacher Gram matrix (section 2.1 of the paper;
    the dissertation's teacher contexts). The teacher's outputs are
    standardised and divided by their number ``q``, so that
    ``Q = Z / sqrt(n q)`` has squared singular values summing to 1 (they are
    the shares of variance of the standardised outputs' principal
    components). The anchors are the ``q`` outputs; the rows of ``W`` do not
    sum to 1 and there is no trivial mode (the centring removed it).

    Parameters
    ----------
    features : transformer or None, default=None
        Computes ``Omega`` (fit on the rows given to ``fit``, with ``y``);
        ``None`` uses ``X`` itself, which makes the embedding PCA of the
        standardised features.
    threshold : float or None, default=None
        Replace the operator by the projection onto the components whose
        singular value is at least ``threshold`` times the largest (all
        those singular values become 1, the others 0), as the
        dissertation's code does; ``None`` keeps the spectrum.

    Attributes
    ----------
    features_ : transformer
        The fitted teacher (when ``features`` is given).
    mean_ : ndarray of shape (n_outputs,)
    scale_ : ndarray of shape (n_outputs,)
        Standardisation of the teacher's outputs.
    fit_conditional_ : ndarray of shape (n_samples, n_anchors)
    row_marginal_ : ndarray of shape (n_samples,)
    anchor_marginal_ : ndarray of shape (n_anchors,)
    anchor_support_ : ndarray of shape (n_outputs,) of bool
    n_anchors_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import TeacherFeatureContext
    >>> X = np.random.default_rng(0).normal(size=(30, 4))
    >>> s = np.linalg.svd(TeacherFeatureContext().fit(X).fit_operator_, compute_uv=False)
    >>> round(float((s**2).sum()), 6)
    1.0
    """

    _parameter_constraints = {
        "features": [HasMethods(["fit", "transform"]), None],
        "threshold": [Interval(Real, 0, 1, closed="right"), None],
    }

    def __init__(self, features=None, *, threshold=None):
        self.features = features
        self.threshold = threshold

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Fit the teacher and the standardisation of its outputs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or None
            Passed to the teacher's ``fit``.

        Returns
        -------
        self
        """
        X = self._validate(X, reset=True)
        if self.features is not None:
            self.features_ = clone(self.features).fit(X, y)
        omega = self._outputs(X)
        self.mean_ = omega.mean(axis=0)
        scale = omega.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        Z = (omega - self.mean_) / self.scale_
        q = Z.shape[1]
        self._projection = None
        if self.threshold is not None:
            _, s, Vt = np.linalg.svd(Z / np.sqrt(Z.shape[0] * q), full_matrices=False)
            keep = s >= self.threshold * s[0] if s[0] > 0 else np.zeros(s.size, bool)
            self._projection = (Vt[keep].T / s[keep]) @ Vt[keep] / np.sqrt(q)
        self.fit_conditional_ = self._transform_outputs(Z)
        self.row_marginal_ = np.full(X.shape[0], 1.0 / X.shape[0])
        self.anchor_marginal_ = np.full(q, 1.0 / q)
        self.anchor_support_ = np.ones(q, dtype=bool)
        self.n_anchors_ = q
        return self

    def _outputs(self, X):
        omega = X if self.features is None else self.features_.transform(X)
        return np.asarray(omega, dtype=np.float64)

    def _transform_outputs(self, Z):
        q = Z.shape[1]
        if self._projection is None:
            return Z / q
        return Z @ self._projection / np.sqrt(q)

    @property
    def trivial_mode_(self):
        return None

    def _raw_conditional(self, X):
        return self._transform_outputs((self._outputs(X) - self.mean_) / self.scale_)


# -------------------------------------------------------------------------
# Combining contexts
# -------------------------------------------------------------------------
def _hstack(blocks):
    if any(isinstance(block, LinearOperator) for block in blocks):
        return _HorizontalStack(blocks)
    if any(sp.issparse(block) for block in blocks):
        return sp.hstack(blocks, format="csr")
    return np.hstack(blocks)


class _HorizontalStack(_MatmatOperator):
    def __init__(self, blocks):
        self.blocks = [aslinearoperator(block) for block in blocks]
        self.widths = np.cumsum([0] + [block.shape[1] for block in blocks])
        super().__init__(dtype=np.float64, shape=(blocks[0].shape[0], int(self.widths[-1])))

    def _matmat(self, V):
        return sum(block @ V[a:b] for block, a, b in zip(self.blocks, self.widths[:-1], self.widths[1:]))

    def _rmatmat(self, U):
        return np.vstack([block.H @ U for block in self.blocks])


def _weighted(W, weight):
    if isinstance(W, LinearOperator):
        return aslinearoperator(W) * weight
    return W * weight


class MixtureContext(_ConditionalContext):
    """A convex combination of contexts.

    ``mode="disjoint"``: ``A`` is drawn from context ``j`` with probability
    ``weights[j]``, the anchor sets kept apart, so ``k_X+`` is the weighted
    sum of the contexts' kernels and ``Q = [sqrt(w_1) Q_1 | sqrt(w_2) Q_2 | ...]``.
    ``mode="shared"``: the contexts share one anchor set (all must have the
    same anchors, e.g. kNN and RBF contexts of the same rows) and
    ``W = sum_j w_j W_j``, which is how the masked contexts average masks.

    Parameters
    ----------
    contexts : list of contexts
        Exact contexts with uniform row weights (not graphs or teachers).
    weights : array-like of shape (n_contexts,) or None, default=None
        Non-negative; normalised to sum to 1. ``None``: equal weights.
    mode : {"disjoint", "shared"}, default="disjoint"

    Attributes
    ----------
    contexts_ : list of contexts
        The fitted contexts.
    weights_ : ndarray of shape (n_contexts,)
    fit_conditional_ : ndarray, sparse matrix or LinearOperator of shape (n_samples, n_anchors)
    row_marginal_ : ndarray of shape (n_samples,)
    anchor_marginal_ : ndarray of shape (n_anchors,)
    anchor_support_ : ndarray of bool
    n_anchors_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import KNNContext, MixtureContext, RBFContext
    >>> X = np.random.default_rng(0).normal(size=(30, 2))
    >>> mixture = MixtureContext([KNNContext(5), RBFContext(1.0)], weights=[0.7, 0.3]).fit(X)
    >>> mixture.fit_operator_.shape
    (30, 60)
    """

    _parameter_constraints = {
        "contexts": [list, tuple],
        "weights": ["array-like", None],
        "mode": [StrOptions({"disjoint", "shared"})],
    }

    def __init__(self, contexts=(), *, weights=None, mode="disjoint"):
        self.contexts = contexts
        self.weights = weights
        self.mode = mode

    def _input_rules(self):
        contexts = [_resolve_context(c) for c in self.contexts] or [BaseContext()]
        if all(c._input_rules()["accept_sparse"] for c in contexts):
            return {"accept_sparse": "csr", "dtype": np.float64}
        return super()._input_rules()

    def _fit_anchors(self, X, y):
        if len(self.contexts) == 0:
            raise ValueError("MixtureContext needs at least one context in contexts=[...].")
        contexts = [clone(_resolve_context(c)) for c in self.contexts]
        for context in contexts:
            if not context.exact or isinstance(context, (GraphContext, TeacherFeatureContext)):
                raise TypeError(
                    f"MixtureContext mixes conditional contexts with uniform row weights; "
                    f"{type(context).__name__} is not one."
                )
        weights = np.full(len(contexts), 1.0 / len(contexts)) if self.weights is None else np.asarray(
            self.weights, dtype=np.float64)
        if weights.shape != (len(contexts),) or np.any(weights < 0) or not weights.sum() > 0:
            raise ValueError(
                f"weights must be {len(contexts)} non-negative numbers with a positive sum, got {self.weights!r}."
            )
        self.weights_ = weights / weights.sum()
        self.contexts_ = [context.fit(X, y) for context in contexts]
        if self.mode == "shared":
            widths = {context.n_anchors_ for context in self.contexts_}
            if len(widths) != 1:
                raise ValueError(
                    f"mode='shared' needs contexts with the same anchors; they have {sorted(widths)} anchors."
                )

    def _combine(self, blocks):
        if self.mode == "shared":
            total = None
            for block, weight in zip(blocks, self.weights_):
                total = _weighted(block, weight) if total is None else total + _weighted(block, weight)
            # A sparse plus a dense matrix is an np.matrix; keep arrays.
            return np.asarray(total) if isinstance(total, np.matrix) else total
        return _hstack([_weighted(block, weight) for block, weight in zip(blocks, self.weights_)])

    def _raw_fit_conditional(self, X):
        return self._combine([context.fit_conditional_ for context in self.contexts_])

    def _raw_conditional(self, X):
        return self._combine([context.conditional(X) for context in self.contexts_])


class ConvolutionContext(_ConditionalContext):
    """Two contexts in a chain: ``A1 ~ P1(a | x)``, then ``A2 ~ P2(a | A1)``.

    ``W = W1 @ W2`` (``T = T1 T2``): a smoother, weaker association than
    either. The first context's anchors must be fit rows (kNN, RBF, masked
    or mixed ``shared`` contexts), where the second one is evaluated.

    Parameters
    ----------
    first : context
    second : context

    Attributes
    ----------
    first_ : context
    second_ : context
        The fitted contexts.
    fit_conditional_ : ndarray or sparse matrix of shape (n_samples, n_anchors)
    row_marginal_ : ndarray of shape (n_samples,)
    anchor_marginal_ : ndarray of shape (n_anchors,)
    anchor_support_ : ndarray of bool
    n_anchors_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import ConvolutionContext, KNNContext
    >>> X = np.random.default_rng(0).normal(size=(40, 2))
    >>> context = ConvolutionContext(KNNContext(5), KNNContext(5)).fit(X)
    >>> bool(np.allclose(context.fit_conditional_.sum(axis=1), 1))
    True
    """

    _parameter_constraints = {
        "first": [HasMethods(["fit", "conditional"]), str, None],
        "second": [HasMethods(["fit", "conditional"]), str, None],
    }

    def __init__(self, first=None, second=None):
        self.first = first
        self.second = second

    def _input_rules(self):
        rules = [_resolve_context(c)._input_rules() for c in (self.first, self.second)]
        if all(rule["accept_sparse"] for rule in rules):
            return {"accept_sparse": "csr", "dtype": np.float64}
        return super()._input_rules()

    def _fit_anchors(self, X, y):
        first, second = (clone(_resolve_context(c)) for c in (self.first, self.second))
        if not isinstance(first, (KNNContext, RBFContext, MaskedContext)):
            raise TypeError(
                f"ConvolutionContext's first context must have the fit rows as anchors (KNNContext, "
                f"RBFContext or MaskedContext), got {type(first).__name__}."
            )
        if not second.exact or isinstance(second, GraphContext):
            raise TypeError(f"ConvolutionContext's second context must be an exact feature context, "
                            f"got {type(second).__name__}.")
        self.first_, self.second_ = first.fit(X, y), second.fit(X, y)
        # The second context evaluated at the first one's anchors (fit rows).
        rows = np.flatnonzero(self.first_.anchor_support_)
        self._second_at_anchors = _dense_or_sparse(self.second_.conditional(X[rows]))

    def _chain(self, W1):
        W1 = _dense_or_sparse(W1)
        product = W1 @ self._second_at_anchors
        return sp.csr_matrix(product) if sp.issparse(product) else np.asarray(product)

    def _raw_fit_conditional(self, X):
        return self._chain(self.first_.fit_conditional_)

    def _raw_conditional(self, X):
        return self._chain(self.first_.conditional(X))


def _dense_or_sparse(W):
    if isinstance(W, LinearOperator):
        return W @ np.eye(W.shape[1])
    return W


# -------------------------------------------------------------------------
# Sampling contexts: continuous A, views instead of an operator
# -------------------------------------------------------------------------
class _SamplingContext(BaseContext):
    exact = False

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn what drawing views needs (feature ranges, rows to mix with).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self
        """
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=1)
        self._fit_views(X)
        return self

    def _fit_views(self, X):
        self.n_samples_fit_ = X.shape[0]

    def sample(self, X, n_views=2, random_state=None):
        """Draw ``n_views`` views of every row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        n_views : int, default=2
        random_state : int, RandomState instance or None, default=None

        Returns
        -------
        views : ndarray of shape (n_samples, n_views, n_features)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        if not isinstance(n_views, Integral) or isinstance(n_views, bool) or n_views < 1:
            raise ValueError(f"n_views must be a positive integer, got {n_views!r}.")
        rng = check_random_state(random_state)
        return np.stack([self._view(X, rng) for _ in range(n_views)], axis=1)


class FeatureCorruptionContext(_SamplingContext):
    """SCARF corruption: each feature is replaced, with probability
    ``corruption_rate``, by a draw from that feature's marginal.

    Parameters
    ----------
    corruption_rate : float, default=0.5
    distribution : {"uniform", "marginal", "gaussian"}, default="uniform"
        Replacement values: uniform over the feature's fit range (the
        dissertation's default), a value of the feature from a random fit
        row, or a normal draw with the feature's mean and deviation.

    Attributes
    ----------
    minimum_, maximum_, mean_, scale_ : ndarray of shape (n_features,)
        Per-feature statistics of the fit rows.
    n_samples_fit_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import FeatureCorruptionContext
    >>> X = np.random.default_rng(0).normal(size=(10, 3))
    >>> FeatureCorruptionContext().fit(X).sample(X, n_views=4, random_state=0).shape
    (10, 4, 3)
    """

    _parameter_constraints = {
        "corruption_rate": [Interval(Real, 0, 1, closed="both")],
        "distribution": [StrOptions({"uniform", "marginal", "gaussian"})],
    }

    def __init__(self, corruption_rate=0.5, *, distribution="uniform"):
        self.corruption_rate = corruption_rate
        self.distribution = distribution

    def _fit_views(self, X):
        super()._fit_views(X)
        self.minimum_, self.maximum_ = X.min(axis=0), X.max(axis=0)
        self.mean_, self.scale_ = X.mean(axis=0), X.std(axis=0)
        self._rows = X.copy()

    def _view(self, X, rng):
        corrupt = rng.random_sample(X.shape) < self.corruption_rate
        if self.distribution == "uniform":
            replacement = self.minimum_ + rng.random_sample(X.shape) * (self.maximum_ - self.minimum_)
        elif self.distribution == "gaussian":
            replacement = self.mean_ + self.scale_ * rng.standard_normal(X.shape)
        else:
            replacement = self._rows[rng.randint(self._rows.shape[0], size=X.shape), np.arange(X.shape[1])]
        return np.where(corrupt, replacement, X)


class CutmixContext(_SamplingContext):
    """Cutmix for tables: each feature is taken, with probability
    ``corruption_rate``, from the same feature of a random fit row.

    Partners come from the fit rows, not from the rows being viewed, so a
    row's views do not depend on the batch it is drawn with.

    Parameters
    ----------
    corruption_rate : float, default=0.5

    Attributes
    ----------
    n_samples_fit_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import CutmixContext
    >>> X = np.arange(12.0).reshape(4, 3)
    >>> CutmixContext(0.5).fit(X).sample(X, random_state=0).shape
    (4, 2, 3)
    """

    _parameter_constraints = {"corruption_rate": [Interval(Real, 0, 1, closed="both")]}

    def __init__(self, corruption_rate=0.5):
        self.corruption_rate = corruption_rate

    def _fit_views(self, X):
        super()._fit_views(X)
        self._rows = X.copy()

    def _view(self, X, rng):
        partner = self._rows[rng.randint(self._rows.shape[0], size=X.shape[0])]
        corrupt = rng.random_sample(X.shape) < self.corruption_rate
        return np.where(corrupt, partner, X)


class GaussianNoiseContext(_SamplingContext):
    """Additive Gaussian noise of deviation ``sigma`` (times each feature's
    deviation when ``relative=True``).

    Parameters
    ----------
    sigma : float, default=0.1
    relative : bool, default=True

    Attributes
    ----------
    scale_ : ndarray of shape (n_features,)
        Per-feature noise deviation.
    n_samples_fit_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import GaussianNoiseContext
    >>> X = np.zeros((5, 2))
    >>> GaussianNoiseContext(sigma=1.0, relative=False).fit(X).sample(X, random_state=0).shape
    (5, 2, 2)
    """

    _parameter_constraints = {
        "sigma": [Interval(Real, 0, None, closed="left")],
        "relative": ["boolean"],
    }

    def __init__(self, sigma=0.1, *, relative=True):
        self.sigma = sigma
        self.relative = relative

    def _fit_views(self, X):
        super()._fit_views(X)
        std = X.std(axis=0)
        self.scale_ = self.sigma * (np.where(std > 0, std, 1.0) if self.relative else np.ones(X.shape[1]))

    def _view(self, X, rng):
        return X + self.scale_ * rng.standard_normal(X.shape)


class RandomCropContext(_SamplingContext):
    """Random crops resized back to full size (images or sequences).

    A crop keeps a window of area ``crop_ratio`` of the image (side
    ``sqrt(crop_ratio)`` of each side, at a random place) and stretches it
    back to the full size by bilinear interpolation. Rows are flattened
    images of ``image_shape``; without it each row is a 1-D sequence and a
    crop keeps a fraction ``crop_ratio`` of it.

    Parameters
    ----------
    crop_ratio : float, default=0.2
        Area of the crop over the area of the image, in (0, 1].
    image_shape : tuple of (int, int) or None, default=None
        ``(height, width)`` of the flattened rows.

    Attributes
    ----------
    image_shape_ : tuple of (int, int)
    n_samples_fit_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture import RandomCropContext
    >>> images = np.random.default_rng(0).random((3, 64))
    >>> RandomCropContext(0.25, image_shape=(8, 8)).fit(images).sample(images, random_state=0).shape
    (3, 2, 64)
    """

    _parameter_constraints = {
        "crop_ratio": [Interval(Real, 0, 1, closed="right")],
        "image_shape": [tuple, list, None],
    }

    def __init__(self, crop_ratio=0.2, *, image_shape=None):
        self.crop_ratio = crop_ratio
        self.image_shape = image_shape

    def _fit_views(self, X):
        super()._fit_views(X)
        shape = (1, X.shape[1]) if self.image_shape is None else tuple(int(side) for side in self.image_shape)
        if len(shape) != 2 or shape[0] * shape[1] != X.shape[1]:
            raise ValueError(f"image_shape={self.image_shape!r} does not match rows of {X.shape[1]} values.")
        self.image_shape_ = shape

    def _view(self, X, rng):
        import torch
        import torch.nn.functional as F

        height, width = self.image_shape_
        side = np.sqrt(self.crop_ratio) if height > 1 else self.crop_ratio
        crop_h = max(1, int(round(height * (side if height > 1 else 1.0))))
        crop_w = max(1, int(round(width * side)))
        images = torch.as_tensor(X.reshape(-1, 1, height, width))
        out = torch.empty_like(images)
        for i in range(images.shape[0]):
            top = rng.randint(height - crop_h + 1)
            left = rng.randint(width - crop_w + 1)
            crop = images[i:i + 1, :, top:top + crop_h, left:left + crop_w]
            out[i:i + 1] = F.interpolate(crop, size=(height, width), mode="bilinear", align_corners=False)
        return out.reshape(X.shape[0], -1).numpy()


# -------------------------------------------------------------------------
_SHORTCUTS = {
    "knn": lambda: KNNContext(),
    "rbf": lambda: RBFContext(),
    "masked_knn": lambda: MaskedContext(KNNContext()),
    "masked_rbf": lambda: MaskedContext(RBFContext()),
    "label": lambda: LabelContext(),
}


def _resolve_context(context):
    """A context instance from a shortcut name or an instance (not cloned)."""
    if context is None:
        return KNNContext()
    if isinstance(context, str):
        if context not in _SHORTCUTS:
            raise ValueError(f"context={context!r} is not a known shortcut; use one of {sorted(_SHORTCUTS)} "
                             "or pass a context object.")
        return _SHORTCUTS[context]()
    if not isinstance(context, BaseContext):
        raise TypeError(f"context must be a skicml.contexture context or one of {sorted(_SHORTCUTS)}, "
                        f"got {type(context).__name__}.")
    return context
