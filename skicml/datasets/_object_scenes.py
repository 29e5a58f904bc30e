"""Grid scenes of many coloured objects with long, biased captions (VISTA).

Used by one family: ``vlm`` (VISTA, Lavender and the tiny VLM's recipe; the
common tests draw their VLM data here too).

:func:`make_object_scenes` renders scenes of three to seven coloured shapes,
each in its own cell of a grid, with long captions that walk through the
objects in raster order, and an optional co-occurrence bias: every object
class has a fixed *partner* class (:func:`object_partners`) that it pulls
into the scene with a chosen probability. Training a small vision-language
model on biased scenes and testing it on unbiased ones gives measurable
object hallucination of the co-occurrence kind (VISTA spec, sections 5.2,
5.3 and 9), scored with CHAIR over the classes of :func:`object_classes`.
"""

import numpy as np
import pandas as pd
from sklearn.utils import check_random_state

from ..utils.param_validation import Integral, Interval, Real, validate_params
from ._shapes import SHAPE_COLORS, SHAPE_NAMES, SHAPE_SIZES, _SCENE_RULES, _article, _shape_mask
from ._validation import NAMES, check_names

__all__ = ["free_object_scene_words", "make_free_object_scenes", "make_object_scenes", "object_classes",
           "object_partners"]

_DEFAULT_SHAPES = ("circle", "square", "triangle", "cross")
_DEFAULT_COLORS = tuple(SHAPE_COLORS)[:6]  # red, green, blue, yellow, purple, orange

# Radius of each size as a share of the cell side (the shapes' extent is at
# most 1.05 radius, the diamond's, so a shape never leaves its cell).
_CELL_SIZES = {"small": 0.2, "large": 0.36}
_EXTENT = 1.05
_RADIUS_JITTER = 0.05  # radii vary by +-5 % around their size
_MIN_CELL = 8  # pixels per cell side, at least

# The absolute place of the caption's first object, by thirds of the image:
# _LOCATIONS[row band][column band].
_LOCATIONS = (
    ("at the top left", "at the top", "at the top right"),
    ("on the left", "in the middle", "on the right"),
    ("at the bottom left", "at the bottom", "at the bottom right"),
)


def object_classes(shapes=None, colors=None):
    """The object classes of :func:`make_object_scenes`: colour and shape word pairs.

    Parameters
    ----------
    shapes : sequence of str or None, default=None
        Shapes among :data:`~skicml.datasets.SHAPE_NAMES`; None is circle,
        square, triangle and cross.
    colors : sequence of str or None, default=None
        Colours among :data:`~skicml.datasets.SHAPE_COLORS`; None is red,
        green, blue, yellow, purple and orange.

    Returns
    -------
    list of str
        ``"<colour> <shape>"`` for every colour (outer loop) and shape (inner
        loop), in the order given: the CHAIR vocabulary of the scenes.

    Examples
    --------
    >>> from skicml.datasets import object_classes
    >>> object_classes(shapes=["circle", "square"], colors=["red", "blue"])
    ['red circle', 'red square', 'blue circle', 'blue square']
    >>> len(object_classes())
    24
    """
    shape_names = check_names(shapes, "shapes", SHAPE_NAMES, _DEFAULT_SHAPES)
    color_names = check_names(colors, "colors", tuple(SHAPE_COLORS), _DEFAULT_COLORS)
    return [f"{c} {s}" for c in color_names for s in shape_names]


def _partner_index(n_classes, partner_seed):
    """``partner[k]``: a random cyclic permutation of ``range(n_classes)``."""
    order = np.random.RandomState(partner_seed).permutation(n_classes)
    partner = np.empty(n_classes, dtype=np.int64)
    partner[order] = np.roll(order, -1)
    return partner


@validate_params(
    {"partner_seed": [Interval(Integral, 0, None, closed="left")], "shapes": NAMES, "colors": NAMES},
    prefer_skip_nested_validation=True,
)
def object_partners(partner_seed=0, shapes=None, colors=None):
    """The fixed partner of every object class, which biased scenes pull in.

    The partners are one random cycle through all the classes of
    :func:`object_classes` (so no class is its own partner when there are
    two or more, and the map is a permutation), seeded by ``partner_seed``
    alone: scenes drawn with any ``random_state`` share them. A different
    selection of shapes or colours gives a different map.

    Parameters
    ----------
    partner_seed : int, default=0
        Seed of the partner permutation (a non-negative integer).
    shapes, colors : sequence of str or None, default=None
        As in :func:`object_classes`.

    Returns
    -------
    dict of str to str
        Class name to its partner's name, in the order of
        :func:`object_classes`.

    See Also
    --------
    make_object_scenes : Scenes whose ``cooccurrence`` uses these partners.

    Examples
    --------
    >>> from skicml.datasets import object_partners
    >>> partners = object_partners()
    >>> len(partners), sorted(partners.values()) == sorted(partners)
    (24, True)
    >>> any(k == v for k, v in partners.items())
    False
    """
    names = object_classes(shapes, colors)
    partner = _partner_index(len(names), partner_seed)
    return {name: names[partner[k]] for k, name in enumerate(names)}


