"""Combinatorial scenes for the physics testbed: a small PHYRE of balls, bars, pegs and cups.

Used by one family: ``video`` (the physics testbed's combinatorial benchmark).

The third scenario of "How Far is Video Generation from World Model: A
Physical Law Perspective" (Kang et al., ICML 2025): scenes built from a red
ball plus a few of a fixed set of object types, a *template* being one
combination of types and its *variants* the layouts drawn for it. A model
trained on some templates is tested on held-out variants of those
templates (in-template) and on templates it never saw (out-of-template).
The paper uses PHYRE (8 types, 4 per scene: 70 templates); PHYRE has no
wheel for current Pythons, so this is the miniature of the spec (§5.2):

- 6 object types, 3 per scene plus the red ball: C(6, 3) = 20 templates,
  :data:`PHYSICS_TEMPLATES`; five of them, :data:`HELD_OUT_TEMPLATES`, are
  never trained on. Each type appears in training templates, so a held-out
  template is a new *combination* of familiar objects.
- Static objects are black (bars as capsules, pegs as discs); the red ball
  and the optional second ball (blue, PHYRE's grey dynamic ball, blue so that
  the official colour-threshold parser separates it from antialiased black
  edges) are dynamic. As in PHYRE's ball tier, the red ball is placed above
  one of the scene's objects and both balls start at rest.
- Motion is integrated as Box2D integrates it (semi-implicit Euler,
  ``substeps`` per frame); contacts are resolved by impulses with a
  restitution and Coulomb friction, the balls sliding without rotation.
  The bottom of the world is the ground; the sides are open, as in PHYRE.
"""

import itertools

import numpy as np
import pandas as pd
from sklearn.utils import Bunch, check_random_state

from ..utils.param_validation import Integral, Interval, Real, validate_params
from ._physics_world import _disc_coverage, physics_pixel_centers

__all__ = [
    "HELD_OUT_TEMPLATES",
    "PHYSICS_TEMPLATES",
    "TEMPLATE_OBJECTS",
    "make_template_scenes",
    "make_template_split",
]

#: The object types a scene combines (besides its red ball).
TEMPLATE_OBJECTS = ("floor", "ramp", "wall", "ball", "pegs", "cup")

#: Every template: three object types. Template ``i`` is ``PHYSICS_TEMPLATES[i]``.
PHYSICS_TEMPLATES = tuple(itertools.combinations(TEMPLATE_OBJECTS, 3))

#: The templates no training set of :func:`make_template_split` contains:
#: one in four, each type appearing in 2 or 3 of them.
HELD_OUT_TEMPLATES = (2, 8, 12, 13, 16)

# The order in which make_template_split adds training templates: the first
# two together hold all six types, so every training set has seen every
# object and only the number of combinations grows.
_TRAINING_ORDER = (0, 19, 5, 14, 3, 17, 10, 7, 11, 1, 18, 4, 15, 6, 9)

_WORLD = 10.0
_BAR = 0.25           # half-thickness of every bar: 1.6 px thick at 32 px
_RED_COLOR = np.array([255.0, 0.0, 0.0])
_BLUE_COLOR = np.array([0.0, 0.0, 255.0])
_MAX_SEGMENTS = 5     # a cup has three bars, a floor, ramp or wall one
_MAX_PEGS = 2


# ------------------------------------------------------------------ layouts

def _bar(x0, y0, x1, y1):
    return [x0, y0, x1, y1]


