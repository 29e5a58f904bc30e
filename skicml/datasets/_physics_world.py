"""The physics testbed's world: closed-form simulation and rendering.

Used by one family: ``video`` (the physics testbed's predictors and evaluation,
through ``_physics.py`` as well).

The one-law scenarios of "How Far is Video Generation from World Model: A
Physical Law Perspective" (Kang et al., ICML 2025) without a physics engine:
every trajectory is a closed form, so the laws hold to rounding error and
a simulated batch costs a few array operations.

- :func:`simulate_physics`: positions of the objects at every frame.
- :func:`render_videos`: those positions as RGB frames, with exact area
  antialiasing, so that sub-pixel positions survive in the intensities.
- :func:`physics_pixel_centers`: where a pixel sits in the world. The
  renderer and :func:`skicml.video.parse_object_states` read this one
  function, so a parsed position has no convention bias.
"""

import numbers

import numpy as np
import pandas as pd

__all__ = [
    "PHYSICS_COLORS",
    "PHYSICS_SCENARIOS",
    "PHYSICS_SHAPES",
    "physics_pixel_centers",
    "render_videos",
    "simulate_physics",
]

#: The scenarios of :func:`simulate_physics`: objects per video.
PHYSICS_SCENARIOS = {"uniform": 1, "parabola": 1, "collision": 2, "bounce": 1, "static": 1}

#: Object colours by name. Primary colours only: a parser separates them by
#: thresholding each channel at the middle (red is R high, G and B low), as
#: the official evaluation does for red and blue.
PHYSICS_COLORS = {"red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 255, 0)}

#: Object shapes: a disc of radius r, an axis-aligned square of half-side r,
#: and a ring of outer radius r and inner radius r / 2.
PHYSICS_SHAPES = ("circle", "square", "ring")

_RING_INNER = 0.5
# The official renderer's soft edge: alpha = (r^2 - d^2) / (0.03 r^2).
_SOFT_EDGE = 0.03
_DIRECTIONS = {"right": (1.0, 0.0), "left": (-1.0, 0.0), "up": (0.0, 1.0), "down": (0.0, -1.0)}


# ---------------------------------------------------------------- argument checks

def _check_choice(value, name, options):
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {sorted(options)}, got {value!r}.")
    return value


def _check_positive(value, name, allow_zero=False):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}.")
    return float(value)


def _check_resolution(resolution):
    if isinstance(resolution, bool) or not isinstance(resolution, numbers.Integral) or resolution < 2:
        raise ValueError(f"resolution must be an integer >= 2 (pixels per side), got {resolution!r}.")
    return int(resolution)


# ---------------------------------------------------------------- simulation

def _column(params, name, n, default=None):
    if name in params:
        values = np.asarray(params[name], dtype=np.float64).reshape(-1)
        if len(values) != n:
            raise ValueError(f"params[{name!r}] has {len(values)} values, expected {n}.")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"params[{name!r}] must be finite, got {values[~np.isfinite(values)][:3]}.")
        return values
    if default is None:
        raise ValueError(f"params has no column {name!r}, which this scenario needs.")
    return np.broadcast_to(np.asarray(default, dtype=np.float64), (n,)).copy()


def _as_table(params):
    if isinstance(params, pd.DataFrame):
        return params
    if isinstance(params, dict):
        return pd.DataFrame({key: np.atleast_1d(value) for key, value in params.items()})
    raise TypeError(f"params must be a pandas DataFrame or a dict of columns, got {type(params).__name__}.")


