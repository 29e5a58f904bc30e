"""Point clouds of primitive shapes, for point-cloud models.

Used by one family: ``pointcloud`` (GAPrompt's Point-MAE recipe and tour row).

:func:`make_point_clouds` samples the surfaces of ten primitive shapes
(numpy only, vectorised over clouds: 2,000 clouds of 512 points in about a
second) in three difficulty variants that mirror ScanObjectNN's: the object
alone, the object on a floor with clutter, and a perturbed, occluded,
unevenly sampled object on that background (GAPrompt spec, section 5). It
is the pretraining corpus of the shipped tiny Point-MAE backbone and the
benchmark of the GAPrompt evidence.
"""

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ..utils.param_validation import Integral, Interval, Real, StrOptions, validate_params
from ._validation import NAMES, check_names

__all__ = ["POINT_CLOUD_CLASSES", "make_point_clouds"]

#: Shape classes of :func:`make_point_clouds`, in target order. Three pairs
#: are confusable on purpose (sphere / ellipsoid, cube / box, cylinder /
#: capsule), so that a classifier must read local geometry.
POINT_CLOUD_CLASSES = (
    "sphere", "ellipsoid", "cube", "box", "cylinder", "capsule", "cone", "torus", "pyramid", "disc",
)

_VARIANTS = ("obj_only", "obj_bg", "hardest")
_ROTATIONS = ("y", "so3", None)
_JITTER = 0.01  # in units of the object's unit sphere
_BACKGROUND_SHARE = 0.2
_OCCLUSION = (0.1, 0.3)  # share of the object's surface a half-space cut removes
_DROPOUT = 0.1  # share of the object's surface removed in local holes
_HARDEST_SCALE = (0.75, 1.25)
_HARDEST_SHIFT = 0.5  # of the object's bounding box, per horizontal axis
_HARDEST_DENSITY_BIAS = 1.0
# Candidates per kept object point when points are dropped or weighted: the
# cut and the holes remove at most 40 % of the candidates, so 3x leaves 1.8x.
_OVERSAMPLE = 3

_DESCR = """\
Primitive-shape point clouds (skicml.datasets.make_point_clouds)
================================================================

Surface samples of ten primitive shapes (sphere, ellipsoid, cube, box,
cylinder, capsule, cone, torus, square pyramid, thin disc), area-uniform per
face or patch, with random class-preserving proportions, a random rotation
and unit-sphere normalisation. Three variants mirror ScanObjectNN:
"obj_only" (the object with jitter), "obj_bg" (a fifth of the points from a
floor patch and clutter blobs) and "hardest" (obj_bg with the object
scaled and shifted on the floor, a half-space cut away, holes and an uneven
sampling density). Sphere / ellipsoid, cube / box and cylinder / capsule
are close pairs on purpose.
"""


# ---------------------------------------------------------------- surfaces


def _unit_vectors(rng, shape):
    v = rng.standard_normal(tuple(shape) + (3,))
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def _categorical(rng, weights, k):
    """``k`` draws per row of ``weights`` (m, P): indices in 0..P-1, shape (m, k)."""
    cdf = np.cumsum(weights, axis=1)
    cdf /= cdf[:, -1:]
    index = (rng.uniform(size=(len(weights), k, 1)) >= cdf[:, None, :]).sum(-1)
    return np.minimum(index, weights.shape[1] - 1)


def _rejection(rng, m, k, draw):
    """(m, k, 3) points of ``draw(rows, rng) -> (points, accept_probability)``,
    each point redrawn until accepted."""
    out = np.empty((m, k, 3))
    rows, cols = np.divmod(np.arange(m * k), k)
    while rows.size:
        points, accept = draw(rows, rng)
        ok = rng.uniform(size=rows.size) < accept
        out[rows[ok], cols[ok]] = points[ok]
        rows, cols = rows[~ok], cols[~ok]
    return out


