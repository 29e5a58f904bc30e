"""Point-cloud input of the pointcloud domain, shared by its estimators.

:func:`check_point_clouds` turns what a user may pass (an ``(n, N, 3)``
array, a list of clouds of different sizes, clouds with extra channels, or
the flattened 2-D rows scikit-learn's checks feed) into one float32 array of
``n_points`` points per cloud, or a clear error. :func:`normalize_point_clouds`
centres clouds and scales them into the unit sphere, and
:func:`invariant_start_index` picks a first farthest-point-sampling point
that does not depend on the order of the points.
"""

import numbers
import zlib

import numpy as np
import torch
from sklearn.utils import check_array
from sklearn.utils.validation import validate_data

from ..base import warn_user
from ..ops import farthest_point_sample
from ._model import invariant_start_index, order_free_centroid

__all__ = ["check_point_clouds", "normalize_point_clouds", "validate_point_clouds"]


def _name_of(estimator_name):
    if estimator_name is None or isinstance(estimator_name, str):
        return estimator_name or "check_point_clouds"
    return type(estimator_name).__name__


def _warn_channels(name, n_channels):
    warn_user(
        f"{name}: X has {n_channels} channels per point; only the first 3 (x, y, z) are used, the other "
        f"{n_channels - 3} (normals, colours, ...) are ignored.",
        UserWarning,
    )


def _check_finite(clouds, name):
    """Refuse NaN or infinite coordinates, naming the first cloud that has them."""
    if isinstance(clouds, np.ndarray):
        bad = np.flatnonzero(~np.isfinite(clouds).all(axis=(1, 2)))
    else:
        bad = [i for i, cloud in enumerate(clouds) if not np.isfinite(cloud).all()]
    if len(bad):
        raise ValueError(
            f"{name}: X has NaN or infinite coordinates (or values too large for float32) in {len(bad)} "
            f"sample(s), the first at index {bad[0]}; every coordinate must be a finite number."
        )


def _cloud_list(X, name, warn):
    """The clouds of a list of ``(N_i, C)`` arrays, each float32 ``(N_i, 3)``."""
    clouds, n_channels = [], 3
    for i, item in enumerate(X):
        try:
            cloud = check_array(item, dtype="numeric", ensure_all_finite=False, ensure_min_samples=0,
                                ensure_min_features=0, estimator=name, input_name=f"X[{i}]")
        except (TypeError, ValueError) as error:
            raise type(error)(f"{name}: point cloud {i} of X: {error}") from None
        if cloud.shape[1] < 3:
            raise ValueError(
                f"{name}: point cloud {i} of X has shape {cloud.shape}; expected (n_points, 3) xyz "
                f"coordinates, got {cloud.shape[1]} per point."
            )
        if cloud.shape[0] == 0:
            raise ValueError(f"{name}: point cloud {i} of X has no points; every cloud needs at least one.")
        n_channels = max(n_channels, cloud.shape[1])
        with np.errstate(over="ignore"):
            clouds.append(np.ascontiguousarray(cloud[:, :3], dtype=np.float32))
    if warn and n_channels > 3:
        _warn_channels(name, n_channels)
    return clouds


def _cloud_array(X, name, warn):
    """The clouds of an ``(n, N, C)`` or flattened ``(n, F)`` array, float32 ``(n, N, 3)``."""
    if getattr(X, "ndim", None) == 1:
        raise ValueError(
            f"{name}: X is 1-D (shape {X.shape}); expected point clouds (n_samples, n_points, 3), a list of "
            "(n_points, 3) arrays, or 2-D flattened xyz rows (n_samples, 3 * n_points). Reshape your data "
            "with X.reshape(1, -1) if it is a single sample."
        )
    array = check_array(X, dtype="numeric", ensure_all_finite=False, allow_nd=True, estimator=name)
    if array.ndim > 3:
        raise ValueError(
            f"{name}: X has shape {array.shape}; expected point clouds (n_samples, n_points, 3), a list of "
            "(n_points, 3) arrays, or flattened xyz rows (n_samples, 3 * n_points)."
        )
    if array.ndim == 2:
        # Flattened xyz rows, zero-padded to whole points: (20, 2) rows are
        # clouds of one point (x, y, 0).
        n, F = array.shape
        pad = -F % 3
        if pad:
            array = np.concatenate([array, np.zeros((n, pad), dtype=array.dtype)], axis=1)
        array = array.reshape(n, -1, 3)
    if array.shape[2] < 3:
        raise ValueError(
            f"{name}: X has shape {array.shape}; the last dimension holds the coordinates of each point and "
            f"must be 3 (x, y, z), got {array.shape[2]}."
        )
    if array.shape[1] == 0:
        raise ValueError(f"{name}: X has shape {array.shape}: point clouds with no points.")
    if array.shape[2] > 3:
        if warn:
            _warn_channels(name, array.shape[2])
        array = array[:, :, :3]
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(array, dtype=np.float32)


