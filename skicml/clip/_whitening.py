"""``WhiteningLikelihood``: the modality-agnostic core of Whitened CLIP.

An embedding ``x`` is whitened as ``z = (x - mean_) @ whitening_matrix_`` and
scored by the standard-normal log-density of ``z`` (Betser, Levi and Gilboa,
ICML 2025). Fitting is pure linear algebra in float64 with the symmetric
eigen-solver; see the spec's sections 2.7 and 4.1 for the numerical choices.
"""

import math
import numbers

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    DensityMixin,
    TransformerMixin,
)
from sklearn.utils import check_array, check_random_state
from sklearn.utils.extmath import row_norms
from sklearn.utils.validation import check_is_fitted, validate_data

from ..base import as_skicml_tags, warn_user
from ..utils.param_validation import Integral, Interval, Real, RealNotInt, StrOptions, fit_context

__all__ = ["WhiteningLikelihood"]

_LOG_2PI = math.log(2.0 * math.pi)
_METHODS = ("pca", "zca", "cholesky")


def _l2_normalize(X):
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norms, np.finfo(X.dtype).tiny)


def _fix_signs(vectors):
    """Make the largest-magnitude entry of each column positive."""
    rows = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[rows, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1.0
    return vectors * signs


class WhiteningLikelihood(ClassNamePrefixFeaturesOutMixin, TransformerMixin, DensityMixin, BaseEstimator):
    r"""Whitening of embeddings and their Gaussian log-likelihood (W-CLIP).

    Fits the mean :math:`\mu` and the covariance :math:`\Sigma` of a set of
    embeddings (CLIP image or text features, or any other embedding) and a
    whitening matrix :math:`W` with :math:`W^\top \Sigma W = I`. A sample is
    whitened as :math:`z = (x - \mu) W` and scored by

    .. math::

        \log p(x) = -\tfrac{1}{2}\left(k \log 2\pi + \lVert z \rVert^2\right)
                    \;[+ \log\lvert\det W\rvert],

    the log-density of a standard normal in the ``k`` kept directions. Without
    the log-determinant (the default, as in the paper) the score ranks
    samples; with it the score is a log-density in the original space.

    Unlike the official code (general ``eig`` in float32, no regularisation),
    the covariance is decomposed with the symmetric solver
    :func:`numpy.linalg.eigh` in float64, eigenvalues are floored at
    ``eps * max_eigenvalue``, and eigenvector signs are fixed so that
    :meth:`transform` is deterministic.

    Parameters
    ----------
    method : {"pca", "zca", "cholesky"}, default="pca"
        The whitening transform. ``"pca"`` (the paper's) returns coordinates
        in the eigenbasis, ``"zca"`` rotates them back to the feature axes,
        ``"cholesky"`` uses the inverse Cholesky factor. All three give the
        same :math:`\lVert z \rVert^2`, hence the same scores; only the output
        of :meth:`transform` differs. ``"cholesky"`` needs
        ``n_components=None``.
    n_components : int, float or None, default=None
        Directions kept: an int in ``[1, n_features]`` keeps the top ones by
        variance, a float in ``(0, 1]`` the fewest whose variance reaches that
        fraction, ``None`` keeps all.
    eps : float, default=1e-12
        Relative eigenvalue floor: eigenvalues below ``eps * max_eigenvalue``
        are raised to it (a :class:`UserWarning` says so).
    shrinkage : None, "ledoit_wolf" or float in [0, 1], default=None
        Shrink the covariance towards ``trace / n_features`` times the
        identity, by the Ledoit-Wolf coefficient or by the given one.
    ddof : int, default=1
        Delta degrees of freedom of the covariance (1 as ``torch.cov`` in the
        official code; 0 gives maximum likelihood).
    corr_threshold : float or None, default=None
        Paper compatibility (its Algorithm 1): before the covariance, every
        column ``j`` whose Pearson correlation with an earlier column exceeds
        this value is overwritten with ``noise_scale * N(0, 1)`` noise. As in
        the official code this is *not* mirrored when scoring. Off by default.
    noise_scale : float, default=0.1
        Standard deviation of that replacement noise.
    normalize_input : bool, default=False
        L2-normalise every row before anything else. ``False`` matches the
        official repository (raw CLIP features); the authors' demo Space uses
        normalised features.
    include_log_det : bool, default=False
        Add :math:`\log\lvert\det W\rvert` (``log_det_``) to
        :meth:`score_samples`.
    include_constant : bool, default=True
        Keep the :math:`-\tfrac{k}{2}\log 2\pi` term in :meth:`score_samples`.
    random_state : int, RandomState instance or None, default=None
        Seeds the replacement noise of ``corr_threshold``; unused otherwise.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
        Mean of the (normalised, if asked) training embeddings.
    eigenvalues_ : ndarray of shape (k,)
        Kept covariance eigenvalues (``k = n_components_``), descending,
        after shrinkage and floor.
    components_ : ndarray of shape (n_features, k)
        The matching orthonormal eigenvectors (columns).
    whitening_matrix_ : ndarray of shape (n_features, n_features_out)
        ``W``: ``transform(X) = (X - mean_) @ W``. ``n_features_out`` is
        ``n_components_`` for ``"pca"`` and ``n_features`` otherwise.
    unwhitening_matrix_ : ndarray of shape (n_features_out, n_features)
        The inverse map used by :meth:`inverse_transform`.
    n_components_ : int
        Directions kept (the ``k`` of the score).
    log_det_ : float
        :math:`\log\lvert\det W\rvert = -\tfrac{1}{2}\sum_i \log\lambda_i`
        over the kept directions.
    noise_variance_ : float
        Mean of the dropped eigenvalues (0 when none is dropped), used by
        :meth:`score` as in probabilistic PCA.
    shrinkage_ : float
        The shrinkage coefficient applied (0 without shrinkage).
    replaced_features_ : list of int
        Columns overwritten by noise (``corr_threshold`` only).
    n_samples_fit_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features,)
        Defined only when ``X`` has string column names.

    See Also
    --------
    WhitenedLikelihoodOutlierDetector : The same model as an outlier detector.
    sklearn.decomposition.PCA : ``PCA(whiten=True)`` gives the same norms.

    Notes
    -----
    For held-out in-distribution samples :math:`E\lVert z\rVert^2` exceeds
    ``k`` because of estimation error, by about a factor
    ``(N - 1) / (N - k - 2)`` for ``N`` training samples.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.clip import WhiteningLikelihood
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4)) + 3.0
    >>> model = WhiteningLikelihood().fit(X)
    >>> Z = model.transform(X)
    >>> np.allclose(np.cov(Z, rowvar=False), np.eye(4))
    True
    >>> model.score_samples(X[:2]).shape
    (2,)
    >>> bool(model.score_samples(model.mean_[None])[0] > model.score_samples(X[:1])[0])
    True
    """

    _parameter_constraints = {
        "method": [StrOptions(set(_METHODS))],
        "n_components": [Interval(Integral, 1, None, closed="left"), Interval(RealNotInt, 0, 1, closed="right"),
                         None],
        "eps": [Interval(Real, 0, 1, closed="left")],
        "shrinkage": [StrOptions({"ledoit_wolf"}), Interval(Real, 0, 1, closed="both"), None],
        "ddof": [Interval(Integral, 0, None, closed="left")],
        "corr_threshold": [Interval(Real, -1, 1, closed="both"), None],
        "noise_scale": [Interval(Real, 0, None, closed="left")],
        "normalize_input": ["boolean"],
        "include_log_det": ["boolean"],
        "include_constant": ["boolean"],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        method="pca",
        n_components=None,
        eps=1e-12,
        shrinkage=None,
        ddof=1,
        corr_threshold=None,
        noise_scale=0.1,
        normalize_input=False,
        include_log_det=False,
        include_constant=True,
        random_state=None,
    ):
        self.method = method
        self.n_components = n_components
        self.eps = eps
        self.shrinkage = shrinkage
        self.ddof = ddof
        self.corr_threshold = corr_threshold
        self.noise_scale = noise_scale
        self.normalize_input = normalize_input
        self.include_log_det = include_log_det
        self.include_constant = include_constant
        self.random_state = random_state

    # ------------------------------------------------------------------
    # validation
    # ------------------------------------------------------------------
    def _check_params(self, n_features):
        """The rules that relate parameters to each other or to the data.

        Each parameter on its own is checked first, by its declared rule.
        """
        n = self.n_components
        if n is not None:
            if isinstance(n, numbers.Integral) and n > n_features:
                raise ValueError(
                    f"n_components={n} must be between 1 and n_features={n_features}."
                )
            if self.method == "cholesky":
                raise ValueError(
                    "method='cholesky' whitens all directions; use n_components=None, "
                    "or method='pca' or 'zca' to truncate."
                )

    def _validate(self, X, reset):
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_min_samples=2 if reset else 1)
        if self.normalize_input:
            X = _l2_normalize(X)
        return X

    # ------------------------------------------------------------------
    # fitting
    # ------------------------------------------------------------------
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the mean and the whitening matrix.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings, at least two of them. Cast to float64.
        y : None
            Ignored.

        Returns
        -------
        self : WhiteningLikelihood
        """
        self._fit(X)
        return self

    def _fit(self, X):
        """Fit, returning the validated (and normalised) training rows."""
        X = self._validate(X, reset=True)
        n_samples, n_features = X.shape
        self._check_params(n_features)
        if self.ddof >= n_samples:
            raise ValueError(f"ddof={self.ddof} must be smaller than n_samples={n_samples}.")
        self.mean_ = X.mean(axis=0)
        Xc = X - self.mean_
        self.replaced_features_ = self._replace_correlated(Xc)
        with np.errstate(over="ignore", invalid="ignore"):  # checked just below
            cov = (Xc.T @ Xc) / (n_samples - self.ddof)
            cov = self._shrink(cov, Xc)
        if not np.isfinite(cov).all():
            peak = float(np.max(np.abs(X)))
            raise ValueError(
                f"{type(self).__name__}: the values of X are too large to form a covariance in float64 "
                f"(max |X| = {peak:.3g}; its products overflow); rescale X (divide it by a constant) "
                "before fitting."
            )
        eigenvalues, vectors = np.linalg.eigh(cov)
        order = np.argsort(eigenvalues)[::-1]
        eigenvalues, vectors = eigenvalues[order], _fix_signs(vectors[:, order])
        top = max(float(eigenvalues[0]), 0.0)
        floor = self.eps * top if top > 0 else np.finfo(np.float64).tiny
        floor = max(floor, np.finfo(np.float64).tiny)
        if np.any(eigenvalues < floor) or n_samples <= n_features:
            warn_user(
                f"covariance is rank-deficient (n_samples={n_samples}, n_features={n_features}, "
                f"{int(np.sum(eigenvalues < floor))} eigenvalue(s) floored at eps * max); "
                "consider n_components or shrinkage.",
                UserWarning,
            )
        eigenvalues = np.maximum(eigenvalues, floor)
        k = self._resolve_n_components(eigenvalues)
        self._set_whitening(eigenvalues, vectors, k)
        self.n_samples_fit_ = n_samples
        return X

    def _replace_correlated(self, Xc):
        if self.corr_threshold is None:
            return []
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = np.nan_to_num(np.corrcoef(Xc, rowvar=False), nan=0.0)
        corr = np.atleast_2d(corr)
        upper = np.triu(corr > self.corr_threshold, k=1)
        replaced = sorted({int(j) for j in np.nonzero(upper)[1]})
        if replaced:
            rng = check_random_state(self.random_state)
            Xc[:, replaced] = self.noise_scale * rng.standard_normal((Xc.shape[0], len(replaced)))
        return replaced

    def _shrink(self, cov, Xc):
        if self.shrinkage is None:
            self.shrinkage_ = 0.0
            return cov
        if isinstance(self.shrinkage, str):
            from sklearn.covariance import ledoit_wolf_shrinkage

            delta = float(ledoit_wolf_shrinkage(Xc, assume_centered=True))
        else:
            delta = float(self.shrinkage)
        mu = np.trace(cov) / cov.shape[0]
        shrunk = (1.0 - delta) * cov
        shrunk.flat[:: cov.shape[0] + 1] += delta * mu
        self.shrinkage_ = delta
        return shrunk

    def _resolve_n_components(self, eigenvalues):
        n = self.n_components
        if n is None:
            return eigenvalues.size
        if isinstance(n, numbers.Integral):
            return int(n)
        ratio = np.cumsum(eigenvalues) / eigenvalues.sum()
        return int(min(np.searchsorted(ratio, n - 1e-12) + 1, eigenvalues.size))

    def _set_whitening(self, eigenvalues, vectors, k):
        d = vectors.shape[0]
        kept, V = eigenvalues[:k], vectors[:, :k]
        self.eigenvalues_ = kept
        self.components_ = V
        self.n_components_ = k
        self.log_det_ = float(-0.5 * np.sum(np.log(kept)))
        self.noise_variance_ = float(eigenvalues[k:].mean()) if k < d else 0.0
        root = np.sqrt(kept)
        if self.method == "pca":
            W = V / root
            U = (V * root).T
        elif self.method == "zca":
            W = (V / root) @ V.T
            U = (V * root) @ V.T
        else:  # cholesky of the (floored, shrunk) covariance
            cov = (V * kept) @ V.T
            cov = 0.5 * (cov + cov.T)
            try:
                L = np.linalg.cholesky(cov)
            except np.linalg.LinAlgError as exc:
                raise ValueError(
                    "method='cholesky' failed: the covariance is numerically not positive "
                    "definite; use method='pca', a larger eps or shrinkage."
                ) from exc
            U = L.T
            W = np.linalg.inv(U)
        self.whitening_matrix_ = W
        self.unwhitening_matrix_ = U

    @classmethod
    def from_precomputed(cls, mean, whitening_matrix, **params):
        """Build a fitted model from a published mean and whitening matrix.

        The matrices are used as they are: no refit, no check that they
        whiten anything, and singular matrices are accepted (the official
        ViT-L/14 text matrix has rank 765 of 768). :meth:`inverse_transform`
        then uses the pseudo-inverse, and ``log_det_`` is ``-inf`` for a
        numerically rank-deficient matrix (the sum of the log singular
        values otherwise).

        Parameters
        ----------
        mean : array-like or torch.Tensor of shape (n_features,)
        whitening_matrix : array-like or torch.Tensor of shape (n_features, k)
            ``W`` in the row-vector convention ``z = (x - mean) @ W``, as in
            the official ``w_mats/*.pt`` files (load those with
            ``torch.load(path, weights_only=True)``).
        **params
            Constructor parameters, such as ``include_log_det``. ``method``
            is recorded but does not change ``W``.

        Returns
        -------
        WhiteningLikelihood
            A fitted instance (or of the subclass it is called on).

        Examples
        --------
        >>> import numpy as np
        >>> from skicml.clip import WhiteningLikelihood
        >>> W = np.diag([1.0, 0.5, 0.0])          # singular, kept as is
        >>> model = WhiteningLikelihood.from_precomputed(np.zeros(3), W)
        >>> model.transform([[2.0, 2.0, 2.0]])
        array([[2., 1., 0.]])
        >>> round(float(model.score_samples([[2.0, 2.0, 2.0]])[0]), 4)
        -5.2568
        """
        mean = np.asarray(_to_numpy(mean), dtype=np.float64).ravel()
        W = np.asarray(_to_numpy(whitening_matrix), dtype=np.float64)
        if W.ndim != 2 or W.shape[0] != mean.size:
            raise ValueError(
                f"whitening_matrix has shape {W.shape}; expected ({mean.size}, k) to match "
                f"the mean of {mean.size} features."
            )
        if not (np.isfinite(mean).all() and np.isfinite(W).all()):
            raise ValueError("mean and whitening_matrix must be finite (no NaN or infinity).")
        model = cls(**params)
        model._validate_params()
        model._check_params(mean.size)
        model.mean_ = mean
        model.whitening_matrix_ = W
        model.unwhitening_matrix_ = np.linalg.pinv(W)
        model.n_components_ = W.shape[1]
        col_norms = np.linalg.norm(W, axis=0)
        with np.errstate(divide="ignore"):
            model.eigenvalues_ = 1.0 / col_norms**2
        model.components_ = W / np.where(col_norms > 0, col_norms, 1.0)
        # |det W| from the singular values (the pseudo-determinant when W is
        # not square); -inf when W is numerically rank-deficient.
        s = np.linalg.svd(W, compute_uv=False)
        tol = s.max(initial=0.0) * max(W.shape) * np.finfo(np.float64).eps
        model.log_det_ = float(np.sum(np.log(s))) if s.size and s.min() > tol else -math.inf
        model.noise_variance_ = 0.0
        model.shrinkage_ = 0.0
        model.replaced_features_ = []
        model.n_features_in_ = mean.size
        model.n_samples_fit_ = 0
        return model

    # ------------------------------------------------------------------
    # transforms and scores
    # ------------------------------------------------------------------
    @property
    def _n_features_out(self):
        return self.whitening_matrix_.shape[1]

    def transform(self, X):
        """Whiten: ``(X - mean_) @ whitening_matrix_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        Z : ndarray of shape (n_samples, n_features_out)
        """
        check_is_fitted(self)
        return self._whiten(self._validate(X, reset=False))

    def _whiten(self, X):
        # X already validated (and normalised when normalize_input is set).
        return (X - self.mean_) @ self.whitening_matrix_

    def inverse_transform(self, X):
        """Map whitened coordinates back: ``Z @ unwhitening_matrix_ + mean_``.

        Exact at full rank (``n_components=None``); with truncation the
        result is the projection onto the kept directions. With
        ``normalize_input=True`` the result is on the normalised scale.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_out)

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        Z = check_array(X, dtype=np.float64)
        if Z.shape[1] != self.unwhitening_matrix_.shape[0]:
            raise ValueError(
                f"X has {Z.shape[1]} features, but inverse_transform expects "
                f"{self.unwhitening_matrix_.shape[0]} whitened features."
            )
        return Z @ self.unwhitening_matrix_ + self.mean_

    def squared_norm(self, X):
        r"""Squared whitened norm :math:`\lVert z \rVert^2` (the Mahalanobis distance squared).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return row_norms(self.transform(X), squared=True)

    def _scores_from_sqnorm(self, sq):
        scores = -0.5 * sq
        if self.include_constant:
            scores = scores - 0.5 * self.n_components_ * _LOG_2PI
        if self.include_log_det:
            scores = scores + self.log_det_
        return scores

    def score_samples(self, X):
        r"""Whitened log-likelihood of each sample.

        :math:`-\tfrac{1}{2}(k \log 2\pi + \lVert z \rVert^2)`, plus
        ``log_det_`` when ``include_log_det=True`` (then, at full rank, the
        Gaussian log-density of ``X``); the constant is dropped when
        ``include_constant=False``. Higher means more typical.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._scores_from_sqnorm(self.squared_norm(X))

    def score(self, X, y=None):
        r"""Mean log-density of ``X`` in the original feature space.

        Always includes the log-determinant and the constant, whatever
        ``include_log_det`` and ``include_constant`` say, and with
        ``n_components < n_features`` adds the dropped directions as in
        probabilistic PCA (isotropic variance ``noise_variance_``), so that
        held-out scores of models with different ``n_components`` or
        ``shrinkage`` are comparable and :class:`~sklearn.model_selection.GridSearchCV`
        can choose between them. At full rank it equals the mean of
        :meth:`score_samples` with ``include_log_det=True``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        float
        """
        check_is_fitted(self)
        Xv = self._validate(X, reset=False)
        Xc = Xv - self.mean_
        sq = row_norms(self._whiten(Xv), squared=True)
        k, d = self.n_components_, self.n_features_in_
        log_density = -0.5 * (k * _LOG_2PI + sq) + self.log_det_
        if k < d and self.noise_variance_ > 0:
            projected = Xc @ self.components_
            residual = row_norms(Xc, squared=True) - row_norms(projected, squared=True)
            residual = np.maximum(residual, 0.0)
            s2 = self.noise_variance_
            log_density = log_density - 0.5 * ((d - k) * (_LOG_2PI + math.log(s2)) + residual / s2)
        return float(np.mean(log_density))

    def __sklearn_tags__(self):
        return as_skicml_tags(super().__sklearn_tags__())


def _to_numpy(value):
    """A torch tensor (or anything array-like) as a numpy array."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu().double().numpy()
    return value