def _place_object(kind, rng):
    """One object of ``kind``: its bars, pegs, blue-ball start and bounding box (x0, y0, x1, y1)."""
    bars, pegs, ball = [], [], None
    if kind == "floor":
        length, y = rng.uniform(3.5, 5.5), rng.uniform(2.0, 4.0)
        x = rng.uniform(length / 2 + 0.5, _WORLD - length / 2 - 0.5)
        bars.append(_bar(x - length / 2, y, x + length / 2, y))
    elif kind == "ramp":
        length, angle = rng.uniform(3.0, 4.5), np.radians(rng.uniform(20.0, 35.0)) * rng.choice([-1, 1])
        x, y = rng.uniform(2.5, 7.5), rng.uniform(3.5, 6.0)
        dx, dy = length / 2 * np.cos(angle), length / 2 * np.sin(angle)
        bars.append(_bar(x - dx, y - dy, x + dx, y + dy))
    elif kind == "wall":
        x, height = rng.uniform(1.5, 8.5), rng.uniform(2.0, 4.5)
        bars.append(_bar(x, 0.0, x, height))
    elif kind == "cup":
        width, height = rng.uniform(1.8, 2.6), rng.uniform(0.9, 1.4)
        x, y = rng.uniform(1.5 + width / 2, 8.5 - width / 2), rng.uniform(_BAR, 1.5)
        bars += [_bar(x - width / 2, y, x + width / 2, y), _bar(x - width / 2, y, x - width / 2, y + height),
                 _bar(x + width / 2, y, x + width / 2, y + height)]
    elif kind == "pegs":
        y, x = rng.uniform(3.0, 6.5), rng.uniform(2.0, 6.5)
        for dx, dy in ((0.0, 0.0), (rng.uniform(1.2, 2.2), rng.uniform(-0.5, 0.5))):
            pegs.append([x + dx, y + dy, rng.uniform(0.25, 0.4)])
    else:  # "ball": the second dynamic ball
        r = rng.uniform(0.4, 0.7)
        ball = [rng.uniform(1.0, 9.0), rng.uniform(r + 0.5, 7.5), r]
    points = [(b[0], b[1]) for b in bars] + [(b[2], b[3]) for b in bars]
    spans = [(p[0] - p[2], p[1] - p[2], p[0] + p[2], p[1] + p[2]) for p in pegs]
    if ball is not None:
        spans.append((ball[0] - ball[2], ball[1] - ball[2], ball[0] + ball[2], ball[1] + ball[2]))
    spans += [(x - _BAR, y - _BAR, x + _BAR, y + _BAR) for x, y in points]
    spans = np.array(spans)
    box = (spans[:, 0].min(), spans[:, 1].min(), spans[:, 2].max(), spans[:, 3].max())
    return bars, pegs, ball, box


def _boxes_overlap(a, b, margin):
    return not (a[2] + margin < b[0] or b[2] + margin < a[0] or a[3] + margin < b[1] or b[3] + margin < a[1])


def _clearance(x, y, bars, pegs):
    """Distance from (x, y) to the nearest static surface (inf with none)."""
    best = np.inf
    for x0, y0, x1, y1 in bars:
        d = np.array([x1 - x0, y1 - y0])
        t = np.clip(np.dot([x - x0, y - y0], d) / max(np.dot(d, d), 1e-12), 0.0, 1.0)
        best = min(best, np.hypot(x - x0 - t * d[0], y - y0 - t * d[1]) - _BAR)
    for px, py, pr in pegs:
        best = min(best, np.hypot(x - px, y - py) - pr)
    return best


def _draw_scene(template, rng, max_tries=2000):
    """A layout of ``template``: objects that keep apart, and a red ball dropped above one of them."""
    for _ in range(max_tries):
        bars, pegs, blue, boxes = [], [], None, []
        for kind in PHYSICS_TEMPLATES[template]:
            object_bars, object_pegs, ball, box = _place_object(kind, rng)
            bars += object_bars
            pegs += object_pegs
            blue = ball if ball is not None else blue
            boxes.append(box)
        if any(_boxes_overlap(a, b, 0.4) for a, b in itertools.combinations(boxes, 2)):
            continue
        if blue is not None and _clearance(blue[0], blue[1], bars, pegs) < blue[2] + 0.1:
            continue
        # PHYRE's "positioning" heuristic: above an object, jittered by its size.
        r = rng.uniform(0.35, 0.65)
        anchor = boxes[rng.integers(len(boxes))]
        half = (anchor[2] - anchor[0]) / 2
        x = np.clip((anchor[0] + anchor[2]) / 2 + rng.uniform(-0.8, 0.8) * (half + r), r, _WORLD - r)
        y = np.clip(anchor[3] + r + rng.uniform(0.5, 2.5), r, _WORLD - r)
        if _clearance(x, y, bars, pegs) < r + 0.1:
            continue
        if blue is not None and np.hypot(x - blue[0], y - blue[1]) < r + blue[2] + 0.1:
            continue
        return bars, pegs, blue, (x, y, r)
    raise RuntimeError(f"no layout of template {template} {PHYSICS_TEMPLATES[template]} found in {max_tries} "
                       "tries.")