def _as_cloud_list(X):
    """A 1-D object array of arrays (``np.array([cloud_a, cloud_b], dtype=object)`` of clouds of different
    sizes) as the list of clouds it holds; anything else as it is."""
    if (isinstance(X, np.ndarray) and X.dtype == object and X.ndim == 1 and X.size
            and all(np.ndim(item) >= 1 for item in X)):
        return list(X)
    return X


def _is_cloud_list(X, name):
    if not isinstance(X, (list, tuple)):
        return False
    if len(X) == 0:
        raise ValueError(f"{name}: X is empty; expected at least one point cloud.")
    try:
        dims = {np.ndim(item) for item in X}
    except ValueError:  # ragged rows
        dims = {None}
    if dims == {2}:
        return True
    if dims <= {0, 1}:
        return False  # rows of a 2-D array
    raise ValueError(
        f"{name}: X is a list whose items are not all (n_points, 3) point clouds; expected a list of "
        "(n_points, 3) arrays, an (n_samples, n_points, 3) array or flattened xyz rows."
    )


def _fps(clouds, n_points):
    """``n_points`` farthest points of each cloud of ``clouds`` (B, N, 3), N >= n_points."""
    points = torch.from_numpy(clouds)
    index = farthest_point_sample(points, n_points, start_index=invariant_start_index(points))
    return np.take_along_axis(clouds, index.numpy()[..., None], axis=1)


def _upsample(cloud, n_points):
    """Every point of ``cloud`` (N, 3), N < n_points, once, then a random draw of the rest.

    The points are first put in lexicographic order and the draw is seeded
    from their bytes, so the result depends only on the cloud, neither on
    the order of its points nor on the other clouds of the batch."""
    cloud = cloud[np.lexsort(cloud.T[::-1])]
    rng = np.random.RandomState(zlib.crc32(cloud.tobytes()) ^ n_points)
    extra = rng.randint(0, len(cloud), size=n_points - len(cloud))
    return np.concatenate([cloud, cloud[extra]])


def _resample(clouds, n_points):
    """Clouds of exactly ``n_points`` points from clouds (a list or (n, N, 3) array) of any size."""
    out = np.empty((len(clouds), n_points, 3), dtype=np.float32)
    by_size = {}
    for i, cloud in enumerate(clouds):
        by_size.setdefault(len(cloud), []).append(i)
    for size, rows in by_size.items():
        group = clouds[rows] if isinstance(clouds, np.ndarray) else np.stack([clouds[i] for i in rows])
        if size == n_points:
            out[rows] = group
        elif size > n_points:
            out[rows] = _fps(group, n_points)
        else:
            out[rows] = np.stack([_upsample(cloud, n_points) for cloud in group])
    return out