def _relations(grid):
    """``table[dr, dc + grid - 1]``: the phrase placing an object at offset
    (dr rows down, dc columns right) from the previous one, for the offsets
    raster order allows (dr > 0, or dr == 0 and dc > 0)."""
    table = np.full((grid, 2 * grid - 1), "", dtype=object)
    for dr in range(grid):
        for dc in range(-(grid - 1), grid):
            if dr == 0 and dc <= 0:
                continue
            far_h = "far " if abs(dc) >= 2 else ""
            side = "right" if dc > 0 else "left"
            if dr == 0:
                phrase = f"{far_h}to its right"
            else:
                phrase = ("far below it" if dr >= 2 else "below it")
                if dc:
                    phrase += f" {far_h}to the {side}"
            table[dr, dc + grid - 1] = phrase
    return table


def _draw_classes(rng, n, lo, hi, partner, cooccurrence):
    """Object counts and classes of ``n`` scenes, slot by slot in drawing order.

    Each slot is a free draw, or the partner of the free draw before it when
    that one pulled (probability ``cooccurrence``). Returns ``count`` (n,),
    ``cls`` (n, hi) and ``pulled`` (n, hi): whether a slot is a partner.
    """
    count = rng.randint(lo, hi + 1, size=n)
    free = rng.randint(len(partner), size=(n, hi))
    pulls = rng.uniform(size=(n, hi)) < cooccurrence
    cls = np.empty((n, hi), dtype=np.int64)
    pulled = np.zeros((n, hi), dtype=bool)
    pending = np.zeros(n, dtype=bool)
    for j in range(hi):
        prev = cls[:, j - 1] if j else free[:, 0]
        cls[:, j] = np.where(pending, partner[prev], free[:, j])
        pulled[:, j] = pending
        pending = ~pending & pulls[:, j]
    return count, cls, pulled