# ------------------------------------------------------------------ motion

def _contact(pos, vel, normal, depth, hit, restitution, friction, rest_speed):
    """Push the balls out along ``normal`` by ``depth`` where ``hit``; bounce and rub off a static body."""
    pos += np.where(hit[..., None], normal * depth[..., None], 0.0)
    approach = np.sum(vel * normal, axis=-1)
    hit = hit & (approach < 0)
    # A slow contact does not bounce: a ball comes to rest instead of chattering.
    impulse = np.where(approach < -rest_speed, -(1 + restitution) * approach, -approach)
    impulse = np.where(hit, impulse, 0.0)
    vel += impulse[..., None] * normal
    tangent = vel - np.sum(vel * normal, axis=-1, keepdims=True) * normal
    speed = np.linalg.norm(tangent, axis=-1)
    keep = np.where(speed > 0, np.maximum(0.0, 1 - friction * impulse / np.maximum(speed, 1e-12)), 1.0)
    vel -= (1 - keep)[..., None] * tangent


def _simulate(bars, pegs, balls, present, n_frames, frame_dt, substeps, gravity, restitution, friction):
    """Positions (n, n_frames, 2, 2) of the red and blue balls; frame 0 is the start."""
    pos, radius = balls[..., :2].copy(), balls[..., 2]
    vel = np.zeros_like(pos)
    mass = radius ** 2
    dt = frame_dt / substeps
    rest_speed = 2 * gravity * dt
    # The ground: a bar far wider than the world, along y = 0.
    ground = np.broadcast_to(np.array([-1e3, -_BAR, 1e3, -_BAR]), (len(bars), 1, 4))
    segments = np.concatenate([bars, ground], axis=1)
    active_segments = np.isfinite(segments[..., 0])
    states = np.empty((len(pos), n_frames, 2, 2))
    for frame in range(n_frames):
        states[:, frame] = np.where(present[..., None], pos, np.nan)
        if frame == n_frames - 1:
            break
        for _ in range(substeps):
            vel[..., 1] -= np.where(present, gravity * dt, 0.0)
            pos += vel * dt
            for s in range(segments.shape[1]):
                start, end = np.nan_to_num(segments[:, None, s, :2]), np.nan_to_num(segments[:, None, s, 2:])
                along = end - start
                t = np.clip(np.sum((pos - start) * along, -1) / np.maximum(np.sum(along ** 2, -1), 1e-12), 0, 1)
                offset = pos - start - t[..., None] * along
                distance = np.linalg.norm(offset, axis=-1)
                depth = radius + _BAR - distance
                hit = present & active_segments[:, None, s] & (depth > 0)
                normal = offset / np.maximum(distance, 1e-12)[..., None]
                _contact(pos, vel, normal, depth, hit, restitution, friction, rest_speed)
            for p in range(pegs.shape[1]):
                peg = np.nan_to_num(pegs[:, None, p])
                offset = pos - peg[..., :2]
                distance = np.linalg.norm(offset, axis=-1)
                depth = radius + peg[..., 2] - distance
                hit = present & np.isfinite(pegs[:, None, p, 0]) & (depth > 0)
                normal = offset / np.maximum(distance, 1e-12)[..., None]
                _contact(pos, vel, normal, depth, hit, restitution, friction, rest_speed)
            # The two balls: momentum conserved, masses r ** 2.
            offset = pos[:, 0] - pos[:, 1]
            distance = np.linalg.norm(offset, axis=-1)
            depth = radius[:, 0] + radius[:, 1] - distance
            hit = present[:, 1] & (depth > 0)
            if hit.any():
                normal = offset / np.maximum(distance, 1e-12)[:, None]
                share = mass[:, 1] / (mass[:, 0] + mass[:, 1])
                pos[:, 0] += np.where(hit, depth * share, 0.0)[:, None] * normal
                pos[:, 1] -= np.where(hit, depth * (1 - share), 0.0)[:, None] * normal
                approach = np.sum((vel[:, 0] - vel[:, 1]) * normal, axis=-1)
                push = np.where(hit & (approach < 0), -(1 + restitution) * approach, 0.0)
                push /= 1 / mass[:, 0] + 1 / mass[:, 1]
                vel[:, 0] += (push / mass[:, 0])[:, None] * normal
                vel[:, 1] -= (push / mass[:, 1])[:, None] * normal
    return states


