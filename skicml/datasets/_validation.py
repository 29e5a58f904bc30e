"""Argument checks shared by the generators and readers of :mod:`skicml.datasets`.

Functions, not estimators, so scikit-learn's declared parameter constraints
do not apply; these keep the messages of every ``make_*`` / ``load_*`` alike:
the argument's name, what was expected, what was received.
"""

import numbers

import numpy as np

__all__ = ["NAMES", "check_int", "check_names", "check_real", "is_real_in"]

#: The declared rule of an argument that :func:`check_names` reads: one name,
#: several, or None.
NAMES = [str, "array-like", None]


def check_int(value, name, low):
    """``value`` as an ``int`` of at least ``low``.

    Parameters
    ----------
    value : object
    name : str
        The argument's name, for the message.
    low : int
        Smallest allowed value.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``value`` is not an integer (``bool`` is not one) or is below
        ``low``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}.")
    return int(value)


def is_real_in(value, low, high, high_inclusive=True):
    """Whether ``value`` is a finite real number (not a ``bool``) in ``[low, high]``.

    Parameters
    ----------
    value : object
    low, high : float
        Bounds; ``low`` is always included.
    high_inclusive : bool, default=True
        Whether ``high`` is allowed.

    Returns
    -------
    bool
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = ok and np.isfinite(value) and value >= low
    return bool(ok and (value <= high if high_inclusive else value < high))


def check_real(value, name, low, high, high_inclusive=True):
    """``value`` as a ``float`` in ``[low, high]`` (or ``[low, high)``).

    Parameters
    ----------
    value : object
    name : str
        The argument's name, for the message.
    low, high : float
        Bounds; ``low`` is always included.
    high_inclusive : bool, default=True
        Whether ``high`` is allowed.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``value`` is not a finite real number in the interval.
    """
    if not is_real_in(value, low, high, high_inclusive):
        bracket = "]" if high_inclusive else ")"
        raise ValueError(f"{name} must be a number in [{low}, {high}{bracket}, got {value!r}.")
    return float(value)


def check_names(value, name, known, default=None, *, unique=True):
    """A selection of names from ``known``, as a tuple.

    Parameters
    ----------
    value : str, sequence of str or None
        One name, several, or ``None`` for ``default``.
    name : str
        The argument's name, for the message.
    known : sequence of str
        The names allowed.
    default : sequence of str or None, default=None
        The selection ``None`` stands for; ``None`` takes all of ``known``.
    unique : bool, default=True
        Whether a name may appear only once.

    Returns
    -------
    tuple of str

    Raises
    ------
    ValueError
        If the selection is empty, names something not in ``known`` or
        (with ``unique=True``) repeats a name.
    """
    if value is None:
        return tuple(known if default is None else default)
    value = (value,) if isinstance(value, str) else tuple(value)
    unknown = [v for v in value if v not in known]
    if not value or unknown:
        raise ValueError(
            f"{name}={value!r}: unknown or empty; expected a non-empty selection of {list(known)}."
        )
    if unique and len(set(value)) != len(value):
        raise ValueError(f"{name}={value!r} has duplicates.")
    return value
