"""``ShapeDistributionFeatures``: the classic hand-made descriptor, the plain baseline."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ..base import as_skicml_tags
from ..utils.param_validation import Integral, Interval, fit_context
from ._input import validate_point_clouds

__all__ = ["ShapeDistributionFeatures"]


class ShapeDistributionFeatures(TransformerMixin, BaseEstimator):
    """Histograms of point-pair distances (D2), of radii and of per-axis spreads of each cloud.

    Osada et al.'s D2 shape distribution (the distances between random
    pairs of surface points) with the distribution of distances to the
    centroid and the sorted eigenvalues of the covariance, on clouds
    centred and scaled to the unit sphere: invariant to rotation,
    translation, scale and point order. With a linear model it is the plain
    baseline of the point-cloud benchmarks.

    Parameters
    ----------
    n_bins : int, default=32
        Bins of each histogram (over ``[0, 2]`` for pairs, ``[0, 1]`` for radii).
    n_pairs : int, default=4096
        Random point pairs per cloud.
    n_points : int, default=512
        Points per cloud after resampling (as the deep estimators do).
    random_state : int, RandomState instance or None, default=0
        Draws the pairs (the same pairs for every cloud).

    Attributes
    ----------
    n_features_in_ : int
        Columns of a 2-D ``X``.

    Examples
    --------
    >>> from skicml.datasets import make_point_clouds
    >>> from skicml.pointcloud import ShapeDistributionFeatures
    >>> clouds = make_point_clouds(4, n_points=64, random_state=0).points
    >>> ShapeDistributionFeatures(n_bins=8, n_points=64).fit_transform(clouds).shape
    (4, 19)
    """

    _parameter_constraints = {
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "n_pairs": [Interval(Integral, 1, None, closed="left")],
        "n_points": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, n_bins=32, n_pairs=4096, n_points=512, random_state=0):
        self.n_bins = n_bins
        self.n_pairs = n_pairs
        self.n_points = n_points
        self.random_state = random_state

    def _clouds(self, X, reset):
        return validate_point_clouds(self, X, reset=reset)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Check ``X``; the features need no fitting.

        Parameters
        ----------
        X : ndarray of shape (n_clouds, n_points, 3), list of (n_i, 3) arrays, or (n_clouds, 3 * n_points)
        y : None
            Ignored.

        Returns
        -------
        self
        """
        self._clouds(X, reset=True)
        rng = check_random_state(self.random_state)
        self.pairs_ = rng.randint(0, self.n_points, size=(2, self.n_pairs))
        return self

    def transform(self, X):
        """Histogram features of each cloud.

        Parameters
        ----------
        X : ndarray of shape (n_clouds, n_points, 3), list of (n_i, 3) arrays, or (n_clouds, 3 * n_points)

        Returns
        -------
        ndarray of shape (n_clouds, 2 * n_bins + 3)
        """
        check_is_fitted(self)
        clouds = self._clouds(X, reset=False).astype(np.float64)
        first, second = self.pairs_
        pair_distances = np.linalg.norm(clouds[:, first] - clouds[:, second], axis=-1)
        radii = np.linalg.norm(clouds, axis=-1)

        def histogram(values, scale):
            index = np.clip((values / scale * self.n_bins).astype(np.int64), 0, self.n_bins - 1)
            flat = (np.arange(len(values))[:, None] * self.n_bins + index).ravel()
            counts = np.bincount(flat, minlength=len(values) * self.n_bins).reshape(len(values), self.n_bins)
            return counts / values.shape[1]

        spread = np.linalg.eigvalsh(np.einsum("npi,npj->nij", clouds, clouds) / clouds.shape[1])[:, ::-1]
        return np.hstack([histogram(pair_distances, 2.0), histogram(radii, 1.0), spread])

    def __sklearn_tags__(self):
        tags = as_skicml_tags(super().__sklearn_tags__())
        tags.input_tags.three_d_array = True
        tags.three_d_input = True
        return tags