def _velocities(table, scenario, n, index):
    """Signed (vx, vy) of object ``index`` (1 or 2) from vx/vy or a speed and a direction."""
    vx_name, vy_name, speed_name = f"vx{index}", f"vy{index}", f"v{index}"
    if vx_name in table:
        return _column(table, vx_name, n), _column(table, vy_name, n, default=0.0)
    speed = _column(table, speed_name, n)
    if np.any(speed < 0):
        raise ValueError(f"params[{speed_name!r}] is a speed and must be >= 0, got {speed.min()!r}; "
                         f"give signed velocities as {vx_name!r} and {vy_name!r}.")
    if scenario == "collision":
        # Ball 1 comes from the left, ball 2 from the right.
        return (speed if index == 1 else -speed), np.zeros(n)
    directions = table["direction"] if "direction" in table else ["right"] * n
    unit = np.empty((n, 2))
    for row, direction in enumerate(directions):
        allowed = ("right", "left") if scenario == "parabola" else tuple(_DIRECTIONS)
        unit[row] = _DIRECTIONS[_check_choice(direction, f"params['direction'][{row}]", allowed)]
    return speed * unit[:, 0], speed * unit[:, 1]


def _frame_times(n_frames, frame_dt, time_offset):
    return time_offset + frame_dt * np.arange(n_frames)


