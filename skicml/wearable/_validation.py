"""Input checks shared by the wearable estimators: weeks as 3-D or flattened 2-D arrays."""

import numpy as np
from sklearn.utils.validation import check_array, validate_data

__all__ = ["validate_weeks"]


def validate_weeks(estimator, X, *, reset, dtype=(np.float64, np.float32)):
    """Return ``X`` as a float array ``(n_weeks, T, V)`` with NaN for missing values.

    ``X`` is either a 3-D array ``(n_weeks, T, V)`` or a 2-D array with one
    flattened week per row, reshaped C-order to ``(T, V)`` with
    ``V = estimator.n_channels`` (``V = 1`` when ``n_channels`` is None).
    ``n_features_in_`` is the flattened width ``T * V`` in both cases.
    Infinite values and non-numeric data are errors; NaN is allowed.
    """
    name = type(estimator).__name__
    ndim = getattr(X, "ndim", None)
    if ndim is None and isinstance(X, (list, tuple)):
        ndim = np.ndim(X)
    if ndim == 3:
        X = check_array(X, allow_nd=True, dtype=list(dtype), ensure_all_finite="allow-nan",
                        input_name="X", estimator=name)
        n_weeks, length, n_channels = X.shape
        if n_channels == 0 or length == 0:
            raise ValueError(f"{name}: X of shape {X.shape} has no hours or no variables.")
        if estimator.n_channels is not None and n_channels != estimator.n_channels:
            raise ValueError(
                f"{name}: X has {n_channels} variables on its last axis but n_channels="
                f"{estimator.n_channels}."
            )
        if not reset:
            _check_week_shape(estimator, X)
        # Checked above already: only record (or compare) the flattened width.
        validate_data(estimator, X.reshape(n_weeks, length * n_channels), reset=reset, skip_check_array=True)
    else:
        flat = validate_data(estimator, X, reset=reset, dtype=list(dtype), ensure_all_finite="allow-nan")
        n_channels = estimator.n_channels or 1
        if flat.shape[1] % n_channels:
            raise ValueError(
                f"{name}: X has {flat.shape[1]} columns, which is not a whole number of hours "
                f"of n_channels={n_channels} variables; pass a 3-D array (n_weeks, T, V) or "
                f"set n_channels to the number of variables per hour."
            )
        X = flat.reshape(len(flat), flat.shape[1] // n_channels, n_channels)
    if not reset:
        _check_week_shape(estimator, X)
    # torch cannot wrap read-only buffers (memory-mapped input, for one).
    return np.require(X, requirements="W")


def _check_week_shape(estimator, X):
    expected = (estimator.n_timesteps_, estimator.n_channels_)
    if X.shape[1:] != expected:
        raise ValueError(
            f"{type(estimator).__name__} was fitted on weeks of {expected[0]} hours x {expected[1]} "
            f"variables; got {X.shape[1]} x {X.shape[2]}."
        )