@validate_params(
    {
        **_SCENE_RULES,
        "image_size": [Interval(Integral, 1, None, closed="left")],
        "grid": [Interval(Integral, 1, None, closed="left")],
        "cooccurrence": [Interval(Real, 0, 1, closed="both")],
        "partner_seed": [Interval(Integral, 0, None, closed="left")],
        "return_masks": ["boolean"],
    },
    prefer_skip_nested_validation=True,
)
def make_object_scenes(n_scenes=1000, *, image_size=48, grid=3, min_objects=3, max_objects=7,
                       shapes=None, colors=None, sizes=None, cooccurrence=0.0, partner_seed=0,
                       color_jitter=0.04, noise=0.02, return_masks=False, random_state=None):
    """Grid scenes of coloured shapes with long raster-order captions and a co-occurrence bias.

    Each scene is a dark background (random grey level, light pixel noise)
    cut into ``grid`` x ``grid`` cells; ``min_objects`` to ``max_objects``
    objects (uniform per scene) sit in distinct random cells, jittered inside
    them, so they never overlap. An object's class is a colour and shape
    pair ("red circle", see :func:`object_classes`); it also has a size
    ("small" or "large": a radius of 0.2 or 0.36 cell side, +-5 %).

    **Captions** walk through the objects in raster order (by cell: the top
    row left to right, then the next row), so the order is fixed by the
    image. The first object is placed absolutely, each later one relative
    to the object before it, and the phrases are joined by ", "::

        a large red circle at the top left, to its right a small blue cross,
        below it to the left a large green triangle, far to its right a small
        red square

    The grammar, word for word:

    - an object is ``<article> <size> <colour> <shape>`` ("a large red
      circle"); the article is "a" for both sizes;
    - the first object is followed by its place by thirds of the image:
      "at the top left", "at the top", "at the top right", "on the left",
      "in the middle", "on the right", "at the bottom left", "at the
      bottom", "at the bottom right" (on a 3 x 3 grid, the cell itself);
    - every later object is preceded by its offset (``dr`` rows down,
      ``dc`` columns right) from the previous one: "to its right" (same
      row, ``dc = 1``), "far to its right" (same row, ``dc >= 2``), else
      "below it" (``dr = 1``) or "far below it" (``dr >= 2``), followed for
      ``dc != 0`` by "to the left" / "to the right" (``|dc| = 1``) or "far
      to the left" / "far to the right" (``|dc| >= 2``).

    On grids up to 3 x 3 a caption therefore fixes every object's cell. The
    vocabulary is the size, colour and shape words, 15 others (a, at, the,
    top, bottom, left, right, middle, on, in, to, its, it, below, far) and
    the comma: 27 words at the defaults. Captions have about 8 words per
    object (commas not counted): 19 to 28 at 3 objects, 34 to 44 at 5, 52
    to 58 at 7 on the default grid.

    **Co-occurrence bias.** Every class has a fixed partner
    (:func:`object_partners`, seeded by ``partner_seed`` only, so training
    and test sets share it). Classes are drawn one object at a time until
    the scene's object count is reached: a freely drawn class is uniform
    over the classes, and with probability ``cooccurrence`` it pulls its
    partner in as the next object (if the count allows; pulled objects pull
    nothing). ``cooccurrence=0`` draws classes independently (the unbiased
    test condition), ``0.8`` is the training condition of the VISTA probe.
    The object count per scene does not depend on ``cooccurrence``; a class
    may appear twice in a scene. Cells are assigned at random after the
    classes are drawn, so partners are not neighbours in the caption.

    Rendering is vectorised numpy over all objects at once (no drawing
    library): thousands of 48 x 48 scenes per second.

    Parameters
    ----------
    n_scenes : int, default=1000
        Number of scenes.
    image_size : int, default=48
        Side of the square images in pixels; each cell needs at least 8
        (``image_size >= 8 * grid``).
    grid : int, default=3
        Cells per side of the grid.
    min_objects, max_objects : int, default=3, 7
        Inclusive range of objects per scene, ``1 <= min_objects <=
        max_objects <= grid ** 2``.
    shapes : sequence of str or None, default=None
        Shapes among :data:`~skicml.datasets.SHAPE_NAMES` (circle, square,
        triangle, diamond, cross); None is circle, square, triangle and
        cross.
    colors : sequence of str or None, default=None
        Colours among :data:`~skicml.datasets.SHAPE_COLORS`; None is red,
        green, blue, yellow, purple and orange (24 classes with the default
        shapes).
    sizes : sequence of str or None, default=None
        Sizes among "small" and "large"; None is both.
    cooccurrence : float in [0, 1], default=0.0
        Probability that a freely drawn object pulls its partner class into
        the scene.
    partner_seed : int, default=0
        Seed of the partner map, independent of ``random_state``.
    color_jitter : float in [0, 1], default=0.04
        Standard deviation of per-object colour noise, as a share of 255.
    noise : float in [0, 1], default=0.02
        Standard deviation of per-pixel background noise, on the [0, 1] scale.
    return_masks : bool, default=False
        Also return each object's pixels (``max_objects * image_size ** 2``
        bytes per scene: 16 kB at the defaults).
    random_state : int, RandomState instance or None, default=None
        Seeds everything but the partners; the same seed gives the same scenes.

    Returns
    -------
    images : ndarray of shape (n_scenes, image_size, image_size, 3), dtype uint8
        RGB images.
    captions : ndarray of shape (n_scenes,), dtype object
        One caption (str) per scene.
    objects : pandas.DataFrame
        One row per object, scenes in order and objects in caption order:
        ``scene``, ``object`` (position in the caption, from 0), ``name``
        (the class, "red circle"), ``shape``, ``color``, ``size``, ``row``
        and ``col`` (the grid cell, from the top left), ``x`` and ``y``
        (centre in pixels, ``y`` pointing down), ``radius`` (pixels) and
        ``pulled`` (whether the object was pulled in as a partner).
    masks : ndarray of shape (n_scenes, max_objects, image_size, image_size), dtype bool
        Only with ``return_masks=True``: ``masks[i, j]`` holds the pixels of
        object ``j`` (caption order) of scene ``i``; all False for the slots
        past the scene's object count. Masks of a scene are disjoint.

    See Also
    --------
    object_classes : The classes, the CHAIR vocabulary of these scenes.
    object_partners : The partner map behind ``cooccurrence``.
    make_shape_scenes : Up to four free-floating shapes with short captions.
    skicml.vlm.chair : The CHAIR hallucination metric.

    Examples
    --------
    >>> from skicml.datasets import make_object_scenes
    >>> images, captions, objects = make_object_scenes(4, random_state=0)
    >>> images.shape, images.dtype
    ((4, 48, 48, 3), dtype('uint8'))
    >>> captions[0].split(", ")[:2]
    ['a large blue square at the top left', 'to its right a small purple triangle']
    >>> list(objects.columns)[:6]
    ['scene', 'object', 'name', 'shape', 'color', 'size']
    >>> objects.loc[objects["scene"] == 0, "name"].tolist()[:2]
    ['blue square', 'purple triangle']

    Biased scenes and the pixels of each object:

    >>> images, captions, objects, masks = make_object_scenes(
    ...     2, cooccurrence=0.8, return_masks=True, random_state=0)
    >>> masks.shape
    (2, 7, 48, 48)
    """
    n, g, S, lo, hi = n_scenes, grid, image_size, min_objects, max_objects
    if S < _MIN_CELL * g:
        raise ValueError(
            f"image_size={image_size} is too small for grid={grid}: each cell needs at least "
            f"{_MIN_CELL} pixels, so image_size >= {_MIN_CELL * g}."
        )
    if lo > hi:
        raise ValueError(f"min_objects={min_objects} is larger than max_objects={max_objects}.")
    if hi > g * g:
        raise ValueError(
            f"grid={grid} has {g * g} cells, too few for max_objects={max_objects} "
            "(one object per cell); use a larger grid or fewer objects."
        )
    shape_names = check_names(shapes, "shapes", SHAPE_NAMES, _DEFAULT_SHAPES)
    color_names = check_names(colors, "colors", tuple(SHAPE_COLORS), _DEFAULT_COLORS)
    size_names = check_names(sizes, "sizes", tuple(SHAPE_SIZES))
    rng = check_random_state(random_state)

    n_shapes, n_classes = len(shape_names), len(shape_names) * len(color_names)
    partner = _partner_index(n_classes, partner_seed)

    count, cls, pulled = _draw_classes(rng, n, lo, hi, partner, cooccurrence)
    size = rng.randint(len(size_names), size=(n, hi))
    scale = rng.uniform(1 - _RADIUS_JITTER, 1 + _RADIUS_JITTER, size=(n, hi))
    jitter = rng.uniform(size=(n, hi, 2))
    rgb_noise = color_jitter * rng.standard_normal((n, hi, 3))

    # Random distinct cells, then every array in raster (caption) order.
    present = np.arange(hi)[None, :] < count[:, None]
    cell = np.argsort(rng.uniform(size=(n, g * g)), axis=1)[:, :hi]
    cell = np.where(present, cell, g * g)
    order = np.argsort(cell, axis=1, kind="stable")
    cell, cls, pulled, size, scale = (np.take_along_axis(a, order, axis=1) for a in (cell, cls, pulled, size, scale))
    jitter, rgb_noise = (np.take_along_axis(a, order[..., None], axis=1) for a in (jitter, rgb_noise))
    row, col = cell // g, cell % g

    side = S / g
    frac = np.array([_CELL_SIZES[s] for s in size_names])
    r = frac[size] * side * scale
    margin = _EXTENT * r + 0.5
    span = np.maximum(side - 2 * margin, 0.0)
    cx = col * side + margin + jitter[..., 0] * span
    cy = row * side + margin + jitter[..., 1] * span

    # Grey noisy background (rounded once, then copied to the three channels).
    background = rng.uniform(0.0, 0.16, size=(n, 1, 1))
    grey = background + noise * rng.standard_normal((n, S, S))
    grey = np.clip(np.rint(grey * 255.0), 0, 255).astype(np.uint8)
    images = np.repeat(grey[..., None], 3, axis=3)
    palette = np.array([SHAPE_COLORS[c] for c in color_names], dtype=np.float64) / 255.0
    color, shape = cls // n_shapes, cls % n_shapes
    rgb = np.clip(np.rint((palette[color] + rgb_noise) * 255.0), 0, 255).astype(np.uint8)

    # Rendering: one window around every present object, all objects at once.
    scene_i, slot_j = np.nonzero(present)  # scene-major, caption order
    m_cx, m_cy, m_r = cx[scene_i, slot_j], cy[scene_i, slot_j], r[scene_i, slot_j]
    m_shape = shape[scene_i, slot_j]
    half = int(np.ceil(_EXTENT * frac.max() * side * (1 + _RADIUS_JITTER))) + 1
    offsets = np.arange(-half, half + 1)
    ys = np.floor(m_cy).astype(np.int64)[:, None] + offsets  # (m, W)
    xs = np.floor(m_cx).astype(np.int64)[:, None] + offsets
    dy = (ys + 0.5 - m_cy[:, None])[:, :, None]
    dx = (xs + 0.5 - m_cx[:, None])[:, None, :]
    inside = ((ys >= 0) & (ys < S))[:, :, None] & ((xs >= 0) & (xs < S))[:, None, :]
    window = np.zeros((scene_i.size, offsets.size, offsets.size), dtype=bool)
    for s_index, s_name in enumerate(shape_names):
        idx = np.nonzero(m_shape == s_index)[0]
        if idx.size:
            window[idx] = _shape_mask(s_name, dx[idx], dy[idx], m_r[idx, None, None])
    window &= inside
    k, wy, wx = np.nonzero(window)
    py, px = ys[k, wy], xs[k, wx]
    images[scene_i[k], py, px] = rgb[scene_i[k], slot_j[k]]

    # Captions: "<a> <size> <colour> <shape>" phrases, placed and joined.
    names = np.array(object_classes(shape_names, color_names), dtype=object)
    m_size = size[scene_i, slot_j]
    m_cls = cls[scene_i, slot_j]
    described = np.array([f"{_article(s)} {s} " for s in size_names], dtype=object)[m_size] + names[m_cls]
    m_row, m_col = row[scene_i, slot_j], col[scene_i, slot_j]
    first = slot_j == 0
    prev_row, prev_col = np.roll(m_row, 1), np.roll(m_col, 1)
    relation = _relations(g)[np.where(first, 0, m_row - prev_row), np.where(first, g - 1, m_col - prev_col + g - 1)]
    # thirds of the image by cell centre: floor(3 * (index + 0.5) / g)
    location = np.array(_LOCATIONS, dtype=object)[(6 * m_row + 3) // (2 * g), (6 * m_col + 3) // (2 * g)]
    phrases = np.where(first, described + " " + location, relation + " " + described)
    bounds = np.cumsum(count)[:-1]
    captions = np.empty(n, dtype=object)
    captions[:] = [", ".join(p) for p in np.split(phrases, bounds)]

    objects = pd.DataFrame({
        "scene": scene_i,
        "object": slot_j,
        "name": names[m_cls].astype(str),
        "shape": np.array(shape_names)[m_shape],
        "color": np.array(color_names)[color[scene_i, slot_j]],
        "size": np.array(size_names)[m_size],
        "row": m_row,
        "col": m_col,
        "x": m_cx,
        "y": m_cy,
        "radius": m_r,
        "pulled": pulled[scene_i, slot_j],
    })
    if not return_masks:
        return images, captions, objects
    masks = np.zeros((n, hi, S, S), dtype=bool)
    masks[scene_i[k], slot_j[k], py, px] = True
    return images, captions, objects, masks


# --------------------------------------------------------------------------
# Free scenes: objects off the grid, overlapping, with long captions (issue 58)
# --------------------------------------------------------------------------
#: Radius ranges of each size, as shares of the image side (uniform within).
#: At 48 pixels a small object is 6 to 9 pixels across and a large one 12 to
#: 16, so against 8-pixel image patches most objects straddle patches.
_FREE_SIZES = {"small": (0.06, 0.09), "large": (0.12, 0.17)}
#: Every object keeps at least this share of its pixels in view.
_MIN_VISIBLE = 0.5
#: Centre offsets below this share of the image side do not make a relation.
_RELATION_SLACK = 0.06
_PLACEMENT_TRIES = 48  # candidate positions per object and round
_PLACEMENT_ROUNDS = 60  # rounds of redrawing the scenes that do not fit
_CHUNK = 512  # scenes rendered at once (masks of a chunk: ~10 MB at 48 px)
_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
            "twelve")
