"""Tests of make_point_clouds, the primitive-shape point clouds (GAPrompt spec, section 5)."""

import numpy as np
import pytest

from skicml.datasets import POINT_CLOUD_CLASSES, make_point_clouds

VARIANTS = ("obj_only", "obj_bg", "hardest")


def _pca(points):
    """Eigenvalues (ascending) and eigenvectors of each cloud's covariance."""
    p = points.astype(np.float64)
    p = p - p.mean(axis=1, keepdims=True)
    return np.linalg.eigh(np.einsum("nki,nkj->nij", p, p) / p.shape[1])


def _best_threshold_accuracy(a, b):
    """Accuracy of the best single threshold on a statistic telling a from b."""
    values = np.concatenate([a, b])
    labels = np.concatenate([np.zeros(len(a)), np.ones(len(b))])
    best = 0.0
    for t in values:
        accuracy = np.mean((values > t) == labels)
        best = max(best, accuracy, 1.0 - accuracy)
    return best


@pytest.mark.parametrize("variant", VARIANTS)
def test_shapes_dtypes_and_unit_sphere(variant):
    data = make_point_clouds(30, n_points=64, variant=variant, random_state=0)
    assert set(data) >= {"points", "target", "target_names", "variant", "DESCR"}
    assert data.points.shape == (30, 64, 3) and data.points.dtype == np.float32
    assert np.all(np.isfinite(data.points))
    assert data.target.shape == (30,) and data.target.dtype == np.int64
    assert data.target_names == POINT_CLOUD_CLASSES and data.variant == variant
    np.testing.assert_allclose(data.points.mean(axis=1), 0.0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(data.points, axis=-1).max(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_deterministic_per_seed(variant):
    a = make_point_clouds(12, n_points=32, variant=variant, rotation="so3", random_state=3)
    b = make_point_clouds(12, n_points=32, variant=variant, rotation="so3", random_state=3)
    c = make_point_clouds(12, n_points=32, variant=variant, rotation="so3", random_state=4)
    np.testing.assert_array_equal(a.points, b.points)
    np.testing.assert_array_equal(a.target, b.target)
    assert not np.allclose(a.points, c.points)


def test_classes_are_balanced_and_selectable():
    counts = np.bincount(make_point_clouds(103, n_points=16, random_state=0).target, minlength=10)
    assert counts.max() - counts.min() <= 1 and counts.sum() == 103
    data = make_point_clouds(9, n_points=16, classes=["torus", "cube"], random_state=0)
    assert data.target_names == ("torus", "cube")
    assert sorted(np.bincount(data.target)) == [4, 5]
    assert make_point_clouds(3, n_points=16, classes="disc", random_state=0).target.tolist() == [0, 0, 0]


def test_sphere_samples_are_uniform_by_area():
    # Archimedes: the height of a uniform point on a sphere is uniform.
    points = make_point_clouds(40, n_points=512, classes=["sphere"], rotation=None, random_state=0).points
    y = points[..., 1]
    height = (y - y.min(axis=1, keepdims=True)) / np.ptp(y, axis=1, keepdims=True)
    shares = np.histogram(height.ravel(), bins=4, range=(0, 1))[0] / height.size
    np.testing.assert_allclose(shares, 0.25, atol=0.02)


def test_rotation_options():
    def principal_axes(rotation):
        points = make_point_clouds(20, n_points=256, classes=["cylinder"], rotation=rotation, random_state=0).points
        return np.abs(_pca(points)[1][:, :, 2])

    assert np.all(principal_axes(None)[:, 1] > 0.97)  # upright along y
    assert np.all(principal_axes("y")[:, 1] > 0.97)  # turning about y keeps it upright
    assert np.mean(principal_axes("so3")[:, 1] < 0.9) > 0.5
    flat = make_point_clouds(5, n_points=256, classes=["disc"], rotation=None, random_state=0).points
    assert np.all(np.abs(flat[..., 1]).max(axis=1) < 0.2)  # discs lie flat


def test_confusable_pairs_are_different_but_close():
    data = make_point_clouds(600, n_points=512, rotation="so3", random_state=0)
    points, y = data.points.astype(np.float64), data.target
    values, vectors = _pca(points)
    names = {name: i for i, name in enumerate(POINT_CLOUD_CLASSES)}

    def of(name, statistic):
        return statistic[y == names[name]]

    # Different: one simple statistic tells each pair apart.
    anisotropy = values[:, 2] / values[:, 0]
    along = np.abs(np.einsum("nki,ni->nk", points, vectors[:, :, 2]))
    flat_ends = np.mean(along > 0.95 * along.max(axis=1, keepdims=True), axis=1)
    assert _best_threshold_accuracy(of("sphere", anisotropy), of("ellipsoid", anisotropy)) >= 0.95
    assert _best_threshold_accuracy(of("cube", anisotropy), of("box", anisotropy)) >= 0.95
    assert _best_threshold_accuracy(of("cylinder", flat_ends), of("capsule", flat_ends)) >= 0.9

    # Close: where the statistic that tells them apart is taken out, each is
    # nearest to its partner among all classes. Sphere / ellipsoid and cube /
    # box differ by an anisotropic scale: whitened, their radial profiles
    # match. Cylinder / capsule have the same proportions (PCA spectrum).
    whitened = np.einsum("nki,nij->nkj", points, vectors) / np.sqrt(values)[:, None, :]
    radius = np.linalg.norm(whitened, axis=-1)
    radius /= radius.max(axis=1, keepdims=True)
    profile = np.stack([np.histogram(r, bins=10, range=(0, 1))[0] for r in radius]) / points.shape[1]
    spectrum = values / values.sum(axis=1, keepdims=True)

    def nearest_class(name, descriptor):
        means = np.stack([descriptor[y == c].mean(0) for c in range(len(POINT_CLOUD_CLASSES))])
        gaps = np.abs(means - means[names[name]]).sum(axis=1)
        gaps[names[name]] = np.inf
        return POINT_CLOUD_CLASSES[int(np.argmin(gaps))]

    assert nearest_class("sphere", profile) == "ellipsoid"
    assert nearest_class("cube", profile) == "box"
    assert nearest_class("box", profile) == "cube"
    assert nearest_class("cylinder", spectrum) == "capsule"
    assert nearest_class("capsule", spectrum) == "cylinder"


def _floor_share(points):
    """Share of each cloud's points within 0.03 of its lowest height."""
    y = points[..., 1]
    return np.mean(y < y.min(axis=1, keepdims=True) + 0.03, axis=1)


def _radial_spread(points):
    return np.linalg.norm(points, axis=-1).std(axis=1)


def test_variants_differ():
    kw = dict(n_samples=20, n_points=512, classes=["sphere"], rotation=None, random_state=0)
    only, bg, hard = (make_point_clouds(variant=v, **kw).points for v in VARIANTS)
    # the background variants stand on a floor
    assert _floor_share(only).max() < 0.05
    assert _floor_share(bg).min() > 0.08 and _floor_share(hard).min() > 0.08
    # obj_bg keeps the whole sphere at the centre of its points, the hardest
    # variant cuts, shifts and rescales it
    assert _radial_spread(only).max() < 0.05
    assert np.median(_radial_spread(hard)) > np.median(_radial_spread(bg))
    # the cuts never cost points
    assert hard.shape == bg.shape == (20, 512, 3)


def test_density_bias_makes_the_sampling_uneven():
    kw = dict(n_samples=20, n_points=512, classes=["sphere"], rotation=None, random_state=0)
    even = make_point_clouds(density_bias=0.0, **kw).points
    uneven = make_point_clouds(density_bias=3.0, **kw).points
    # the centroid moves toward the dense side, so the points no longer lie
    # at one distance from it
    assert np.median(_radial_spread(uneven)) > 3 * np.median(_radial_spread(even))
    # the default of the hardest variant is biased, an explicit 0 is not
    hard = dict(kw, variant="hardest")
    assert not np.allclose(make_point_clouds(**hard).points, make_point_clouds(density_bias=0.0, **hard).points)


def test_varying_point_counts():
    data = make_point_clouds(60, n_points=100, min_points=50, variant="hardest", random_state=0)
    counts = np.array([len(cloud) for cloud in data.points])
    assert isinstance(data.points, list) and len(data.points) == 60
    assert counts.min() >= 50 and counts.max() <= 100 and len(np.unique(counts)) > 10
    for cloud in data.points:
        assert cloud.dtype == np.float32 and cloud.shape[1] == 3
        np.testing.assert_allclose(cloud.mean(axis=0), 0.0, atol=1e-6)
        np.testing.assert_allclose(np.linalg.norm(cloud, axis=1).max(), 1.0, rtol=1e-5)
    fixed = make_point_clouds(4, n_points=20, min_points=20, random_state=0).points
    assert [len(c) for c in fixed] == [20] * 4


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_samples=0), r"'n_samples' parameter of make_point_clouds must be an int in the range \[1, inf\)"),
    (dict(n_points=4), r"'n_points' parameter .* must be an int in the range \[8, inf\)"),
    (dict(n_points=32.0), r"'n_points' parameter .* must be an int"),
    (dict(variant="scan"), r"'variant' parameter .* must be a str among .*Got 'scan'"),
    (dict(rotation="z"), r"'rotation' parameter .* must be a str among .*Got 'z'"),
    (dict(classes=["hexagon"]), "classes=.*unknown"),
    (dict(classes=["cube", "cube"]), "duplicates"),
    (dict(classes=[]), "unknown or empty"),
    (dict(min_points=0), r"'min_points' parameter .* must be an int in the range \[1, inf\)"),
    (dict(n_points=32, min_points=40), "min_points=40 exceeds n_points=32"),
    (dict(density_bias=-1.0), r"'density_bias' parameter .* must be a float in the range"),
    (dict(density_bias=True), r"'density_bias' parameter .* must be a float in the range"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_point_clouds(**{"n_samples": 4, "n_points": 16, **kwargs})
