"""Analysis helpers of Whitened CLIP: normality checks and spherical paths."""

import numbers

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["full_circle", "normality_report", "slerp"]

_TESTS = ("anderson", "dagostino", "shapiro", "standard")


def _pvalue(test, x):
    if test == "anderson":
        return float(stats.anderson(x, dist="norm", method="interpolate").pvalue)
    if test == "dagostino":
        return float(stats.normaltest(x).pvalue)
    if test == "standard":
        return float(stats.kstest(x, "norm").pvalue)
    return float(stats.shapiro(x).pvalue)


def normality_report(Z, n_groups=20, group_size=250, alpha=0.05, tests=("anderson", "dagostino")):
    """Per-feature normality pass rates of whitened embeddings (paper section 3).

    The rows of ``Z`` are cut, in order, into ``n_groups`` consecutive groups
    of ``group_size`` rows (fewer groups when ``Z`` is too short); every test
    is run on every feature of every group, and a feature passes a group when
    the test's p-value exceeds ``alpha``. For truly Gaussian data the pass
    rates are close to ``1 - alpha`` (0.947 and 0.946 for Anderson-Darling
    and D'Agostino-Pearson at alpha 0.05 in the spec's check).

    Parameters
    ----------
    Z : array-like of shape (n_samples, n_features)
        Whitened embeddings, e.g. ``WhiteningLikelihood().fit_transform(X)``.
        Shuffle the rows first if their order carries structure.
    n_groups : int, default=20
        Groups to test (the paper splits 5000 embeddings into 20 of 250).
    group_size : int, default=250
        Rows per group; at least 20 (D'Agostino-Pearson needs 8, and its
        kurtosis test warns below 20).
    alpha : float in (0, 1), default=0.05
        Significance level.
    tests : sequence of {"anderson", "dagostino", "shapiro", "standard"}, default=("anderson", "dagostino")
        ``"anderson"`` is Anderson-Darling with an interpolated p-value
        (:func:`scipy.stats.anderson` with ``method="interpolate"``; p-values
        are clipped to [0.01, 0.15], which is fine at alpha 0.05),
        ``"dagostino"`` is D'Agostino-Pearson (:func:`scipy.stats.normaltest`),
        ``"shapiro"`` is Shapiro-Wilk. These three test the *shape* of a
        normal distribution, with its mean and variance estimated from the
        group, so they cannot tell raw features from whitened ones when the
        raw ones are already bell-shaped. ``"standard"`` is the
        Kolmogorov-Smirnov test against the *standard* normal N(0, 1)
        (:func:`scipy.stats.kstest`): the paper's "identically distributed
        N(0, 1)" claim, which raw features (other means and scales) fail.

    Returns
    -------
    pandas.DataFrame
        One row per feature, one column per test: the fraction of groups in
        which the feature passed. ``report.mean()`` gives the overall pass
        rates; ``report.attrs`` records ``n_groups``, ``group_size`` and
        ``alpha``.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.clip import normality_report
    >>> Z = np.random.default_rng(0).normal(size=(2000, 3))
    >>> report = normality_report(Z, n_groups=8, group_size=250)
    >>> list(report.columns), report.shape
    (['anderson', 'dagostino'], (3, 2))
    >>> bool(report.mean().min() > 0.7)
    True
    """
    Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim != 2:
        raise ValueError(f"Z must be a 2-D array of whitened embeddings; got shape {Z.shape}.")
    if not np.isfinite(Z).all():
        raise ValueError("Z contains NaN or infinity.")
    for name, value in (("n_groups", n_groups), ("group_size", group_size)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name}={value!r}; expected a positive int.")
    if group_size < 20:
        raise ValueError(f"group_size={group_size} is too small for the normality tests; use at least 20.")
    if not isinstance(alpha, numbers.Real) or not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha={alpha!r}; expected a float in (0, 1).")
    tests = (tests,) if isinstance(tests, str) else tuple(tests)
    unknown = [t for t in tests if t not in _TESTS]
    if unknown or not tests:
        raise ValueError(f"tests={tests!r}; expected a non-empty sequence of {list(_TESTS)}.")
    groups = min(n_groups, Z.shape[0] // group_size)
    if groups == 0:
        raise ValueError(
            f"Z has {Z.shape[0]} rows, fewer than group_size={group_size}; pass a smaller group_size."
        )
    passed = np.zeros((Z.shape[1], len(tests)))
    for g in range(groups):
        block = Z[g * group_size:(g + 1) * group_size]
        for j in range(Z.shape[1]):
            for t, test in enumerate(tests):
                passed[j, t] += _pvalue(test, block[:, j]) > alpha
    report = pd.DataFrame(passed / groups, columns=list(tests))
    report.index.name = "feature"
    report.attrs.update(n_groups=groups, group_size=group_size, alpha=alpha)
    return report


def slerp(a, b, t):
    r"""Spherical linear interpolation between two vectors (paper section 2.5).

    :math:`\mathrm{slerp}(t) = \frac{\sin((1-t)\Omega)}{\sin\Omega}\,a +
    \frac{\sin(t\Omega)}{\sin\Omega}\,b`, with :math:`\Omega` the angle
    between ``a`` and ``b``. ``t`` outside [0, 1] extrapolates along the same
    great circle. Meant for whitened embeddings; map the result back with
    :meth:`WhiteningLikelihood.inverse_transform`. When ``a`` and ``b`` point
    the same way (:math:`\sin\Omega \approx 0`) it falls back to linear
    interpolation; opposite vectors raise, since no great circle is defined.

    Parameters
    ----------
    a, b : array-like of shape (n_features,)
    t : float or array-like of shape (n_steps,)

    Returns
    -------
    ndarray of shape (n_features,) for a scalar ``t``, else (n_steps, n_features)

    Examples
    --------
    >>> from skicml.clip import slerp
    >>> slerp([1.0, 0.0], [0.0, 1.0], 0.5).round(4)
    array([0.7071, 0.7071])
    """
    a, b = _check_pair(a, b)
    scalar = np.ndim(t) == 0
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))[:, None]
    if not np.isfinite(t).all():
        raise ValueError("t must be finite.")
    omega, sin_omega = _angle(a, b)
    if sin_omega < 1e-10:
        if np.dot(a, b) < 0:
            raise ValueError("a and b point in opposite directions; the great circle is not defined.")
        out = (1.0 - t) * a + t * b
    else:
        out = (np.sin((1.0 - t) * omega) * a + np.sin(t * omega) * b) / sin_omega
    return out[0] if scalar else out