def simulate_physics(scenario, params, n_frames=32, frame_dt=0.1, world_size=10.0, integrator="box2d_like",
                     time_offset=0.01, gravity=2.5, step_dt=0.01):
    """Positions of the objects of each video at every frame, in closed form.

    World units throughout: the world is a ``world_size`` square, x to the
    right and y up, and a frame is recorded every ``frame_dt`` seconds from
    ``time_offset`` on. The defaults are the official generators': Box2D
    stepped at 0.01 s, a record every 10 steps, the first after the first
    step (t = 0.01, 0.11, ...).

    - ``"uniform"``: ``x = x0 + vx t``, ``y = y0 + vy t``.
    - ``"parabola"``: uniform in x, and gravity ``g`` pulls y down. With
      ``integrator="box2d_like"`` the closed form of Box2D's semi-implicit
      Euler after ``n`` steps of ``step_dt``, ``y0 + vy n dt - g dt^2
      n (n + 1) / 2`` (it matches Box2D to 1e-4; the continuous parabola
      ``y0 + vy t - g t^2 / 2`` of ``integrator="exact"`` differs from it
      by ``g dt t / 2``, 0.04 units at 3.2 s).
    - ``"collision"``: two balls on one horizontal line, a perfectly
      elastic 1-D collision with masses ``m = r^2`` (discs of one density):
      at contact, ``w1 = ((m1 - m2) u1 + 2 m2 u2) / (m1 + m2)`` and ``w2 =
      ((m2 - m1) u2 + 2 m1 u1) / (m1 + m2)``. Unlike Box2D, whose default
      velocity threshold makes contacts slower than 1 unit/s inelastic,
      the collision is elastic at every speed.
    - ``"bounce"``: uniform motion and an elastic reflection off a wall at
      ``x = world_size`` (the right edge of the view).
    - ``"static"``: the object stays at ``(x1, y1)``.

    Parameters
    ----------
    scenario : {"uniform", "parabola", "collision", "bounce", "static"}
    params : DataFrame or dict of array-like
        One row per video. Object ``k`` (1, or 1 and 2 for a collision)
        starts at ``xk``, ``yk`` (``y2`` defaults to ``y1``) with radius
        ``rk``, and moves at the signed velocity ``vxk``, ``vyk``, or at the
        speed ``vk`` along ``direction`` (``"right"``, ``"left"``, ``"up"``,
        ``"down"``; default ``"right"``; a collision's ball 1 moves right and
        ball 2 left). The tables of
        :func:`~skicml.datasets.make_physics_videos` fit as they are.
    n_frames : int, default=32
    frame_dt : float, default=0.1
        Seconds between frames.
    world_size : float, default=10.0
    integrator : {"box2d_like", "exact"}, default="box2d_like"
        How gravity acts (``"parabola"`` only).
    time_offset : float, default=0.01
        The time of the first frame.
    gravity : float, default=2.5
        Downward acceleration of ``"parabola"``, in units/s^2.
    step_dt : float, default=0.01
        Box2D's time step, for ``integrator="box2d_like"``; every frame time
        must be a whole number of steps.

    Returns
    -------
    states : ndarray of shape (n_videos, n_frames, n_objects, 2)
        ``(x, y)`` of each object at each frame.

    Raises
    ------
    ValueError
        For an unknown scenario, a missing or non-finite column, a radius
        that is not positive, collision balls that overlap at the start or
        are not on one line, or a bouncing ball that starts past its wall.

    Examples
    --------
    >>> from skicml.datasets import simulate_physics
    >>> states = simulate_physics("uniform", {"x1": [1.0], "y1": [5.0], "r1": [1.0], "v1": [2.0]},
    ...                           n_frames=3)
    >>> states[0, :, 0].round(3).tolist()
    [[1.02, 5.0], [1.22, 5.0], [1.42, 5.0]]
    >>> collision = {"x1": [2.0], "x2": [8.0], "y1": [5.0], "r1": [1.0], "r2": [1.0],
    ...              "v1": [2.0], "v2": [1.0]}
    >>> x = simulate_physics("collision", collision, n_frames=32)[0, :, :, 0]
    >>> (x[-1] - x[-2]).round(6).tolist()  # equal masses swap their velocities (per 0.1 s)
    [-0.1, 0.2]
    """
    _check_choice(scenario, "scenario", PHYSICS_SCENARIOS)
    _check_choice(integrator, "integrator", ("box2d_like", "exact"))
    if isinstance(n_frames, bool) or not isinstance(n_frames, numbers.Integral) or n_frames < 1:
        raise ValueError(f"n_frames must be an integer >= 1, got {n_frames!r}.")
    frame_dt = _check_positive(frame_dt, "frame_dt")
    world_size = _check_positive(world_size, "world_size")
    time_offset = _check_positive(time_offset, "time_offset", allow_zero=True)
    gravity = _check_positive(gravity, "gravity", allow_zero=True)
    step_dt = _check_positive(step_dt, "step_dt")
    table = _as_table(params)
    n = len(table)
    t = _frame_times(n_frames, frame_dt, time_offset)[None, :]
    n_objects = PHYSICS_SCENARIOS[scenario]
    radii = [_column(table, f"r{k}", n) for k in range(1, n_objects + 1)]
    for k, r in enumerate(radii, start=1):
        if np.any(r <= 0):
            raise ValueError(f"params['r{k}'] must be > 0, got {r.min()!r}.")
    x1, y1 = _column(table, "x1", n)[:, None], _column(table, "y1", n)[:, None]
    states = np.empty((n, n_frames, n_objects, 2))
    if scenario == "static":
        states[:, :, 0, 0], states[:, :, 0, 1] = x1, y1
        return states
    vx1, vy1 = (v[:, None] for v in _velocities(table, scenario, n, 1))
    if scenario in ("uniform", "bounce"):
        x = x1 + vx1 * t
        if scenario == "bounce":
            wall = world_size - radii[0][:, None]
            if np.any(x1 > wall + 1e-12):
                row = int(np.argmax((x1 > wall + 1e-12).ravel()))
                raise ValueError(f"params row {row}: the ball (x1={x1[row, 0]!r}, r1={radii[0][row]!r}) "
                                 f"starts past the wall at x = world_size = {world_size}.")
            # Only one wall, so one reflection at most.
            x = np.where(x > wall, 2 * wall - x, x)
        states[:, :, 0, 0], states[:, :, 0, 1] = x, y1 + vy1 * t
        return states
    if scenario == "parabola":
        if integrator == "exact":
            y = y1 + vy1 * t - 0.5 * gravity * t ** 2
        else:
            steps = t / step_dt
            whole = np.rint(steps)
            if np.any(np.abs(steps - whole) > 1e-6):
                raise ValueError(f"integrator='box2d_like' needs frame times that are whole steps of "
                                 f"step_dt={step_dt}; time_offset={time_offset} and frame_dt={frame_dt} "
                                 "are not.")
            y = y1 + vy1 * whole * step_dt - gravity * step_dt ** 2 * whole * (whole + 1) / 2
        states[:, :, 0, 0], states[:, :, 0, 1] = x1 + vx1 * t, y
        return states
    # collision
    x2 = _column(table, "x2", n)[:, None]
    y2 = _column(table, "y2", n, default=table["y1"] if "y1" in table else None)[:, None]
    if np.any(np.abs(y2 - y1) > 1e-9):
        row = int(np.argmax(np.abs(y2 - y1).ravel() > 1e-9))
        raise ValueError(f"params row {row}: a collision is 1-D, so y2 must equal y1, got y1={y1[row, 0]!r}, "
                         f"y2={y2[row, 0]!r}.")
    vx2, _ = (v[:, None] for v in _velocities(table, scenario, n, 2))
    r1, r2 = radii[0][:, None], radii[1][:, None]
    gap = x2 - x1 - r1 - r2
    if np.any(gap < -1e-9):
        row = int(np.argmax(gap.ravel() < -1e-9))
        raise ValueError(f"params row {row}: ball 2 must start right of ball 1 without overlap "
                         f"(x2 - x1 >= r1 + r2), got x1={x1[row, 0]!r}, x2={x2[row, 0]!r}, "
                         f"r1={r1[row, 0]!r}, r2={r2[row, 0]!r}.")
    approach = vx1 - vx2
    with np.errstate(divide="ignore", invalid="ignore"):
        contact = np.where(approach > 0, np.maximum(gap, 0.0) / approach, np.inf)
    m1, m2 = r1 ** 2, r2 ** 2
    w1 = ((m1 - m2) * vx1 + 2 * m2 * vx2) / (m1 + m2)
    w2 = ((m2 - m1) * vx2 + 2 * m1 * vx1) / (m1 + m2)
    before = t <= contact
    after = np.where(before, 0.0, t - np.where(np.isfinite(contact), contact, 0.0))
    until = np.minimum(t, contact)
    states[:, :, 0, 0] = x1 + vx1 * until + w1 * after
    states[:, :, 1, 0] = x2 + vx2 * until + w2 * after
    states[:, :, :, 1] = y1[:, :, None]
    return states


