"""``WeeklySummaryFeatures``: the summary-statistics baseline of the paper."""

import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..base import as_skicml_tags
from ..utils.param_validation import Integral, Interval, fit_context
from ._validation import validate_weeks

__all__ = ["WeeklySummaryFeatures"]

_STATISTICS = ("mean", "std", "min", "max", "observed", "night_mean", "day_mean",
               "weekday_mean", "weekend_mean")


class WeeklySummaryFeatures(TransformerMixin, BaseEstimator):
    """Per-variable summary statistics of each week: what a health-data
    scientist feeds a linear model before reaching for a foundation model.

    For every variable: mean, standard deviation, minimum and maximum over the
    observed hours, the fraction of hours observed, the means over night
    (00-06 h) and day (06-24 h) hours, and the means over weekdays and the
    weekend (hour 0 is Monday 00:00). A statistic with no observed hour (a
    variable missing all week) takes its training mean; the observed
    fraction of 0 flags it.

    Parameters
    ----------
    n_channels : int or None, default=None
        Variables per hour, to unflatten 2-D input (see
        :class:`~skicml.wearable.WearableEncoder`).
    channel_names : list of str or None, default=None
        Names of the variables, used by :meth:`get_feature_names_out`.

    Attributes
    ----------
    n_channels_ : int
    n_timesteps_ : int
    n_features_in_ : int
    fill_values_ : ndarray of shape (n_channels * 9,)
        Training means used for statistics that cannot be computed.
    statistics : tuple of str
        Class attribute: the names of the nine statistics, in the order in
        which each variable's columns list them (``"mean"``, ``"std"``,
        ``"min"``, ``"max"``, ``"observed"``, ``"night_mean"``,
        ``"day_mean"``, ``"weekday_mean"``, ``"weekend_mean"``).

    Examples
    --------
    >>> from skicml.datasets import make_wearable_cohort
    >>> from skicml.wearable import WeeklySummaryFeatures
    >>> X, meta, y_static, y_weekly = make_wearable_cohort(n_people=4, n_weeks=1, random_state=0)
    >>> WeeklySummaryFeatures().fit_transform(X).shape
    (4, 108)
    >>> WeeklySummaryFeatures.statistics[:3]
    ('mean', 'std', 'min')
    """

    statistics = _STATISTICS

    _parameter_constraints = {
        "n_channels": [Interval(Integral, 1, None, closed="left"), None],
        "channel_names": [list, tuple, None],
    }

    def __init__(self, n_channels=None, channel_names=None):
        self.n_channels = n_channels
        self.channel_names = channel_names

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the shapes and the fill values of ``X``."""
        weeks = validate_weeks(self, X, reset=True)
        self.n_timesteps_, self.n_channels_ = weeks.shape[1:]
        if self.channel_names is not None and len(self.channel_names) != self.n_channels_:
            raise ValueError(
                f"channel_names has {len(self.channel_names)} names for {self.n_channels_} variables."
            )
        features = self._summaries(weeks)
        with np.errstate(invalid="ignore"):
            fill = np.nanmean(np.where(np.isnan(features).all(axis=0), 0.0, features), axis=0)
        self.fill_values_ = np.nan_to_num(fill)
        return self

    def transform(self, X):
        """Summary features of shape ``(n_weeks, n_channels_ * 9)``."""
        check_is_fitted(self)
        weeks = validate_weeks(self, X, reset=False)
        features = self._summaries(weeks)
        return np.where(np.isnan(features), self.fill_values_, features)

    def _summaries(self, weeks):
        # float64 whatever X's dtype: sums and squares of large float32 values
        # (1e20) overflow float32 and would give inf features.
        weeks = weeks.astype(np.float64, copy=False)
        hours = np.arange(weeks.shape[1])
        night = hours % 24 < 6
        weekend = (hours // 24) % 7 >= 5
        observed = ~np.isnan(weeks)
        empty = np.full((len(weeks), weeks.shape[2]), np.nan)
        with warnings.catch_warnings():
            # "Mean of empty slice": variables missing all week are expected.
            warnings.simplefilter("ignore", RuntimeWarning)
            parts = [
                np.nanmean(weeks, axis=1),
                np.nanstd(weeks, axis=1),
                np.nanmin(weeks, axis=1),
                np.nanmax(weeks, axis=1),
                observed.mean(axis=1),
                np.nanmean(weeks[:, night], axis=1) if night.any() else empty,
                np.nanmean(weeks[:, ~night], axis=1),
                np.nanmean(weeks[:, ~weekend], axis=1),
                np.nanmean(weeks[:, weekend], axis=1) if weekend.any() else empty,
            ]
        # Columns grouped by variable: var0_mean, var0_std, ..., var1_mean, ...
        features = np.stack(parts, axis=-1).reshape(len(weeks), -1)
        if np.isinf(features).any():
            raise ValueError(
                f"{type(self).__name__}: the values of X are too large for summary statistics even in "
                f"float64 (max |X| = {np.nanmax(np.abs(weeks)):.3g}; their sums or squares overflow); "
                "rescale X (change its units) first."
            )
        return features

    def get_feature_names_out(self, input_features=None):
        """``<variable>_<statistic>`` for each output column."""
        check_is_fitted(self)
        names = self.channel_names or [f"x{i}" for i in range(self.n_channels_)]
        return np.asarray([f"{name}_{stat}" for name in names for stat in _STATISTICS], dtype=object)

    def __sklearn_tags__(self):
        tags = as_skicml_tags(super().__sklearn_tags__())
        tags.input_tags.allow_nan = True
        tags.three_d_input = True
        return tags

