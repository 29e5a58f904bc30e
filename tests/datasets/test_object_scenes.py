"""Tests of the VISTA grid scenes: make_object_scenes, object_classes, object_partners."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.datasets import SHAPE_COLORS, SHAPE_NAMES, make_object_scenes, object_classes, object_partners

_DESC = r"an? (small|large) (\w+) (\w+)"
_FIRST = re.compile(
    rf"^{_DESC} (at the top left|at the top|at the top right|on the left|in the middle|on the right"
    r"|at the bottom left|at the bottom|at the bottom right)$"
)
_LATER = re.compile(
    rf"^(to its right|far to its right|(?:far )?below it(?: (?:far )?to the (?:left|right))?) {_DESC}$"
)


def _parse(caption):
    """[(size, colour, shape, placement phrase)] of a caption, or an AssertionError."""
    parts = caption.split(", ")
    first = _FIRST.match(parts[0])
    assert first, caption
    out = [(*first.groups()[:3], first.group(4))]
    for part in parts[1:]:
        later = _LATER.match(part)
        assert later, (part, caption)
        out.append((*later.groups()[1:], later.group(1)))
    return out


def _offset_phrase(dr, dc):
    if dr == 0:
        return ("far " if dc >= 2 else "") + "to its right"
    phrase = "far below it" if dr >= 2 else "below it"
    if dc:
        phrase += " " + ("far " if abs(dc) >= 2 else "") + "to the " + ("right" if dc > 0 else "left")
    return phrase


def test_shapes_types_and_columns():
    images, captions, objects, masks = make_object_scenes(12, return_masks=True, random_state=0)
    assert images.shape == (12, 48, 48, 3) and images.dtype == np.uint8
    assert captions.shape == (12,) and captions.dtype == object
    assert all(isinstance(c, str) for c in captions)
    assert masks.shape == (12, 7, 48, 48) and masks.dtype == bool
    assert list(objects.columns) == [
        "scene", "object", "name", "shape", "color", "size", "row", "col", "x", "y", "radius", "pulled",
    ]
    assert objects["scene"].is_monotonic_increasing and set(objects["scene"]) == set(range(12))
    counts = objects.groupby("scene").size()
    assert counts.between(3, 7).all()
    assert (objects["name"] == objects["color"] + " " + objects["shape"]).all()
    assert set(objects["name"]) <= set(object_classes())
    assert len(make_object_scenes(3, random_state=0)) == 3  # masks only on request


def test_same_seed_same_scenes_and_seed_dependence():
    a = make_object_scenes(20, cooccurrence=0.5, return_masks=True, random_state=7)
    b = make_object_scenes(20, cooccurrence=0.5, return_masks=True, random_state=7)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2].equals(b[2])
    np.testing.assert_array_equal(a[3], b[3])
    c = make_object_scenes(20, random_state=8)
    assert not np.array_equal(a[0], c[0])
    # the partners do not depend on random_state, only on partner_seed
    assert object_partners() == object_partners(0)
    assert object_partners(1) != object_partners(0)


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(1, 12),
    grid=st.integers(1, 4),
    lo=st.integers(1, 16),
    extra=st.integers(0, 16),
    shapes=st.sets(st.sampled_from(SHAPE_NAMES), min_size=1),
    colors=st.sets(st.sampled_from(sorted(SHAPE_COLORS)), min_size=1),
    cooccurrence=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_captions_mention_the_objects_in_raster_order(seed, n, grid, lo, extra, shapes, colors, cooccurrence):
    lo = min(lo, grid * grid)
    hi = min(lo + extra, grid * grid)
    images, captions, objects, masks = make_object_scenes(
        n, image_size=8 * grid + seed % 9, grid=grid, min_objects=lo, max_objects=hi,
        shapes=sorted(shapes), colors=sorted(colors), cooccurrence=cooccurrence,
        return_masks=True, random_state=seed,
    )
    S = images.shape[1]
    side = S / grid
    for scene in range(n):
        group = objects[objects["scene"] == scene]
        assert lo <= len(group) <= hi
        assert list(group["object"]) == list(range(len(group)))
        cells = list(group["row"] * grid + group["col"])
        assert cells == sorted(set(cells)), "raster order, one object per cell"
        parsed = _parse(captions[scene])
        assert [p[:3] for p in parsed] == list(zip(group["size"], group["color"], group["shape"]))
        rows, cols = list(group["row"]), list(group["col"])
        for j in range(1, len(group)):
            assert parsed[j][3] == _offset_phrase(rows[j] - rows[j - 1], cols[j] - cols[j - 1])
        # every object inside its cell
        x, y, r = group["x"].to_numpy(), group["y"].to_numpy(), group["radius"].to_numpy()
        assert np.all(x - r >= group["col"] * side) and np.all(x + r <= (group["col"] + 1) * side)
        assert np.all(y - r >= group["row"] * side) and np.all(y + r <= (group["row"] + 1) * side)
        # masks: one non-empty mask per object, disjoint, empty past the count
        scene_masks = masks[scene]
        assert scene_masks[: len(group)].reshape(len(group), -1).any(axis=1).all()
        assert not scene_masks[len(group):].any()
        assert scene_masks.sum(axis=0).max() <= 1


def test_first_object_place_on_the_default_grid():
    _, captions, objects = make_object_scenes(200, random_state=1)
    places = {
        (0, 0): "at the top left", (0, 1): "at the top", (0, 2): "at the top right",
        (1, 0): "on the left", (1, 1): "in the middle", (1, 2): "on the right",
        (2, 0): "at the bottom left", (2, 1): "at the bottom", (2, 2): "at the bottom right",
    }
    first = objects[objects["object"] == 0]
    for scene, row, col in zip(first["scene"], first["row"], first["col"]):
        assert _parse(captions[scene])[0][3] == places[row, col]


def test_masks_are_the_drawn_pixels():
    images, _, objects, masks = make_object_scenes(
        30, noise=0.0, color_jitter=0.0, return_masks=True, random_state=2,
    )
    palette = {name: np.array(rgb) for name, rgb in SHAPE_COLORS.items()}
    for (scene, j), color in zip(objects[["scene", "object"]].itertuples(index=False), objects["color"]):
        pixels = images[scene][masks[scene, j]]
        assert len(pixels) > 0
        np.testing.assert_array_equal(pixels, np.broadcast_to(palette[color], pixels.shape))
        # the mask sits around the object's centre, within its radius (and the shapes' 1.05 extent)
        ys, xs = np.nonzero(masks[scene, j])
        row = objects[(objects["scene"] == scene) & (objects["object"] == j)].iloc[0]
        extent = np.maximum(np.abs(xs + 0.5 - row["x"]), np.abs(ys + 0.5 - row["y"]))
        assert extent.max() <= 1.05 * row["radius"] + 1e-9
    # outside every mask, a grey background (all channels equal) darker than any palette colour
    background = ~masks.any(axis=1)
    rest = images[background]
    assert np.all(rest[:, 0] == rest[:, 1]) and np.all(rest[:, 1] == rest[:, 2])
    assert rest.max() <= np.ceil(0.16 * 255)


def test_large_objects_are_larger():
    _, _, objects, masks = make_object_scenes(60, return_masks=True, random_state=3)
    area = masks.reshape(masks.shape[0], masks.shape[1], -1).sum(axis=2)
    areas = area[objects["scene"], objects["object"]]
    small = areas[objects["size"].to_numpy() == "small"]
    large = areas[objects["size"].to_numpy() == "large"]
    assert large.min() > small.max()


def test_partners_are_a_permutation_without_fixed_points():
    partners = object_partners(partner_seed=3, shapes=["circle", "cross"], colors=["red", "blue", "green"])
    assert list(partners) == object_classes(["circle", "cross"], ["red", "blue", "green"])
    assert sorted(partners.values()) == sorted(partners)
    assert all(k != v for k, v in partners.items())
    # one cycle through all the classes
    seen, name = set(), next(iter(partners))
    while name not in seen:
        seen.add(name)
        name = partners[name]
    assert seen == set(partners)
    assert object_partners(shapes=["circle"], colors=["red"]) == {"red circle": "red circle"}


def _partner_rate(objects, partners):
    """Share of objects whose partner class is in the same scene."""
    names = objects.groupby("scene")["name"].agg(set)
    hits = [partners[name] in names[scene] for scene, name in zip(objects["scene"], objects["name"])]
    return float(np.mean(hits))


def test_cooccurrence_pulls_partners_together():
    partners = object_partners(partner_seed=5)
    kwargs = dict(min_objects=4, max_objects=6, partner_seed=5)
    _, _, unbiased = make_object_scenes(600, cooccurrence=0.0, random_state=0, **kwargs)
    _, _, biased = make_object_scenes(600, cooccurrence=1.0, random_state=0, **kwargs)
    _, _, training = make_object_scenes(600, cooccurrence=0.8, random_state=0, **kwargs)
    rate0, rate1, rate08 = (_partner_rate(o, partners) for o in (unbiased, biased, training))
    # independent draws: P(partner among the k - 1 others) = 1 - (23/24)^(k-1), about 0.16 at k = 5
    assert 0.10 < rate0 < 0.22
    # every free draw but a last one pulls its partner (about half of the objects; the pulled
    # half finds its own partner only by chance): about 0.54, and 0.48 at 0.8
    assert rate1 > 0.45 and rate1 > rate0 + 0.3
    assert rate0 + 0.2 < rate08 < rate1
    assert not unbiased["pulled"].any()
    pulled = biased[biased["pulled"]]
    assert len(pulled) > 0.35 * len(biased)
    # the object count does not depend on the bias
    assert biased.groupby("scene").size().equals(unbiased.groupby("scene").size())
    # a pulled object's puller (its partner's inverse) is in the scene
    inverse = {v: k for k, v in partners.items()}
    names = biased.groupby("scene")["name"].agg(list)
    assert all(inverse[name] in names[scene] for scene, name in zip(pulled["scene"], pulled["name"]))


def test_caption_length_grows_with_the_objects():
    lengths = {}
    for k in (3, 7):
        _, captions, _ = make_object_scenes(100, min_objects=k, max_objects=k, random_state=k)
        lengths[k] = np.array([len(c.replace(",", " ").split()) for c in captions])
    assert 18 <= lengths[3].min() and lengths[3].max() <= 30
    assert 48 <= lengths[7].min() and lengths[7].max() <= 62


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_scenes=0), "n_scenes"),
    (dict(grid=0), "grid"),
    (dict(image_size=20), "image_size=20 is too small for grid=3"),
    (dict(grid=2, max_objects=5), "grid=2 has 4 cells, too few for max_objects=5"),
    (dict(min_objects=5, max_objects=4), "min_objects=5 is larger than max_objects=4"),
    (dict(min_objects=0), "min_objects"),
    (dict(shapes=["circle", "hexagon"]), "shapes"),
    (dict(colors=["magenta"]), "colors"),
    (dict(colors=["red", "red"]), "duplicates"),
    (dict(sizes=["huge"]), "sizes"),
    (dict(cooccurrence=1.5), "cooccurrence"),
    (dict(cooccurrence=-0.1), "cooccurrence"),
    (dict(cooccurrence=float("nan")), "cooccurrence"),
    (dict(noise=2.0), "noise"),
    (dict(color_jitter=-1.0), "color_jitter"),
    (dict(partner_seed=-1), "partner_seed"),
    (dict(return_masks="yes"), "return_masks"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_object_scenes(**{"n_scenes": 2, **kwargs})


def test_bad_partner_arguments():
    with pytest.raises(ValueError, match="partner_seed"):
        object_partners(partner_seed=1.5)
    with pytest.raises(ValueError, match="shapes"):
        object_classes(shapes=[])
