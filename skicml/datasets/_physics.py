"""Videos of one physical law each, their ID/OOD evaluation grids and the analysis splits.

Used by one family: ``video`` (the physics world-model testbed's recipe and
tour row).

The data of "How Far is Video Generation from World Model: A Physical Law
Perspective" (Kang et al., ICML 2025), generated offline by the closed-form
simulator of :func:`~skicml.datasets.simulate_physics`:

- :func:`make_physics_videos`: videos of uniform motion, parabolic motion,
  an elastic collision, a bounce or a resting object, with the official
  ranges and placement rules, or rendered from a table of parameters.
- :func:`make_physics_eval`: the official in-distribution and
  out-of-distribution evaluation grids, each video labelled with its
  bucket (``id``, ``r_out``, ``v_out``, ``rv_out``, ``zero``).
- :func:`make_gap_split`, :func:`make_collision_hole_split`,
  :func:`make_attribute_pair_split`, :func:`make_flip_split`: the
  parameter tables of the paper's analysis experiments, to render with
  ``make_physics_videos(params=...)``.
"""

import itertools
import warnings

import numpy as np
import pandas as pd
from sklearn.utils import Bunch, check_random_state

from ..utils.param_validation import Integral, Interval, Real, StrOptions, validate_params
from ._physics_world import (
    PHYSICS_COLORS,
    PHYSICS_SCENARIOS,
    PHYSICS_SHAPES,
    _check_choice,
    render_videos,
    simulate_physics,
)
from ._validation import check_int

__all__ = [
    "PHYSICS_ID_RANGES",
    "PHYSICS_OOD_VALUES",
    "make_attribute_pair_split",
    "make_collision_hole_split",
    "make_flip_split",
    "make_gap_split",
    "make_physics_eval",
    "make_physics_videos",
    "ood_bucket",
]

#: The training ranges of the official generators: speed ``v`` and radius
#: ``r`` (of each ball, for a collision).
PHYSICS_ID_RANGES = {
    "uniform": {"v": (1.0, 4.0), "r": (0.7, 1.4)},
    "parabola": {"v": (1.0, 4.0), "r": (0.7, 1.4)},
    "collision": {"v": (1.0, 4.0), "r": (0.5, 1.5)},
}

#: The values of the official evaluation grids: in-distribution companions
#: (``id``) and the low and high out-of-distribution ranges, each as
#: ``(low, high, n_points)`` of a ``numpy.linspace``.
PHYSICS_OOD_VALUES = {
    "uniform": {"v": {"id": (1.0, 4.0, 16, 2), "low": (0.0, 0.8, 11), "high": (4.5, 6.0, 6)},
                "r": {"id": (0.7, 1.4, 6), "low": (0.3, 0.6, 11), "high": (1.5, 2.0, 6)}},
    "parabola": {"v": {"id": (1.0, 4.0, 16, 2), "low": (0.0, 0.8, 11), "high": (4.5, 6.0, 6)},
                 "r": {"id": (0.7, 1.4, 6), "low": (0.3, 0.6, 11), "high": (1.5, 2.0, 6)}},
    "collision": {"v": {"id": (1.0, 4.0, 16, 2), "low": (0.0, 0.8, 11), "high": (4.5, 6.0, 6)},
                  "r": {"id": (0.5, 1.5, 6), "low": (0.3, 0.4, 11), "high": (1.7, 2.0, 6)}},
}

_FRAME_DT = 0.1
_MARGIN = 0.5          # the official generators keep a ball this far from the top and bottom
_LOPSIDED_SLACK = 0.5  # how far from its wall the larger of two very unequal balls may start

_DESCR = """\
Physical-law videos (skicml.datasets.make_physics_videos)
==========================================================

Closed-form simulations of the scenarios of Kang et al. (ICML 2025), "How
Far is Video Generation from World Model: A Physical Law Perspective",
rendered on a white background in a 10 x 10 world, one frame every 0.1 s.
Uniform and parabolic motion: one red ball; speed in [1, 4] and radius in
[0.7, 1.4] by default; the ball stays fully in view for at least 24 frames
where that is possible; parabolic motion starts near the top with a
horizontal velocity and falls at g = 2.5. Collision: a red ball moving
right meets a blue ball moving left on one horizontal line, elastically,
with masses proportional to r^2; at least 8 frames before and 8 after the
collision. ``states`` are the exact world positions, ``params`` one row per
video (radii, speeds, start positions, velocities, colours, shapes).
"""


# ---------------------------------------------------------------- argument checks

def _check_range(value, name, low, high=np.inf, strict_low=False):
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a (low, high) pair of numbers, got {value!r}.") from None
    below = lo <= low if strict_low else lo < low
    if not (np.isfinite(lo) and np.isfinite(hi)) or below or hi > high or lo > hi:
        bound = f"> {low}" if strict_low else f">= {low}"
        raise ValueError(f"{name} must be a (low, high) pair with {bound}, low <= high <= {high}, "
                         f"got {value!r}.")
    return lo, hi


def _check_pair_of_counts(value, name):
    try:
        a, b = value
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair of integers (n_v, n_r), got {value!r}.") from None
    return check_int(a, f"{name}[0]", 1), check_int(b, f"{name}[1]", 1)


def _linspace(spec):
    values = np.linspace(*spec[:3])
    return values[::spec[3]] if len(spec) > 3 else values


# ---------------------------------------------------------------- placement

