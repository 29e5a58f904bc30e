"""The context score tau and the spectral decay rate, from a context's spectrum.

What a fitted :class:`~skicml.contexture.ContextureEmbedding` or
:class:`~skicml.contexture.NeuralContexture` computes from its own
eigenvalues, below both estimators and :mod:`skicml.contexture.metrics`
(which re-exports the public names): the metrics build a
``ContextureEmbedding`` to compute a spectrum, so the score cannot live there
without an import cycle.
"""

import math
import warnings
from numbers import Integral, Real

import numpy as np
from scipy.optimize import least_squares

from ..base import warn_user
from ..utils.param_validation import Interval, validate_params

__all__ = ["ContextScoreAbstainWarning", "context_tau", "spectral_decay_rate"]

# A squared singular value this close to 1 counts as 1: tau_d is then infinite.
_UNIT = 1.0 - 1e-12
# How far outside [0, 1] an eigenvalue may fall from rounding before it is refused.
_SLACK = 1e-6
# tau's minimum "sits at d0 - 1" when it falls in this last fraction of the d's considered.
_BOUNDARY_FRACTION = 0.05


class ContextScoreAbstainWarning(UserWarning):
    """The context score tau is too close to ``beta + 1`` to be trusted.

    The paper's metric is unreliable for extremely weak or extremely strong
    associations, where tau approaches ``beta + 1``; :func:`context_tau`
    warns with this category so that the warning can be filtered or turned
    into an error on its own.
    """


def _tau_at_boundary(d_star, n_curve):
    """Whether ``d_star`` sits at the end of a tau curve of ``n_curve`` values (``d = 1 .. d0 - 1``).

    The last 5% of the d's, and at least ``d0 - 1`` itself: there the curve
    is still falling where the spectrum was cut, the signature of a context
    too strong for ``d0`` (the paper's strong-context failure).
    """
    if n_curve < 2 or d_star < 1:
        return False
    return d_star >= n_curve - max(1, math.floor(_BOUNDARY_FRACTION * n_curve)) + 1


def _check_eigenvalues(eigenvalues, min_size=1):
    """The squared singular values as a float64 array in [0, 1], sorted in decreasing order."""
    try:
        lam = np.asarray(eigenvalues, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"eigenvalues must be a 1-D array of numbers, got {eigenvalues!r}.") from None
    if lam.ndim != 1 or lam.size < min_size:
        raise ValueError(f"eigenvalues must be a 1-D array of at least {min_size} values, got shape {lam.shape}.")
    if not np.all(np.isfinite(lam)):
        raise ValueError("eigenvalues contain NaN or infinity.")
    if lam.min() < -_SLACK or lam.max() > 1 + _SLACK:
        raise ValueError(
            "eigenvalues are squared singular values s_i^2 of a context and lie in [0, 1]; got values in "
            f"[{lam.min():g}, {lam.max():g}]."
        )
    return np.sort(np.clip(lam, 0.0, 1.0))[::-1]