# ------------------------------------------------------------------ drawing

def _static_coverage(bars, pegs, resolution, supersample=4):
    """Fraction of each pixel the static objects cover, (n, rows, cols), top row first."""
    fine, _ = physics_pixel_centers(resolution * supersample, _WORLD)
    x, y = fine[None, None, :], fine[::-1][None, :, None]
    coverage = np.empty((len(bars), resolution, resolution))
    for i in range(len(bars)):
        inside = np.zeros((len(fine), len(fine)), dtype=bool)
        for x0, y0, x1, y1 in bars[i][np.isfinite(bars[i][:, 0])]:
            dx, dy = x1 - x0, y1 - y0
            t = np.clip(((x - x0) * dx + (y - y0) * dy) / max(dx * dx + dy * dy, 1e-12), 0, 1)
            inside |= ((x - x0 - t * dx) ** 2 + (y - y0 - t * dy) ** 2 <= _BAR ** 2)[0]
        for px, py, pr in pegs[i][np.isfinite(pegs[i][:, 0])]:
            inside |= ((x - px) ** 2 + (y - py) ** 2 <= pr ** 2)[0]
        coverage[i] = inside.reshape(resolution, supersample, resolution, supersample).mean(axis=(1, 3))
    return coverage


def _render(states, radii, bars, pegs, resolution):
    """RGB frames: black static objects on white, the balls drawn over them with exact coverage."""
    n, n_frames = states.shape[:2]
    centers, pitch = physics_pixel_centers(resolution, _WORLD)
    edges = np.concatenate([centers - pitch / 2, centers[-1:] + pitch / 2])
    frames = np.repeat((255.0 * (1 - _static_coverage(bars, pegs, resolution)))[:, None, :, :, None], n_frames, 1)
    frames = np.repeat(frames, 3, axis=-1)
    for k, color in enumerate((_RED_COLOR, _BLUE_COLOR)):
        xy = states[:, :, k].reshape(-1, 2)
        shown = np.isfinite(xy[:, 0])
        if not shown.any():
            continue
        alpha = np.zeros((len(xy), resolution, resolution))
        alpha[shown] = _disc_coverage(xy[shown, 0], xy[shown, 1], np.repeat(radii[:, k], n_frames)[shown], edges)
        alpha = np.clip(alpha[:, ::-1], 0, 1).reshape(n, n_frames, resolution, resolution, 1)
        frames = frames * (1 - alpha) + alpha * color
    return np.clip(frames + 0.5, 0, 255).astype(np.uint8)


# ------------------------------------------------------------------ public

def _check_templates(templates):
    if templates is None:
        return list(range(len(PHYSICS_TEMPLATES)))
    values = np.atleast_1d(np.asarray(templates))
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.integer) or len(values) == 0 \
            or values.min() < 0 or values.max() >= len(PHYSICS_TEMPLATES):
        raise ValueError(f"templates must be template numbers in [0, {len(PHYSICS_TEMPLATES) - 1}] "
                         f"(see PHYSICS_TEMPLATES), got {templates!r}.")
    return values.tolist()


