"""Physics read back from pixels: object states, velocity errors and the case-based analyses.

Everything here is numpy on rendered or generated frames, as in the
official evaluation (phyworld ``id_ood_data/evaluate.py``), with two
differences that are options here: pixels sit where the renderer put them
(:func:`skicml.datasets.physics_pixel_centers`), where the official parser
divides by the width while its renderer spaced pixels by the width minus
one, which scales every parsed velocity by ``(W - 1) / W``; and an object's
position is the coverage-weighted centroid of its pixels, not the centroid
of a thresholded mask, so sub-pixel positions are recovered without bias.

The last section is the evaluation protocol of :class:`VideoWorldModel` that
the ``skicml pretrain physics-world-model`` recipe and
``benchmarks/bench_video_physics_world_model.py`` share: the model's
options, the estimator they describe, and the scores per bucket of the
evaluation grid.
"""

import math
import numbers
import warnings

import numpy as np
import pandas as pd
from scipy.ndimage import gaussian_filter

from ...datasets import PHYSICS_COLORS, physics_pixel_centers, simulate_physics
from ._model import TIME_SAMPLINGS

__all__ = [
    "abnormal_rollouts",
    "attribute_priority_report",
    "infer_attributes",
    "nearest_training_case",
    "parse_object_states",
    "summarize_by_bucket",
    "velocity_error",
    "video_similarity",
]

_COLOR_NAMES = tuple(PHYSICS_COLORS)
# Background minus colour, per channel, for every known colour: the columns
# of the unmixing that turns a pixel's darkening into each colour's coverage.
_SHIFTS = np.array([[255.0 - c for c in PHYSICS_COLORS[name]] for name in _COLOR_NAMES]).T
_CHUNK_PIXELS = 2 ** 22


def _check_videos(videos, name="videos"):
    array = np.asarray(videos)
    if array.ndim != 5 or array.shape[-1] != 3:
        raise ValueError(f"{name} must be (n_videos, n_frames, height, width, 3) frames, got shape {array.shape}.")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {array.shape}.")
    if array.dtype == np.uint8:
        return array
    if not np.issubdtype(array.dtype, np.floating) and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must be uint8 or float frames, got dtype {array.dtype}.")
    if np.issubdtype(array.dtype, np.integer):
        if array.min() < 0 or array.max() > 255:
            raise ValueError(f"integer {name} must lie in [0, 255], got [{array.min()}, {array.max()}].")
        return array.astype(np.uint8)
    if np.isnan(array).any():
        raise ValueError(f"{name} contains NaN; frames must be intensities in [0, 1] (floats) or [0, 255] (uint8).")
    if np.isinf(array).any():
        raise ValueError(f"{name} contains infinite values; frames must be intensities in [0, 1] (floats) or "
                         "[0, 255] (uint8).")
    if array.min() < 0 or array.max() > 1:
        raise ValueError(f"float {name} must be intensities in [0, 1], got [{array.min()}, {array.max()}].")
    return np.rint(array * 255).astype(np.uint8)


def _check_colors(colors):
    if isinstance(colors, str):
        colors = (colors,)
    colors = tuple(colors)
    for color in colors:
        if color not in PHYSICS_COLORS:
            raise ValueError(f"colors must be names among {sorted(PHYSICS_COLORS)}, got {color!r}.")
    if not colors:
        raise ValueError("colors must name at least one colour.")
    return colors


def _masks_and_weights(frames, colors, threshold, method):
    """Thresholded masks and centroid weights of each colour: ``(k, n, H, W)`` each."""
    pixels = frames.astype(np.float32)
    masks, weights = [], []
    if method == "coverage":
        deficit = 255.0 - pixels
        coverage = np.einsum("...c,kc->k...", deficit, np.linalg.inv(_SHIFTS).astype(np.float32))
    for color in colors:
        target = np.array(PHYSICS_COLORS[color]) > 127
        high = pixels[..., target] > threshold
        low = pixels[..., ~target] < threshold
        mask = np.all(high, axis=-1) & np.all(low, axis=-1)
        masks.append(mask)
        if method == "threshold":
            weights.append(mask.astype(np.float32))
            continue
        # The edge pixels an object only partly covers fail the threshold:
        # the support is the mask grown by one pixel, weighted by coverage.
        grown = mask.copy()
        grown[..., 1:, :] |= mask[..., :-1, :]
        grown[..., :-1, :] |= mask[..., 1:, :]
        wide = grown.copy()
        wide[..., :, 1:] |= grown[..., :, :-1]
        wide[..., :, :-1] |= grown[..., :, 1:]
        alpha = np.clip(coverage[_COLOR_NAMES.index(color)], 0.0, 1.0)
        weights.append(np.where(wide, alpha, 0.0).astype(np.float32))
    return np.stack(masks), np.stack(weights)


def _pixel_coordinates(height, width, world_size, pixel_convention):
    convention = "center" if pixel_convention == "center" else "index"
    xs, pitch_x = physics_pixel_centers(width, world_size, convention)
    ys, pitch_y = physics_pixel_centers(height, world_size, convention)
    return xs, ys[::-1], pitch_x * pitch_y