# ---------------------------------------------------------------- rendering

def physics_pixel_centers(resolution, world_size=10.0, pixel_convention="center"):
    """World coordinate of each pixel's centre along one image axis, and the pixel pitch.

    Column ``j`` is at ``centers[j]`` in x; row ``i`` (counted from the top
    of the image) is at ``centers[resolution - 1 - i]`` in y, since world y
    points up.

    Parameters
    ----------
    resolution : int
        Pixels per side.
    world_size : float, default=10.0
    pixel_convention : {"center", "linspace", "index"}, default="center"
        ``"center"``: pixel ``j`` covers ``[j, j + 1] * world_size /
        resolution`` and sits at its middle; the renderer and the parser of
        this package both use it. The official code renders with
        ``"linspace"`` (pixel ``j`` at ``j / (resolution - 1)`` of the world,
        ``numpy.linspace(0, 1, W)``) and parses with ``"index"`` (pixel ``j``
        at ``j * world_size / resolution``): the mismatch scales every parsed
        velocity by ``(W - 1) / W``.

    Returns
    -------
    centers : ndarray of shape (resolution,)
    pitch : float
        The spacing of the centres.

    Examples
    --------
    >>> from skicml.datasets import physics_pixel_centers
    >>> centers, pitch = physics_pixel_centers(4, world_size=10.0)
    >>> centers.tolist(), pitch
    ([1.25, 3.75, 6.25, 8.75], 2.5)
    """
    resolution = _check_resolution(resolution)
    world_size = _check_positive(world_size, "world_size")
    _check_choice(pixel_convention, "pixel_convention", ("center", "linspace", "index"))
    index = np.arange(resolution, dtype=np.float64)
    if pixel_convention == "center":
        pitch = world_size / resolution
        return (index + 0.5) * pitch, pitch
    pitch = world_size / (resolution - 1 if pixel_convention == "linspace" else resolution)
    return index * pitch, pitch