def _uniform_window(v, r, n_frames, min_frames_in_view, world_size, rng):
    """Start positions along the motion: in view for ``min_frames_in_view`` frames where possible."""
    frames = min(min_frames_in_view, n_frames)
    high = world_size - (frames * v * _FRAME_DT + r)
    spread = rng.uniform(size=len(v))
    # Too fast to stay in view that long: start just inside the left edge.
    return np.where(high >= r, r + spread * (high - r), r + spread * _MARGIN)


def _collision_gap_bounds(table, n_frames, min_pre, min_post, world_size):
    """Allowed gaps between the balls' surfaces at the start, ``(low, high)`` per row."""
    closing = table["v1"].to_numpy() + table["v2"].to_numpy()
    sum_r = table["r1"].to_numpy() + table["r2"].to_numpy()
    room = world_size - 2 * sum_r
    low = min_pre * _FRAME_DT * closing
    high = np.where(closing > 0, (n_frames - min_post) * _FRAME_DT * closing, room)
    return low, np.minimum(high, room)


def _feasible(scenario, table, n_frames, min_pre, min_post, world_size):
    """Whether each row of attributes has a placement that the rules allow."""
    r1 = table["r1"].to_numpy()
    if scenario == "collision":
        r_max = np.maximum(r1, table["r2"].to_numpy())
        low, high = _collision_gap_bounds(table, n_frames, min_pre, min_post, world_size)
        return (low <= high) & (2 * (r_max + _MARGIN) <= world_size)
    ok = 2 * (r1 + _MARGIN) <= world_size
    if scenario == "bounce":
        v = table["v1"].to_numpy()
        room = world_size - 2 * r1
        ok &= (v > 0) & (min_pre * _FRAME_DT * v <= np.minimum(room, (n_frames - min_post) * _FRAME_DT * v))
    return ok


def _place(scenario, table, n_frames, min_frames_in_view, min_pre, min_post, world_size, rng):
    """Add start positions (x1, y1, and x2, y2) to a table of feasible attributes."""
    n = len(table)
    r1, v1 = table["r1"].to_numpy(), table["v1"].to_numpy()
    if scenario == "collision":
        r2 = table["r2"].to_numpy()
        r_max = np.maximum(r1, r2)
        height = rng.uniform(r_max + _MARGIN, world_size - _MARGIN - r_max)
        low, high = _collision_gap_bounds(table, n_frames, min_pre, min_post, world_size)
        lopsided = (r1 > 2 * r2) | (r2 > 2 * r1)
        # A much heavier ball barely slows down: start it close to the pair's
        # meeting point so the lighter one keeps enough frames after the hit.
        high = np.where(lopsided, np.minimum(high, 1.25 * low), high)
        gap = low + rng.uniform(size=n) * (high - low)
        x1_high = world_size - r1 - 2 * r2 - gap
        x1_low = np.where(r2 > 2 * r1, np.maximum(r1, x1_high - _LOPSIDED_SLACK), r1)
        x1_high = np.where(r1 > 2 * r2, np.minimum(x1_high, r1 + _LOPSIDED_SLACK), x1_high)
        x1 = x1_low + rng.uniform(size=n) * (x1_high - x1_low)
        table["x1"], table["y1"] = x1, height
        table["x2"], table["y2"] = x1 + r1 + r2 + gap, height
        table["vx1"], table["vy1"] = v1, 0.0
        table["vx2"], table["vy2"] = -table["v2"].to_numpy(), 0.0
        return table
    if scenario == "parabola":
        across = rng.uniform(world_size - 1.5 - r1, world_size - _MARGIN - r1)
    else:
        across = rng.uniform(r1 + _MARGIN, world_size - _MARGIN - r1)
    if scenario == "static":
        along = rng.uniform(r1, world_size - r1)
    elif scenario == "bounce":
        # The distance to the wall leaves min_pre frames before the bounce and min_post after it.
        room = world_size - 2 * r1
        low = min_pre * _FRAME_DT * v1
        high = np.minimum(room, (n_frames - min_post) * _FRAME_DT * v1)
        along = world_size - r1 - (low + rng.uniform(size=n) * (high - low))
    else:
        along = _uniform_window(v1, r1, n_frames, min_frames_in_view, world_size, rng)
    direction = table["direction"].to_numpy() if "direction" in table else np.full(n, "right")
    vertical = np.isin(direction, ("up", "down"))
    backwards = np.isin(direction, ("left", "down"))
    along = np.where(backwards, world_size - along, along)
    table["x1"] = np.where(vertical, across, along)
    table["y1"] = np.where(vertical, along, across)
    speed = 0.0 if scenario == "static" else v1
    sign = np.where(backwards, -1.0, 1.0)
    table["vx1"] = np.where(vertical, 0.0, sign * speed)
    table["vy1"] = np.where(vertical, sign * speed, 0.0)
    return table


def _object_names(value, name, n_objects, defaults, options):
    if value is None:
        return list(defaults[:n_objects])
    if isinstance(value, str):
        value = [value] * n_objects
    value = list(value)
    if len(value) != n_objects:
        raise ValueError(f"{name} must be one name or {n_objects} (one per object), got {value!r}.")
    for item in value:
        _check_choice(item, name, options)
    return value


def _draw_attributes(scenario, n, v_range, r_range, rng):
    n_objects = PHYSICS_SCENARIOS[scenario]
    columns = {}
    for k in range(1, n_objects + 1):
        columns[f"r{k}"] = rng.uniform(*r_range, size=n)
        columns[f"v{k}"] = rng.uniform(*v_range, size=n) if scenario != "static" else np.zeros(n)
    return pd.DataFrame(columns)