@validate_params(
    {
        "eigenvalues": ["array-like"],
        "max_components": [Interval(Integral, 2, None, closed="left")],
        "beta": [Interval(Real, 0, None, closed="left")],
        "return_curve": ["boolean"],
        "abstain_tol": [Interval(Real, 0, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def context_tau(eigenvalues, max_components=512, beta=1.0, return_curve=False, abstain_tol=0.05):
    """The task-agnostic context score tau (paper, Eq. 4); lower is better.

    With ``d0 = min(max_components, len(eigenvalues))``::

        tau_d = 1 / (1 - s_{d+1}^2) + beta * (s_1^2 + ... + s_d^2) / (s_1^2 + ... + s_{d0}^2)

    for ``d = 1 ... d0 - 1``, and ``tau = min_d tau_d`` at ``d_star``, the
    embedding dimension the score predicts to be best. The first term is the
    approximation error of the compatible tasks (Theorem 16 with
    ``s_1 ~ 1``); the second stands for the error on the incompatible part
    plus the estimation error, bounded by ``beta``. ``tau_d >= 1``, and
    ``tau_d`` is infinite where ``s_{d+1}^2 >= 1 - 1e-12`` (a context whose
    kNN graph has several components, or a deterministic label context).

    Parameters
    ----------
    eigenvalues : array-like of shape (n_eigenvalues,)
        The squared singular values ``s_1^2, s_2^2, ...`` of the context,
        ``s_0 = 1`` excluded, each in [0, 1] (values within 1e-6 outside are
        clipped); sorted in decreasing order first. At least 2.
    max_components : int, default=512
        ``d0``, the largest embedding dimension considered (the paper's
        512); only the first ``d0`` eigenvalues are used. At least 2.
    beta : float, default=1.0
        Weight of the second term (the paper's 1). At least 0.
    return_curve : bool, default=False
        Whether to return ``tau_d`` for every ``d`` as well.
    abstain_tol : float, default=0.05
        A :class:`ContextScoreAbstainWarning` is issued when tau lies within
        this distance of ``beta + 1``, where the paper finds the score
        unreliable (abstain from ranking on it).

    Returns
    -------
    tau : float
        ``min_d tau_d``; ``inf`` when every ``tau_d`` is infinite, and
        ``beta + 1`` (with a warning) when all eigenvalues are 0.
    d_star : int
        The smallest ``d`` attaining the minimum (ties go to the smaller
        dimension); 0 when every ``tau_d`` is infinite, 1 when all
        eigenvalues are 0.
    curve : ndarray of shape (d0 - 1,)
        ``curve[d - 1] = tau_d``; only with ``return_curve=True``.

    Warns
    -----
    ContextScoreAbstainWarning
        When tau is within ``abstain_tol`` of ``beta + 1``, or all
        eigenvalues are 0; and when ``d_star`` sits at ``d0 - 1`` (in the
        last 5% of the d's considered, with at least 2 of them): the curve
        is still falling where the spectrum was cut, which is how the
        strong contexts the paper finds tau unreliable on show up (a few
        neighbours, a narrow kernel). Such a context is ranked worse than it
        may be; compare it with a few labels, or raise ``max_components``.

    Examples
    --------
    The reference values of the contexture spec (section 6):

    >>> from skicml.contexture.metrics import context_tau
    >>> tau, d_star, curve = context_tau([0.5, 0.25, 0.125, 0.0], return_curve=True)
    >>> round(tau, 4), d_star, curve.round(4).tolist()
    (1.9048, 1, [1.9048, 2.0, 2.0])

    Three disconnected clusters give ``s_1 = s_2 = 1``, so ``tau_1`` is
    infinite:

    >>> context_tau([1.0, 1.0, 0.3, 0.1], return_curve=True)[2].round(4).tolist()
    [inf, 2.2619, 2.0694]
    """
    lam = _check_eigenvalues(eigenvalues, min_size=2)
    lam = lam[: min(max_components, lam.size)]
    total = lam.sum()
    if total <= 0:
        warn_user(
            "All eigenvalues are 0 (X and the context are independent): tau is beta + 1 by convention and "
            "says nothing about the context; abstain from ranking on it.",
            ContextScoreAbstainWarning,
        )
        curve = np.full(lam.size - 1, beta + 1.0)
        tau, d_star = beta + 1.0, 1
    else:
        following = lam[1:]
        finite = following < _UNIT
        first = np.full(following.size, np.inf)
        first[finite] = 1.0 / (1.0 - following[finite])
        curve = first + beta * np.cumsum(lam)[:-1] / total
        if not np.any(np.isfinite(curve)):
            tau, d_star = math.inf, 0
        else:
            d_star = int(np.argmin(curve)) + 1
            tau = float(curve[d_star - 1])
        if abs(tau - (beta + 1.0)) <= abstain_tol:
            warn_user(
                f"tau = {tau:.4f} is within abstain_tol = {abstain_tol} of beta + 1 = {beta + 1.0:g}, where "
                "the score is unreliable (extremely weak or strong association): abstain from ranking "
                "contexts on it.",
                ContextScoreAbstainWarning,
            )
        elif _tau_at_boundary(d_star, curve.size):
            warn_user(
                f"tau is minimised at d = {d_star}, at the end of the d = 1 .. {curve.size} considered "
                f"(d0 = {lam.size}): tau_d is still falling where the spectrum is cut, the strong-context "
                "case where the paper finds tau unreliable (it ranks such contexts too low). Compare this "
                "context with a few labels, or raise max_components.",
                ContextScoreAbstainWarning,
            )
    if return_curve:
        return tau, d_star, curve
    return tau, d_star


@validate_params({"eigenvalues": ["array-like"]}, prefer_skip_nested_validation=True)
def _fitted_score(eigenvalues, max_components, beta):
    """``(tau, d_star, curve)`` of an estimator's fit, without the abstain warning.

    An abstaining score is still the score an estimator stores; the warning
    is for callers of :func:`context_tau`, not for every fit.
    """
    if eigenvalues.size < 2:
        return float("inf"), 1, np.full(max(eigenvalues.size - 1, 0), np.inf)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tau, d_star, curve = context_tau(eigenvalues, max_components=max_components, beta=beta, return_curve=True)
    return float(tau), int(d_star), np.asarray(curve, dtype=np.float64)


def spectral_decay_rate(eigenvalues):
    """Decay rate ``lambda`` of the spectrum, from ``s_i^2 ~ exp(-lambda i)``.

    Non-linear least squares over ``i = 0, 1, ..., n``, with ``s_0^2 = 1``
    prepended to the given values: ``lambda`` minimises
    ``sum_i (exp(-lambda i) - s_i^2)^2`` over ``lambda >= 0``. A large
    ``lambda`` means a weak association between ``X`` and the context (the
    paper, section 5).

    Parameters
    ----------
    eigenvalues : array-like of shape (n_eigenvalues,)
        The squared singular values ``s_1^2, s_2^2, ...`` (``s_0``
        excluded), each in [0, 1]; sorted in decreasing order first.

    Returns
    -------
    decay_rate : float
        ``lambda >= 0``; ``inf`` when all eigenvalues are 0 (the fit
        ``exp(-lambda i)`` reaches them only in the limit).

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.contexture.metrics import spectral_decay_rate
    >>> round(spectral_decay_rate(np.exp(-0.5 * np.arange(1, 20))), 6)
    0.5
    """
    lam = _check_eigenvalues(eigenvalues)
    if not np.any(lam > 0):
        return math.inf
    y = np.concatenate([[1.0], lam])
    i = np.arange(y.size, dtype=np.float64)

    def loss(rate):
        return np.sum((np.exp(-np.multiply.outer(rate, i)) - y) ** 2, axis=-1)

    # The loss is flat for large rates and need not be convex, so a grid
    # finds the basin first and least squares polishes within it.
    grid = np.concatenate([[0.0], np.geomspace(1e-6, 1e3, 400)])
    start = grid[np.argmin(loss(grid))]
    fit = least_squares(
        lambda t: np.exp(-t[0] * i) - y,
        x0=[start],
        jac=lambda t: (-i * np.exp(-t[0] * i))[:, None],
        bounds=(0.0, np.inf),
        xtol=1e-12,
        ftol=1e-12,
        gtol=1e-12,
    )
    # Least squares steps strictly inside the bounds; the boundary may be the optimum.
    rate = float(fit.x[0])
    return 0.0 if loss(0.0) <= loss(rate) else rate