def _disc_quadrant(x, y, r):
    """Area of the disc of radius ``r`` at the origin with coordinates ``<= (x, y)``."""
    x, y = np.clip(x, -r, r), np.clip(y, -r, r)
    r2 = r * r

    def primitive(u):  # an antiderivative of sqrt(r^2 - u^2)
        ratio = np.clip(u / r, -1.0, 1.0)
        return 0.5 * (u * np.sqrt(np.maximum(r2 - u * u, 0.0)) + r2 * np.arcsin(ratio))

    chord_end = np.sqrt(np.maximum(r2 - x * x, 0.0))  # where the chord's half-width equals |x|
    top = np.minimum(y, chord_end)
    middle = np.where(y > -chord_end, primitive(top) - primitive(-chord_end), 0.0)
    span = np.where(y > -chord_end, top + chord_end, 0.0)
    right_half = 2 * (primitive(y) - primitive(-r)) - (middle - x * span)
    return np.where(x >= 0, right_half, middle + x * span)


def _disc_coverage(cx, cy, r, edges):
    """Fraction of each pixel inside a disc, ``(n, rows, cols)``; ``edges`` ascending, rows ascending in y.

    Only a window of pixels around each disc is integrated (the rest is
    empty), which makes a 32-px frame about ten times cheaper.
    """
    n_pixels = len(edges) - 1
    pitch = edges[1] - edges[0]
    width = int(min(n_pixels, np.ceil(2 * r.max() / pitch) + 2))
    offsets = np.arange(width + 1)

    def window_start(c):
        start = np.floor((c - r - edges[0]) / pitch).astype(np.int64)
        return np.clip(start, 0, n_pixels - width)

    x0, y0 = window_start(cx), window_start(cy)
    gx = edges[x0[:, None] + offsets] - cx[:, None]                  # (n, width + 1)
    gy = edges[y0[:, None] + offsets] - cy[:, None]
    corner = _disc_quadrant(gx[:, None, :], gy[:, :, None], r[:, None, None])
    area = corner[:, 1:, 1:] - corner[:, 1:, :-1] - corner[:, :-1, 1:] + corner[:, :-1, :-1]
    full = np.zeros((len(cx), n_pixels, n_pixels))
    rows = (y0[:, None] + offsets[:-1])[:, :, None]
    cols = (x0[:, None] + offsets[:-1])[:, None, :]
    full[np.arange(len(cx))[:, None, None], rows, cols] = area / pitch ** 2
    return full


def _interval_overlap(low, high, edges):
    return np.clip(np.minimum(high[..., None], edges[1:]) - np.maximum(low[..., None], edges[:-1]), 0.0, None)


def _coverage(shape, cx, cy, r, centers, pitch, antialias):
    """Fraction of each pixel the shape covers, rows ascending in y: ``(n, rows, cols)``."""
    if antialias == "area":
        edges = np.concatenate([centers - pitch / 2, centers[-1:] + pitch / 2])
        if shape == "square":
            ox = _interval_overlap(cx - r, cx + r, edges)
            oy = _interval_overlap(cy - r, cy + r, edges)
            return oy[:, :, None] * ox[:, None, :] / pitch ** 2
        area = _disc_coverage(cx, cy, r, edges)
        if shape == "ring":
            area = area - _disc_coverage(cx, cy, _RING_INNER * r, edges)
        return np.clip(area, 0.0, 1.0)
    dx = centers[None, None, :] - cx[:, None, None]
    dy = centers[None, :, None] - cy[:, None, None]
    rr = r[:, None, None]
    if shape == "square":
        return ((np.abs(dx) <= rr) & (np.abs(dy) <= rr)).astype(np.float64)
    d2 = dx ** 2 + dy ** 2
    if antialias == "soft_disc":
        alpha = np.clip((rr ** 2 - d2) / (_SOFT_EDGE * rr ** 2), 0.0, 1.0)
        if shape == "ring":
            inner = (_RING_INNER * rr) ** 2
            alpha = alpha - np.clip((inner - d2) / (_SOFT_EDGE * inner), 0.0, 1.0)
        return alpha
    alpha = (d2 <= rr ** 2).astype(np.float64)
    if shape == "ring":
        alpha = alpha - (d2 < (_RING_INNER * rr) ** 2)
    return alpha


