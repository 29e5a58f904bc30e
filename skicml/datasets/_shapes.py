"""A synthetic world of shapes with captions, for image-caption models.

:func:`make_shape_scenes` renders small RGB images of coloured shapes with
numpy (no drawing library, vectorised over scenes, thousands of 32x32
scenes per second) together with captions that describe them ("a small red
circle left of a large blue square") and a table of the objects. It is the
training data of the shipped tiny CLIP (``skicml pretrain tiny-clip``) and
the test bed of the Whitened CLIP evidence (W-CLIP spec, sections 3.4 and
5.4): :func:`corrupt_images` applies the corruptions of that evidence at
graded severities and :func:`perturb_captions` turns captions into
ill-formed, mismatched or out-of-vocabulary ones.
"""

import math

import numpy as np
import pandas as pd
from sklearn.utils import check_random_state

from ..utils.param_validation import Integral, Interval, Real, StrOptions, validate_params
from ._validation import NAMES, check_names

__all__ = [
    "CAPTION_PERTURBATIONS",
    "CORRUPTIONS",
    "SHAPE_COLORS",
    "SHAPE_NAMES",
    "SHAPE_SIZES",
    "SHAPE_TEXTURES",
    "corrupt_images",
    "make_shape_scenes",
    "perturb_captions",
]

#: Shapes :func:`make_shape_scenes` can draw; the first three are the default.
SHAPE_NAMES = ("circle", "square", "triangle", "diamond", "cross")

#: Colour names and their RGB values; the first four are the default.
SHAPE_COLORS = {
    "red": (220, 40, 40),
    "green": (40, 175, 60),
    "blue": (45, 90, 235),
    "yellow": (235, 215, 45),
    "purple": (150, 60, 205),
    "orange": (245, 140, 30),
    "white": (240, 240, 240),
    "cyan": (40, 205, 220),
}

#: Size names and their radius as a fraction of the image side.
SHAPE_SIZES = {"small": 0.1, "large": 0.18}

#: Surface textures: "plain" objects are one colour; "striped" ones alternate
#: their colour with a darker shade in horizontal bands a sixteenth of the
#: image side wide (2 pixels at 32), fine detail that blur wipes out. Plain
#: objects carry no texture word in captions.
SHAPE_TEXTURES = ("plain", "striped")
_STRIPE_SHADE = 0.35  # the darker bands keep this share of the object's colour

_DEFAULT_SHAPES = SHAPE_NAMES[:3]
_DEFAULT_COLORS = tuple(SHAPE_COLORS)[:4]

#: Severity (1..5) -> parameter of each corruption of :func:`corrupt_images`.
CORRUPTIONS = {
    # pixel standard deviation on the [0, 1] scale (ImageNet-C's values)
    "gaussian_noise": (0.08, 0.12, 0.18, 0.26, 0.38),
    # Gaussian blur sigma in pixels of a 32-pixel image (scaled with the size)
    "blur": (0.5, 0.75, 1.0, 1.5, 2.0),
    # share of the image area covered by one grey square
    "occlusion": (0.05, 0.1, 0.15, 0.25, 0.35),
}

#: Kinds of :func:`perturb_captions`.
CAPTION_PERTURBATIONS = ("scramble", "mismatch", "drop_attributes", "unseen_words")

# Words no caption of make_shape_scenes contains: stand-ins for unseen vocabulary.
_UNSEEN_SHAPES = ("hexagon", "star", "heart", "pentagon")
_UNSEEN_COLORS = ("magenta", "brown", "pink", "teal")

_RELATIONS = ("left of", "right of", "above", "below")
_LOCATIONS = ("on the left", "on the right", "at the top", "at the bottom", "in the middle")
_LOCATION_NAMES = ("left", "right", "top", "bottom", "middle")
_GAP = 1.0  # pixels between the bounding boxes of two objects


def _article(word):
    return "an" if word[:1].lower() in "aeiou" else "a"