def full_circle(a, b, step_deg=5.0, whitener=None):
    """Points along the whole great circle through ``a`` and ``b`` (circle_slerp.py).

    For each angle ``theta`` in ``0, step_deg, ..., 360`` degrees from ``a``
    towards ``b``, the point ``slerp(a, b, theta / omega)`` where ``omega`` is
    the angle between them; the last point returns to ``a``. With
    ``whitener`` (a fitted :class:`WhiteningLikelihood`), ``a`` and ``b`` are
    raw embeddings: they are whitened first and the path is mapped back with
    ``whitener.inverse_transform``, as in the official script. Without it the
    path is computed on ``a`` and ``b`` as given (whitened, or raw for the
    paper's unwhitened baseline).

    Parameters
    ----------
    a, b : array-like of shape (n_features,)
    step_deg : float, default=5.0
        Angular step in degrees; must divide into (0, 360].
    whitener : WhiteningLikelihood or None, default=None

    Returns
    -------
    ndarray of shape (n_steps, n_features)
        ``n_steps = floor(360 / step_deg) + 1`` rows.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.clip import full_circle
    >>> path = full_circle([1.0, 0.0], [0.0, 1.0], step_deg=90)
    >>> np.round(path, 6) + 0.0
    array([[ 1.,  0.],
           [ 0.,  1.],
           [-1.,  0.],
           [ 0., -1.],
           [ 1.,  0.]])
    """
    if not isinstance(step_deg, numbers.Real) or not 0.0 < step_deg <= 360.0:
        raise ValueError(f"step_deg={step_deg!r}; expected a number of degrees in (0, 360].")
    if whitener is not None:
        a = whitener.transform(np.asarray(a, dtype=np.float64).reshape(1, -1))[0]
        b = whitener.transform(np.asarray(b, dtype=np.float64).reshape(1, -1))[0]
    a, b = _check_pair(a, b)
    omega, sin_omega = _angle(a, b)
    if sin_omega < 1e-10:
        raise ValueError("a and b are parallel; they do not define a great circle.")
    degrees = np.arange(0.0, 360.0 + 1e-9, step_deg)
    path = slerp(a, b, degrees / np.degrees(omega))
    return whitener.inverse_transform(path) if whitener is not None else path


def _check_pair(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"a and b must be 1-D vectors of the same length; got shapes {a.shape} and {b.shape}.")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("a and b must be finite (no NaN or infinity).")
    if not (np.any(a) and np.any(b)):
        raise ValueError("a and b must be non-zero vectors.")
    return a, b


def _angle(a, b):
    cos = np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))
    omega = float(np.arccos(np.clip(cos, -1.0, 1.0)))
    return omega, float(np.sin(omega))