def _per_object(values, name, n_videos, n_objects, options):
    """A name per (video, object) from one name, one per object, or an (n_videos, n_objects) array."""
    if isinstance(values, str):
        array = np.full((n_videos, n_objects), values, dtype=object)
    else:
        array = np.asarray(values, dtype=object)
        if array.ndim == 1 and len(array) == n_objects:
            array = np.broadcast_to(array[None, :], (n_videos, n_objects))
    if array.shape != (n_videos, n_objects):
        raise ValueError(f"{name} must be one name, one per object ({n_objects}) or an array of shape "
                         f"(n_videos, n_objects) = {(n_videos, n_objects)}, got shape {np.shape(values)}.")
    for value in set(array.ravel().tolist()):
        _check_choice(value, name, options)
    return array.astype(str)


def render_videos(states, radii, colors=None, shapes="circle", resolution=32, antialias="area",
                  background=255, pixel_convention="center", world_size=10.0):
    """Draw object positions as RGB videos.

    Each object's colour is mixed over the background by the fraction of
    the pixel it covers. With ``antialias="area"`` that fraction is exact
    (the area of the disc, square or ring inside the pixel, in closed
    form): at 32 px a ball moves 0.3 to 1.3 px per frame, and exact
    coverage keeps the sub-pixel position in the intensities, so
    :func:`skicml.video.parse_object_states` recovers it without bias.
    Objects at NaN positions are absent. World y points up (the top image
    row is the top of the world).

    Parameters
    ----------
    states : array-like of shape (n_videos, n_frames, n_objects, 2)
        World positions, as :func:`simulate_physics` returns them.
    radii : array-like of shape (n_videos, n_objects) or (n_objects,)
        Radius (half-side of a square) of each object.
    colors : str or array-like of str, default=None
        Names from :data:`PHYSICS_COLORS`: one for all objects, one per
        object, or one per video and object (shape ``(n_videos,
        n_objects)``). ``None``: red, then blue, then green.
    shapes : str or array-like of str, default="circle"
        ``"circle"``, ``"square"`` or ``"ring"``, laid out like ``colors``.
    resolution : int, default=32
        Pixels per side (the world is square).
    antialias : {"area", "soft_disc", "none"}, default="area"
        ``"soft_disc"`` is the official renderer's edge, ``alpha = clip((r^2
        - d^2) / (0.03 r^2), 0, 1)`` at pixel centres: about 1.5% of r wide,
        so effectively hard at low resolution. ``"none"``: a pixel is
        covered when its centre is.
    background : int, default=255
        Grey level of the background.
    pixel_convention : {"center", "official"}, default="center"
        Where pixels sit (:func:`physics_pixel_centers`): ``"center"``, or
        the official renderer's ``"linspace"`` grid.
    world_size : float, default=10.0

    Returns
    -------
    videos : ndarray of shape (n_videos, n_frames, resolution, resolution, 3), dtype uint8

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.datasets import render_videos
    >>> video = render_videos(np.array([[[[5.0, 5.0]]]]), [2.0], colors=["red"], resolution=8)
    >>> video.shape, video[0, 0, 4, 4].tolist(), video[0, 0, 0, 0].tolist()
    ((1, 1, 8, 8, 3), [255, 0, 0], [255, 255, 255])
    """
    states = np.asarray(states, dtype=np.float64)
    if states.ndim != 4 or states.shape[-1] != 2:
        raise ValueError(f"states must be (n_videos, n_frames, n_objects, 2), got shape {states.shape}.")
    if np.any(np.isinf(states)):
        raise ValueError("states must be finite or NaN (absent), got infinity.")
    n_videos, n_frames, n_objects, _ = states.shape
    resolution = _check_resolution(resolution)
    _check_choice(antialias, "antialias", ("area", "soft_disc", "none"))
    _check_choice(pixel_convention, "pixel_convention", ("center", "official"))
    if isinstance(background, bool) or not isinstance(background, numbers.Integral) or not 0 <= background <= 255:
        raise ValueError(f"background must be an integer grey level in [0, 255], got {background!r}.")
    radii = np.asarray(radii, dtype=np.float64)
    if radii.ndim == 1:
        radii = np.broadcast_to(radii[None, :], (n_videos, radii.shape[0]))
    if radii.shape != (n_videos, n_objects):
        raise ValueError(f"radii must be (n_videos, n_objects) = {(n_videos, n_objects)} or (n_objects,), "
                         f"got shape {np.shape(radii)}.")
    if not np.all(np.isfinite(radii) & (radii > 0)):
        raise ValueError(f"radii must be finite and > 0, got {radii[~(np.isfinite(radii) & (radii > 0))][:3]}.")
    if colors is None:
        colors = list(PHYSICS_COLORS)[:n_objects] if n_objects <= len(PHYSICS_COLORS) else "red"
    colors = _per_object(colors, "colors", n_videos, n_objects, PHYSICS_COLORS)
    shapes = _per_object(shapes, "shapes", n_videos, n_objects, PHYSICS_SHAPES)
    centers, pitch = physics_pixel_centers(resolution, world_size,
                                           "center" if pixel_convention == "center" else "linspace")
    videos = np.empty((n_videos, n_frames, resolution, resolution, 3), dtype=np.uint8)
    # Chunks of about a million pixels keep the float temporaries small.
    chunk = max(1, 2 ** 20 // (n_frames * resolution * resolution))
    for start in range(0, n_videos, chunk):
        part = slice(start, min(start + chunk, n_videos))
        videos[part] = _composite(states[part], radii[part], colors[part], shapes[part], centers, pitch,
                                  antialias, background)
    return videos


def _composite(states, radii, colors, shapes, centers, pitch, antialias, background):
    """Mix each object's colour over the background by its coverage, as uint8 frames."""
    n_videos, n_frames, n_objects, _ = states.shape
    resolution = len(centers)
    alphas = []
    for k in range(n_objects):
        alpha = np.zeros((n_videos, n_frames, resolution, resolution), dtype=np.float32)
        for shape in np.unique(shapes[:, k]):
            rows = np.flatnonzero(shapes[:, k] == shape)
            xy = states[rows, :, k].reshape(-1, 2)
            r = np.repeat(radii[rows, k], n_frames)
            present = np.all(np.isfinite(xy), axis=1)
            coverage = np.zeros((len(xy), resolution, resolution), dtype=np.float32)
            if present.any():
                coverage[present] = _coverage(shape, xy[present, 0], xy[present, 1], r[present], centers,
                                              pitch, antialias)
            # Rows were ascending in y; the image's first row is the top of the world.
            alpha[rows] = coverage[:, ::-1, :].reshape(len(rows), n_frames, resolution, resolution)
        alphas.append(alpha)
    if n_objects > 1:
        total = np.sum(alphas, axis=0)
        if total.max() > 1:
            # Objects do not overlap in these scenarios; where they would,
            # their coverage is shared out rather than exceeding the pixel.
            scale = np.maximum(total, 1.0)
            alphas = [alpha / scale for alpha in alphas]
    frames = np.full((n_videos, n_frames, resolution, resolution, 3), background + 0.5, dtype=np.float32)
    for k, alpha in enumerate(alphas):
        shift = background - np.array([PHYSICS_COLORS[name] for name in colors[:, k]], dtype=np.float32)
        for channel in range(3):
            weight = shift[:, channel]
            if np.any(weight != 0):
                frames[..., channel] -= alpha * weight[:, None, None, None]
    return np.clip(frames, 0, 255.49).astype(np.uint8)
