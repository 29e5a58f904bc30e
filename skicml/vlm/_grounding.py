"""Where a word's attention map points, against the objects of a scene (Lavender's grounding metric).

A *word map* is a non-negative ``(R, R)`` array over the image, row 0 at the
top: a teacher's or a student's attention of one word to the image.
Several maps of one image are a dict ``word -> map``; a batch is a list of
such dicts, one per image, the format every Lavender teacher returns.

:func:`pointing_accuracy` asks whether the argmax cell of each colour or
shape word's map falls on an object of that colour or shape, the metric of
the Lavender spec's probes; :func:`oracle_word_maps` makes the maps of a
perfect teacher from the scene generator's object masks.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_word_maps", "minmax", "oracle_word_maps", "pointing_accuracy", "resize_map"]


def minmax(maps, axis=(-2, -1), eps=1e-6):
    """Scale maps to [0, 1] over ``axis``; a constant map becomes zeros, not NaN."""
    maps = np.asarray(maps, dtype=np.float32)
    low = maps.min(axis=axis, keepdims=True)
    span = maps.max(axis=axis, keepdims=True) - low
    return np.where(span > eps, (maps - low) / np.maximum(span, eps), 0.0).astype(np.float32)


def resize_map(word_map, resolution):
    """Area-resize a square ``(R, R)`` map to ``(resolution, resolution)``.

    Exact box averaging when ``R`` is a multiple of ``resolution``; otherwise
    each output cell averages the input cells its box overlaps, weighted by
    the overlap, so mass is never shifted between rows or columns.
    """
    word_map = np.asarray(word_map, dtype=np.float32)
    size = word_map.shape[0]
    if size == resolution:
        return word_map
    weights = _overlap(size, resolution)  # (resolution, size)
    return (weights @ word_map @ weights.T).astype(np.float32)


def _overlap(size, resolution):
    """Row-stochastic (resolution, size) matrix: the share of each output cell covered by each input cell."""
    edges_out = np.linspace(0.0, 1.0, resolution + 1)
    edges_in = np.linspace(0.0, 1.0, size + 1)
    low = np.maximum(edges_out[:-1, None], edges_in[None, :-1])
    high = np.minimum(edges_out[1:, None], edges_in[None, 1:])
    weights = np.clip(high - low, 0.0, None)
    return weights / weights.sum(1, keepdims=True)


def check_word_maps(word_maps, n_images, resolution=None, name="word_maps"):
    """Validate a list of ``{word: (R, R) map}`` dicts; return it with float32 maps.

    Maps of another square resolution are area-resized to ``resolution``
    when it is given; values outside [0, 1] are refused (a teacher's maps
    are min-max scaled by the teacher, so that 1 is where the word is most).
    """
    if not isinstance(word_maps, (list, tuple)) or len(word_maps) != n_images:
        got = len(word_maps) if isinstance(word_maps, (list, tuple)) else type(word_maps).__name__
        raise ValueError(f"{name} must be a list of {n_images} dicts (one per image) of word -> (R, R) map; "
                         f"got {got}.")
    checked = []
    for i, maps in enumerate(word_maps):
        if not isinstance(maps, dict):
            raise ValueError(f"{name}[{i}] must be a dict of word -> (R, R) map; got {type(maps).__name__}.")
        out = {}
        for word, word_map in maps.items():
            word_map = np.asarray(word_map, dtype=np.float32)
            if word_map.ndim != 2 or word_map.shape[0] != word_map.shape[1]:
                raise ValueError(f"{name}[{i}][{word!r}] must be a square 2-D map; got shape {word_map.shape}.")
            if not np.isfinite(word_map).all():
                raise ValueError(f"{name}[{i}][{word!r}] holds NaN or infinite values.")
            low, high = float(word_map.min()), float(word_map.max())
            if low < 0 or high > 1:
                raise ValueError(f"{name}[{i}][{word!r}] has values from {low:.4g} to {high:.4g}; a teacher's maps "
                                 "hold values in [0, 1] (1 where the word is most). min-max scale each map first: "
                                 "(m - m.min()) / (m.max() - m.min()).")
            if resolution is not None:
                # An area average of values in [0, 1] stays there, up to rounding.
                word_map = np.clip(resize_map(word_map, resolution), 0.0, 1.0)
            out[str(word).strip().lower()] = word_map
        checked.append(out)
    return checked


def _attribute_masks(objects, masks, scene):
    """``word -> union mask`` of the colour and shape words of one scene's objects."""
    rows = objects[objects["scene"] == scene]
    union = {}
    for obj, color, shape in zip(rows["object"], rows["color"], rows["shape"]):
        for word in (color, shape):
            union[word] = union.get(word, False) | masks[scene, obj]
    return union


