"""``WhitenedLikelihoodOutlierDetector``: W-CLIP as an outlier detector.

Works on precomputed embeddings (2-D float arrays). For images and captions,
:class:`~skicml.clip.WhitenedCLIPScorer` puts a ``CLIPEmbedder`` in front of
this class.
"""

import numpy as np
from scipy import stats
from sklearn.base import OutlierMixin
from sklearn.utils.extmath import row_norms
from sklearn.utils.validation import check_is_fitted

from ..utils.param_validation import Interval, Real, StrOptions, fit_context
from ._whitening import WhiteningLikelihood

__all__ = ["WhitenedLikelihoodOutlierDetector"]


class WhitenedLikelihoodOutlierDetector(OutlierMixin, WhiteningLikelihood):
    r"""Flag embeddings with a low whitened likelihood (W-CLIP anomaly scores).

    The model of :class:`WhiteningLikelihood` (mean, whitening matrix,
    :math:`-\tfrac{1}{2}(k\log 2\pi + \lVert z\rVert^2)` score) plus a
    threshold ``offset_``: :meth:`decision_function` is
    ``score_samples - offset_`` and :meth:`predict` returns -1 (outlier)
    where it is negative, +1 otherwise. This is how the paper's uses
    (artifacts in generated images, domain shift, unusual captions) become
    standard anomaly detection; :meth:`decision_function` is ready for AUROC.

    It reads precomputed embeddings: CLIP image or text features (one
    detector per modality, as the paper whitens them separately) or any other
    embedding. No encoder is built in: :class:`WhitenedCLIPScorer` is the
    same model reading images and captions through ``CLIPEmbedder``.

    Parameters
    ----------
    contamination : float in (0, 0.5] or "auto", default=0.05
        A float sets ``offset_`` at that quantile of the training scores, so
        about that share of the training set is flagged (as
        :class:`~sklearn.ensemble.IsolationForest` does). ``"auto"`` uses the
        Gaussian model instead: a sample is an outlier when
        :math:`\lVert z\rVert^2` exceeds the :math:`1 - \alpha` quantile of
        the chi-square distribution with ``n_components_`` degrees of freedom.
    alpha : float in (0, 1), default=0.025
        Tail probability of that chi-square test (used only with
        ``contamination="auto"``; the default is the spec's 0.975 quantile).
        For held-out in-distribution data the real false-positive rate is a
        little higher than ``alpha`` because the covariance is estimated.
    whitening parameters
        ``method``, ``n_components``, ``eps``, ``shrinkage``, ``ddof``,
        ``corr_threshold``, ``noise_scale``, ``normalize_input``,
        ``include_log_det``, ``include_constant`` and ``random_state``, as in
        :class:`WhiteningLikelihood`.

    Attributes
    ----------
    offset_ : float
        Threshold on :meth:`score_samples`.
    fitted whitening attributes
        ``mean_``, ``eigenvalues_``, ``components_``, ``whitening_matrix_``,
        ``unwhitening_matrix_``, ``n_components_``, ``log_det_``,
        ``noise_variance_``, ``shrinkage_``, ``replaced_features_``,
        ``n_samples_fit_``, ``n_features_in_`` and ``feature_names_in_``, as
        in :class:`WhiteningLikelihood`.

    See Also
    --------
    WhiteningLikelihood : The whitening and the likelihood alone.
    sklearn.covariance.EllipticEnvelope : A robust-covariance relative.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.clip import WhitenedLikelihoodOutlierDetector
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 8)) @ rng.normal(size=(8, 8))
    >>> detector = WhitenedLikelihoodOutlierDetector(contamination=0.1).fit(X)
    >>> float(np.mean(detector.predict(X) == -1))
    0.1
    >>> far = detector.mean_ + 10 * detector.components_[:, -1] * np.sqrt(detector.eigenvalues_[-1])
    >>> detector.predict(far[None])
    array([-1])
    """

    _parameter_constraints = {
        **WhiteningLikelihood._parameter_constraints,
        "contamination": [StrOptions({"auto"}), Interval(Real, 0, 0.5, closed="right")],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(
        self,
        contamination=0.05,
        alpha=0.025,
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
        super().__init__(
            method=method,
            n_components=n_components,
            eps=eps,
            shrinkage=shrinkage,
            ddof=ddof,
            corr_threshold=corr_threshold,
            noise_scale=noise_scale,
            normalize_input=normalize_input,
            include_log_det=include_log_det,
            include_constant=include_constant,
            random_state=random_state,
        )
        self.contamination = contamination
        self.alpha = alpha

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the whitening and the threshold ``offset_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings of in-distribution (reference) data.
        y : None
            Ignored.

        Returns
        -------
        self : WhitenedLikelihoodOutlierDetector
        """
        X = self._fit(X)
        if self.contamination == "auto":
            self.offset_ = self._chi2_offset()
        else:
            scores = self._scores_from_sqnorm(row_norms(self._whiten(X), squared=True))
            self.offset_ = float(np.percentile(scores, 100.0 * self.contamination))
        return self

    def _chi2_offset(self):
        k = self.n_components_
        threshold = float(stats.chi2.ppf(1.0 - self.alpha, k))
        return float(self._scores_from_sqnorm(np.array([threshold]))[0])

    @classmethod
    def from_precomputed(cls, mean, whitening_matrix, X_reference=None, **params):
        """A fitted detector from a published mean and whitening matrix.

        See :meth:`WhiteningLikelihood.from_precomputed`. The threshold comes
        from the chi-square rule when ``contamination="auto"``; a float
        ``contamination`` needs reference embeddings ``X_reference`` to take
        the quantile of.

        Parameters
        ----------
        mean : array-like or torch.Tensor of shape (n_features,)
        whitening_matrix : array-like or torch.Tensor of shape (n_features, k)
        X_reference : array-like of shape (n_samples, n_features) or None
        **params
            Constructor parameters.

        Returns
        -------
        WhitenedLikelihoodOutlierDetector
        """
        model = super().from_precomputed(mean, whitening_matrix, **params)
        if model.contamination == "auto":
            model.offset_ = model._chi2_offset()
        elif X_reference is None:
            raise ValueError(
                f"contamination={model.contamination!r} needs X_reference embeddings to set the "
                "threshold; pass them, or use contamination='auto'."
            )
        else:
            model.offset_ = float(np.percentile(model.score_samples(X_reference), 100.0 * model.contamination))
        return model

    def decision_function(self, X):
        """``score_samples(X) - offset_``: negative for outliers.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "offset_")
        return self.score_samples(X) - self.offset_

    def predict(self, X):
        """+1 for inliers, -1 for outliers.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        labels = np.ones(len(decision := self.decision_function(X)), dtype=int)
        labels[decision < 0] = -1
        return labels

