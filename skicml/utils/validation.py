"""Checks of user input that several families share.

Parameter rules live in :mod:`skicml.utils.param_validation`; this module
holds the checks of the data itself that scikit-learn's helpers leave to the
estimator.
"""

__all__ = ["check_no_missing_labels", "check_regression_targets"]

import numpy as np


def check_no_missing_labels(y):
    """Refuse class labels that are missing (``None`` or NaN in an object array).

    scikit-learn's ``check_classification_targets`` lets them through and
    numpy then fails sorting the classes with "'<' not supported"; this says
    what is wrong instead.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Labels, after ``column_or_1d``.

    Raises
    ------
    ValueError
        Naming how many labels are missing and the first one's index.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.utils.validation import check_no_missing_labels
    >>> check_no_missing_labels(np.array(["a", "b"], dtype=object))
    >>> check_no_missing_labels(np.array(["a", None], dtype=object))
    Traceback (most recent call last):
    ...
    ValueError: y contains missing labels (None or NaN) at 1 position(s), the first at index 1; ...
    """
    if y.dtype != object:
        return
    missing = [i for i, label in enumerate(y) if label is None or (isinstance(label, float) and label != label)]
    if missing:
        raise ValueError(
            f"y contains missing labels (None or NaN) at {len(missing)} position(s), the first at "
            f"index {missing[0]}; every training row needs a class label: drop those rows or "
            "give them a label."
        )


def check_regression_targets(y, n_samples=None, *, multi_output=False, allow_constant=True):
    """Regression targets as a float64 array, or an error saying what is wrong with them.

    Parameters
    ----------
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        A column vector ``(n, 1)`` is accepted as 1-D, with scikit-learn's
        ``DataConversionWarning``, when ``multi_output`` is False.
    n_samples : int or None, default=None
        Rows of ``X``; a different number of targets raises.
    multi_output : bool, default=False
        Accept 2-D targets of several columns.
    allow_constant : bool, default=True
        ``False`` refuses targets that all have one value (a model that
        standardises them has nothing to learn).

    Returns
    -------
    ndarray of float64

    Raises
    ------
    ValueError
        For ``None``, complex, non-numeric, empty, wrongly shaped, NaN,
        infinite or (with ``allow_constant=False``) constant targets.

    Examples
    --------
    >>> from skicml.utils.validation import check_regression_targets
    >>> check_regression_targets([1, 2.5])
    array([1. , 2.5])
    >>> check_regression_targets([1.0, float("nan")])
    Traceback (most recent call last):
    ...
    ValueError: y contains NaN or infinite values: 1 NaN and 0 infinite, the first at index 1; ...
    """
    if y is None:
        raise ValueError("A regressor requires y to be passed, but the target y is None.")
    y = np.asarray(y)
    if np.iscomplexobj(y):
        raise ValueError("Complex data not supported: y holds complex numbers; regression targets must be real.")
    if y.dtype == object or not np.issubdtype(y.dtype, np.number):
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"y must be numeric for regression, got dtype {y.dtype}.") from None
    y = y.astype(np.float64)
    if not multi_output and y.ndim == 2 and y.shape[1] == 1:
        from sklearn.utils.validation import column_or_1d

        y = column_or_1d(y, warn=True)  # scikit-learn's DataConversionWarning
    if y.ndim != 1 and not (multi_output and y.ndim == 2):
        expected = "1-D or 2-D" if multi_output else "1-D, one target per row"
        raise ValueError(f"y must be {expected}, got shape {y.shape}.")
    if len(y) == 0:
        raise ValueError("y is empty; at least one target is needed.")
    if n_samples is not None and len(y) != n_samples:
        raise ValueError(f"X has {n_samples} rows but y has {len(y)} targets.")
    finite = np.isfinite(y)
    if not finite.all():
        first = int(np.flatnonzero(~finite.reshape(len(y), -1).all(axis=1))[0])
        raise ValueError(
            f"y contains NaN or infinite values: {int(np.isnan(y).sum())} NaN and {int(np.isinf(y).sum())} "
            f"infinite, the first at index {first}; drop those rows or impute their targets."
        )
    if not allow_constant and len(y) > 1 and np.ptp(y, axis=0).max() == 0:
        raise ValueError(
            f"y is constant (every target is {y.flat[0]!r}): there is nothing to regress; the "
            "prediction is that constant."
        )
    return y