_PLURALS = {"circle": "circles", "square": "squares", "triangle": "triangles", "diamond": "diamonds",
            "cross": "crosses"}
_FREE_WORDS = ("there", "is", "are", "object", "objects", "a", "at", "the", "top", "bottom", "left", "right",
               "middle", "on", "in", "of", "above", "below", "and", "hides", "part", "no", "another", "all",
               ".", ",", ":", ";")


def free_object_scene_words(shapes=None, colors=None, sizes=None):
    """Every word and punctuation mark a :func:`make_free_object_scenes` caption can hold.

    For building the vocabulary of a model trained on those captions: the
    sentence words, the counts "one" to "twelve", the shapes in the singular
    and the plural, the colours and the sizes.

    Parameters
    ----------
    shapes, colors, sizes : sequence of str or None, default=None
        As in :func:`make_free_object_scenes`.

    Returns
    -------
    list of str
        Sorted, each once.

    Examples
    --------
    >>> from skicml.datasets import free_object_scene_words
    >>> words = free_object_scene_words()
    >>> "crosses" in words, "twelve" in words, "hides" in words, "diamond" in words
    (True, True, True, False)
    """
    shape_names = check_names(shapes, "shapes", SHAPE_NAMES, _DEFAULT_SHAPES)
    color_names = check_names(colors, "colors", tuple(SHAPE_COLORS), _DEFAULT_COLORS)
    size_names = check_names(sizes, "sizes", tuple(SHAPE_SIZES))
    words = set(_FREE_WORDS) | set(_NUMBERS[1:]) | set(shape_names) | {_PLURALS[s] for s in shape_names}
    return sorted(words | set(color_names) | set(size_names))


