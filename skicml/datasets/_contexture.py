"""Synthetic data with a known answer for the contexture family.

Used by one family: ``contexture`` (its tests, examples and user guide; no
module of the family imports it).

:func:`make_context_blobs` draws points on a simple shape (well separated
blobs, a noisy circle, a Swiss roll) with two targets: one that varies slowly
along the shape, which a kNN or RBF context can explain with a few singular
functions (a *compatible* task), and one that oscillates quickly, which it
cannot (an *incompatible* task).

:func:`make_planted_spectrum` builds a finite joint distribution of ``X``
and a context variable ``A`` whose singular values and singular functions are
known exactly, so that an SVD of its expectation operator can be checked to
machine precision (contexture spec, section 5, item 2).
"""

import math

import numpy as np
from sklearn.utils import check_random_state

from ..utils.param_validation import Integral, Interval, Real, StrOptions, validate_params

__all__ = ["make_context_blobs", "make_planted_spectrum"]

_SHAPES = {"blobs": 2, "circle": 2, "swiss_roll": 3}


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_features": [Interval(Integral, 2, None, closed="left"), None],
        "shape": [StrOptions(set(_SHAPES))],
        "n_centers": [Interval(Integral, 2, None, closed="left")],
        "noise": [Interval(Real, 0, None, closed="left")],
        "frequency": [Interval(Real, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_context_blobs(n_samples=500, n_features=None, *, shape="blobs", n_centers=4, noise=0.05,
                       frequency=8, random_state=None):
    """Points on a shape with a smooth and a high-frequency target.

    The points lie on a latent shape, every coordinate gets Gaussian noise of
    standard deviation ``noise``, and features beyond the shape's own
    dimension are pure noise. Each shape has a latent coordinate from which
    the two targets are computed:

    - ``"blobs"``: ``n_centers`` clusters whose centres are evenly spaced on
      the unit circle of the first two features (so they are well separated
      for small ``noise``); each point is its centre plus ``noise`` times a
      standard normal draw ``z``. ``y_smooth`` is a value per cluster, evenly
      spaced in [-1, 1] (constant on clusters, as the top singular functions
      of a kNN context with small K are); ``y_rough`` is
      ``sin(frequency * z @ u)`` for a random unit direction ``u``, which
      varies only inside the clusters (with ``noise=0`` it is not a
      function of ``X`` at all).
    - ``"circle"``: angle ``theta`` uniform on [0, 2 pi), the point
      ``(cos theta, sin theta)``; ``y_smooth = cos(theta)`` (the lowest
      Fourier mode, which a local context learns first) and
      ``y_rough = cos(frequency * theta)``.
    - ``"swiss_roll"``: the roll ``(t cos t, h, t sin t)`` with ``t``
      uniform on [1.5 pi, 4.5 pi] and the height ``h`` uniform on [0, 21];
      with ``c = (t - 1.5 pi) / (3 pi)`` in [0, 1] the position along the
      roll, ``y_smooth = cos(pi c)`` and ``y_rough = cos(2 pi frequency c)``.

    Parameters
    ----------
    n_samples : int, default=500
        Number of points.
    n_features : int or None, default=None
        Number of features: at least the shape's dimension (2 for blobs and
        circle, 3 for the Swiss roll), which ``None`` selects.
    shape : {"blobs", "circle", "swiss_roll"}, default="blobs"
        The latent shape.
    n_centers : int, default=4
        Number of clusters (``shape="blobs"`` only; at least 2).
    noise : float, default=0.05
        Standard deviation of the Gaussian noise added to every feature
        (for blobs, the spread of each cluster). At least 0.
    frequency : float, default=8
        How fast ``y_rough`` oscillates along the latent coordinate (see
        above). At least 1.
    random_state : int, RandomState instance or None, default=None
        Seeds the points, the noise and the blobs' direction ``u``.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The points, float64.
    y_smooth : ndarray of shape (n_samples,)
        The compatible target, with values in [-1, 1].
    y_rough : ndarray of shape (n_samples,)
        The incompatible target, with values in [-1, 1].

    Examples
    --------
    >>> from skicml.datasets import make_context_blobs
    >>> X, y_smooth, y_rough = make_context_blobs(200, shape="circle", random_state=0)
    >>> X.shape, y_smooth.shape, y_rough.shape
    ((200, 2), (200,), (200,))
    >>> X, y_smooth, y_rough = make_context_blobs(100, 5, shape="swiss_roll", random_state=0)
    >>> X.shape
    (100, 5)
    """
    dim = _SHAPES[shape]
    if n_features is None:
        n_features = dim
    elif n_features < dim:
        raise ValueError(f"n_features must be at least {dim} for shape={shape!r}, got {n_features!r}.")
    rng = check_random_state(random_state)

    X = np.zeros((n_samples, n_features))
    if shape == "blobs":
        labels = rng.randint(n_centers, size=n_samples)
        angles = 2 * np.pi * np.arange(n_centers) / n_centers
        X[:, 0], X[:, 1] = np.cos(angles)[labels], np.sin(angles)[labels]
        z = rng.standard_normal((n_samples, n_features))
        X += noise * z
        u = rng.standard_normal(n_features)
        u /= np.linalg.norm(u)
        y_smooth = np.linspace(-1.0, 1.0, n_centers)[labels]
        y_rough = np.sin(frequency * (z @ u))
        return X, y_smooth, y_rough
    if shape == "circle":
        theta = rng.uniform(0.0, 2 * np.pi, size=n_samples)
        X[:, 0], X[:, 1] = np.cos(theta), np.sin(theta)
        y_smooth, y_rough = np.cos(theta), np.cos(frequency * theta)
    else:
        c = rng.uniform(0.0, 1.0, size=n_samples)
        t = 1.5 * np.pi * (1 + 2 * c)
        X[:, 0], X[:, 1], X[:, 2] = t * np.cos(t), rng.uniform(0.0, 21.0, size=n_samples), t * np.sin(t)
        y_smooth, y_rough = np.cos(np.pi * c), np.cos(2 * np.pi * frequency * c)
    X += noise * rng.standard_normal((n_samples, n_features))
    return X, y_smooth, y_rough


def _balanced_tree(n_leaves):
    """Internal nodes of a balanced binary tree over leaves 0..n_leaves-1, parents first.

    Each node is ``(leaves of its first child, leaves of its second child)``
    as two ranges; breadth-first order puts every parent before its children.
    """
    nodes, queue = [], [range(n_leaves)]
    while queue:
        leaves = queue.pop(0)
        if len(leaves) < 2:
            continue
        half = (len(leaves) + 1) // 2
        first, second = leaves[:half], leaves[half:]
        nodes.append((first, second))
        queue += [first, second]
    return nodes


def _haar_functions(nodes, weights):
    """Weighted Haar functions of the tree's nodes on its leaves, shape (n_leaves, n_nodes).

    The function of a node is constant on each of its two children, zero
    outside it, has mean 0 and second moment 1 under ``weights``; functions
    of different nodes are orthogonal because the partitions are nested.
    """
    f = np.zeros((len(weights), len(nodes)))
    for i, (first, second) in enumerate(nodes):
        w1, w2 = weights[list(first)].sum(), weights[list(second)].sum()
        f[list(first), i] = math.sqrt(w2 / (w1 * (w1 + w2)))
        f[list(second), i] = -math.sqrt(w1 / (w2 * (w1 + w2)))
    return f


@validate_params(
    {
        "n_samples": [Interval(Integral, 2, None, closed="left")],
        "n_anchors": [Interval(Integral, 2, None, closed="left"), None],
        "singular_values": ["array-like"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_planted_spectrum(n_samples=60, n_anchors=None, singular_values=(0.9, 0.6, 0.3, 0.1), *,
                          random_state=None):
    """A finite context ``P+(a | x)`` with exactly known singular values and functions.

    With ``P_X`` uniform over ``n_samples`` points and ``P_A`` uniform over
    ``n_anchors`` anchors, the joint distribution is

        P+(x_j, a_k) = (1 + sum_i s_i mu_i(x_j) nu_i(a_k)) / (n_samples n_anchors),

    where the ``mu_i`` (``nu_i``) have mean 0 and are orthonormal under the
    uniform weights. Its expectation operator therefore has the singular
    values ``1 = s_0 > s_1 >= ... >= s_r`` (then zeros), with ``mu_0 = nu_0 = 1``
    and the given ``mu_i``, ``nu_i``: the matrix
    ``Q = W / sqrt(n_samples * p)`` (``p = W.mean(axis=0) = 1 / n_anchors``)
    has exactly these singular values, with left singular vectors
    ``mu_i / sqrt(n_samples)`` and right ones ``nu_i / sqrt(n_anchors)``.

    How the entries stay non-negative: the rows and the anchors are split
    into ``r + 1`` groups of matching shares (group ``g`` holds the same
    fraction ``pi_g`` of the rows and of the anchors) and the groups are the
    leaves of a balanced binary tree. ``mu_i`` and ``nu_i`` are the same
    weighted Haar function of the ``i``-th internal node (breadth first, so a
    node gets a value no larger than its parent's). Then ``W`` is a mixture,
    with non-negative weights ``1 - s_1``, ``s_parent - s_node`` and
    ``s_parent`` of a leaf, of "draw the anchor uniformly from the anchors of
    the row's subtree" channels, so every entry is non-negative for any
    values in [0, 1]. Matching shares need ``r + 1 <= gcd(n_samples, n_anchors)``.

    Parameters
    ----------
    n_samples : int, default=60
        Number of points ``x_j`` (rows of ``W``); at least 2.
    n_anchors : int or None, default=None
        Number of anchors ``a_k`` (columns of ``W``); ``None`` takes
        ``n_samples``.
    singular_values : array-like of shape (r,), default=(0.9, 0.6, 0.3, 0.1)
        The planted ``s_1 ... s_r`` (``s_0 = 1`` excluded), each in [0, 1];
        they are sorted in decreasing order. ``r + 1`` must not exceed
        ``gcd(n_samples, n_anchors)`` (``n_samples`` when the two are
        equal). Equal values make the corresponding singular functions
        unique only up to a rotation of their span.
    random_state : int, RandomState instance or None, default=None
        Shuffles which rows and which anchors fall into each group, so that
        neither is ordered by the planted functions.

    Returns
    -------
    W : ndarray of shape (n_samples, n_anchors)
        The conditional ``W[j, k] = P+(a_k | x_j)``: non-negative, rows sum
        to 1, column means ``1 / n_anchors``.
    singular_values : ndarray of shape (r,)
        The planted values, in decreasing order.
    mu : ndarray of shape (n_samples, r)
        ``mu_i(x_j)``: mean 0, ``mu.T @ mu / n_samples`` is the identity.
    nu : ndarray of shape (n_anchors, r)
        ``nu_i(a_k)``: mean 0, ``nu.T @ nu / n_anchors`` is the identity.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.datasets import make_planted_spectrum
    >>> W, s, mu, nu = make_planted_spectrum(40, 20, (0.8, 0.5, 0.2), random_state=0)
    >>> W.shape, bool(W.min() >= 0), bool(np.allclose(W.sum(axis=1), 1))
    ((40, 20), True, True)
    >>> Q = W / np.sqrt(40 * W.mean(axis=0))
    >>> np.round(np.linalg.svd(Q, compute_uv=False)[:5], 12)
    array([1. , 0.8, 0.5, 0.2, 0. ])
    """
    n_anchors = n_samples if n_anchors is None else n_anchors
    try:
        s = np.asarray(singular_values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"singular_values must be a 1-D array of numbers, got {singular_values!r}.") from None
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"singular_values must be a non-empty 1-D array, got shape {s.shape}.")
    if not np.all(np.isfinite(s)) or s.min() < 0 or s.max() > 1:
        raise ValueError(f"singular_values must lie in [0, 1], got {s.tolist()}.")
    n_groups = s.size + 1
    shared = math.gcd(n_samples, n_anchors)
    if n_groups > shared:
        raise ValueError(
            f"{s.size} singular values need r + 1 = {n_groups} groups of rows and anchors in matching "
            f"shares, but gcd(n_samples, n_anchors) = gcd({n_samples}, {n_anchors}) = {shared}; pass at "
            f"most {shared - 1} values, or sizes with a larger common divisor (e.g. n_anchors=n_samples)."
        )
    s = np.sort(s)[::-1]
    rng = check_random_state(random_state)

    # Group g holds units[g] / shared of the rows and the same share of the anchors.
    units = np.full(n_groups, shared // n_groups)
    units[: shared % n_groups] += 1
    weights = units / shared
    f = _haar_functions(_balanced_tree(n_groups), weights)
    row_group = rng.permutation(np.repeat(np.arange(n_groups), units * (n_samples // shared)))
    anchor_group = rng.permutation(np.repeat(np.arange(n_groups), units * (n_anchors // shared)))
    mu, nu = f[row_group], f[anchor_group]
    W = (1.0 + (mu * s) @ nu.T) / n_anchors
    # Rounding can leave -1e-17 where an exact zero belongs (a singular value of 1).
    np.maximum(W, 0.0, out=W)
    return W, s.copy(), mu, nu