@validate_params(
    {
        "templates": ["array-like", Interval(Integral, 0, None, closed="left"), None],
        "n_per_template": [Interval(Integral, 1, None, closed="left")],
        "n_frames": [Interval(Integral, 2, None, closed="left")],
        "resolution": [Interval(Integral, 8, None, closed="left")],
        "frame_dt": [Interval(Real, 0, None, closed="neither")],
        "gravity": [Interval(Real, 0, None, closed="left")],
        "restitution": [Interval(Real, 0, 1, closed="both")],
        "friction": [Interval(Real, 0, None, closed="left")],
        "substeps": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_template_scenes(templates=None, n_per_template=10, *, n_frames=16, resolution=32, frame_dt=0.1,
                         gravity=10.0, restitution=0.5, friction=0.2, substeps=20, random_state=None):
    """Videos of combinatorial scenes: a red ball dropped among the objects of a template.

    A template (:data:`PHYSICS_TEMPLATES`) names three object types of
    :data:`TEMPLATE_OBJECTS`:

    - ``"floor"``: a static horizontal bar, 3.5 to 5.5 units long;
    - ``"ramp"``: a static bar inclined 20 to 35 degrees either way;
    - ``"wall"``: a static vertical bar standing on the ground;
    - ``"ball"``: a second dynamic ball (blue), dropped from rest;
    - ``"pegs"``: two static discs;
    - ``"cup"``: three static bars forming a U.

    Each video draws a layout of its template (objects kept apart; sizes,
    places and angles at random), drops the red ball from rest above one
    of the objects (PHYRE's positioning heuristic), and simulates both
    balls under gravity with bounces (``restitution``), sliding friction and
    ball-ball collisions that conserve momentum (masses ``r ** 2``). The
    world is 10 x 10 units with a ground along its bottom and open sides.

    Parameters
    ----------
    templates : array-like of int, int or None, default=None
        Template numbers (indices of :data:`PHYSICS_TEMPLATES`); ``None``:
        all 20.
    n_per_template : int, default=10
        Videos (layouts) per template.
    n_frames : int, default=16
        Frames per video; frame 0 is the scene at rest before release.
    resolution : int, default=32
        Pixels per side.
    frame_dt : float, default=0.1
        Seconds between frames.
    gravity : float, default=10.0
        Units per second squared: a drop of 2 units takes 0.63 s, a third of a
        16-frame video.
    restitution : float, default=0.5
        Share of the approach speed a bounce returns (1 is elastic).
    friction : float, default=0.2
        Coulomb friction of the balls against static objects.
    substeps : int, default=20
        Integration steps per frame.
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    data : Bunch
        - ``videos``: uint8 ``(n_videos, n_frames, resolution, resolution, 3)``;
        - ``states``: ``(n_videos, n_frames, 2, 2)`` positions of the red
          and the blue ball (NaN where a template has no blue ball);
        - ``radii``: ``(n_videos, 2)`` (NaN likewise);
        - ``bars``: ``(n_videos, 5, 4)`` bar end points ``x0, y0, x1, y1``
          (NaN rows unused; bars are 0.5 units thick), ``pegs``:
          ``(n_videos, 2, 3)`` peg centres and radii;
        - ``params``: a DataFrame with ``template``, ``objects`` (types
          joined by ``+``) and ``variant``;
        - ``gravity``, ``frame_dt``.

    Examples
    --------
    >>> from skicml.datasets import make_template_scenes
    >>> data = make_template_scenes([0, 19], n_per_template=2, n_frames=4, resolution=16, random_state=0)
    >>> data.videos.shape, data.params["objects"].tolist()[:3]
    ((4, 4, 16, 16, 3), ['floor+ramp+wall', 'floor+ramp+wall', 'ball+pegs+cup'])
    """
    templates = _check_templates(templates)
    rng = np.random.default_rng(check_random_state(random_state).randint(2 ** 31))
    n = len(templates) * n_per_template
    bars = np.full((n, _MAX_SEGMENTS, 4), np.nan)
    pegs = np.full((n, _MAX_PEGS, 3), np.nan)
    balls = np.full((n, 2, 3), np.nan)
    rows = []
    for i, (template, variant) in enumerate(itertools.product(templates, range(n_per_template))):
        scene_bars, scene_pegs, blue, red = _draw_scene(template, rng)
        bars[i, :len(scene_bars)] = scene_bars
        if scene_pegs:
            pegs[i, :len(scene_pegs)] = scene_pegs
        balls[i, 0] = red
        if blue is not None:
            balls[i, 1] = blue
        rows.append({"template": template, "objects": "+".join(PHYSICS_TEMPLATES[template]), "variant": variant})
    present = np.isfinite(balls[..., 0])
    states = _simulate(bars, pegs, np.nan_to_num(balls, nan=-100.0), present, n_frames, frame_dt, substeps,
                       gravity, restitution, friction)
    radii = balls[..., 2]
    videos = np.empty((n, n_frames, resolution, resolution, 3), dtype=np.uint8)
    for start in range(0, n, 64):  # chunks keep the float frames small
        part = slice(start, start + 64)
        videos[part] = _render(states[part], np.nan_to_num(radii[part], nan=1.0), bars[part], pegs[part],
                               resolution)
    return Bunch(videos=videos, states=states, radii=radii, bars=bars, pegs=pegs, params=pd.DataFrame(rows),
                 gravity=float(gravity), frame_dt=float(frame_dt))


@validate_params(
    {
        "n_train_templates": [Interval(Integral, 1, len(_TRAINING_ORDER), closed="both")],
        "n_train": [Interval(Integral, 1, None, closed="left")],
        "n_eval_per_template": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=False,
)
def make_template_split(n_train_templates=15, n_train=600, n_eval_per_template=10, *, random_state=None,
                        **scene_options):
    """The paper's template split: train on some templates, test in and out of them.

    Training templates are added in a fixed order whose first two together
    hold all six object types, so training sets of any size have seen
    every object; only the number of combinations grows. The training
    videos are spread evenly over the training templates, so a curve over
    ``n_train_templates`` at a fixed ``n_train`` varies the templates and
    not the amount of data (the paper's Table 1).

    Parameters
    ----------
    n_train_templates : int, default=15
        How many of the 15 training templates to train on.
    n_train : int, default=600
        Training videos in all (rounded up to a whole number per template).
    n_eval_per_template : int, default=10
        Evaluation videos of each template: fresh layouts of each training
        template (``test_in``) and of each of the five
        :data:`HELD_OUT_TEMPLATES` (``test_out``).
    random_state : int, RandomState instance or None, default=None
    **scene_options
        Passed to :func:`make_template_scenes` (``n_frames``,
        ``resolution``, ...).

    Returns
    -------
    split : Bunch
        ``train``, ``test_in`` and ``test_out``, each a
        :func:`make_template_scenes` Bunch, and ``train_templates``.

    Examples
    --------
    >>> from skicml.datasets import make_template_split
    >>> split = make_template_split(2, n_train=4, n_eval_per_template=1, n_frames=3, resolution=8,
    ...                             random_state=0)
    >>> split.train_templates, len(split.train.videos), len(split.test_out.videos)
    ([0, 19], 4, 5)
    """
    rng = check_random_state(random_state)
    chosen = list(_TRAINING_ORDER[:n_train_templates])
    per_template = -(-n_train // n_train_templates)
    seeds = rng.randint(2 ** 31, size=3)
    return Bunch(
        train=make_template_scenes(chosen, per_template, random_state=seeds[0], **scene_options),
        test_in=make_template_scenes(chosen, n_eval_per_template, random_state=seeds[1], **scene_options),
        test_out=make_template_scenes(list(HELD_OUT_TEMPLATES), n_eval_per_template, random_state=seeds[2],
                                      **scene_options),
        train_templates=chosen,
    )