def _count_phrase(counts, names, plural):
    """"two circles , one square and one cross" (or "two red , one green") of the non-zero counts."""
    parts = [f"{_NUMBERS[c]} {(_PLURALS[n] if c > 1 else n) if plural else n}" for c, n in zip(counts, names) if c]
    return parts[0] if len(parts) == 1 else " , ".join(parts[:-1]) + " and " + parts[-1]


def _relation_phrase(dx, dy, slack):
    """Where an object at offset (dx, dy) (pixels, y down) from another lies: "below and left of"."""
    vertical = "below" if dy > slack else "above" if dy < -slack else ""
    horizontal = "right of" if dx > slack else "left of" if dx < -slack else ""
    if not vertical and not horizontal:  # closer than the slack on both axes: the larger offset decides
        if abs(dy) >= abs(dx):
            vertical = "below" if dy > 0 else "above"
        else:
            horizontal = "right of" if dx > 0 else "left of"
    return " and ".join(p for p in (vertical, horizontal) if p)


def _place(rng, r, present, lo_margin, size, overlap):
    """Centres (c, k, 2) of objects of radii ``r`` (c, k), drawn one slot at a time among free positions.

    A slot tries ``_PLACEMENT_TRIES`` uniform positions that keep the object
    inside the image and keep its centre ``(1 - overlap) * (r_i + r_j)``
    and ``_EXTENT * max(r_i, r_j)`` away from every object placed before (so
    no object's centre lies under another); a scene where some slot finds
    none is flagged (second output) to be drawn again.
    """
    c, k = r.shape
    centre = np.zeros((c, k, 2))
    failed = np.zeros(c, dtype=bool)
    for j in range(k):
        low = lo_margin[:, j, None, None]
        tries = low + rng.uniform(size=(c, _PLACEMENT_TRIES, 2)) * (size - 2 * low)
        ok = np.ones((c, _PLACEMENT_TRIES), dtype=bool)
        if j:
            d = np.linalg.norm(tries[:, :, None, :] - centre[:, None, :j, :], axis=-1)  # (c, T, j)
            need = np.maximum((1 - overlap) * (r[:, None, :j] + r[:, j, None, None]),
                              _EXTENT * np.maximum(r[:, None, :j], r[:, j, None, None]))
            ok = ((d >= need) | ~present[:, None, :j]).all(-1)
        first = np.argmax(ok, axis=1)
        centre[:, j] = tries[np.arange(c), first]
        failed |= present[:, j] & ~ok.any(1)
    return centre, failed


def _render_full(shape_names, shape, cx, cy, r, present, size):
    """Each object's whole (unoccluded) pixels, (c, k, size, size) bool."""
    c, k = r.shape
    full = np.zeros((c, k, size, size), dtype=bool)
    scene_i, slot_j = np.nonzero(present)
    if not scene_i.size:
        return full
    m_cx, m_cy, m_r, m_shape = cx[scene_i, slot_j], cy[scene_i, slot_j], r[scene_i, slot_j], shape[scene_i, slot_j]
    half = int(np.ceil(_EXTENT * m_r.max())) + 1
    offsets = np.arange(-half, half + 1)
    ys = np.floor(m_cy).astype(np.int64)[:, None] + offsets
    xs = np.floor(m_cx).astype(np.int64)[:, None] + offsets
    dy = (ys + 0.5 - m_cy[:, None])[:, :, None]
    dx = (xs + 0.5 - m_cx[:, None])[:, None, :]
    inside = ((ys >= 0) & (ys < size))[:, :, None] & ((xs >= 0) & (xs < size))[:, None, :]
    window = np.zeros((scene_i.size, offsets.size, offsets.size), dtype=bool)
    for s_index, s_name in enumerate(shape_names):
        idx = np.nonzero(m_shape == s_index)[0]
        if idx.size:
            window[idx] = _shape_mask(s_name, dx[idx], dy[idx], m_r[idx, None, None])
    window &= inside
    m, wy, wx = np.nonzero(window)
    full[scene_i[m], slot_j[m], ys[m, wy], xs[m, wx]] = True
    return full