def oracle_word_maps(objects, masks, resolution=8):
    """A perfect teacher's maps: each colour and shape word's objects, area-downsampled and min-max scaled.

    Parameters
    ----------
    objects : pandas.DataFrame
        The objects table of :func:`skicml.datasets.make_object_scenes`.
    masks : ndarray of shape (n_scenes, max_objects, S, S), dtype bool
        Its masks (``return_masks=True``).
    resolution : int, default=8

    Returns
    -------
    list of dict
        One ``{word: (resolution, resolution) float32 map}`` per scene, for
        the colour and shape words of the scene's objects.
    """
    masks = np.asarray(masks)
    weights = _overlap(masks.shape[-1], resolution)
    maps = []
    for scene in range(len(masks)):
        union = _attribute_masks(objects, masks, scene)
        maps.append({word: minmax(weights @ mask.astype(np.float32) @ weights.T) for word, mask in union.items()})
    return maps


def pointing_accuracy(word_maps, objects, masks, resolution=None):
    """Share of colour and shape words whose map's argmax cell touches an object of that colour or shape.

    A word counts only in scenes that hold an object of its colour or shape
    (a map of an absent word has nothing to point at). The argmax cell of an
    ``(R, R)`` map covers an ``S / R`` pixel box of the ``S x S`` image; it
    hits when that box overlaps the pixels of any such object.

    Parameters
    ----------
    word_maps : list of dict
        One ``{word: (R, R) map}`` per scene.
    objects : pandas.DataFrame
        The objects table of :func:`skicml.datasets.make_object_scenes`.
    masks : ndarray of shape (n_scenes, max_objects, S, S), dtype bool
        Its masks.
    resolution : int or None, default=None
        Area-resize every map to ``resolution x resolution`` first, so that
        maps of different sources are judged on one grid (a coarse cell
        touches an object more easily than a fine one); None keeps each
        map's own size.

    Returns
    -------
    dict
        ``"color"``, ``"shape"`` and ``"all"`` accuracies (NaN without any
        word of the kind), and ``"n_color"``, ``"n_shape"``, the words counted.
    """
    masks = np.asarray(masks)
    if len(word_maps) != len(masks):
        raise ValueError(f"word_maps has {len(word_maps)} scenes but masks has {len(masks)}.")
    colors = set(objects["color"])
    size = masks.shape[-1]
    hits = {"color": [], "shape": []}
    for scene, maps in enumerate(word_maps):
        union = _attribute_masks(objects, masks, scene)
        for word, word_map in maps.items():
            if word not in union:
                continue
            word_map = np.asarray(word_map) if resolution is None else resize_map(word_map, resolution)
            side = word_map.shape[0]
            row, col = np.unravel_index(np.argmax(word_map), word_map.shape)
            top, bottom = int(np.floor(row * size / side)), int(np.ceil((row + 1) * size / side))
            left, right = int(np.floor(col * size / side)), int(np.ceil((col + 1) * size / side))
            hit = bool(union[word][top:bottom, left:right].any())
            hits["color" if word in colors else "shape"].append(hit)
    result = {kind: float(np.mean(v)) if v else float("nan") for kind, v in hits.items()}
    both = hits["color"] + hits["shape"]
    result["all"] = float(np.mean(both)) if both else float("nan")
    result["n_color"], result["n_shape"] = len(hits["color"]), len(hits["shape"])
    return result