def parse_object_states(videos, colors=("red", "blue"), *, world_size=10.0, threshold=127,
                        pixel_convention="center", method="coverage", fill=None):
    """Position and size of each coloured object in every frame.

    An object is found by its colour, thresholded per channel at
    ``threshold`` as the official evaluation does (red: R above, G and B
    below). Its position is then the centroid of its pixels, in world units.

    Parameters
    ----------
    videos : array-like of shape (n_videos, n_frames, height, width, 3)
        uint8, or float intensities in [0, 1]; white background.
    colors : sequence of str, default=("red", "blue")
        The objects to find, by colour name (:data:`skicml.datasets.PHYSICS_COLORS`).
    world_size : float, default=10.0
    threshold : int, default=127
    pixel_convention : {"center", "official"}, default="center"
        Where a pixel sits: at its centre, as :func:`skicml.datasets.render_videos`
        draws it; or the official parser's ``index * world_size / width``,
        which against the official renderer's grid biases velocities by
        ``(W - 1) / W`` (0.08 units/s at 32 px).
    method : {"coverage", "threshold"}, default="coverage"
        ``"coverage"``: each pixel of the mask, grown by one pixel, weighs by
        the fraction of it the object covers (unmixed from the pixel's
        colour), which recovers an exactly antialiased position to a small
        fraction of a pixel. ``"threshold"``: the official centroid of the
        mask, whose sub-pixel information is only which edge pixels cross
        the threshold.
    fill : {None, "official"}, default=None
        ``None``: NaN where an object is absent. ``"official"``: the
        official carry-forward, the previous ``y`` and radius, and ``x`` at
        the wall the object left through (0 for the first colour, the world
        size for the others).

    Returns
    -------
    states : ndarray of shape (n_videos, n_frames, n_colors, 3)
        ``(x, y, r)`` in world units; ``r`` is the radius of the disc of the
        object's area (the official size measure).

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.datasets import render_videos
    >>> from skicml.video import parse_object_states
    >>> videos = render_videos(np.array([[[[3.3, 6.1]]]]), [1.0], colors=["red"], resolution=32)
    >>> parse_object_states(videos, colors=["red", "blue"])[0, 0].round(2).tolist()
    [[3.3, 6.1, 1.0], [nan, nan, nan]]
    """
    videos = _check_videos(videos)
    colors = _check_colors(colors)
    if method not in ("coverage", "threshold"):
        raise ValueError(f"method must be 'coverage' or 'threshold', got {method!r}.")
    if pixel_convention not in ("center", "official"):
        raise ValueError(f"pixel_convention must be 'center' or 'official', got {pixel_convention!r}.")
    if fill not in (None, "official"):
        raise ValueError(f"fill must be None or 'official', got {fill!r}.")
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0 < threshold < 255:
        raise ValueError(f"threshold must be a number in (0, 255), got {threshold!r}.")
    n_videos, n_frames, height, width, _ = videos.shape
    xs, ys, pixel_area = _pixel_coordinates(height, width, world_size, pixel_convention)
    frames = videos.reshape(-1, height, width, 3)
    states = np.full((len(frames), len(colors), 3), np.nan)
    step = max(1, _CHUNK_PIXELS // (height * width))
    for start in range(0, len(frames), step):
        part = slice(start, start + step)
        masks, weights = _masks_and_weights(frames[part], colors, threshold, method)
        mass = weights.sum(axis=(2, 3))
        present = masks.any(axis=(2, 3)) & (mass > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.einsum("knhw,w->kn", weights, xs) / mass
            y = np.einsum("knhw,h->kn", weights, ys) / mass
        r = np.sqrt(mass * pixel_area / np.pi)
        found = np.stack([x, y, r], axis=-1)
        states[part] = np.where(present[..., None], found, np.nan).transpose(1, 0, 2)
    states = states.reshape(n_videos, n_frames, len(colors), 3)
    if fill == "official":
        for t in range(1, n_frames):
            absent = np.isnan(states[:, t, :, 0])
            previous = states[:, t - 1]
            states[:, t, :, 1:] = np.where(absent[..., None], previous[..., 1:], states[:, t, :, 1:])
            wall = np.where(np.arange(len(colors)) == 0, 0.0, world_size)
            states[:, t, :, 0] = np.where(absent & ~np.isnan(previous[..., 0]), wall, states[:, t, :, 0])
    return states


# ---------------------------------------------------------------- velocity errors

def _parsed(pred, params, n_objects):
    pred = np.asarray(pred)
    if pred.ndim == 5:
        colors = [params[f"color{k}"].iloc[0] if f"color{k}" in params else ("red", "blue")[k - 1]
                  for k in range(1, n_objects + 1)]
        if "color1" in params and params["color1"].nunique() > 1:
            # One colour per video: parse each video for its own colour.
            out = np.full(pred.shape[:2] + (1, 3), np.nan)
            for color in params["color1"].unique():
                rows = np.flatnonzero(params["color1"].to_numpy() == color)
                out[rows] = parse_object_states(pred[rows], colors=[color])
            return out
        return parse_object_states(pred, colors=colors)
    if pred.ndim == 4 and pred.shape[-1] in (2, 3):
        return pred.astype(np.float64)
    raise ValueError("pred must be videos (n_videos, n_frames, height, width, 3) or parsed states "
                     f"(n_videos, n_frames, n_objects, 2 or 3), got shape {pred.shape}.")


def _nanmean(values, axis=None):
    values = np.asarray(values, dtype=np.float64)
    count = np.sum(~np.isnan(values), axis=axis)
    total = np.nansum(values, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def velocity_error(pred, params, scenario, *, n_cond_frames=3, frame_dt=0.1, states_true=None, in_view_only=True,
                   world_size=10.0):
    """Velocity and position errors of predicted frames against the true law.

    As the official evaluation: positions are parsed from the frames
    (:func:`parse_object_states`), frames from ``n_cond_frames`` on are kept
    where the true object is fully in view, and velocities are differences
    of consecutive kept frames over ``frame_dt``.

    - Uniform, parabola, static: ``vel_error = |mean(v_parsed) - v_true|``
      along the motion (x, or y for vertical uniform motion), ``x_err`` and
      ``y_err`` the mean absolute position errors. Bounce: ``vel_error`` is
      the mean of ``|v_parsed - v_true|`` per frame step.
    - Collision: the collision frame is the first where a true velocity
      changes by more than 0.1; ``pre_vel_err`` and ``post_vel_err`` are the
      mean ``|vx - vx_true|`` of both balls before and after it,
      ``pre_x_err`` and ``post_x_err`` the position errors, and
      ``momentum_err`` and ``energy_err`` compare the parsed post-collision
      velocities' momentum and kinetic energy (masses ``r^2``) with the
      initial ones; ``pre_vx1``, ``pre_vx2``, ``post_vx1`` and ``post_vx2``
      are the parsed mean velocities of each ball before and after it.

    Parameters
    ----------
    pred : array-like
        Videos ``(n_videos, n_frames, H, W, 3)`` (parsed for the colours in
        ``params``) or already parsed states ``(n_videos, n_frames,
        n_objects, 2 or 3)``: the whole clips, or only the frames after the
        ``n_cond_frames`` conditioning ones when ``states_true`` (of the
        whole clips) is given.
    params : DataFrame
        The videos' parameters (:func:`skicml.datasets.make_physics_videos`);
        a ``bucket`` column is carried over.
    scenario : {"uniform", "parabola", "collision", "bounce", "static"}
    n_cond_frames : int, default=3
    frame_dt : float, default=0.1
    states_true : ndarray of shape (n_videos, n_frames, n_objects, 2) or None
        The true states of the whole clips; ``None`` simulates them from
        ``params`` (which then needs the start positions), as long as ``pred``.
    in_view_only : bool, default=True
        Keep only frames where the true objects are fully in view.
    world_size : float, default=10.0

    Returns
    -------
    errors : DataFrame
        One row per video.

    Examples
    --------
    >>> from skicml.datasets import make_physics_videos
    >>> from skicml.video import velocity_error
    >>> data = make_physics_videos("uniform", 20, random_state=0)
    >>> errors = velocity_error(data.videos, data.params, "uniform", states_true=data.states)
    >>> bool(errors["vel_error"].mean() < 0.01)
    True
    """
    if scenario not in ("uniform", "parabola", "collision", "bounce", "static"):
        raise ValueError(f"scenario must be a physics scenario, got {scenario!r}.")
    if not isinstance(params, pd.DataFrame):
        raise TypeError(f"params must be a DataFrame of the videos' parameters, got {type(params).__name__}.")
    n_objects = 2 if scenario == "collision" else 1
    parsed = _parsed(pred, params, n_objects)
    if len(parsed) != len(params):
        raise ValueError(f"pred holds {len(parsed)} videos but params {len(params)} rows.")
    if parsed.shape[2] < n_objects:
        raise ValueError(f"a {scenario} needs {n_objects} objects, pred has {parsed.shape[2]}.")
    n_cond_frames = int(n_cond_frames)
    if states_true is None:
        truth = simulate_physics(scenario, params, n_frames=parsed.shape[1], frame_dt=frame_dt)
    else:
        truth = np.asarray(states_true, dtype=np.float64)
        if truth.ndim != 4 or truth.shape[-1] != 2 or len(truth) != len(params):
            raise ValueError(f"states_true must be (n_videos, n_frames, n_objects, 2) for {len(params)} videos, "
                             f"got shape {truth.shape}.")
    n_total = truth.shape[1]
    if not 0 <= n_cond_frames <= n_total - 2:
        raise ValueError(
            f"n_cond_frames={n_cond_frames} for clips of {n_total} frames leaves {max(n_total - n_cond_frames, 0)} "
            "future frame(s); a velocity needs at least 2, so n_cond_frames must lie in "
            f"[0, {n_total - 2}]."
        )
    if parsed.shape[1] == n_total - n_cond_frames:
        parsed = np.concatenate([np.full((len(parsed), n_cond_frames) + parsed.shape[2:], np.nan), parsed], axis=1)
    elif parsed.shape[1] != n_total:
        raise ValueError(f"pred has {parsed.shape[1]} frames; expected the whole clip ({n_total}) or its "
                         f"{n_total - n_cond_frames} future frames.")
    position = parsed[:, :, :n_objects, :2]
    truth = truth[:, :, :n_objects]
    radii = params[[f"r{k}" for k in range(1, n_objects + 1)]].to_numpy(dtype=np.float64)
    keep = np.arange(n_total)[None, :] >= n_cond_frames
    keep = np.broadcast_to(keep, truth.shape[:2]).copy()
    if in_view_only:
        r = radii[:, None, :]
        inside = (truth[..., 0] - r >= 0) & (truth[..., 0] + r <= world_size)
        if scenario == "collision":
            keep &= inside[..., 0] & inside[..., 1]
        else:
            keep &= inside[..., 0] & (truth[..., 0, 1] - r[..., 0] >= 0) & (truth[..., 0, 1] + r[..., 0] <= world_size)
    step = keep[:, 1:] & keep[:, :-1]
    v_pred = np.diff(position, axis=1) / frame_dt
    v_true = np.diff(truth, axis=1) / frame_dt
    pos_err = np.abs(position - truth)
    out = {}
    if scenario != "collision":
        vertical = np.zeros(len(params), dtype=bool)
        if scenario == "uniform" and "direction" in params:
            vertical = np.isin(params["direction"].to_numpy(), ("up", "down"))
        axis = vertical.astype(int)
        vp = np.where(step, np.take_along_axis(v_pred[:, :, 0], axis[:, None, None], axis=2)[..., 0], np.nan)
        vt = np.where(step, np.take_along_axis(v_true[:, :, 0], axis[:, None, None], axis=2)[..., 0], np.nan)
        if scenario == "bounce":
            out["vel_error"] = _nanmean(np.abs(vp - vt), axis=1)
        else:
            out["vel_error"] = np.abs(_nanmean(vp, axis=1) - _nanmean(vt, axis=1))
        out["x_err"] = _nanmean(np.where(keep, pos_err[:, :, 0, 0], np.nan), axis=1)
        out["y_err"] = _nanmean(np.where(keep, pos_err[:, :, 0, 1], np.nan), axis=1)
    else:
        dvx = np.abs(np.diff(v_true[..., 0], axis=1)).max(axis=2)           # (n, n_total - 2)
        changed = dvx > 0.1
        collision_frame = np.where(changed.any(axis=1), changed.argmax(axis=1) + 1, n_total)
        index = np.arange(n_total - 1)[None, :]
        pre_step = step & (index < collision_frame[:, None])
        post_step = step & (index > collision_frame[:, None])
        err = np.abs(v_pred[..., 0] - v_true[..., 0])                        # (n, steps, 2)
        out["pre_vel_err"] = _nanmean(np.where(pre_step[..., None], err, np.nan).reshape(len(err), -1), axis=1)
        out["post_vel_err"] = _nanmean(np.where(post_step[..., None], err, np.nan).reshape(len(err), -1), axis=1)
        frame = np.arange(n_total)[None, :]
        pre_frame = keep & (frame < collision_frame[:, None])
        post_frame = keep & (frame > collision_frame[:, None])
        x_err = pos_err[..., 0]
        out["pre_x_err"] = _nanmean(np.where(pre_frame[..., None], x_err, np.nan).reshape(len(x_err), -1), axis=1)
        out["post_x_err"] = _nanmean(np.where(post_frame[..., None], x_err, np.nan).reshape(len(x_err), -1), axis=1)
        mass = radii ** 2
        initial = v_true[:, 0, :, 0]
        before = np.stack([_nanmean(np.where(pre_step, v_pred[..., k, 0], np.nan), axis=1) for k in range(2)], -1)
        after = np.stack([_nanmean(np.where(post_step, v_pred[..., k, 0], np.nan), axis=1) for k in range(2)], -1)
        out["momentum_err"] = np.abs((mass * after).sum(1) - (mass * initial).sum(1))
        out["energy_err"] = np.abs(0.5 * (mass * after ** 2).sum(1) - 0.5 * (mass * initial ** 2).sum(1))
        out["collision_frame"] = collision_frame
        for k in range(2):
            out[f"pre_vx{k + 1}"], out[f"post_vx{k + 1}"] = before[:, k], after[:, k]
    errors = pd.DataFrame(out)
    for column in ("bucket", "level", "cell", "region", "hole"):
        if column in params:
            errors[column] = params[column].to_numpy()
    return errors


def summarize_by_bucket(errors, by="bucket", columns=None):
    """Mean, median and count of each error per bucket (NaN ignored).

    Parameters
    ----------
    errors : DataFrame
        From :func:`velocity_error`, with a ``by`` column.
    by : str, default="bucket"
    columns : list of str or None, default=None
        The errors to summarise; ``None``: every numeric column.

    Returns
    -------
    summary : DataFrame
        Indexed by bucket, with ``(error, statistic)`` columns.

    Examples
    --------
    >>> import pandas as pd
    >>> from skicml.video import summarize_by_bucket
    >>> errors = pd.DataFrame({"vel_error": [0.1, 0.3, 2.0], "bucket": ["id", "id", "v_out"]})
    >>> summarize_by_bucket(errors)["vel_error"]["mean"].round(2).to_dict()
    {'id': 0.2, 'v_out': 2.0}
    """
    if by not in errors:
        raise ValueError(f"errors has no {by!r} column; pass params with buckets to velocity_error.")
    if columns is None:
        columns = [c for c in errors.columns if c != by and pd.api.types.is_numeric_dtype(errors[c])]
    return errors.groupby(by)[list(columns)].agg(["mean", "median", "count"])


# ---------------------------------------------------------------- case-based analysis

def nearest_training_case(query_params, train_params, features=("v1", "r1"), scale="range"):
    """The training video whose attributes are closest to each query's.

    With the attributes a model *generated* as the query (from
    :func:`infer_attributes`), this answers "which training case did the
    model imitate?".

    Parameters
    ----------
    query_params, train_params : DataFrame
    features : sequence of str, default=("v1", "r1")
        Numeric columns of both tables.
    scale : {"range", "std", "none"}, default="range"
        Divide each feature by its range (or standard deviation) over the
        training table before measuring distances.

    Returns
    -------
    index : ndarray of shape (n_queries,)
        Positions in ``train_params``.
    distance : ndarray of shape (n_queries,)

    Examples
    --------
    >>> import pandas as pd
    >>> from skicml.video import nearest_training_case
    >>> train = pd.DataFrame({"v1": [1.0, 2.0, 4.0], "r1": [1.0, 1.0, 1.0]})
    >>> nearest_training_case(pd.DataFrame({"v1": [5.5], "r1": [1.0]}), train)[0].tolist()
    [2]
    """
    features = list(features)
    missing = [f for f in features if f not in query_params or f not in train_params]
    if missing:
        raise ValueError(f"features {missing} are not columns of both tables.")
    if scale not in ("range", "std", "none"):
        raise ValueError(f"scale must be 'range', 'std' or 'none', got {scale!r}.")
    train = train_params[features].to_numpy(dtype=np.float64)
    query = query_params[features].to_numpy(dtype=np.float64)
    if len(train) == 0:
        raise ValueError("train_params is empty.")
    if scale == "none":
        unit = np.ones(len(features))
    else:
        unit = np.ptp(train, axis=0) if scale == "range" else train.std(axis=0)
        unit = np.where(unit > 0, unit, 1.0)
    distance = np.sqrt((((query[:, None, :] - train[None, :, :]) / unit) ** 2).sum(-1))
    index = np.argmin(np.where(np.isnan(distance), np.inf, distance), axis=1)
    return index, distance[np.arange(len(query)), index]


def infer_attributes(videos, n_cond_frames=0, *, colors=None, frame_dt=0.1, world_size=10.0):
    """The colour, size, velocity and shape of the one object of each video.

    Measured on the frames from ``n_cond_frames`` on (the generated ones):
    the colour of the largest total coverage, the size as the median radius
    (of the disc of equal area), the velocity as the least-squares slope of
    the parsed x (the official measure of horizontal motion), and the shape
    from the compactness, mask area over bounding-box area: about pi/4 for a
    disc, 1 for a square, lower for a ring. Only frames where the object
    clears the image border count.

    Parameters
    ----------
    videos : array-like of shape (n_videos, n_frames, H, W, 3)
    n_cond_frames : int, default=0
    colors : sequence of str or None, default=None
        Candidate colours; ``None``: every colour of
        :data:`skicml.datasets.PHYSICS_COLORS`.
    frame_dt : float, default=0.1
    world_size : float, default=10.0

    Returns
    -------
    attributes : DataFrame
        ``color``, ``size``, ``velocity``, ``compactness``, ``shape``
        (``"circle"``, ``"square"``, ``"ring"``; NaN where nothing was found).

    Examples
    --------
    >>> from skicml.datasets import make_physics_videos
    >>> from skicml.video import infer_attributes
    >>> data = make_physics_videos("uniform", 2, resolution=64, color="blue", shape="square", random_state=0)
    >>> infer_attributes(data.videos)[["color", "shape"]].values.tolist()
    [['blue', 'square'], ['blue', 'square']]
    """
    videos = _check_videos(videos)
    colors = _check_colors(_COLOR_NAMES if colors is None else colors)
    future = videos[:, int(n_cond_frames):]
    if future.shape[1] == 0:
        raise ValueError(f"n_cond_frames={n_cond_frames} leaves no frame of the {videos.shape[1]} to measure.")
    states = parse_object_states(future, colors=colors, world_size=world_size)
    mass = np.nan_to_num(states[..., 2] ** 2).sum(axis=1)                 # (n, colors)
    best = mass.argmax(axis=1)
    found = mass.max(axis=1) > 0
    rows = np.arange(len(videos))
    chosen = states[rows, :, best]                                       # (n, frames, 3)
    times = np.arange(future.shape[1]) * frame_dt
    velocity = np.full(len(videos), np.nan)
    size = np.full(len(videos), np.nan)
    compactness = np.full(len(videos), np.nan)
    for i in np.flatnonzero(found):
        target = np.array(PHYSICS_COLORS[colors[best[i]]]) > 127
        frames = future[i]
        mask = np.all(frames[..., target] > 127, axis=-1) & np.all(frames[..., ~target] < 127, axis=-1)
        # A cut-off object has a shifted centroid and a smaller area: only
        # frames where it clears the image border count.
        whole = ~(mask[:, 0].any(-1) | mask[:, -1].any(-1) | mask[:, :, 0].any(-1) | mask[:, :, -1].any(-1))
        ok = whole & ~np.isnan(chosen[i, :, 0])
        if ok.sum() >= 2:
            velocity[i] = np.polyfit(times[ok], chosen[i, ok, 0], 1)[0]
        if ok.any():
            size[i] = np.median(chosen[i, ok, 2])
        ratios = []
        for frame in mask[ok]:
            ys, xs = np.nonzero(frame)
            if len(xs) >= 4:
                ratios.append(len(xs) / ((np.ptp(xs) + 1) * (np.ptp(ys) + 1)))
        compactness[i] = np.median(ratios) if ratios else np.nan
    shape = np.where(np.isnan(compactness), None,
                     np.where(compactness > 0.9, "square", np.where(compactness > 0.62, "circle", "ring")))
    return pd.DataFrame({
        "color": np.where(found, np.asarray(colors, dtype=object)[best], None),
        "size": size,
        "velocity": velocity,
        "compactness": compactness,
        "shape": shape,
    })


_ATTRIBUTE_COLUMNS = {"color": "color1", "size": "r1", "velocity": "v1", "shape": "shape1"}


def _level_of(values, levels):
    """Index of the level each value belongs to: equal name, or nearest interval centre."""
    if isinstance(levels[0], str):
        return np.select([values == levels[0], values == levels[1]], [0, 1], default=-1)
    values = np.asarray(values, dtype=np.float64)
    centres = np.array([np.mean(level) for level in levels])
    level = np.argmin(np.abs(values[:, None] - centres[None, :]), axis=1)
    return np.where(np.isnan(values), -1, level)


def attribute_priority_report(generated, conditioning, pair, levels):
    """Which attribute of a pair a model keeps when the test swaps their training combination.

    For a test video of cell ``a0b1`` (training only ever showed ``a0b0``
    and ``a1b1``), a generation that keeps ``a0`` and turns ``b`` to ``b0``
    imitates the training case by ``a``: ``a`` has priority. A continuous
    attribute (size, velocity) belongs to the level whose interval centre is
    nearest. The paper finds colour > size > velocity > shape.

    Parameters
    ----------
    generated : DataFrame
        ``color``, ``size``, ``velocity``, ``shape`` of each generation
        (:func:`infer_attributes`).
    conditioning : DataFrame
        The test table of :func:`skicml.datasets.make_attribute_pair_split`
        (``r1``, ``v1``, ``color1``, ``shape1``, ``cell``), row for row.
    pair : (str, str)
    levels : dict
        The split's ``levels``.

    Returns
    -------
    report : DataFrame
        Per test cell: ``n``, ``kept_a`` (fraction that kept ``a``'s level
        and changed ``b``'s), ``kept_b`` (the reverse), ``kept_both``,
        ``changed_both``, ``unparsed``, and ``priority``.

    Examples
    --------
    >>> import pandas as pd
    >>> from skicml.datasets import make_attribute_pair_split
    >>> from skicml.video import attribute_priority_report
    >>> split = make_attribute_pair_split(("color", "velocity"), grid=(2, 1))
    >>> generated = split.test.rename(columns={"color1": "color", "v1": "velocity", "r1": "size",
    ...                                        "shape1": "shape"})
    >>> generated["velocity"] = 5.0 - generated["velocity"]  # as if velocity followed the colour's training case
    >>> attribute_priority_report(generated, split.test, split.pair, split.levels)["priority"].tolist()
    ['color > velocity', 'color > velocity']
    """
    a, b = pair
    if len(generated) != len(conditioning):
        raise ValueError(f"generated has {len(generated)} rows but conditioning {len(conditioning)}.")
    if "cell" not in conditioning:
        raise ValueError("conditioning needs the 'cell' column of make_attribute_pair_split's test table.")
    generated = generated.reset_index(drop=True)
    conditioning = conditioning.reset_index(drop=True)
    # The cell names the conditioning's levels (a radius on the boundary
    # between two levels belongs to its cell).
    cells = conditioning["cell"].astype(str)
    cond_a, cond_b = cells.str[1].astype(int).to_numpy(), cells.str[3].astype(int).to_numpy()
    gen_a = _level_of(generated[a].to_numpy(), levels[a])
    gen_b = _level_of(generated[b].to_numpy(), levels[b])
    table = pd.DataFrame({
        "cell": conditioning["cell"],
        "kept_a": (gen_a == cond_a) & (gen_b == 1 - cond_b),
        "kept_b": (gen_b == cond_b) & (gen_a == 1 - cond_a),
        "kept_both": (gen_a == cond_a) & (gen_b == cond_b),
        "changed_both": (gen_a == 1 - cond_a) & (gen_b == 1 - cond_b),
        "unparsed": (gen_a < 0) | (gen_b < 0),
    })
    report = table.groupby("cell").mean()
    report.insert(0, "n", table.groupby("cell").size())
    report["priority"] = np.where(report["kept_a"] > report["kept_b"], f"{a} > {b}",
                                  np.where(report["kept_b"] > report["kept_a"], f"{b} > {a}", "tie"))
    return report


def video_similarity(pred, true):
    """PSNR and SSIM of each predicted video against the true one.

    SSIM with an 11-tap Gaussian window (sigma 1.5) per channel, averaged
    over pixels, channels and frames; PSNR over the whole video. FVD and
    LPIPS need networks downloaded at run time and are not offered.

    Parameters
    ----------
    pred, true : array-like of shape (n_videos, n_frames, H, W, 3)

    Returns
    -------
    scores : DataFrame
        ``psnr`` (dB; inf for identical videos) and ``ssim``.

    Examples
    --------
    >>> from skicml.datasets import make_physics_videos
    >>> from skicml.video import video_similarity
    >>> videos = make_physics_videos("uniform", 2, n_frames=4, random_state=0).videos
    >>> video_similarity(videos, videos)["ssim"].tolist()
    [1.0, 1.0]
    """
    pred, true = _check_videos(pred, "pred"), _check_videos(true, "true")
    if pred.shape != true.shape:
        raise ValueError(f"pred and true must have one shape, got {pred.shape} and {true.shape}.")
    x, y = pred.astype(np.float64), true.astype(np.float64)
    mse = ((x - y) ** 2).mean(axis=(1, 2, 3, 4))
    with np.errstate(divide="ignore"):
        psnr = 10 * np.log10(255.0 ** 2 / mse)
    sigma = (0, 0, 1.5, 1.5, 0)

    def blur(z):
        return gaussian_filter(z, sigma=sigma, truncate=5 / 1.5)  # an 11-tap window

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mx, my = blur(x), blur(y)
    vx, vy, cxy = blur(x * x) - mx ** 2, blur(y * y) - my ** 2, blur(x * y) - mx * my
    ssim = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx ** 2 + my ** 2 + c1) * (vx + vy + c2))
    return pd.DataFrame({"psnr": psnr, "ssim": ssim.mean(axis=(1, 2, 3, 4)).round(12)})


def abnormal_rollouts(pred, scenes, *, n_cond_frames=1, drift_limit=1.0, energy_limit=0.2, static_limit=0.5):
    """Which generated videos of combinatorial scenes break physics, by automatic checks.

    The paper has people label a rollout "abnormal"; these are the spec's
    automatic stand-ins, read from the pixels of the generated frames (from
    ``n_cond_frames`` on) against the simulation of
    :func:`skicml.datasets.make_template_scenes`:

    - ``vanished``: a ball the simulation shows fully in view is not found;
    - ``appeared``: a ball is found where the simulation has none in view;
    - ``drift``: the largest distance, in world units, between the red
      ball's parsed and simulated centres;
    - ``energy_gain``: the largest rise of the balls' parsed mechanical
      energy (``r^2 (|v|^2 / 2 + g y)`` summed, velocities by central
      differences) over the scene's energy at rest, as a fraction: the
      balls start at rest, and nothing in the scene adds energy;
    - ``static_change``: the mean change of the dark (static) area, pixels
      at least half covered by black, as a fraction of the simulated area:
      bars and pegs that move, bend or fade.

    A rollout is ``abnormal`` when a ball vanishes or appears, ``drift``
    exceeds ``drift_limit``, ``energy_gain`` exceeds ``energy_limit`` or
    ``static_change`` exceeds ``static_limit``. The simulation's own videos
    score no abnormal rollout (tested).

    Parameters
    ----------
    pred : array-like of shape (n_videos, n_frames, H, W, 3)
        Whole videos (conditioning frames and generated ones), as
        ``VideoWorldModel.predict(X, return_full=True)`` returns them.
    scenes : Bunch
        The :func:`~skicml.datasets.make_template_scenes` Bunch the videos
        continue (its ``states``, ``radii``, ``videos``, ``gravity`` and
        ``frame_dt``).
    n_cond_frames : int, default=1
        Given frames; the rest are judged.
    drift_limit, energy_limit, static_limit : float
        The thresholds above.

    Returns
    -------
    report : DataFrame
        One row per video: the five measures and ``abnormal``.

    Examples
    --------
    >>> from skicml.datasets import make_template_scenes
    >>> from skicml.video import abnormal_rollouts
    >>> scenes = make_template_scenes([0], n_per_template=2, n_frames=6, random_state=0)
    >>> abnormal_rollouts(scenes.videos, scenes)["abnormal"].tolist()
    [False, False]
    """
    pred = _check_videos(pred, "pred")
    for key in ("states", "radii", "videos", "gravity", "frame_dt"):
        if key not in scenes:
            raise ValueError(f"scenes must be a make_template_scenes Bunch; it has no {key!r}.")
    if pred.shape != scenes.videos.shape:
        raise ValueError(f"pred must have the scenes' video shape {scenes.videos.shape}, got {pred.shape}.")
    n_frames = pred.shape[1]
    if isinstance(n_cond_frames, bool) or not isinstance(n_cond_frames, numbers.Integral) \
            or not 1 <= n_cond_frames < n_frames:
        raise ValueError(f"n_cond_frames must be an integer in [1, {n_frames - 1}], got {n_cond_frames!r}.")
    for name, value in (("drift_limit", drift_limit), ("energy_limit", energy_limit),
                        ("static_limit", static_limit)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
            raise ValueError(f"{name} must be a number > 0, got {value!r}.")
    world = 10.0
    true, radii = np.asarray(scenes.states, dtype=float), np.asarray(scenes.radii, dtype=float)
    parsed = parse_object_states(pred, colors=("red", "blue"), method="threshold")[..., :2]
    judged = np.arange(n_frames) >= n_cond_frames
    r = radii[:, None, :]
    x, y = true[..., 0], true[..., 1]
    with np.errstate(invalid="ignore"):
        in_view = (x >= r) & (x <= world - r) & (y >= r) & (y <= world - r)
        out_of_view = ~np.isfinite(x) | (x < -r) | (x > world + r) | (y > world + r)
    found = np.isfinite(parsed[..., 0])
    vanished = (judged[None, :, None] & in_view & ~found).any(axis=(1, 2))
    appeared = (judged[None, :, None] & out_of_view & found).any(axis=(1, 2))
    distance = np.linalg.norm(parsed[..., 0, :] - true[..., 0, :], axis=-1)
    distance = np.where(judged[None, :] & in_view[..., 0] & found[..., 0], distance, np.nan)
    mass = np.nan_to_num(radii) ** 2
    with np.errstate(invalid="ignore"):
        rest = np.nansum(mass * scenes.gravity * true[:, 0, :, 1], axis=1)
        # Central differences: the velocity at a frame from its two neighbours, which halves the parse noise.
        speed2 = ((parsed[:, 2:] - parsed[:, :-2]) ** 2).sum(-1) / (2 * scenes.frame_dt) ** 2
        energy = mass[:, None, :] * (speed2 / 2 + scenes.gravity * parsed[:, 1:-1, :, 1])
        # A frame counts when every ball the simulation shows in view is found in it and its neighbours.
        both = found[:, 2:] & found[:, 1:-1] & found[:, :-2]
        complete = np.where(in_view[:, 1:-1], both, True).all(-1) & judged[None, 1:-1]
        total = np.where(complete, np.nansum(np.where(both, energy, 0.0), -1), np.nan)
    # Dark pixels: at least half covered by a static object (balls are drawn in pure colours).
    black = (pred < 128).all(-1).sum(axis=(2, 3)).astype(float)
    black_true = (np.asarray(scenes.videos) < 128).all(-1).sum(axis=(2, 3)).astype(float)
    change = np.abs(black - black_true)[:, judged].mean(1) / np.maximum(black_true[:, judged].mean(1), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: nothing to judge
        drift = np.nanmax(distance, axis=1)
        gain = np.nanmax(total, axis=1) / rest - 1
    report = pd.DataFrame({"vanished": vanished, "appeared": appeared, "drift": drift, "energy_gain": gain,
                           "static_change": change})
    report["abnormal"] = (vanished | appeared | (np.nan_to_num(drift) > drift_limit)
                          | (np.nan_to_num(gain) > energy_limit) | (change > static_limit))
    return report


# --------------------------------------------------------------------------
# the world model's protocol: the recipe's and the benchmark's
# --------------------------------------------------------------------------
#: Conditioning frames of every clip; the rest are generated.
N_COND = 3
#: The buckets of the evaluation grid (:func:`skicml.datasets.make_physics_eval`).
BUCKETS = ("id", "r_out", "v_out", "rv_out", "zero")


#: The model of the prepared one-H100 runs (``--gpu`` of the world-model
#: benchmarks), as arguments of :func:`add_model_options`' parser.
GPU_MODEL_OPTIONS = ("--patch-size", "4", "--d-model", "128", "--depth", "4", "--batch-size", "64", "--lr", "5e-4",
                     "--ema-decay", "0.999", "--sampling-steps", "20", "--device", "cuda", "--threads", "8")


def add_model_options(parser):
    """The model's and the evaluation's options, shared by the recipe and the benchmark."""
    parser.add_argument("--steps", type=int, default=1000, help="optimiser steps")
    parser.add_argument("--n-frames", type=int, default=8, help="frames per clip, 3 of them given")
    parser.add_argument("--patch-size", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ema-decay", type=float, default=0.99)
    parser.add_argument("--time-sampling", default="logit_normal", choices=TIME_SAMPLINGS)
    parser.add_argument("--sampling-steps", type=int, default=10)
    parser.add_argument("--n-eval", type=int, default=30, help="clips per evaluation bucket")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    return parser


def recipe_model(args, n_videos, **extra):
    """The estimator of these options for ``n_videos`` training clips (the benchmark's, too).

    ``fit`` runs whole epochs: ``--steps`` rounded to epochs of
    ``ceil(n_videos / batch_size)`` steps.
    """
    from ._world_model import VideoWorldModel  # here: that module imports this one

    steps_per_epoch = math.ceil(n_videos / args.batch_size)
    return VideoWorldModel(patch_size=args.patch_size, d_model=args.d_model, depth=args.depth,
                           n_heads=args.n_heads, n_sampling_steps=args.sampling_steps,
                           time_sampling=args.time_sampling, ema_decay=args.ema_decay,
                           max_epochs=max(1, round(args.steps / steps_per_epoch)), batch_size=args.batch_size,
                           lr=args.lr, device=args.device, random_state=args.seed, **extra)


def pretrained_model(source, args, clips):
    """VideoWorldModel with the network of a weights file as it is, sampling as these options say.

    ``source`` is a shipped name or a file; ``clips`` (whole clips) only
    give ``fit`` the layout.
    """
    from ._world_model import VideoWorldModel  # here: that module imports this one

    model = VideoWorldModel(pretrained=source, max_epochs=0, n_sampling_steps=args.sampling_steps,
                            batch_size=args.batch_size, device=args.device, random_state=args.seed)
    return model.fit(clips[:, :N_COND], clips[:, N_COND:])


def bucket_means(future, test, scenario="uniform", column="vel_error"):
    """Mean ``column`` of :func:`velocity_error` per bucket of the evaluation grid ``test``."""
    errors = velocity_error(future, test.params, scenario, n_cond_frames=N_COND, states_true=test.states)
    summary = summarize_by_bucket(errors, columns=[column])[column]["mean"]
    return {bucket: float(summary.get(bucket, np.nan)) for bucket in BUCKETS}


def speed_following(model, test):
    """Does the generated speed follow the given one? Over the grid's in-distribution clips.

    The correlation of the parsed speed of the rollouts with the true one,
    the slope of the generated speed on the true one (1 when it follows, 0
    when it ignores it: a correlation alone can be high between two nearly
    constant speeds), both means, and the velocity error.
    """
    inside = (test.params["bucket"] == "id").to_numpy()
    full = model.predict(test.videos[inside, :N_COND], return_full=True)
    generated = infer_attributes(full, n_cond_frames=N_COND, colors=["red"])["velocity"].to_numpy()
    true = test.params["v1"].to_numpy()[inside]
    found = np.isfinite(generated)
    errors = velocity_error(full, test.params[inside], "uniform", n_cond_frames=N_COND,
                            states_true=test.states[inside])
    correlation, slope = np.nan, np.nan
    if found.sum() > 2:
        correlation = np.corrcoef(true[found], generated[found])[0, 1]
        slope = np.polyfit(true[found], generated[found], 1)[0]
    return {"correlation": float(correlation), "slope": float(slope), "v_true_mean": float(true.mean()),
            "v_generated_mean": float(np.mean(generated[found])) if found.any() else float("nan"),
            "vel_error_id": float(errors["vel_error"].mean())}
