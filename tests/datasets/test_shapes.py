"""Tests of the shapes world: make_shape_scenes, corrupt_images, perturb_captions."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.datasets import corrupt_images, make_shape_scenes, perturb_captions
from skicml.datasets._shapes import SHAPE_COLORS, SHAPE_NAMES, SHAPE_SIZES

_DESC = r"(an?) (\w+) (?:striped )?(\w+) (\w+)"
_CAPTION = re.compile(
    rf"^{_DESC}(?: (on the left|on the right|at the top|at the bottom|in the middle)"
    rf"|((?: (?:and )?(?:left of|right of|above|below) {_DESC})+))$"
)


def test_shapes_and_types():
    images, captions, objects = make_shape_scenes(20, image_size=24, random_state=0)
    assert images.shape == (20, 24, 24, 3) and images.dtype == np.uint8
    assert captions.shape == (20,) and all(isinstance(c, str) for c in captions)
    assert list(objects.columns) == [
        "scene", "object", "shape", "color", "size", "texture", "x", "y", "radius", "location", "relation",
    ]
    assert set(objects["scene"]) == set(range(20))


def test_deterministic_and_seed_dependent():
    a = make_shape_scenes(30, random_state=3)
    b = make_shape_scenes(30, random_state=3)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2].equals(b[2])
    c = make_shape_scenes(30, random_state=4)
    assert not np.array_equal(a[0], c[0])


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(1, 25),
    lo=st.integers(1, 3),
    extra=st.integers(0, 1),
    shapes=st.sets(st.sampled_from(SHAPE_NAMES), min_size=1),
    colors=st.sets(st.sampled_from(sorted(SHAPE_COLORS)), min_size=1),
)
def test_captions_agree_with_the_objects(seed, n, lo, extra, shapes, colors):
    hi = min(lo + extra, 3)
    images, captions, objects = make_shape_scenes(
        n, min_objects=lo, max_objects=hi, shapes=sorted(shapes), colors=sorted(colors),
        random_state=seed,
    )
    S = images.shape[1]
    for scene, group in objects.groupby("scene"):
        group = group.sort_values("object")
        assert lo <= len(group) <= hi
        caption = captions[scene]
        assert _CAPTION.match(caption), caption
        # every object appears, in order, as "<size> <colour> <shape>"
        descs = [f"{s} {'' if t == 'plain' else t + ' '}{c} {h}"
                 for s, t, c, h in zip(group["size"], group["texture"], group["color"], group["shape"])]
        start = 0
        for desc in descs:
            found = caption.find(desc, start)
            assert found >= 0, (caption, descs)
            start = found + len(desc)
        assert set(group["shape"]) <= shapes and set(group["color"]) <= colors
        assert set(group["size"]) <= set(SHAPE_SIZES)
        first = group.iloc[0]
        if len(group) == 1:
            phrase = {"left": "on the left", "right": "on the right", "top": "at the top",
                      "bottom": "at the bottom", "middle": "in the middle"}[first["location"]]
            assert caption.endswith(phrase)
        for _, other in group.iloc[1:].iterrows():
            dx, dy = other["x"] - first["x"], other["y"] - first["y"]
            expected = ("left of" if dx > 0 else "right of") if abs(dx) >= abs(dy) else (
                "above" if dy > 0 else "below")
            assert other["relation"] == expected
            assert f"{expected} {'an' if other['size'][0] in 'aeiou' else 'a'} {other['size']}" in caption
            # separated along the named axis: bounding boxes do not overlap there
            gap = abs(dx) if expected in ("left of", "right of") else abs(dy)
            assert gap >= first["radius"] + other["radius"]
        # every object lies inside the image
        assert ((group["x"] - group["radius"] >= 0) & (group["x"] + group["radius"] <= S)).all()
        assert ((group["y"] - group["radius"] >= 0) & (group["y"] + group["radius"] <= S)).all()


def test_pixels_carry_the_object_colours():
    images, _, objects = make_shape_scenes(40, textures=["plain"], color_jitter=0.0, noise=0.0, random_state=1)
    for _, obj in objects.iterrows():
        pixel = images[obj["scene"], int(obj["y"]), int(obj["x"])].astype(int)
        np.testing.assert_allclose(pixel, SHAPE_COLORS[obj["color"]], atol=2)
    # the background is darker than every palette colour used here
    assert images[:, 0, 0].max() <= 0.16 * 255 + 1


def test_striped_objects_alternate_colour_and_shade_in_bands():
    images, captions, objects = make_shape_scenes(60, image_size=32, textures=["striped"], color_jitter=0.0,
                                                  noise=0.0, random_state=5)
    assert all("striped" in c for c in captions)
    assert set(objects["texture"]) == {"striped"}
    for _, obj in objects.iterrows():
        column = images[obj["scene"], :, int(obj["x"])].astype(float)
        colour = np.array(SHAPE_COLORS[obj["color"]], dtype=float)
        rows = [y for y in range(32) if abs(y + 0.5 - obj["y"]) < 0.5 * obj["radius"]]
        for y in rows:  # bands are 2 pixels wide at 32 pixels: odd band index is the shade
            expected = colour * (0.35 if (y // 2) % 2 else 1.0)
            np.testing.assert_allclose(column[y], expected, atol=2)
    _, plain, objects = make_shape_scenes(30, textures=["plain"], random_state=5)
    assert not any("striped" in c for c in plain) and set(objects["texture"]) == {"plain"}


def test_sizes_and_shapes_differ_in_area():
    kw = dict(min_objects=1, max_objects=1, color_jitter=0.0, noise=0.0, random_state=2)
    images, _, objects = make_shape_scenes(60, **kw)
    area = (images.max(axis=3) > 60).sum(axis=(1, 2))
    small = area[objects["size"].to_numpy() == "small"]
    large = area[objects["size"].to_numpy() == "large"]
    assert small.max() < large.min()


def test_fast_enough():
    import time

    start = time.perf_counter()
    make_shape_scenes(2000, random_state=0)
    # about 3,000 scenes/s on a loaded 2-core box; generous bound for CI
    assert time.perf_counter() - start < 10.0


@pytest.mark.parametrize("params, match", [
    (dict(n_scenes=0), "n_scenes"),
    (dict(image_size=8), "image_size"),
    (dict(min_objects=3, max_objects=2), "min_objects"),
    (dict(max_objects=5), "max_objects"),
    (dict(shapes=["hexagon"]), "shapes"),
    (dict(colors=[]), "colors"),
    (dict(textures=["dotted"]), "textures"),
    (dict(noise=-1.0), "noise"),
])
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        make_shape_scenes(**{"n_scenes": 3, **params})


# ----------------------------------------------------------------------------
# corruptions
# ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["gaussian_noise", "blur", "occlusion"])
def test_corruption_grows_with_severity(kind):
    images, _, _ = make_shape_scenes(30, random_state=0)
    assert np.array_equal(corrupt_images(images, kind, 0), images)
    distances = []
    for severity in range(1, 6):
        out = corrupt_images(images, kind, severity, random_state=0)
        assert out.shape == images.shape and out.dtype == np.uint8
        distances.append(np.abs(out.astype(float) - images).mean())
    assert distances[0] > 0
    assert all(a < b for a, b in zip(distances, distances[1:])), distances
    again = corrupt_images(images, kind, 3, random_state=0)
    np.testing.assert_array_equal(again, corrupt_images(images, kind, 3, random_state=0))


def test_corruption_keeps_float_images_float():
    images, _, _ = make_shape_scenes(4, random_state=0)
    x = images / 255.0
    out = corrupt_images(x, "gaussian_noise", 2, random_state=0)
    assert out.dtype == x.dtype and 0.0 <= out.min() and out.max() <= 1.0


def test_occlusion_covers_the_stated_share():
    images = np.zeros((5, 32, 32, 3), dtype=np.uint8)
    out = corrupt_images(images, "occlusion", 5, random_state=0)
    share = (out[..., 0] == 128).mean(axis=(1, 2))
    np.testing.assert_allclose(share, 0.35, atol=0.03)


@pytest.mark.parametrize("kwargs, match", [
    (dict(kind="jpeg"), "kind"),
    (dict(severity=6), "severity"),
    (dict(severity=True), "severity"),
])
def test_corruption_bad_arguments(kwargs, match):
    images, _, _ = make_shape_scenes(2, random_state=0)
    with pytest.raises(ValueError, match=match):
        corrupt_images(images, **kwargs)
    with pytest.raises(ValueError, match="shape"):
        corrupt_images(images[0])


# ----------------------------------------------------------------------------
# caption perturbations
# ----------------------------------------------------------------------------
def test_scramble_keeps_the_words():
    _, captions, _ = make_shape_scenes(50, random_state=0)
    scrambled = perturb_captions(captions, "scramble", random_state=0)
    for original, new in zip(captions, scrambled):
        assert sorted(original.split()) == sorted(new.split()) and original != new


def test_mismatch_is_a_derangement_of_the_captions():
    _, captions, _ = make_shape_scenes(50, random_state=0)
    mismatched = perturb_captions(captions, "mismatch", random_state=0)
    assert sorted(mismatched) == sorted(captions)
    assert all(a != b for a, b in zip(captions, mismatched))
    # heavy duplicates still work while a derangement exists
    out = perturb_captions(["x", "x", "y", "y", "z"], "mismatch", random_state=0)
    assert all(a != b for a, b in zip(["x", "x", "y", "y", "z"], out))
    with pytest.raises(ValueError, match="two different"):
        perturb_captions(["same", "same"], "mismatch")


def test_drop_attributes_and_unseen_words():
    captions = ["a small red circle left of a large striped blue square", "an orange circle on the left"]
    assert list(perturb_captions(captions, "drop_attributes")) == [
        "a circle left of a square", "a circle on the left",
    ]
    unseen = perturb_captions(captions, "unseen_words", random_state=0)
    vocab = set(SHAPE_NAMES) | set(SHAPE_COLORS)
    for text in unseen:
        assert not vocab & set(text.split())
    assert unseen[0].split()[2] in {"magenta", "brown", "pink", "teal"}


def test_perturb_bad_arguments():
    with pytest.raises(ValueError, match="single string"):
        perturb_captions("a red circle")
    with pytest.raises(ValueError, match="kind"):
        perturb_captions(["a red circle"], "reverse")