def _relation(dx, dy):
    """Index into _RELATIONS of "subject rel other" with other - subject = (dx, dy)."""
    horizontal = np.abs(dx) >= np.abs(dy)
    return np.where(horizontal, np.where(dx > 0, 0, 1), np.where(dy > 0, 2, 3))


def _location(ox, oy, middle):
    """Index into _LOCATIONS of an object at offset (ox, oy) from the centre."""
    horizontal = np.abs(ox) >= np.abs(oy)
    index = np.where(horizontal, np.where(ox < 0, 0, 1), np.where(oy < 0, 2, 3))
    return np.where(np.maximum(np.abs(ox), np.abs(oy)) < 0.5 * middle, 4, index)


def _valid_layout(cx, cy, r, count, middle, S):
    """Per scene: every pair of objects is separated along its dominant axis,
    so that boxes are disjoint and each relation word is unambiguous; a
    single object is either clearly off-centre or clearly in the middle."""
    n, k = cx.shape
    ok = np.ones(n, dtype=bool)
    for i in range(k):
        for j in range(i + 1, k):
            both = count > j
            dx, dy = cx[:, j] - cx[:, i], cy[:, j] - cy[:, i]
            major = np.maximum(np.abs(dx), np.abs(dy))
            minor = np.minimum(np.abs(dx), np.abs(dy))
            sep = (major >= r[:, i] + r[:, j] + _GAP) & (major >= 1.25 * minor)
            ok &= ~both | sep
    single = count == 1
    ox, oy = cx[:, 0] - 0.5 * S, cy[:, 0] - 0.5 * S
    major = np.maximum(np.abs(ox), np.abs(oy))
    minor = np.minimum(np.abs(ox), np.abs(oy))
    clear = (major < 0.5 * middle) | ((major >= middle) & (major >= 1.25 * minor))
    ok &= ~single | clear
    return ok


def _shape_mask(shape, dx, dy, r):
    if shape == "circle":
        return dx * dx + dy * dy <= r * r
    if shape == "square":
        return np.maximum(np.abs(dx), np.abs(dy)) <= 0.85 * r
    if shape == "triangle":  # apex up, base at 0.8 r below the centre
        return (dy <= 0.8 * r) & (dy >= -r) & (np.abs(dx) <= (dy + r) / 1.8)
    if shape == "diamond":
        return np.abs(dx) + np.abs(dy) <= 1.05 * r
    if shape == "cross":
        adx, ady = np.abs(dx), np.abs(dy)
        return ((adx <= r / 3) & (ady <= r)) | ((ady <= r / 3) & (adx <= r))
    raise ValueError(shape)


#: The rules that make_shape_scenes and make_object_scenes share.
_SCENE_RULES = {
    "n_scenes": [Interval(Integral, 1, None, closed="left")],
    "min_objects": [Interval(Integral, 1, None, closed="left")],
    "max_objects": [Interval(Integral, 1, None, closed="left")],
    "shapes": NAMES,
    "colors": NAMES,
    "sizes": NAMES,
    "color_jitter": [Interval(Real, 0, 1, closed="both")],
    "noise": [Interval(Real, 0, 1, closed="both")],
    "random_state": ["random_state"],
}