def _grid_attributes(scenario, grid, v_range, r_range):
    n_v, n_r = grid
    v_values, r_values = np.linspace(*v_range, n_v), np.linspace(*r_range, n_r)
    if scenario == "static":
        v_values = np.zeros(1)
    if PHYSICS_SCENARIOS[scenario] == 2:
        rows = itertools.product(r_values, r_values, v_values, v_values)
        return pd.DataFrame(list(rows), columns=["r1", "r2", "v1", "v2"])
    rows = itertools.product(v_values, r_values)
    return pd.DataFrame(list(rows), columns=["v1", "r1"])[["r1", "v1"]]


_ANTIALIAS = StrOptions({"area", "soft_disc", "none"})
_PAIR = ["array-like"]


@validate_params(
    {
        "scenario": [StrOptions(set(PHYSICS_SCENARIOS))],
        "n_samples": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "params": [pd.DataFrame, dict, None],
        "v_range": ["array-like", None],
        "r_range": ["array-like", None],
        "sampling": [StrOptions({"random", "grid"})],
        "resolution": [Interval(Integral, 2, None, closed="left")],
        "n_frames": [Interval(Integral, 2, None, closed="left")],
        "color": [str, "array-like", None],
        "shape": [str, "array-like", None],
        "direction": [StrOptions({"right", "left", "up", "down"})],
        "min_frames_in_view": [Interval(Integral, 0, None, closed="left")],
        "min_pre": [Interval(Integral, 0, None, closed="left")],
        "min_post": [Interval(Integral, 0, None, closed="left")],
        "antialias": [_ANTIALIAS],
        "world_size": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_physics_videos(scenario="uniform", n_samples=100, *, params=None, v_range=None, r_range=None,
                        sampling="random", resolution=32, n_frames=32, color=None, shape="circle",
                        direction="right", min_frames_in_view=24, min_pre=8, min_post=8, antialias="area",
                        world_size=10.0, random_state=None):
    """Videos of one physical law, with their exact states and parameters.

    The official generators' rules, in closed form (see
    :func:`simulate_physics`): a ball of uniform motion starts at a height
    in ``[r + 0.5, 9.5 - r]`` and far enough left to stay fully in view for
    ``min_frames_in_view`` frames (if it is too fast for that, just inside
    the left edge); a parabola starts at a height in ``[8.5 - r, 9.5 - r]``
    with a horizontal velocity; two colliding balls share a height and are
    placed so that at least ``min_pre`` frames come before the collision and
    ``min_post`` after, a much larger ball (radius over twice the other's)
    starting near its edge of the view. Attributes without such a placement
    are redrawn (``sampling="random"``), dropped with a warning like the
    official scripts do (``"grid"``), or refused (``params``).

    Parameters
    ----------
    scenario : {"uniform", "parabola", "collision", "bounce", "static"}, default="uniform"
        ``"bounce"``: uniform motion to the right that reflects off the right
        edge of the view; ``"static"``: a resting object.
    n_samples : int or (int, int), default=100
        Videos to draw (``sampling="random"``), or ``(n_v, n_r)`` points of
        the grid over each speed and radius (``sampling="grid"``): ``n_v *
        n_r`` videos, ``(n_r * n_v) ** 2`` for a collision (the official
        grids: 300 x 100 for 30K uniform videos, 21 speeds x 8 radii for
        28,224 collisions). Not used when ``params`` is given.
    params : DataFrame or None, default=None
        Attributes to render instead of drawing them: one row per video with
        ``r1`` and ``v1`` (and ``r2``, ``v2`` for a collision), and optionally
        ``color1``, ``shape1`` (``color2``, ``shape2``), ``direction`` and
        the start positions ``x1``, ``y1`` (``x2``, ``y2``); missing start
        positions are placed by the rules above. The split builders
        (:func:`make_attribute_pair_split`, ...) return such tables.
    v_range, r_range : (float, float) or None, default=None
        Ranges of speed and radius; ``None`` takes the official ones
        (:data:`PHYSICS_ID_RANGES`; ``[1, 4]`` and ``[0.7, 1.4]`` for the
        scenarios without their own).
    sampling : {"random", "grid"}, default="random"
    resolution : int, default=32
        Pixels per side.
    n_frames : int, default=32
    color : str, sequence of str or None, default=None
        A name of :data:`PHYSICS_COLORS` per object (``None``: red, and
        blue for a collision's second ball).
    shape : str or sequence of str, default="circle"
        ``"circle"``, ``"square"`` or ``"ring"`` per object.
    direction : {"right", "left", "up", "down"}, default="right"
        Direction of uniform motion (parabola: right or left).
    min_frames_in_view : int, default=24
    min_pre, min_post : int, default=8
        Frames before and after the collision (the bounce).
    antialias : {"area", "soft_disc", "none"}, default="area"
        See :func:`render_videos`.
    world_size : float, default=10.0
    random_state : int, RandomState instance or None, default=None
        Draws the attributes and the start positions; grid values need none.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        videos : ndarray of shape (n_videos, n_frames, resolution, resolution, 3), uint8
        states : ndarray of shape (n_videos, n_frames, n_objects, 2)
            World positions of each object in each frame.
        params : DataFrame
            ``r1``, ``v1``, ``x1``, ``y1``, ``vx1``, ``vy1``, ``color1``,
            ``shape1`` (and the same for ball 2), ``direction``, plus any
            extra column of the ``params`` given.
        scenario : str
        frame_dt : float
            Seconds between frames (0.1).
        world_size : float
        DESCR : str

    Raises
    ------
    ValueError
        For an unknown scenario, ranges out of bounds (a radius that cannot
        fit in the world, a negative speed), ``min_*`` frame counts beyond
        ``n_frames``, or ``params`` rows without a placement.

    Examples
    --------
    >>> from skicml.datasets import make_physics_videos
    >>> data = make_physics_videos("collision", 4, resolution=32, n_frames=16, random_state=0)
    >>> data.videos.shape, data.states.shape
    ((4, 16, 32, 32, 3), (4, 16, 2, 2))
    >>> sorted(data.params.columns)[:6]
    ['color1', 'color2', 'r1', 'r2', 'shape1', 'shape2']
    """
    if scenario in ("collision", "bounce") and min_pre + min_post > n_frames:
        raise ValueError(f"min_pre + min_post = {min_pre + min_post} frames do not fit in n_frames={n_frames}.")
    world_size = float(world_size)
    default = PHYSICS_ID_RANGES.get(scenario, PHYSICS_ID_RANGES["uniform"])
    v_range = _check_range(default["v"] if v_range is None else v_range, "v_range", 0.0)
    r_range = _check_range(default["r"] if r_range is None else r_range, "r_range", 0.0,
                           high=world_size / 2 - _MARGIN, strict_low=True)
    n_objects = PHYSICS_SCENARIOS[scenario]
    allowed_directions = {"parabola": ("right", "left")}.get(scenario, ("right", "left", "up", "down"))
    _check_choice(direction, "direction", allowed_directions)
    colors = _object_names(color, "color", n_objects, ("red", "blue", "green"), PHYSICS_COLORS)
    shapes = _object_names(shape, "shape", n_objects, ("circle",) * 3, PHYSICS_SHAPES)
    rng = check_random_state(random_state)
    place_args = (n_frames, min_pre, min_post, world_size)

    if params is not None:
        table = _table_from_params(params, scenario, n_objects)
        placed = all(f"{c}{k}" in table for k in range(1, n_objects + 1) for c in "xy")
        if not placed:
            ok = _feasible(scenario, table, *place_args)
            if not ok.all():
                bad = np.flatnonzero(~ok)
                raise ValueError(f"params rows {bad[:5].tolist()} (of {len(bad)}) have no placement with "
                                 f"min_pre={min_pre}, min_post={min_post}, n_frames={n_frames}: e.g. "
                                 f"{table.iloc[bad[0]][[c for c in ('r1', 'r2', 'v1', 'v2') if c in table]].to_dict()}.")
    elif sampling == "grid":
        table = _grid_attributes(scenario, _check_pair_of_counts(n_samples, "n_samples"), v_range, r_range)
        ok = _feasible(scenario, table, *place_args)
        if not ok.all():
            warnings.warn(f"{int((~ok).sum())} of {len(table)} grid points have no placement with "
                          f"min_pre={min_pre}, min_post={min_post} and are dropped, as the official "
                          "generators drop them.", UserWarning, stacklevel=2)
            table = table[ok].reset_index(drop=True)
    else:
        n = check_int(n_samples, "n_samples", 1)
        table = _draw_attributes(scenario, n, v_range, r_range, rng)
        for _ in range(100):
            ok = _feasible(scenario, table, *place_args)
            if ok.all():
                break
            redraw = _draw_attributes(scenario, int((~ok).sum()), v_range, r_range, rng)
            table.loc[~ok, redraw.columns] = redraw.to_numpy()
        else:
            raise ValueError(f"v_range={v_range} and r_range={r_range} leave too few {scenario} placements "
                             f"with min_pre={min_pre}, min_post={min_post}, n_frames={n_frames}.")
    if len(table) == 0:
        raise ValueError("no video to render: the grid or params table is empty.")

    for k in range(1, n_objects + 1):
        if f"color{k}" not in table:
            table[f"color{k}"] = colors[k - 1]
        if f"shape{k}" not in table:
            table[f"shape{k}"] = shapes[k - 1]
    if scenario != "collision" and "direction" not in table:
        table["direction"] = direction
    if not all(f"{c}{k}" in table for k in range(1, n_objects + 1) for c in "xy"):
        table = _place(scenario, table, n_frames, min_frames_in_view, min_pre, min_post, world_size, rng)
    states = simulate_physics(scenario, table, n_frames=n_frames, frame_dt=_FRAME_DT, world_size=world_size)
    radii = table[[f"r{k}" for k in range(1, n_objects + 1)]].to_numpy()
    videos = render_videos(states, radii,
                           colors=table[[f"color{k}" for k in range(1, n_objects + 1)]].to_numpy(),
                           shapes=table[[f"shape{k}" for k in range(1, n_objects + 1)]].to_numpy(),
                           resolution=resolution, antialias=antialias, world_size=world_size)
    return Bunch(videos=videos, states=states, params=table, scenario=scenario, frame_dt=_FRAME_DT,
                 world_size=world_size, DESCR=_DESCR)


def _table_from_params(params, scenario, n_objects):
    if not isinstance(params, pd.DataFrame):
        if isinstance(params, dict):
            params = pd.DataFrame(params)
        else:
            raise TypeError(f"params must be a pandas DataFrame, got {type(params).__name__}.")
    table = params.reset_index(drop=True).copy()
    needed = [f"{c}{k}" for k in range(1, n_objects + 1) for c in ("r", "v")]
    if scenario == "static":
        needed = [c for c in needed if not c.startswith("v")]
        table["v1"] = table["v1"] if "v1" in table else 0.0
    missing = [c for c in needed if c not in table]
    if missing:
        raise ValueError(f"params lacks the columns {missing} that a {scenario} video needs.")
    for column in needed:
        values = table[column].to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(values)) or np.any(values < 0) or (column[0] == "r" and np.any(values <= 0)):
            raise ValueError(f"params[{column!r}] must be finite and {'> 0' if column[0] == 'r' else '>= 0'}.")
    return table


# ---------------------------------------------------------------- evaluation grids

def ood_bucket(params, id_ranges=None, scenario="uniform"):
    """The evaluation bucket of each video: in or out of the training ranges.

    ``"zero"`` when every speed is 0; ``"id"`` when every radius and speed
    is in range; ``"r_out"`` when only radii leave it, ``"v_out"`` when only
    speeds do, ``"rv_out"`` when both do (the official buckets).

    Parameters
    ----------
    params : DataFrame
        ``r1``, ``v1`` (and ``r2``, ``v2``).
    id_ranges : dict or None, default=None
        ``{"v": (low, high), "r": (low, high)}``; ``None`` takes
        :data:`PHYSICS_ID_RANGES` of ``scenario``.
    scenario : str, default="uniform"

    Returns
    -------
    buckets : ndarray of str, shape (n_videos,)

    Examples
    --------
    >>> import pandas as pd
    >>> from skicml.datasets import ood_bucket
    >>> ood_bucket(pd.DataFrame({"r1": [1.0, 0.4, 1.0, 1.0], "v1": [2.0, 2.0, 5.0, 0.0]})).tolist()
    ['id', 'r_out', 'v_out', 'zero']
    """
    if id_ranges is None:
        id_ranges = PHYSICS_ID_RANGES[_check_choice(scenario, "scenario", PHYSICS_ID_RANGES)]
    eps = 1e-9
    speeds = [c for c in ("v1", "v2") if c in params]
    radii = [c for c in ("r1", "r2") if c in params]
    if not speeds or not radii:
        raise ValueError(f"params needs r1 and v1 columns, got {list(params.columns)}.")
    v = params[speeds].to_numpy(dtype=np.float64)
    r = params[radii].to_numpy(dtype=np.float64)
    v_in = np.all((v >= id_ranges["v"][0] - eps) & (v <= id_ranges["v"][1] + eps), axis=1)
    r_in = np.all((r >= id_ranges["r"][0] - eps) & (r <= id_ranges["r"][1] + eps), axis=1)
    bucket = np.where(r_in & v_in, "id", np.where(v_in, "r_out", np.where(r_in, "v_out", "rv_out")))
    return np.where(np.all(v == 0, axis=1), "zero", bucket).astype(object)


@validate_params(
    {
        "scenario": [StrOptions(set(PHYSICS_OOD_VALUES))],
        "n_per_bucket": [Interval(Integral, 1, None, closed="left"), None],
        "resolution": [Interval(Integral, 2, None, closed="left")],
        "n_frames": [Interval(Integral, 2, None, closed="left")],
        "min_radius": [Interval(Real, 0, None, closed="left"), None],
        "antialias": [_ANTIALIAS],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_physics_eval(scenario="uniform", n_per_bucket=50, *, resolution=32, n_frames=32, min_radius=None,
                      antialias="area", random_state=None):
    """The official ID / OOD evaluation grid, rendered, with each video's bucket.

    Values per attribute (:data:`PHYSICS_OOD_VALUES`): the in-distribution
    companions (8 speeds of ``linspace(1, 4, 16)[::2]``, 6 radii over the
    training range), and the low and high out-of-distribution ranges (speed
    ``[0, 0.8]`` and ``[4.5, 6]``; radius ``[0.3, 0.6]`` and ``[1.5, 2]``,
    for collisions ``[0.3, 0.4]`` and ``[1.7, 2]``). Every combination of
    them (per ball, for a collision) gets its bucket (:func:`ood_bucket`)
    and ``level``, the attributes out of range and on which side (such as
    ``"r1:low,v1:high"``, the official "cross" levels included); up to
    ``n_per_bucket`` placeable combinations per bucket are kept at random.

    Parameters
    ----------
    scenario : {"uniform", "parabola", "collision"}, default="uniform"
    n_per_bucket : int or None, default=50
        ``None`` keeps every combination (330,625 for a collision).
    resolution : int, default=32
    n_frames : int, default=32
    min_radius : float or None, default=None
        Leave out radii below it; the official evaluation drops ``r < 0.6``
        (uniform, parabola) as "disappearing balls" at 128 px.
    antialias : {"area", "soft_disc", "none"}, default="area"
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        As :func:`make_physics_videos`, with ``bucket`` and ``level``
        columns in ``params``.

    Examples
    --------
    >>> from skicml.datasets import make_physics_eval
    >>> data = make_physics_eval("uniform", n_per_bucket=2, n_frames=8, random_state=0)
    >>> data.params["bucket"].value_counts().sort_index().to_dict()
    {'id': 2, 'r_out': 2, 'rv_out': 2, 'v_out': 2, 'zero': 2}
    """
    rng = check_random_state(random_state)
    values, sides = {}, {}
    for attribute, specs in PHYSICS_OOD_VALUES[scenario].items():
        parts = [(side, _linspace(spec)) for side, spec in specs.items()]
        values[attribute] = np.concatenate([v for _, v in parts])
        sides[attribute] = np.concatenate([[side] * len(v) for side, v in parts])
    if min_radius is not None:
        keep = values["r"] >= float(min_radius) - 1e-9
        values["r"], sides["r"] = values["r"][keep], sides["r"][keep]
    n_objects = PHYSICS_SCENARIOS[scenario]
    names = [f"{a}{k}" for k in range(1, n_objects + 1) for a in ("r", "v")]
    index = np.meshgrid(*[np.arange(len(values[name[0]])) for name in names], indexing="ij")
    index = {name: i.ravel() for name, i in zip(names, index)}
    table = pd.DataFrame({name: values[name[0]][index[name]] for name in names})
    level = np.full(len(table), "", dtype=object)
    for name in names:
        side = sides[name[0]][index[name]]
        tag = np.where(side == "id", "", name + ":" + side.astype(object))
        level = np.where((level != "") & (tag != ""), level + "," + tag, level + tag)
    table["level"] = np.where(level == "", "id", level)
    table["bucket"] = ood_bucket(table, scenario=scenario)
    table = table[_feasible(scenario, table, n_frames, 8, 8, 10.0)]
    if n_per_bucket is not None:
        picked = [rng.choice(rows, size=min(n_per_bucket, len(rows)), replace=False)
                  for _, rows in sorted(table.groupby("bucket").indices.items())]
        table = table.iloc[np.sort(np.concatenate(picked))]
    return make_physics_videos(scenario, params=table.reset_index(drop=True), resolution=resolution,
                               n_frames=n_frames, antialias=antialias, random_state=rng)


# ---------------------------------------------------------------- analysis splits

def _grid_table(v_values, r_values, **constant):
    rows = pd.DataFrame(list(itertools.product(r_values, v_values)), columns=["r1", "v1"])
    for key, value in constant.items():
        rows[key] = value
    return rows


@validate_params(
    {
        "train_bands": ["array-like"],
        "r_range": _PAIR,
        "n_train": _PAIR,
        "eval_grid": _PAIR,
        "eval_range": _PAIR,
        "extrapolation": ["array-like"],
        "n_extrapolation": [Interval(Integral, 1, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def make_gap_split(train_bands=((1.0, 1.25), (3.75, 4.0)), *, r_range=(0.7, 1.4), n_train=(100, 30),
                   eval_grid=(121, 36), eval_range=(1.0, 4.0), extrapolation=((0.0, 1.0), (4.0, 6.0)),
                   n_extrapolation=21):
    """Uniform motion trained on speed bands with gaps, evaluated inside and outside them.

    The interpolation experiment (``one_ball_uniform_motion_square_out``):
    train on ``train_bands`` of speed (the paper: ``[1, 1.25] U [3.75, 4]``,
    ``[1, 1.5] U [3.5, 4]``, ``[1, 1.75] U [3.25, 4]``, and with a middle
    band ``[1, 1.25] U [2.375, 2.625] U [3.75, 4]``), evaluate over
    ``eval_range`` x ``r_range`` and on the extrapolation ranges.

    Parameters
    ----------
    train_bands : sequence of (float, float), default=((1.0, 1.25), (3.75, 4.0))
    r_range : (float, float), default=(0.7, 1.4)
    n_train : (int, int), default=(100, 30)
        Speeds (spread over the bands by width) and radii of the training grid.
    eval_grid : (int, int), default=(121, 36)
        Speeds and radii of the evaluation grid over ``eval_range``.
    eval_range : (float, float), default=(1.0, 4.0)
    extrapolation : sequence of (float, float), default=((0.0, 1.0), (4.0, 6.0))
    n_extrapolation : int, default=21
        Speeds per extrapolation range (radii as ``eval_grid``).

    Returns
    -------
    split : :class:`~sklearn.utils.Bunch`
        train, test : DataFrame
            ``r1``, ``v1``; ``test`` also ``region``: ``"band"`` (a training
            band), ``"gap"`` or ``"extrapolation"``.
        bands : list of (float, float)

    Examples
    --------
    >>> from skicml.datasets import make_gap_split, make_physics_videos
    >>> split = make_gap_split(n_train=(8, 2), eval_grid=(13, 2), n_extrapolation=3)
    >>> split.test["region"].value_counts().to_dict()
    {'gap': 18, 'extrapolation': 12, 'band': 8}
    >>> make_physics_videos("uniform", params=split.train, n_frames=8, random_state=0).videos.shape
    (16, 8, 32, 32, 3)
    """
    bands = [_check_range(band, "train_bands", 0.0) for band in train_bands]
    if not bands:
        raise ValueError("train_bands must hold at least one (low, high) band.")
    r_range = _check_range(r_range, "r_range", 0.0, strict_low=True)
    n_v, n_r = _check_pair_of_counts(n_train, "n_train")
    widths = np.array([hi - lo for lo, hi in bands])
    share = np.maximum(1, np.round(n_v * widths / max(widths.sum(), 1e-12)).astype(int))
    v_train = np.concatenate([np.linspace(lo, hi, k) for (lo, hi), k in zip(bands, share)])
    train = _grid_table(v_train, np.linspace(*r_range, n_r))
    e_v, e_r = _check_pair_of_counts(eval_grid, "eval_grid")
    r_eval = np.linspace(*r_range, e_r)
    test = _grid_table(np.linspace(*_check_range(eval_range, "eval_range", 0.0), e_v), r_eval)
    in_band = np.zeros(len(test), dtype=bool)
    for lo, hi in bands:
        in_band |= (test["v1"] >= lo - 1e-9) & (test["v1"] <= hi + 1e-9)
    test["region"] = np.where(in_band, "band", "gap")
    outside = [_grid_table(np.linspace(*_check_range(rng, "extrapolation", 0.0), n_extrapolation), r_eval,
                           region="extrapolation") for rng in extrapolation]
    test = pd.concat([test, *outside], ignore_index=True)
    return Bunch(train=train, test=test, bands=bands)


#: Holes of the collision interpolation experiment, as boxes over (v1, v2),
#: or over (r1, r2) for the mass hole.
_COLLISION_HOLES = {
    "center": ("velocity", [((2.0, 3.0), (2.0, 3.0))]),
    "three": ("velocity", [((1.2, 2.2), (2.7, 3.7)), ((2.7, 3.7), (1.2, 2.2)), ((2.9, 3.5), (3.3, 3.9))]),
    # Training keeps the "L" where v1 or v2 is at most 2.5: the corner beyond
    # both is outside the L's convex hull only in part.
    "L": ("velocity", [((2.5, 4.0), (2.5, 4.0))]),
    "mass": ("mass", [((0.8, 1.2), (0.8, 1.2))]),
}


@validate_params(
    {
        "holes": [StrOptions(set(_COLLISION_HOLES)), "array-like"],
        "kind": [StrOptions({"velocity", "mass"}), None],
        "grid": _PAIR,
        "test_grid": _PAIR,
    },
    prefer_skip_nested_validation=True,
)
def make_collision_hole_split(holes="center", *, kind=None, grid=(8, 21), test_grid=(5, 31)):
    """Collisions trained on a grid with holes, evaluated inside the holes.

    The collision interpolation experiment (``two_balls_collision_square_out``):
    holes inside the convex hull of the training set interpolate (error
    near ID), holes outside it do not.

    Parameters
    ----------
    holes : {"center", "three", "L", "mass"} or list of ((float, float), (float, float)), default="center"
        Presets: the centre box ``[2, 3]^2`` of ``(v1, v2)``; three boxes
        ``[1.2, 2.2] x [2.7, 3.7]``, ``[2.7, 3.7] x [1.2, 2.2]`` and ``[2.9,
        3.5] x [3.3, 3.9]``; the corner ``[2.5, 4]^2`` (training keeps the
        "L" where ``v1 <= 2.5`` or ``v2 <= 2.5``); the mass hole ``[0.8,
        1.2]^2`` of ``(r1, r2)``. Or boxes of your own.
    kind : {"velocity", "mass"} or None, default=None
        Whether boxes are over ``(v1, v2)`` or ``(r1, r2)``; presets set it.
    grid : (int, int), default=(8, 21)
        Radii and speeds of the training grid (the official 30K level).
    test_grid : (int, int), default=(5, 31)
        Radii and speeds of the grid whose points inside the holes form the test set.

    Returns
    -------
    split : :class:`~sklearn.utils.Bunch`
        train, test : DataFrame of ``r1``, ``r2``, ``v1``, ``v2``; ``test``
        also ``hole``, the index of the box a row falls in.
        holes : list of boxes
        kind : str

    Examples
    --------
    >>> from skicml.datasets import make_collision_hole_split
    >>> split = make_collision_hole_split("center", grid=(2, 5), test_grid=(2, 7))
    >>> len(split.train), len(split.test)
    (96, 36)
    """
    if isinstance(holes, str):
        preset_kind, boxes = _COLLISION_HOLES[holes]
        kind = preset_kind if kind is None else kind
    else:
        boxes = [tuple(_check_range(side, "holes", 0.0) for side in box) for box in holes]
    _check_choice(kind, "kind", ("velocity", "mass"))
    columns = ("v1", "v2") if kind == "velocity" else ("r1", "r2")

    def table(counts, name):
        n_r, n_v = _check_pair_of_counts(counts, name)
        ranges = PHYSICS_ID_RANGES["collision"]
        r, v = np.linspace(*ranges["r"], n_r), np.linspace(*ranges["v"], n_v)
        return pd.DataFrame(list(itertools.product(r, r, v, v)), columns=["r1", "r2", "v1", "v2"])

    def box_index(frame):
        index = np.full(len(frame), -1)
        a, b = frame[columns[0]].to_numpy(), frame[columns[1]].to_numpy()
        for i, ((alo, ahi), (blo, bhi)) in enumerate(boxes):
            inside = (a >= alo - 1e-9) & (a <= ahi + 1e-9) & (b >= blo - 1e-9) & (b <= bhi + 1e-9)
            index = np.where((index < 0) & inside, i, index)
        return index

    train = table(grid, "grid")
    train = train[box_index(train) < 0].reset_index(drop=True)
    test = table(test_grid, "test_grid")
    test["hole"] = box_index(test)
    test = test[test["hole"] >= 0].reset_index(drop=True)
    return Bunch(train=train, test=test, holes=boxes, kind=kind)


#: The two levels of each attribute in the attribute-pair experiments.
_ATTRIBUTE_LEVELS = {
    "color": ("red", "blue"),
    "size": ((0.7, 1.05), (1.05, 1.4)),
    "velocity": ((1.0, 2.5), (2.5, 4.0)),
    "shape": ("circle", "square"),
}


@validate_params(
    {"pair": ["array-like"], "grid": _PAIR, "shape_levels": ["array-like"]},
    prefer_skip_nested_validation=True,
)
def make_attribute_pair_split(pair=("color", "velocity"), *, grid=(31, 11), shape_levels=("circle", "square")):
    """Uniform motion where two attributes always come together in training, swapped at test.

    The attribute-priority experiments (``one_ball_uniform_motion_color_size``,
    ``..._color_vel``, ``..._size_vel``, ``one_object_uniform_motion_vel_shape``,
    ``..._size_shape``): each attribute has two levels (colour red / blue;
    radius ``[0.7, 1.05]`` / ``[1.05, 1.4]``; speed ``[1, 2.5]`` / ``[2.5,
    4]``; shape ``shape_levels``). Training holds the cells ``a0b0`` and
    ``a1b1`` (red small and blue large, red slow and blue fast, ...), the
    test the swapped ``a0b1`` and ``a1b0``. For colour against shape the
    paper trains blue balls and red squares, so the colour levels are blue
    then red there. Attributes outside the pair keep red, circle, the full
    radius and speed ranges.

    Parameters
    ----------
    pair : (str, str), default=("color", "velocity")
        Two of ``"color"``, ``"size"``, ``"velocity"``, ``"shape"``.
    grid : (int, int), default=(31, 11)
        Speeds and radii per cell (the paper's test cells: 31 x 11).
    shape_levels : (str, str), default=("circle", "square")
        ``("circle", "ring")`` gives the ring variant.

    Returns
    -------
    split : :class:`~sklearn.utils.Bunch`
        train, test : DataFrame
            ``r1``, ``v1``, ``color1``, ``shape1``, ``cell``.
        pair : (str, str)
        levels : dict
            The two levels of each attribute of the pair.

    Examples
    --------
    >>> from skicml.datasets import make_attribute_pair_split
    >>> split = make_attribute_pair_split(("color", "size"), grid=(3, 2))
    >>> split.train.groupby("cell")["color1"].first().to_dict()
    {'a0b0': 'red', 'a1b1': 'blue'}
    >>> sorted(split.test["cell"].unique())
    ['a0b1', 'a1b0']
    """
    try:
        a, b = pair
    except (TypeError, ValueError):
        raise ValueError(f"pair must be two attribute names, got {pair!r}.") from None
    for name in (a, b):
        _check_choice(name, "pair", _ATTRIBUTE_LEVELS)
    if a == b:
        raise ValueError(f"pair must name two different attributes, got {pair!r}.")
    shape_levels = tuple(_check_choice(s, "shape_levels", PHYSICS_SHAPES) for s in shape_levels)
    n_v, n_r = _check_pair_of_counts(grid, "grid")
    levels = dict(_ATTRIBUTE_LEVELS, shape=shape_levels)
    if {a, b} == {"color", "shape"}:
        levels["color"] = ("blue", "red")
    levels = {a: levels[a], b: levels[b]}

    def cell(i, j):
        setting = {"color": "red", "shape": shape_levels[0], "size": (0.7, 1.4), "velocity": (1.0, 4.0)}
        setting[a], setting[b] = levels[a][i], levels[b][j]
        rows = _grid_table(np.linspace(*setting["velocity"], n_v), np.linspace(*setting["size"], n_r),
                           color1=setting["color"], shape1=setting["shape"])
        rows["cell"] = f"a{i}b{j}"
        return rows

    train = pd.concat([cell(0, 0), cell(1, 1)], ignore_index=True)
    test = pd.concat([cell(0, 1), cell(1, 0)], ignore_index=True)
    return Bunch(train=train, test=test, pair=(a, b), levels=levels)


@validate_params(
    {
        "flip": ["boolean"],
        "train_v": _PAIR,
        "test_v": _PAIR,
        "r_range": _PAIR,
        "grid": _PAIR,
        "test_grid": _PAIR,
    },
    prefer_skip_nested_validation=True,
)
def make_flip_split(flip=False, *, train_v=(2.5, 4.0), test_v=(1.0, 2.5), r_range=(0.7, 1.4), grid=(61, 30),
                    test_grid=(31, 11)):
    """Uniform motion trained on fast speeds only, evaluated on slow ones.

    The memorisation experiment: Set-1 moves left to right only; Set-2
    (``flip=True``) adds every training video mirrored (moving left). The
    paper finds Set-1 biases generations to high speeds and Set-2 sometimes
    reverses the direction right after the conditioning frames.

    Parameters
    ----------
    flip : bool, default=False
    train_v, test_v : (float, float), default=(2.5, 4.0) and (1.0, 2.5)
    r_range : (float, float), default=(0.7, 1.4)
    grid, test_grid : (int, int), default=(61, 30) and (31, 11)
        Speeds and radii.

    Returns
    -------
    split : :class:`~sklearn.utils.Bunch`
        train, test : DataFrame of ``r1``, ``v1``, ``direction``.

    Examples
    --------
    >>> from skicml.datasets import make_flip_split
    >>> make_flip_split(flip=True, grid=(3, 2)).train["direction"].value_counts().to_dict()
    {'right': 6, 'left': 6}
    """
    r_range = _check_range(r_range, "r_range", 0.0, strict_low=True)
    n_v, n_r = _check_pair_of_counts(grid, "grid")
    t_v, t_r = _check_pair_of_counts(test_grid, "test_grid")
    train = _grid_table(np.linspace(*_check_range(train_v, "train_v", 0.0), n_v), np.linspace(*r_range, n_r),
                        direction="right")
    if flip:
        train = pd.concat([train, train.assign(direction="left")], ignore_index=True)
    test = _grid_table(np.linspace(*_check_range(test_v, "test_v", 0.0), t_v), np.linspace(*r_range, t_r),
                       direction="right")
    return Bunch(train=train, test=test)