def check_point_clouds(X, *, n_points, estimator_name, reset_channels_warning=True):
    """Point clouds as one ``(n_samples, n_points, 3)`` float32 array, or a clear error.

    Accepted input:

    - an ``(n_samples, N, 3)`` array;
    - a list (or tuple) of ``(N_i, 3)`` arrays of varying ``N_i``, or a 1-D
      object array of them (what ``np.array(clouds, dtype=object)`` makes of
      clouds of different sizes);
    - ``(n_samples, N, C)`` arrays (or ``(N_i, C)`` clouds) with ``C > 3``:
      the first three channels are the coordinates, the others (normals,
      colours) are dropped with a :class:`UserWarning`;
    - a 2-D ``(n_samples, F)`` array of flattened xyz rows (what
      scikit-learn's estimator checks feed): each row is a cloud of
      ``ceil(F / 3)`` points, zero-padded to whole points, so ``F = 2`` gives
      one point ``(x, y, 0)``.

    Every cloud then gets exactly ``n_points`` points: a cloud of that size is
    kept as it is; a larger one is reduced by farthest point sampling
    (:func:`skicml.ops.farthest_point_sample`, started at
    :func:`invariant_start_index`, so the points chosen do not depend on the
    order of the input points); a smaller one keeps all its points and adds
    a random draw of them, with replacement, seeded from the cloud's own
    coordinates: deterministic, independent of point order and of the other
    clouds in the batch (so a cloud gives the same result alone or in any
    batch).

    Parameters
    ----------
    X : array-like or list of array-like
        The point clouds, as above.
    n_points : int
        Points per output cloud (at least 1).
    estimator_name : str
        Who is checking, named at the start of every message.
    reset_channels_warning : bool, default=True
        Whether to warn when channels beyond x, y, z are dropped; an
        estimator passes True in ``fit`` and False when it checks the input
        of later calls, so that a fitted model warns once.

    Returns
    -------
    ndarray of shape (n_samples, n_points, 3), dtype float32

    Raises
    ------
    ValueError
        For empty input, 1-D or 4-D arrays, fewer than 3 coordinates per
        point, clouds without points, NaN or infinite coordinates (naming
        the first sample that has them) and non-numeric data (a
        ``TypeError`` for objects that are not numbers).

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.pointcloud._input import check_point_clouds
    >>> rng = np.random.RandomState(0)
    >>> clouds = [rng.normal(size=(100, 3)), rng.normal(size=(20, 3))]
    >>> check_point_clouds(clouds, n_points=64, estimator_name="demo").shape
    (2, 64, 3)
    >>> check_point_clouds(np.ones((5, 2)), n_points=4, estimator_name="demo")[0]
    array([[1., 1., 0.],
           [1., 1., 0.],
           [1., 1., 0.],
           [1., 1., 0.]], dtype=float32)
    """
    name = _name_of(estimator_name)
    X = _as_cloud_list(X)
    if isinstance(n_points, bool) or not isinstance(n_points, numbers.Integral) or n_points < 1:
        raise ValueError(f"{name}: n_points must be an integer >= 1, got {n_points!r}.")
    if _is_cloud_list(X, name):
        clouds = _cloud_list(X, name, reset_channels_warning)
    else:
        clouds = _cloud_array(X, name, reset_channels_warning)
    _check_finite(clouds, name)
    return _resample(clouds, int(n_points))


def _centred_in_unit_sphere(x):
    """(n, N, 3) float tensor -> each cloud centred, scaled into the unit sphere."""
    wide = x.to(torch.float64)
    centroid = order_free_centroid(x)
    centred = wide - centroid
    radius = (centred * centred).sum(-1).amax(dim=1).sqrt()
    # A cloud whose extent is within rounding of its coordinates (identical
    # points) has no shape to scale: it goes to the origin.
    scale = wide.abs().amax(dim=(1, 2))
    eps = max(torch.finfo(x.dtype).eps, x.shape[1] * torch.finfo(torch.float64).eps)
    flat = radius <= 4 * eps * scale
    out = torch.where(flat[:, None, None], 0.0, centred / torch.where(flat, 1.0, radius)[:, None, None])
    return out.to(x.dtype)