@validate_params(
    {**_SCENE_RULES, "image_size": [Interval(Integral, 16, None, closed="left")], "textures": NAMES},
    prefer_skip_nested_validation=True,
)
def make_shape_scenes(n_scenes=1000, *, image_size=32, min_objects=1, max_objects=2, shapes=None,
                      colors=None, sizes=None, textures=None, color_jitter=0.04, noise=0.02,
                      random_state=None):
    """Rendered scenes of coloured shapes with captions that describe them.

    Each scene is a dark background (random grey level, light pixel noise)
    with one to ``max_objects`` shapes of a given colour, size and texture,
    none overlapping. Its caption names every object and the spatial
    relation of the first object to each other one, or, for a single
    object, where it lies::

        a small red circle left of a large striped blue square
        a large green triangle above a small red square and left of a small blue circle
        a small striped yellow circle on the left

    Striped objects carry detail two pixels wide (at 32 pixels), so a model
    trained on these captions must see fine structure, as real CLIP models
    see texture in photographs; blur then removes information the model
    relies on (the Whitened CLIP blur evidence needs this).

    Layouts are drawn so that captions are unambiguous: two objects are
    separated along the axis their relation names (their bounding boxes do
    not overlap on it, and that axis dominates), and a single object is
    either clearly off-centre or clearly in the middle. Rendering is
    vectorised numpy (no drawing library): thousands of 32x32 scenes per
    second.

    Parameters
    ----------
    n_scenes : int, default=1000
        Number of scenes.
    image_size : int, default=32
        Side of the square images, in pixels (at least 16).
    min_objects, max_objects : int, default=1, 2
        Inclusive range of objects per scene (``1 <= min_objects <=
        max_objects <= 4``), drawn uniformly per scene.
    shapes : sequence of str or None, default=None
        Shapes to draw, among :data:`SHAPE_NAMES` (circle, square, triangle,
        diamond, cross); None is circle, square and triangle.
    colors : sequence of str or None, default=None
        Colour names, among :data:`SHAPE_COLORS`; None is red, green, blue
        and yellow.
    sizes : sequence of str or None, default=None
        Size names, among :data:`SHAPE_SIZES` ("small", "large"); None is
        both.
    textures : sequence of str or None, default=None
        Textures, among :data:`SHAPE_TEXTURES` ("plain", "striped"); None is
        both. ``("plain",)`` gives the captions of a world without textures.
    color_jitter : float, default=0.04
        Standard deviation of per-object colour noise, as a share of 255.
    noise : float, default=0.02
        Standard deviation of per-pixel background noise, on the [0, 1] scale.
    random_state : int, RandomState instance or None, default=None
        Seeds everything; the same seed gives the same scenes.

    Returns
    -------
    images : ndarray of shape (n_scenes, image_size, image_size, 3), dtype uint8
        RGB images.
    captions : ndarray of shape (n_scenes,), dtype object
        One caption (str) per scene.
    objects : pandas.DataFrame
        One row per object, in caption order: ``scene``, ``object`` (index
        in the scene, 0 is the caption's subject), ``shape``, ``color``,
        ``size``, ``texture``, ``x``, ``y`` (centre in pixels, ``y`` pointing down),
        ``radius`` (pixels), ``location`` (left, right, top, bottom or
        middle, relative to the image centre) and ``relation`` (for objects
        after the first: where the first object lies relative to this one,
        "left of", "right of", "above" or "below"; empty for the first).

    See Also
    --------
    corrupt_images : Noise, blur and occlusion at graded severities.
    perturb_captions : Scrambled, mismatched or out-of-vocabulary captions.

    Examples
    --------
    >>> from skicml.datasets import make_shape_scenes
    >>> images, captions, objects = make_shape_scenes(4, random_state=0)
    >>> images.shape, images.dtype
    ((4, 32, 32, 3), dtype('uint8'))
    >>> isinstance(captions[0], str)
    True
    >>> list(objects.columns)[:6]
    ['scene', 'object', 'shape', 'color', 'size', 'texture']
    """
    n, S, lo, hi = n_scenes, image_size, min_objects, max_objects
    if not lo <= hi <= 4:
        raise ValueError(
            f"min_objects={min_objects} and max_objects={max_objects}: expected "
            "1 <= min_objects <= max_objects <= 4."
        )
    shape_names = check_names(shapes, "shapes", SHAPE_NAMES, _DEFAULT_SHAPES)
    color_names = check_names(colors, "colors", tuple(SHAPE_COLORS), _DEFAULT_COLORS)
    size_names = check_names(sizes, "sizes", tuple(SHAPE_SIZES))
    texture_names = check_names(textures, "textures", SHAPE_TEXTURES)
    rng = check_random_state(random_state)

    count = rng.randint(lo, hi + 1, size=n)
    shape = rng.randint(len(shape_names), size=(n, hi))
    color = rng.randint(len(color_names), size=(n, hi))
    size = rng.randint(len(size_names), size=(n, hi))
    texture = rng.randint(len(texture_names), size=(n, hi))
    frac = np.array([SHAPE_SIZES[s] for s in size_names])
    r = frac[size] * S * rng.uniform(0.9, 1.1, size=(n, hi))
    middle = 0.2 * S  # off-centre beyond this offset, in the middle within half of it

    cx = np.empty((n, hi))
    cy = np.empty((n, hi))
    pending = np.arange(n)
    for attempt in range(200):
        if attempt == 100:
            # Crowded scenes: give every object of the remaining ones the smallest size.
            smallest = int(np.argmin(frac))
            size[pending] = smallest
            r[pending] = frac[smallest] * S * rng.uniform(0.9, 1.0, size=(pending.size, hi))
        low = r[pending] + 0.5
        span = np.maximum(S - 2 * low, 0.0)
        cx[pending] = low + rng.uniform(size=low.shape) * span
        cy[pending] = low + rng.uniform(size=low.shape) * span
        ok = _valid_layout(cx[pending], cy[pending], r[pending], count[pending], middle, S)
        pending = pending[~ok]
        if pending.size == 0:
            break
    else:
        raise RuntimeError(
            f"could not place {hi} non-overlapping objects in {pending.size} of the scenes; "
            "use a larger image_size or fewer max_objects."
        )

    # Rendering, vectorised over scenes slot by slot.
    background = rng.uniform(0.0, 0.16, size=(n, 1, 1, 1))
    images = background + noise * rng.standard_normal((n, S, S, 1))
    images = np.repeat(images, 3, axis=3)
    palette = np.array([SHAPE_COLORS[c] for c in color_names], dtype=np.float64) / 255.0
    rgb = palette[color] + color_jitter * rng.standard_normal((n, hi, 3))
    grid = np.arange(S) + 0.5
    yy, xx = grid[None, :, None], grid[None, None, :]
    band = max(1, int(round(S / 16)))
    dark_band = np.broadcast_to(((np.arange(S) // band) % 2 == 1)[None, :, None], (1, S, S))
    striped = np.array([t == "striped" for t in texture_names])[texture]
    for j in range(hi):
        present = count > j
        for s_index, s_name in enumerate(shape_names):
            idx = np.nonzero(present & (shape[:, j] == s_index))[0]
            if idx.size == 0:
                continue
            dx = xx - cx[idx, j, None, None]
            dy = yy - cy[idx, j, None, None]
            mask = _shape_mask(s_name, dx, dy, r[idx, j, None, None])
            fill = np.repeat(rgb[idx, j][:, None, None, :], S * S, axis=1).reshape(idx.size, S, S, 3)
            shade = striped[idx, j, None, None] & dark_band
            fill = np.where(shade[..., None], _STRIPE_SHADE * fill, fill)
            block = images[idx]
            block[mask] = fill[mask]
            images[idx] = block
    images = np.clip(np.rint(images * 255.0), 0, 255).astype(np.uint8)

    # Words: locations relative to the centre, relations of the subject.
    location = _location(cx - 0.5 * S, cy - 0.5 * S, middle)
    relation = _relation(cx - cx[:, :1], cy - cy[:, :1])
    captions = np.empty(n, dtype=object)
    rows = []
    for i in range(n):
        words = []
        for j in range(count[i]):
            texture_word = "" if texture_names[texture[i, j]] == "plain" else texture_names[texture[i, j]] + " "
            desc = f"{size_names[size[i, j]]} {texture_word}{color_names[color[i, j]]} {shape_names[shape[i, j]]}"
            phrase = f"{_article(desc)} {desc}"
            if j == 0:
                words.append(phrase)
                if count[i] == 1:
                    words.append(_LOCATIONS[location[i, 0]])
            else:
                words.append(("" if j == 1 else "and ") + f"{_RELATIONS[relation[i, j]]} {phrase}")
            rows.append((
                i, j, shape_names[shape[i, j]], color_names[color[i, j]], size_names[size[i, j]],
                texture_names[texture[i, j]], float(cx[i, j]), float(cy[i, j]), float(r[i, j]), _LOCATION_NAMES[location[i, j]],
                "" if j == 0 else _RELATIONS[relation[i, j]],
            ))
        captions[i] = " ".join(words)
    objects = pd.DataFrame(rows, columns=[
        "scene", "object", "shape", "color", "size", "texture", "x", "y", "radius", "location", "relation",
    ])
    return images, captions, objects


def _check_images(images):
    array = np.asarray(images)
    if array.ndim != 4 or array.shape[-1] != 3:
        raise ValueError(f"images has shape {array.shape}; expected (n_images, height, width, 3).")
    return array


@validate_params(
    {
        "images": ["array-like"],
        "kind": [StrOptions(set(CORRUPTIONS))],
        "severity": [Interval(Integral, 0, 5, closed="both")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def corrupt_images(images, kind="gaussian_noise", severity=1, *, random_state=None):
    """Corrupt images at a graded severity (noise, blur or occlusion).

    The corruptions of the Whitened CLIP evidence, in the spirit of
    ImageNet-C: a likelihood model of images should score them lower as the
    severity rises. Severity 0 returns an unchanged copy.

    Parameters
    ----------
    images : array-like of shape (n_images, height, width, 3)
        uint8 images (0..255) or float images on the [0, 1] scale.
    kind : {"gaussian_noise", "blur", "occlusion"}, default="gaussian_noise"
        ``"gaussian_noise"`` adds pixel noise with standard deviation 0.08,
        0.12, 0.18, 0.26 or 0.38 (ImageNet-C's values); ``"blur"`` is a
        Gaussian blur with sigma 0.5, 0.75, 1, 1.5 or 2 pixels per 32 pixels
        of image side; ``"occlusion"`` covers 5, 10, 15, 25 or 35 % of each
        image with one mid-grey square at a random place. The values are in
        :data:`CORRUPTIONS`.
    severity : int in 0..5, default=1
    random_state : int, RandomState instance or None, default=None
        Seeds the noise and the occluder positions.

    Returns
    -------
    ndarray of the same shape and dtype as ``images``

    Examples
    --------
    >>> from skicml.datasets import corrupt_images, make_shape_scenes
    >>> images, _, _ = make_shape_scenes(8, random_state=0)
    >>> noisy = corrupt_images(images, "gaussian_noise", severity=3, random_state=0)
    >>> noisy.shape == images.shape and noisy.dtype == images.dtype
    True
    """
    array = _check_images(images)
    is_int = np.issubdtype(array.dtype, np.integer)
    if severity == 0:
        return array.copy()
    rng = check_random_state(random_state)
    x = array.astype(np.float64) / 255.0 if is_int else array.astype(np.float64, copy=True)
    n, H, W, _ = x.shape
    value = CORRUPTIONS[kind][severity - 1]
    if kind == "gaussian_noise":
        x = x + value * rng.standard_normal(x.shape)
    elif kind == "blur":
        from scipy.ndimage import gaussian_filter

        sigma = value * min(H, W) / 32.0
        x = gaussian_filter(x, sigma=(0, sigma, sigma, 0), mode="nearest")
    else:
        side = max(1, int(round(math.sqrt(value * H * W))))
        top = rng.randint(0, max(H - side, 0) + 1, size=n)
        left = rng.randint(0, max(W - side, 0) + 1, size=n)
        rows = np.arange(H)[None, :, None]
        cols = np.arange(W)[None, None, :]
        inside = ((rows >= top[:, None, None]) & (rows < top[:, None, None] + side)
                  & (cols >= left[:, None, None]) & (cols < left[:, None, None] + side))
        x[inside] = 0.5
    x = np.clip(x, 0.0, 1.0)
    if is_int:
        return np.rint(x * 255.0).astype(array.dtype)
    return x.astype(array.dtype)


def perturb_captions(captions, kind="scramble", *, random_state=None):
    """Turn captions into ill-formed, mismatched or out-of-vocabulary ones.

    Parameters
    ----------
    captions : sequence of str
        Captions, typically from :func:`make_shape_scenes`.
    kind : {"scramble", "mismatch", "drop_attributes", "unseen_words"}, default="scramble"
        - ``"scramble"``: the same words in a random order (different from
          the original whenever the caption has two distinct words).
        - ``"mismatch"``: each caption replaced by the caption of another
          scene (a random derangement; needs two captions that differ).
          The captions stay well-formed: a text-only likelihood cannot see
          the mismatch, only a model of image and caption together can.
        - ``"drop_attributes"``: size, texture and colour words removed ("a
          circle left of a square").
        - ``"unseen_words"``: every shape and colour word replaced by one no
          caption of :func:`make_shape_scenes` uses (hexagon, star, heart,
          pentagon; magenta, brown, pink, teal).
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    ndarray of shape (n_captions,), dtype object

    Examples
    --------
    >>> from skicml.datasets import perturb_captions
    >>> perturb_captions(["a small red circle on the left"], "drop_attributes")[0]
    'a circle on the left'
    """
    if isinstance(captions, str):
        raise ValueError("captions is a single string; pass a list of captions.")
    texts = [str(c) for c in captions]
    if kind not in CAPTION_PERTURBATIONS:
        raise ValueError(f"kind={kind!r}; expected one of {list(CAPTION_PERTURBATIONS)}.")
    rng = check_random_state(random_state)
    out = np.empty(len(texts), dtype=object)
    if kind == "mismatch":
        if len(set(texts)) < 2:
            raise ValueError("kind='mismatch' needs at least two different captions.")
        for _ in range(1000):
            order = rng.permutation(len(texts))
            if all(texts[o] != t for o, t in zip(order, texts)):
                break
        else:  # many duplicates: a shift of the sorted order moves every caption off its own
            order = _derangement_by_value(texts)
        out[:] = [texts[o] for o in order]
        return out
    size_words, color_words, shape_words = set(SHAPE_SIZES) | set(SHAPE_TEXTURES), set(SHAPE_COLORS), set(SHAPE_NAMES)
    for i, text in enumerate(texts):
        words = text.split()
        if kind == "scramble":
            shuffled = words
            if len(set(words)) > 1:
                while shuffled == words:
                    shuffled = [words[k] for k in rng.permutation(len(words))]
            out[i] = " ".join(shuffled)
        elif kind == "drop_attributes":
            kept = [w for w in words if w not in size_words and w not in color_words]
            out[i] = " ".join(_fix_articles(kept))
        else:
            swapped = []
            for w in words:
                if w in shape_words:
                    w = _UNSEEN_SHAPES[rng.randint(len(_UNSEEN_SHAPES))]
                elif w in color_words:
                    w = _UNSEEN_COLORS[rng.randint(len(_UNSEEN_COLORS))]
                swapped.append(w)
            out[i] = " ".join(_fix_articles(swapped))
    return out


def _fix_articles(words):
    return [(_article(words[k + 1]) if w in ("a", "an") and k + 1 < len(words) else w)
            for k, w in enumerate(words)]


def _derangement_by_value(texts):
    order = sorted(range(len(texts)), key=lambda k: texts[k])
    counts = {}
    for t in texts:
        counts[t] = counts.get(t, 0) + 1
    shift = max(counts.values())
    if shift * 2 > len(texts):
        raise ValueError(
            "kind='mismatch': one caption makes up more than half of the list, so not every "
            "caption can be given a different one."
        )
    result = [0] * len(texts)
    for pos, k in enumerate(order):
        result[k] = order[(pos + shift) % len(texts)]
    return result
