"""Checks of user input that several families share.

Parameter rules live in :mod:`skicml.utils.param_validation`; this module
holds the checks of the data itself that scikit-learn's helpers leave to the
estimator.
"""

__all__ = ["check_no_missing_labels"]


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