def _ellipsoid(rng, axes, k):
    """Area-uniform points on ellipsoids with semi-axes ``axes`` (m, 3).

    A uniform direction u maps to a * u; the map stretches the area near u by
    |u / a| (times a constant), so accepting u with probability
    |u / a| * min(a) makes the result uniform over the surface.
    """
    def draw(rows, rng):
        u = _unit_vectors(rng, (rows.size,))
        a = axes[rows]
        return u * a, np.linalg.norm(u / a, axis=1) * a.min(1)

    return _rejection(rng, len(axes), k, draw)


def _triangles(rng, vertices, k):
    """Area-uniform points on triangle meshes ``vertices`` (m, T, 3, 3)."""
    a, b, c = vertices[:, :, 0], vertices[:, :, 1], vertices[:, :, 2]
    area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=-1)
    face = _categorical(rng, area, k)[..., None, None]
    a, b, c = (np.take_along_axis(v, face[..., 0], axis=1) for v in (a, b, c))
    u, v = rng.uniform(size=(2, len(vertices), k, 1))
    flip = u + v > 1.0
    u, v = np.where(flip, 1.0 - u, u), np.where(flip, 1.0 - v, v)
    return a + u * (b - a) + v * (c - a)


def _box_mesh(half):
    """The 12 triangles of boxes with half-sides ``half`` (m, 3)."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
    quads = [(0, 1, 3, 2), (4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6), (0, 2, 6, 4), (1, 3, 7, 5)]
    tris = [t for q in quads for t in ((q[0], q[1], q[2]), (q[0], q[2], q[3]))]
    return corners[np.array(tris)][None] * half[:, None, None, :]


def _pyramid_mesh(a, c, h):
    """Square pyramids: base half-sides ``a`` (x) and ``c`` (z) at y = 0, apex at y = h."""
    m = len(a)
    base = np.stack([np.stack([sx * a, np.zeros(m), sz * c], 1)
                     for sx, sz in ((-1, -1), (1, -1), (1, 1), (-1, 1))], 1)
    apex = np.stack([np.zeros(m), h, np.zeros(m)], 1)[:, None]
    sides = [np.concatenate([base[:, [i]], base[:, [(i + 1) % 4]], apex], 1) for i in range(4)]
    bottom = [base[:, [0, 1, 2]], base[:, [0, 2, 3]]]
    return np.stack(sides + bottom, 1)


def _revolution(rng, radius, half_height, k, *, capsule=False):
    """Cylinders (flat caps) or capsules (hemispherical caps) about the y axis.

    ``half_height`` is the half-length of the straight part. The parts are
    chosen in proportion to their areas, and each is sampled uniformly.
    """
    m = len(radius)
    r, H = radius[:, None], half_height[:, None]
    side = 4 * np.pi * r * H
    cap = 4 * np.pi * r ** 2 if capsule else 2 * np.pi * r ** 2
    on_side = rng.uniform(size=(m, k)) < side / (side + cap)
    theta = rng.uniform(0, 2 * np.pi, size=(m, k))
    lateral = np.stack([r * np.cos(theta), rng.uniform(-1, 1, size=(m, k)) * H, r * np.sin(theta)], -1)
    if capsule:
        u = _unit_vectors(rng, (m, k))
        ends = r[..., None] * u
        ends[..., 1] += np.sign(u[..., 1]) * H
    else:
        rho = r * np.sqrt(rng.uniform(size=(m, k)))
        top = np.where(rng.uniform(size=(m, k)) < 0.5, 1.0, -1.0)
        ends = np.stack([rho * np.cos(theta), top * H, rho * np.sin(theta)], -1)
    return np.where(on_side[..., None], lateral, ends)


def _cone(rng, radius, height, k):
    """Cones with their base disc: base at y = 0, apex at y = ``height``."""
    m = len(radius)
    r, h = radius[:, None], height[:, None]
    side = np.pi * r * np.sqrt(r ** 2 + h ** 2)
    on_side = rng.uniform(size=(m, k)) < side / (side + np.pi * r ** 2)
    # Both the lateral surface (by distance from the apex) and the base (by
    # distance from its centre) have area growing with the square of the
    # fraction t, hence t = sqrt(uniform) for both.
    t = np.sqrt(rng.uniform(size=(m, k)))
    theta = rng.uniform(0, 2 * np.pi, size=(m, k))
    y = np.where(on_side, h * (1.0 - t), 0.0)
    return np.stack([t * r * np.cos(theta), y, t * r * np.sin(theta)], -1)


def _torus(rng, minor, k):
    """Tori of major radius 1 and minor radius ``minor`` (m,), lying in the xz plane."""
    def draw(rows, rng):
        r = minor[rows]
        u, v = rng.uniform(0, 2 * np.pi, size=(2, rows.size))
        ring = 1.0 + r * np.cos(v)
        # The area element is proportional to the distance from the axis.
        points = np.stack([ring * np.cos(u), r * np.sin(v), ring * np.sin(u)], 1)
        return points, ring / (1.0 + r)

    return _rejection(rng, len(minor), k, draw)


def _spread(rng, m, low, high):
    """Per-axis proportions (m, 3): smallest 1, largest in [low, high], the
    middle one between them, on random axes."""
    largest = rng.uniform(low, high, size=m)
    sizes = np.stack([np.ones(m), rng.uniform(1.0, largest), largest], 1)
    order = np.argsort(rng.uniform(size=(m, 3)), axis=1)
    return np.take_along_axis(sizes, order, axis=1)


def _sample_class(name, rng, m, k):
    """(m, k, 3) surface points of ``m`` random shapes of class ``name``,
    upright along y, before normalisation. The random proportions stay
    inside the class: sphere and cube axes differ by at most 5 %, an
    ellipsoid's longest axis is 1.4-2 times its shortest, a box's 1.6-2.5;
    cylinders and capsules are 1.5-2.5 diameters long overall."""
    if name == "sphere":
        return _ellipsoid(rng, rng.uniform(0.95, 1.05, size=(m, 3)), k)
    if name == "ellipsoid":
        return _ellipsoid(rng, _spread(rng, m, 1.4, 2.0), k)
    if name == "cube":
        return _triangles(rng, _box_mesh(rng.uniform(0.95, 1.05, size=(m, 3))), k)
    if name == "box":
        return _triangles(rng, _box_mesh(_spread(rng, m, 1.6, 2.5)), k)
    if name == "cylinder":
        return _revolution(rng, np.ones(m), rng.uniform(1.5, 2.5, size=m), k)
    if name == "capsule":
        # the same overall length as a cylinder: 1 of it is the two caps
        return _revolution(rng, np.ones(m), rng.uniform(1.5, 2.5, size=m) - 1.0, k, capsule=True)
    if name == "cone":
        return _cone(rng, np.ones(m), rng.uniform(1.5, 2.5, size=m), k)
    if name == "torus":
        return _torus(rng, rng.uniform(0.25, 0.45, size=m), k)
    if name == "pyramid":
        return _triangles(rng, _pyramid_mesh(np.ones(m), rng.uniform(0.9, 1.1, size=m),
                                             rng.uniform(1.5, 2.5, size=m)), k)
    if name == "disc":
        return _revolution(rng, np.ones(m), rng.uniform(0.03, 0.1, size=m), k)
    raise ValueError(name)


# ---------------------------------------------------------------- scene


def _to_unit_sphere(x, mask=None):
    """Centre each cloud at its centroid and scale it into the unit ball
    (``mask`` (n, P) marks the points that count)."""
    if mask is None:
        x = x - x.mean(axis=1, keepdims=True)
        radius = np.sqrt((x * x).sum(axis=-1).max(axis=1))
    else:
        w = mask[..., None]
        x = x - (x * w).sum(axis=1, keepdims=True) / w.sum(axis=1, keepdims=True)
        radius = np.where(mask, np.linalg.norm(x, axis=-1), 0.0).max(axis=1)
    return x / np.maximum(radius, 1e-12)[:, None, None]


def _rotations(rng, n, rotation):
    if rotation == "y":
        angle = rng.uniform(-np.pi, np.pi, size=n)
        c, s, zero, one = np.cos(angle), np.sin(angle), np.zeros(n), np.ones(n)
        return np.stack([np.stack([c, zero, s], 1), np.stack([zero, one, zero], 1),
                         np.stack([-s, zero, c], 1)], 1)
    # uniform on SO(3): a uniform unit quaternion
    q = rng.standard_normal((n, 4))
    w, x, y, z = (q / np.linalg.norm(q, axis=1, keepdims=True)).T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], 1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], 1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], 1),
    ], 1)


def _keep(rng, obj, n_keep, density_bias, damage):
    """``n_keep`` of the candidate points of each cloud: a weighted draw
    without replacement (weights exp(density_bias * p . v) for a random
    direction v per cloud) among those that survive, when ``damage``, a
    half-space cut and the holes."""
    m, M, _ = obj.shape
    # Efraimidis-Spirakis: the largest log(u) / w are a weighted draw without replacement.
    keys = np.log1p(-rng.uniform(size=(m, M)))
    if density_bias:
        toward = _unit_vectors(rng, (m,))
        keys *= np.exp(-density_bias * (obj @ toward[:, :, None])[..., 0])
    if damage:
        normal = _unit_vectors(rng, (m,))
        height = (obj @ normal[:, :, None])[..., 0]
        share = rng.uniform(*_OCCLUSION, size=m)
        cut_rank = np.minimum((1.0 - share) * M, M - 1).astype(int)
        threshold = np.take_along_axis(np.sort(height, axis=1), cut_rank[:, None], axis=1)
        keys[height >= threshold] = -np.inf
        # holes around one to three random surface points, 10 % of the surface together
        n_holes = rng.randint(1, 4, size=m)
        centres = obj[np.arange(m)[:, None], rng.randint(0, M, size=(m, 3))]
        gap = np.full((m, M), np.inf)
        for j in range(3):
            d = ((obj - centres[:, j, None]) ** 2).sum(-1)
            gap = np.where(n_holes[:, None] > j, np.minimum(gap, d), gap)
        n_drop = int(_DROPOUT * M)
        if n_drop:
            hole = np.partition(gap, n_drop - 1, axis=1)[:, n_drop - 1:n_drop]
            keys[gap <= hole] = -np.inf
    keep = np.argpartition(-keys, n_keep - 1, axis=1)[:, :n_keep]
    return np.take_along_axis(obj, keep[..., None], axis=1)


def _background(rng, low, high, k):
    """(m, k, 3) points of a floor patch under each object (bounding boxes
    ``low``, ``high``) and one to three clutter mounds on it."""
    m = len(low)
    centre = 0.5 * (low + high)
    reach = 0.5 * np.maximum(high[:, 0] - low[:, 0], high[:, 2] - low[:, 2])
    floor_y = low[:, 1] - rng.uniform(0.0, 0.02, size=m)
    half = reach * rng.uniform(1.2, 1.8, size=m)
    floor = np.stack([centre[:, 0, None] + half[:, None] * rng.uniform(-1, 1, size=(m, k)),
                      np.broadcast_to(floor_y[:, None], (m, k)),
                      centre[:, 2, None] + half[:, None] * rng.uniform(-1, 1, size=(m, k))], -1)
    n_blobs = rng.randint(1, 4, size=m)
    angle = rng.uniform(0, 2 * np.pi, size=(m, 3))
    distance = reach[:, None] * rng.uniform(0.9, 1.5, size=(m, 3))
    sigma = rng.uniform(0.05, 0.15, size=(m, 3))
    blob = np.minimum((rng.uniform(size=(m, k)) * n_blobs[:, None]).astype(int), 2)
    pick = (np.arange(m)[:, None], blob)
    s = sigma[pick]
    spread = rng.standard_normal((m, k, 3))
    mounds = np.stack([centre[:, 0, None] + distance[pick] * np.cos(angle[pick]) + s * spread[..., 0],
                       floor_y[:, None] + s * np.abs(spread[..., 1]),
                       centre[:, 2, None] + distance[pick] * np.sin(angle[pick]) + s * spread[..., 2]], -1)
    on_floor = rng.uniform(size=(m, k)) < rng.uniform(0.4, 0.8, size=(m, 1))
    return np.where(on_floor[..., None], floor, mounds)


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_points": [Interval(Integral, 8, None, closed="left")],
        "variant": [StrOptions(set(_VARIANTS))],
        "classes": NAMES,
        "rotation": [StrOptions({r for r in _ROTATIONS if r is not None}), None],
        "min_points": [Interval(Integral, 1, None, closed="left"), None],
        "density_bias": [Interval(Real, 0, 10, closed="both"), None],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_point_clouds(n_samples=1000, *, n_points=512, variant="obj_only", classes=None, rotation="y",
                      min_points=None, density_bias=None, random_state=None):
    """Surface point clouds of primitive shapes, labelled by shape.

    Ten classes (:data:`POINT_CLOUD_CLASSES`): sphere, ellipsoid, cube,
    elongated box, cylinder, capsule (a cylinder with hemispherical caps,
    the composite shape), cone, torus, square pyramid and thin disc. Three
    pairs are confusable on purpose, so that local geometry matters: sphere /
    ellipsoid (axes within 5 % of each other vs a longest axis 1.4-2 times
    the shortest), cube / box (likewise, 1.6-2.5) and cylinder / capsule
    (the same overall length of 1.5-2.5 diameters, flat vs round ends).

    Each cloud is built as follows:

    1. **Surface.** Points are sampled uniformly by area over the faces or
       patches of one shape (exactly: triangle meshes by area, curved
       surfaces by their area element, ellipsoids and tori by rejection),
       whose proportions are drawn at random inside the class's ranges
       (an anisotropic scale that never turns one class into another).
       Shapes stand upright along the y axis.
    2. **Pose.** The object is centred, scaled into the unit sphere and
       rotated: about the vertical y axis by an angle in [-pi, pi)
       (``rotation="y"``), uniformly over all rotations (``"so3"``), or not
       at all (``None``).
    3. **Variant** (mirroring ScanObjectNN's):

       - ``"obj_only"``: the object alone.
       - ``"obj_bg"``: a fifth of the points are background: a horizontal
         floor patch under the object, 1.2-1.8 times its horizontal reach,
         and one to three clutter mounds (Gaussian blobs on the floor)
         beside it.
       - ``"hardest"``: as ``"obj_bg"``, and the object is scaled by
         0.75-1.25 relative to the background and shifted along the floor
         by up to half its bounding box in x and z; a random half-space
         cuts away 10-30 % of its surface (occlusion) and holes around one
         to three random surface points remove another 10 % (point
         dropout: random independent dropout would leave no trace once the
         cloud is resampled to ``n_points``); its points are sampled with
         a non-uniform density (``density_bias`` below, 1.0 by default).
         The surface is sampled densely enough before the cuts that the
         cloud still has exactly ``n_points`` points.

    4. **Noise.** Gaussian jitter of standard deviation 0.01 (in units of
       the object's radius) on every point; then the point order is
       shuffled and the whole cloud (background included) is centred at
       its centroid and scaled so that its farthest point is at distance 1.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of clouds. The classes are balanced: their counts differ by
        at most one.
    n_points : int, default=512
        Points per cloud (at least 8), or the largest count when
        ``min_points`` is set.
    variant : {"obj_only", "obj_bg", "hardest"}, default="obj_only"
        Difficulty, see above.
    classes : sequence of str or None, default=None
        Classes to draw, among :data:`POINT_CLOUD_CLASSES`; None is all ten.
        ``target`` indexes this selection.
    rotation : {"y", "so3"} or None, default="y"
        Random rotation of each object: about the vertical axis, uniform
        over SO(3), or none (every object upright in its canonical pose).
        The floor of the background variants stays horizontal.
    min_points : int or None, default=None
        If set, the number of points of each cloud is drawn uniformly from
        ``min_points`` to ``n_points`` (inclusive) and ``points`` is a list
        of arrays; each cloud is a random subset of a full cloud,
        normalised on its own.
    density_bias : float or None, default=None
        Non-uniform sampling density: each object's surface points are drawn
        with weights ``exp(density_bias * p . v)`` for a random unit
        direction ``v`` per cloud (``p`` on the object's unit sphere), so one
        side is more densely sampled than the other, as in a scan from one
        side. 0 is uniform; None is the variant's default (0 for
        ``"obj_only"`` and ``"obj_bg"``, 1.0 for ``"hardest"``). At most 10.
    random_state : int, RandomState instance or None, default=None
        Seeds everything; the same seed gives the same clouds.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With keys:

        - ``points``: float32 array of shape ``(n_samples, n_points, 3)``,
          or, with ``min_points``, a list of ``n_samples`` float32 arrays of
          shape ``(N_i, 3)``.
        - ``target``: int64 array of shape ``(n_samples,)``, the class of
          each cloud as an index into ``target_names``.
        - ``target_names``: tuple of str, the classes drawn.
        - ``variant``: str, the variant.
        - ``DESCR``: str, a description of the data.

    Examples
    --------
    >>> from skicml.datasets import make_point_clouds
    >>> data = make_point_clouds(20, n_points=128, variant="hardest", random_state=0)
    >>> data.points.shape, data.points.dtype
    ((20, 128, 3), dtype('float32'))
    >>> data.target_names[:4]
    ('sphere', 'ellipsoid', 'cube', 'box')
    >>> clouds = make_point_clouds(3, n_points=64, min_points=32, random_state=0).points
    >>> all(32 <= len(cloud) <= 64 for cloud in clouds)
    True
    """
    n, P = n_samples, n_points
    class_names = check_names(classes, "classes", POINT_CLOUD_CLASSES)
    if min_points is not None and min_points > P:
        raise ValueError(f"min_points={min_points} exceeds n_points={P}; expected 1 <= min_points <= n_points.")
    if density_bias is None:
        density_bias = _HARDEST_DENSITY_BIAS if variant == "hardest" else 0.0
    rng = check_random_state(random_state)

    target = rng.permutation(np.arange(n) % len(class_names)).astype(np.int64)
    n_background = 0 if variant == "obj_only" else round(_BACKGROUND_SHARE * P)
    n_object = P - n_background
    damage = variant == "hardest"
    n_candidates = n_object * _OVERSAMPLE if damage or density_bias else n_object

    obj = np.empty((n, n_candidates, 3))
    for c, name in enumerate(class_names):
        rows = np.flatnonzero(target == c)
        if rows.size:
            obj[rows] = _sample_class(name, rng, rows.size, n_candidates)
    obj = _to_unit_sphere(obj)
    if rotation is not None:
        obj = obj @ _rotations(rng, n, rotation).transpose(0, 2, 1)
    if n_candidates > n_object:
        obj = _keep(rng, obj, n_object, density_bias, damage)

    if n_background:
        low, high = obj.min(axis=1), obj.max(axis=1)
        background = _background(rng, low, high, n_background)
        if damage:
            # scale about the object's foot and slide it along the floor
            foot = np.stack([0.5 * (low[:, 0] + high[:, 0]), low[:, 1], 0.5 * (low[:, 2] + high[:, 2])], 1)
            scale = rng.uniform(*_HARDEST_SCALE, size=(n, 1, 1))
            shift = _HARDEST_SHIFT * rng.uniform(-1, 1, size=(n, 3)) * (high - low)
            shift[:, 1] = 0.0
            obj = (obj - foot[:, None]) * scale + (foot + shift)[:, None]
        obj = np.concatenate([obj, background], axis=1)

    obj = obj + _JITTER * rng.standard_normal(obj.shape)
    order = np.argsort(rng.uniform(size=(n, P)), axis=1)
    obj = np.take_along_axis(obj, order[..., None], axis=1)
    if min_points is None:
        points = _to_unit_sphere(obj).astype(np.float32)
    else:
        counts = rng.randint(min_points, P + 1, size=n)
        obj = _to_unit_sphere(obj, np.arange(P) < counts[:, None]).astype(np.float32)
        points = [obj[i, :counts[i]].copy() for i in range(n)]
    return Bunch(points=points, target=target, target_names=class_names, variant=variant, DESCR=_DESCR)