def _visible(full, depth):
    """The pixels of each object that no object of greater ``depth`` covers."""
    c, k = depth.shape
    order = np.argsort(-depth, axis=1, kind="stable")  # front to back
    covered = np.zeros(full.shape[:1] + full.shape[2:], dtype=bool)
    visible = np.zeros_like(full)
    rows = np.arange(c)
    for j in range(k):
        slot = order[:, j]
        mask = full[rows, slot]
        visible[rows, slot] = mask & ~covered
        covered |= mask
    return visible


@validate_params(
    {
        **_SCENE_RULES,
        "image_size": [Interval(Integral, 16, None, closed="left")],
        "overlap": [Interval(Real, 0, 0.5, closed="both")],
        "cooccurrence": [Interval(Real, 0, 1, closed="both")],
        "partner_seed": [Interval(Integral, 0, None, closed="left")],
        "return_masks": ["boolean"],
    },
    prefer_skip_nested_validation=True,
)
def make_free_object_scenes(n_scenes=1000, *, image_size=48, min_objects=5, max_objects=7, shapes=None,
                            colors=None, sizes=None, overlap=0.3, cooccurrence=0.0, partner_seed=0,
                            color_jitter=0.04, noise=0.02, return_masks=False, random_state=None):
    """Scenes of freely placed, overlapping coloured shapes with captions of 100+ tokens.

    The harder sibling of :func:`make_object_scenes` (same classes, partner
    map and co-occurrence bias), made so that a small vision-language model
    has to *ground* its words: objects sit anywhere, not in grid cells, so
    no image token holds one object; their radii vary continuously (a small
    object is 6-9 pixels across, a large one 12-16, at 48 pixels), so they
    straddle the patches of any patch size; they may partly overlap, the
    later-painted in front; and the captions are long, with attributes,
    relations between objects, occlusions and counts, so that what a model
    writes late in a caption still depends on the image.

    Each scene is a dark noisy background with ``min_objects`` to
    ``max_objects`` objects (uniform per scene). Centres are uniform over the
    positions that keep the object inside the image; any two objects' centres
    are at least ``(1 - overlap) * (r_i + r_j)`` apart and no centre lies
    under another object, and every object keeps at least half its pixels in
    view (a scene that does not fit is drawn again). Objects are painted in a
    random depth order.

    **Captions** take the objects in reading order: by third of the image
    from the top (the band of the centre), then from left to right. Five
    parts, each ending with " ."::

        there are five objects . a large red circle at the top left , a small
        blue cross at the top right , ... . the small blue cross is right of
        the large red circle , the large green square is below and left of the
        small blue cross , ... . the large green square hides part of the large
        red circle . in all : two circles , one square and two crosses ; two
        red , one green and two blue ; three large and two small .

    1. the count: "there are <n> objects" ("there is one object");
    2. every object: ``a <size> <colour> <shape> <place>``, the place by
       thirds of the image as in :func:`make_object_scenes` ("at the top
       left", "in the middle", ...), joined by " , ";
    3. every object after the first against the one before it: "the <size>
       <colour> <shape> is <relation> the <size> <colour> <shape>", where the
       relation is "above" or "below" (vertical offset of the centres over
       6 % of the image side) and "left of" or "right of" (horizontal offset
       over 6 %), joined by " and " when both hold; when neither does, the
       larger offset decides;
    4. every pair where the front object covers some pixels the back one
       would show: "the <size> <colour> <shape> hides part of the <size>
       <colour> <shape>", front objects in caption order, or "no object
       hides another";
    5. the counts of each shape (in the order of ``shapes``), of each colour
       (in the order of ``colors``) and of each size present: "in all : two
       circles , one square and one cross ; two red , one green and one blue
       ; three large and one small".

    Counts are spelt out, so ``max_objects`` is at most twelve. With every
    word and punctuation mark a token (:func:`free_object_scene_words` lists
    them), a caption of five objects or more has over 100 tokens, each
    object adding about 20. CHAIR runs over :func:`object_classes`: every
    object mention is a "<colour> <shape>" pair; the counts name colours and
    shapes apart.

    **Co-occurrence bias** as in :func:`make_object_scenes`: a freely drawn
    class pulls in its partner (:func:`object_partners`) as the next object
    with probability ``cooccurrence``; positions are drawn afterwards, so
    partners are anywhere in the caption.

    Parameters
    ----------
    n_scenes : int, default=1000
        Number of scenes.
    image_size : int, default=48
        Side of the square images in pixels, at least 16.
    min_objects, max_objects : int, default=5, 7
        Inclusive range of objects per scene, ``1 <= min_objects <=
        max_objects <= 12``.
    shapes : sequence of str or None, default=None
        Shapes among :data:`~skicml.datasets.SHAPE_NAMES`; None is circle,
        square, triangle and cross.
    colors : sequence of str or None, default=None
        Colours among :data:`~skicml.datasets.SHAPE_COLORS`; None is red,
        green, blue, yellow, purple and orange.
    sizes : sequence of str or None, default=None
        Sizes among "small" and "large"; None is both.
    overlap : float in [0, 0.5], default=0.3
        How far two objects may overlap: their centres are at least ``(1 -
        overlap)`` times the sum of their radii apart. 0 keeps circles
        apart.
    cooccurrence : float in [0, 1], default=0.0
        Probability that a freely drawn object pulls its partner class in.
    partner_seed : int, default=0
        Seed of the partner map (:func:`object_partners`).
    color_jitter : float in [0, 1], default=0.04
        Standard deviation of per-object colour noise, as a share of 255.
    noise : float in [0, 1], default=0.02
        Standard deviation of per-pixel background noise, on the [0, 1] scale.
    return_masks : bool, default=False
        Also return each object's visible pixels.
    random_state : int, RandomState instance or None, default=None
        Seeds everything but the partners.

    Returns
    -------
    images : ndarray of shape (n_scenes, image_size, image_size, 3), dtype uint8
    captions : ndarray of shape (n_scenes,), dtype object
    objects : pandas.DataFrame
        One row per object, scenes in order and objects in caption order:
        ``scene``, ``object`` (position in the caption), ``name``, ``shape``,
        ``color``, ``size``, ``x`` and ``y`` (centre in pixels, ``y`` down),
        ``radius`` (pixels), ``depth`` (painting order in the scene, 0 at the
        back), ``draw`` (order in which the classes were drawn: a pulled
        object's puller has the ``draw`` before it), ``visible`` (share of the object's pixels in view) and
        ``pulled`` (whether it was pulled in as a partner).
    masks : ndarray of shape (n_scenes, max_objects, image_size, image_size), dtype bool
        Only with ``return_masks=True``: the visible pixels of object ``j``
        (caption order) of scene ``i``, all False past the scene's objects;
        the masks of a scene are disjoint. What
        :func:`skicml.vlm.pointing_accuracy` reads.

    See Also
    --------
    make_object_scenes : One object a grid cell, shorter captions.
    free_object_scene_words : The words of these captions.

    Examples
    --------
    >>> from skicml.datasets import make_free_object_scenes
    >>> images, captions, objects = make_free_object_scenes(3, random_state=0)
    >>> images.shape
    (3, 48, 48, 3)
    >>> captions[0].startswith("there are ") and captions[0].endswith(" .")
    True
    >>> 5 <= int((objects["scene"] == 0).sum()) <= 7
    True
    >>> list(objects.columns)[:6]
    ['scene', 'object', 'name', 'shape', 'color', 'size']
    >>> images, captions, objects, masks = make_free_object_scenes(
    ...     2, max_objects=5, cooccurrence=0.8, return_masks=True, random_state=0)
    >>> masks.shape
    (2, 5, 48, 48)
    """
    n, S, lo, hi = n_scenes, image_size, min_objects, max_objects
    if lo > hi:
        raise ValueError(f"min_objects={min_objects} is larger than max_objects={max_objects}.")
    if hi > len(_NUMBERS) - 1:
        raise ValueError(f"max_objects={max_objects} is more than the captions can count: at most "
                         f"{len(_NUMBERS) - 1}.")
    shape_names = check_names(shapes, "shapes", SHAPE_NAMES, _DEFAULT_SHAPES)
    color_names = check_names(colors, "colors", tuple(SHAPE_COLORS), _DEFAULT_COLORS)
    size_names = check_names(sizes, "sizes", tuple(SHAPE_SIZES))
    rng = check_random_state(random_state)
    n_shapes, n_classes = len(shape_names), len(shape_names) * len(color_names)
    partner = _partner_index(n_classes, partner_seed)

    # Classes in drawing order, exactly as make_object_scenes draws them.
    count, cls, pulled = _draw_classes(rng, n, lo, hi, partner, cooccurrence)
    present = np.arange(hi)[None, :] < count[:, None]
    size = rng.randint(len(size_names), size=(n, hi))
    bounds = np.array([_FREE_SIZES[s] for s in size_names])
    r = (bounds[size, 0] + rng.uniform(size=(n, hi)) * (bounds[size, 1] - bounds[size, 0])) * S
    margin = _EXTENT * r + 0.5
    depth = np.argsort(rng.uniform(size=(n, hi)) + ~present, axis=1).argsort(axis=1)  # present ones first
    rgb_noise = color_jitter * rng.standard_normal((n, hi, 3))
    shape, color = cls % n_shapes, cls // n_shapes

    # Positions, the full and the visible pixels, chunk by chunk; scenes that do not fit are drawn again.
    centre = np.zeros((n, hi, 2))
    visible_share = np.zeros((n, hi))
    hides = np.zeros((n, hi, hi), dtype=bool)  # hides[i, a, b]: a covers pixels of b, drawing order
    masks = np.zeros((n, hi, S, S), dtype=bool) if return_masks else None
    images = np.empty((n, S, S, 3), dtype=np.uint8)
    background = rng.uniform(0.0, 0.16, size=n)
    palette = np.array([SHAPE_COLORS[c] for c in color_names], dtype=np.float64) / 255.0
    rgb = np.clip(np.rint((palette[color] + rgb_noise) * 255.0), 0, 255).astype(np.uint8)
    for start in range(0, n, _CHUNK):
        rows = np.arange(start, min(start + _CHUNK, n))
        todo = np.arange(rows.size)
        full = vis = None
        for _ in range(_PLACEMENT_ROUNDS):
            sub = rows[todo]
            placed, failed = _place(rng, r[sub], present[sub], margin[sub], S, overlap)
            f = _render_full(shape_names, shape[sub], placed[..., 0], placed[..., 1], r[sub], present[sub], S)
            v = _visible(f, depth[sub])
            pixels = f.sum((2, 3))
            kept = v.sum((2, 3)) >= _MIN_VISIBLE * pixels
            ok = ~failed & (kept | ~present[sub]).all(1) & ((pixels > 0) | ~present[sub]).all(1)
            if full is None:
                full, vis = f, v
            else:
                full[todo], vis[todo] = f, v
            centre[sub] = placed
            todo = todo[~ok]
            if not todo.size:
                break
        else:
            raise ValueError(
                f"could not fit {hi} objects without covering more than half of one in {todo.size} scenes of "
                f"{image_size} pixels; use a larger image_size, fewer objects or a larger overlap."
            )
        pixels = full.sum((2, 3))
        visible_share[rows] = np.where(pixels > 0, vis.sum((2, 3)) / np.maximum(pixels, 1), 0.0)
        flat_v = vis.reshape(rows.size, hi, -1).astype(np.float32)
        flat_f = full.reshape(rows.size, hi, -1).astype(np.float32)
        hides[rows] = (flat_v @ flat_f.transpose(0, 2, 1)) > 0
        hides[rows[:, None], np.arange(hi), np.arange(hi)] = False
        grey = background[rows, None, None] + noise * rng.standard_normal((rows.size, S, S))
        grey = np.clip(np.rint(grey * 255.0), 0, 255).astype(np.uint8)
        chunk = np.repeat(grey[..., None], 3, axis=3)
        ci, cj, py, px = np.nonzero(vis)
        chunk[ci, py, px] = rgb[rows[ci], cj]
        images[rows] = chunk
        if return_masks:
            masks[rows] = vis

    # Caption order: band of the centre by thirds from the top, then left to right.
    cx, cy = centre[..., 0], centre[..., 1]
    band = np.minimum((3 * cy / S).astype(np.int64), 2)
    column = np.minimum((3 * cx / S).astype(np.int64), 2)
    key = np.where(present, band * (4 * S) + cx, np.inf)
    order = np.argsort(key, axis=1, kind="stable")
    rank = order.argsort(axis=1)  # drawing slot -> caption position

    names = object_classes(shape_names, color_names)
    sized = np.array(size_names, dtype=object)[size] + " " + np.array(names, dtype=object)[cls]  # "large red circle"
    slack = _RELATION_SLACK * S
    scene_rows, captions = [], np.empty(n, dtype=object)
    for i in range(n):
        slots = order[i, :count[i]]
        words = [sized[i, j] for j in slots]
        parts = ["there is one object" if count[i] == 1 else f"there are {_NUMBERS[count[i]]} objects"]
        parts.append(" , ".join(
            f"{_article(size_names[size[i, j]])} {size_names[size[i, j]]} {names[cls[i, j]]} "
            f"{_LOCATIONS[band[i, j]][column[i, j]]}" for j in slots))
        if count[i] > 1:
            parts.append(" , ".join(
                f"the {words[p]} is {_relation_phrase(cx[i, b] - cx[i, a], cy[i, b] - cy[i, a], slack)} "
                f"the {words[p - 1]}" for p, (a, b) in enumerate(zip(slots[:-1], slots[1:]), start=1)))
        pairs = [f"the {sized[i, a]} hides part of the {sized[i, b]}" for a in slots for b in slots if hides[i, a, b]]
        parts.append(" , ".join(pairs) if pairs else "no object hides another")
        shape_counts = np.bincount(shape[i, slots], minlength=n_shapes)
        color_counts = np.bincount(color[i, slots], minlength=len(color_names))
        size_counts = np.bincount(size[i, slots], minlength=len(size_names))
        parts.append(f"in all : {_count_phrase(shape_counts, shape_names, True)} ; "
                     f"{_count_phrase(color_counts, color_names, False)} ; "
                     f"{_count_phrase(size_counts, size_names, False)}")
        captions[i] = " . ".join(parts) + " ."
        scene_rows.append(slots)

    scene_i = np.repeat(np.arange(n), count)
    slot_j = np.concatenate(scene_rows) if n else np.zeros(0, dtype=np.int64)
    objects = pd.DataFrame({
        "scene": scene_i,
        "object": rank[scene_i, slot_j],
        "name": np.array(names, dtype=object)[cls[scene_i, slot_j]].astype(str),
        "shape": np.array(shape_names)[shape[scene_i, slot_j]],
        "color": np.array(color_names)[color[scene_i, slot_j]],
        "size": np.array(size_names)[size[scene_i, slot_j]],
        "x": cx[scene_i, slot_j],
        "y": cy[scene_i, slot_j],
        "radius": r[scene_i, slot_j],
        "depth": depth[scene_i, slot_j],
        "draw": slot_j,
        "visible": visible_share[scene_i, slot_j],
        "pulled": pulled[scene_i, slot_j],
    })
    if not return_masks:
        return images, captions, objects
    masks = np.take_along_axis(masks, order[:, :, None, None], axis=1)
    masks &= (np.arange(hi)[None, :] < count[:, None])[:, :, None, None]
    return images, captions, objects, masks