def normalize_point_clouds(clouds):
    """Centre each cloud at its centroid and scale it so its farthest point is at distance 1.

    A cloud of identical points (no extent beyond rounding) is mapped to the
    origin instead of being divided by zero. The result does not depend on
    the order of the points (the centroid is summed in a fixed order), and
    a translated or uniformly scaled cloud gives the same result up to
    rounding.

    Parameters
    ----------
    clouds : ndarray or tensor of shape (n_samples, N, 3), or list of (N_i, 3) arrays
        Float arrays and tensors keep their dtype, other input becomes
        float32.

    Returns
    -------
    ndarray, tensor or list
        Of the input's kind and shape.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.pointcloud._input import normalize_point_clouds
    >>> unit = normalize_point_clouds(np.array([[[0., 0., 0.], [4., 0., 0.]]]))
    >>> unit.tolist()
    [[[-1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]]
    >>> normalize_point_clouds(np.full((1, 3, 3), 7.0)).tolist()
    [[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]
    """
    if isinstance(clouds, (list, tuple)):
        return [normalize_point_clouds(np.asarray(cloud)[None])[0] for cloud in clouds]
    if isinstance(clouds, torch.Tensor):
        x = clouds if clouds.is_floating_point() else clouds.to(torch.float32)
        if x.ndim != 3 or x.shape[-1] != 3:
            raise ValueError(f"normalize_point_clouds: expected clouds of shape (n, N, 3), got {tuple(x.shape)}.")
        return _centred_in_unit_sphere(x)
    array = np.asarray(clouds)
    if not np.issubdtype(array.dtype, np.floating):
        array = array.astype(np.float32)
    if array.ndim != 3 or array.shape[-1] != 3:
        raise ValueError(f"normalize_point_clouds: expected clouds of shape (n, N, 3), got {array.shape}.")
    return _centred_in_unit_sphere(torch.from_numpy(np.ascontiguousarray(array))).numpy()


def _check_group_size(X, group_size, name):
    """Refuse clouds with fewer points than a neighbourhood holds (flat rows are exempt: padded by design)."""
    if group_size is None:
        return
    if isinstance(X, (list, tuple)):
        sizes = [len(cloud) for cloud in X]
    else:
        # Input of another rank is left to check_point_clouds, which names the expected shapes.
        sizes = [np.shape(X)[1]] * np.shape(X)[0] if np.ndim(X) == 3 else []
    small = [i for i, size in enumerate(sizes) if size < group_size]
    if small:
        raise ValueError(
            f"{name}: {len(small)} cloud(s) have fewer points than group_size={group_size} (the first, at index "
            f"{small[0]}, has {sizes[small[0]]}); every neighbourhood would repeat points. Lower group_size or "
            "drop those clouds."
        )


def validate_point_clouds(estimator, X, *, reset, normalize=True):
    """An estimator's clouds: :func:`check_point_clouds` with its ``n_features_in_`` for flat rows.

    Rows of a 2-D array, a DataFrame or a list of flat rows are validated by
    scikit-learn's ``validate_data`` first, so ``fit`` records
    ``n_features_in_`` and later calls refuse rows of another width; clouds
    in any other form carry no feature count, and those with fewer points
    than the estimator's ``group_size`` are refused.

    Parameters
    ----------
    estimator : estimator with an ``n_points`` attribute
    X : array-like or list of clouds
    reset : bool
        True in ``fit``.
    normalize : bool, default=True
        Centre each cloud and scale it to the unit sphere.

    Returns
    -------
    ndarray of shape (n_samples, estimator.n_points, 3), float32
    """
    name = type(estimator).__name__
    X = _as_cloud_list(X)
    if isinstance(X, (list, tuple)):
        flat_rows = not _is_cloud_list(X, name)
    else:
        # Not np.ndim: array-likes that only offer __array__ must pass too.
        flat_rows = hasattr(X, "iloc") or getattr(X, "ndim", None) == 2 or (
            not hasattr(X, "ndim") and np.asarray(X).ndim == 2)
    if flat_rows:
        X = validate_data(estimator, X, reset=reset, dtype=[np.float64, np.float32])
    else:
        if reset and hasattr(estimator, "n_features_in_"):
            del estimator.n_features_in_
        _check_group_size(X, getattr(estimator, "group_size", None), name)
    clouds = check_point_clouds(X, n_points=estimator.n_points, estimator_name=name,
                                reset_channels_warning=reset)
    if not normalize:
        return clouds
    collapsed = np.flatnonzero(np.ptp(clouds, axis=1).max(axis=1) == 0)
    if len(collapsed):
        warn_user(
            f"{name}: {len(collapsed)} of {len(clouds)} clouds (the first at index {collapsed[0]}) have all their "
            "points at one position; centred and scaled they are the origin and carry no shape.",
            UserWarning,
        )
    return normalize_point_clouds(clouds)
