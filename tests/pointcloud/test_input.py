"""Tests of the point-cloud input checks: check_point_clouds, normalize_point_clouds
and invariant_start_index (GAPrompt spec, sections 4.1 and 6)."""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from skicml.ops import farthest_point_sample
from skicml.pointcloud._input import (
    check_point_clouds,
    invariant_start_index,
    normalize_point_clouds,
)

NAME = "GAPromptClassifier"


def _check(X, n_points=16, **kw):
    return check_point_clouds(X, n_points=n_points, estimator_name=NAME, **kw)


def _as_set(cloud):
    """The rows of a cloud, sorted, as a comparable array."""
    return cloud[np.lexsort(cloud.T[::-1])]


# ------------------------------------------------------------------ input types


def test_array_of_the_right_size_is_kept_as_float32():
    X = np.random.RandomState(0).normal(size=(4, 16, 3))
    out = _check(X)
    assert out.shape == (4, 16, 3) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, X.astype(np.float32))
    assert _check(X.astype(np.int64)).dtype == np.float32


def test_larger_clouds_are_reduced_by_farthest_point_sampling():
    X = np.random.RandomState(0).normal(size=(3, 50, 3)).astype(np.float32)
    out = _check(X, n_points=10)
    points = torch.from_numpy(X)
    index = farthest_point_sample(points, 10, start_index=invariant_start_index(points)).numpy()
    np.testing.assert_array_equal(out, np.take_along_axis(X, index[..., None], axis=1))


def test_list_of_clouds_of_varying_size():
    rng = np.random.RandomState(0)
    clouds = [rng.normal(size=(n, 3)) for n in (40, 16, 5, 40, 1)]
    out = _check(clouds)
    assert out.shape == (5, 16, 3) and out.dtype == np.float32
    np.testing.assert_array_equal(out[1], clouds[1].astype(np.float32))  # right size: kept
    np.testing.assert_array_equal(out[0], _check(clouds[:1])[0])  # same as alone
    # smaller clouds keep every point and repeat some of them
    for small, n in ((out[2], 5), (out[4], 1)):
        assert len(np.unique(small, axis=0)) == n
    np.testing.assert_array_equal(_as_set(np.unique(out[2], axis=0)), _as_set(clouds[2].astype(np.float32)))
    assert np.all(out[4] == clouds[4].astype(np.float32))
    # tuples and tensors are clouds too
    np.testing.assert_array_equal(_check(tuple(torch.as_tensor(c) for c in clouds)), out)


def test_upsampling_is_deterministic_and_independent_of_order_and_batch():
    rng = np.random.RandomState(0)
    cloud = rng.normal(size=(6, 3)).astype(np.float32)
    other = rng.normal(size=(6, 3)).astype(np.float32)
    alone = _check([cloud])[0]
    np.testing.assert_array_equal(alone, _check([cloud])[0])
    np.testing.assert_array_equal(alone, _check([other, cloud[::-1]])[1])
    np.testing.assert_array_equal(_check(np.stack([cloud, other]))[0], alone)
    # not the same draw for every cloud
    again = _check([cloud + 1.0])[0] - 1.0
    assert not np.allclose(_as_set(again), _as_set(alone), atol=1e-5)


def test_extra_channels_are_dropped_with_a_warning():
    X = np.random.RandomState(0).normal(size=(2, 16, 6))
    with pytest.warns(UserWarning, match=f"{NAME}: X has 6 channels per point; only the first 3"):
        out = _check(X)
    np.testing.assert_array_equal(out, X[..., :3].astype(np.float32))
    with pytest.warns(UserWarning, match="7 channels"):
        _check([X[0], np.ones((16, 7))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check(X, reset_channels_warning=False)
        _check(X[..., :3])


@pytest.mark.parametrize("F, n_per_cloud", [(1, 1), (2, 1), (3, 1), (5, 2), (30, 10)])
def test_flat_rows_are_zero_padded_xyz(F, n_per_cloud):
    X = np.arange(1, 4 * F + 1, dtype=float).reshape(4, F)
    out = _check(X, n_points=10)
    assert out.shape == (4, 10, 3)
    padded = np.concatenate([X, np.zeros((4, -F % 3))], axis=1).reshape(4, n_per_cloud, 3)
    for row, cloud in zip(padded, out):
        # every point of the row is in the cloud, and nothing else
        np.testing.assert_array_equal(np.unique(cloud, axis=0), _as_set(row.astype(np.float32)))


def test_flat_rows_as_nested_lists():
    rows = [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]
    np.testing.assert_array_equal(_check(rows, n_points=2), np.array(rows, dtype=np.float32).reshape(2, 2, 3))


# ------------------------------------------------------------------ errors


def test_nan_and_inf_name_the_first_bad_sample():
    X = np.zeros((6, 16, 3))
    X[4, 2, 1] = np.nan
    X[5, 0, 0] = np.inf
    with pytest.raises(ValueError, match=r"NaN or infinite coordinates .* in 2 sample\(s\), the first at index 4"):
        _check(X)
    clouds = [np.zeros((5, 3)), np.full((7, 3), -np.inf)]
    with pytest.raises(ValueError, match="the first at index 1"):
        _check(clouds)
    with pytest.raises(ValueError, match="the first at index 0"):
        _check(np.full((2, 3), 1e300))  # too large for float32
    flat = np.zeros((3, 9))
    flat[2, 8] = np.nan
    with pytest.raises(ValueError, match=f"{NAME}: .*NaN.*the first at index 2"):
        _check(flat)


@pytest.mark.parametrize("X, match", [
    (np.zeros(6), "X is 1-D"),
    (np.zeros((2, 4, 4, 3)), r"shape \(2, 4, 4, 3\); expected point clouds"),
    (np.zeros((2, 4, 2)), "must be 3 .x, y, z., got 2"),
    (np.zeros((2, 0, 3)), "no points"),
    (np.zeros((0, 4, 3)), "0 sample"),
    (np.zeros((0, 6)), "0 sample"),
    ([], "X is empty"),
    ([np.zeros((4, 3)), np.zeros((0, 3))], "point cloud 1 of X has no points"),
    ([np.zeros((4, 3)), np.zeros((4, 2))], "point cloud 1 of X has shape .4, 2.; expected .n_points, 3."),
    ([np.zeros((4, 3)), np.zeros(3)], "not all .n_points, 3. point clouds"),
    (np.array([["a", "b", "c"]]), "numeric"),
    ([np.array([["a", "b", "c"]])], "point cloud 0 of X: .*numeric"),
])
def test_bad_input_gets_a_clear_error(X, match):
    with pytest.raises(ValueError, match=match):
        _check(X)


def test_non_numeric_objects_and_bad_n_points():
    X = np.random.RandomState(0).uniform(size=(3, 6)).astype(object)
    assert _check(X, n_points=2).dtype == np.float32  # numbers as objects are fine
    X[0, 0] = {"not": "a number"}
    with pytest.raises(TypeError):
        _check(X)
    for bad in (0, 2.0, True, None):
        with pytest.raises(ValueError, match=f"{NAME}: n_points must be an integer >= 1"):
            check_point_clouds(np.zeros((1, 4, 3)), n_points=bad, estimator_name=NAME)


# ------------------------------------------------------------------ normalisation

clouds_strategy = hnp.arrays(
    np.float64, st.tuples(st.integers(1, 3), st.integers(2, 30), st.just(3)),
    elements=st.floats(-10, 10, allow_nan=False, width=32),
)


@settings(max_examples=40, deadline=None)
@given(clouds_strategy, st.floats(-50, 50), st.floats(0.1, 20), st.randoms(use_true_random=False))
def test_normalisation_is_invariant_to_translation_scale_and_order(X, shift, scale, random):
    out = normalize_point_clouds(X)
    moved = normalize_point_clouds(X * scale + shift)
    extent = np.ptp(X, axis=1).max(axis=1)
    spread = extent > 1e-3 * (np.abs(X).max(axis=(1, 2)) + abs(shift) / scale)
    np.testing.assert_allclose(moved[spread], out[spread], atol=1e-4)
    assert np.all(np.isfinite(moved))
    order = list(range(X.shape[1]))
    random.shuffle(order)
    np.testing.assert_array_equal(normalize_point_clouds(X[:, order]), out[:, order])
    radius = np.linalg.norm(out, axis=-1).max(axis=1)
    np.testing.assert_allclose(radius[radius > 0], 1.0, rtol=1e-6)
    np.testing.assert_allclose(out.mean(axis=1), 0.0, atol=1e-6)


def test_normalisation_of_identical_points_and_types():
    for value in (0.0, 0.1, 7.3, -1e4):
        for dtype in (np.float32, np.float64):
            out = normalize_point_clouds(np.full((2, 9, 3), value, dtype=dtype))
            assert out.dtype == dtype and np.all(out == 0.0)
    X = np.random.RandomState(0).normal(size=(2, 8, 3)).astype(np.float32)
    tensor = normalize_point_clouds(torch.from_numpy(X))
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32
    np.testing.assert_array_equal(tensor.numpy(), normalize_point_clouds(X))
    listed = normalize_point_clouds([X[0], X[1, :5]])
    np.testing.assert_array_equal(listed[0], normalize_point_clouds(X[:1])[0])
    assert listed[1].shape == (5, 3)
    assert normalize_point_clouds(np.ones((1, 2, 3), dtype=int)).dtype == np.float32
    with pytest.raises(ValueError, match=r"expected clouds of shape \(n, N, 3\)"):
        normalize_point_clouds(np.zeros((4, 3)))


# ------------------------------------------------------------------ invariant start


duplicated_clouds = st.integers(1, 20).flatmap(lambda n: st.tuples(
    hnp.arrays(np.float32, (n, 3), elements=st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0])
               | st.floats(-2, 2, width=32)),
    st.lists(st.integers(0, n - 1), min_size=0, max_size=10),
))


@settings(max_examples=60, deadline=None)
@given(duplicated_clouds, st.randoms(use_true_random=False))
def test_start_point_does_not_depend_on_point_order(cloud_and_copies, random):
    cloud, copies = cloud_and_copies
    cloud = np.concatenate([cloud, cloud[copies]])  # duplicate points
    order = list(range(len(cloud)))
    random.shuffle(order)
    shuffled = cloud[order]
    start = int(invariant_start_index(cloud[None])[0])
    start_shuffled = int(invariant_start_index(shuffled[None])[0])
    np.testing.assert_array_equal(cloud[start], shuffled[start_shuffled])
    # the farthest point from the centroid, lexicographically first among ties
    centroid = cloud.astype(np.float64).mean(axis=0)
    distance = ((cloud.astype(np.float64) - centroid) ** 2).sum(axis=1)
    assert distance[start] >= distance.max() * (1 - 1e-9)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(9, 60))
def test_fps_from_the_invariant_start_does_not_depend_on_point_order(seed, n):
    # Points in general position (no ties between distances): FPS started at
    # the invariant point picks the same points in the same order. (With
    # ties, e.g. the corners of a square, FPS breaks them by index.)
    rng = np.random.RandomState(seed)
    cloud = rng.normal(size=(2, n, 3)).astype(np.float32)
    order = rng.permutation(n)
    shuffled = cloud[:, order]
    picked = farthest_point_sample(torch.from_numpy(cloud), 8, start_index=invariant_start_index(cloud)).numpy()
    again = farthest_point_sample(torch.from_numpy(shuffled), 8, start_index=invariant_start_index(shuffled)).numpy()
    np.testing.assert_array_equal(np.take_along_axis(cloud, picked[..., None], 1),
                                  np.take_along_axis(shuffled, again[..., None], 1))
    # check_point_clouds reduces larger clouds by it, so its output does not
    # depend on the order either (a cloud of n_points points is kept as it is)
    np.testing.assert_array_equal(_check(cloud, n_points=8), _check(shuffled, n_points=8))


def test_start_ties_go_to_the_lexicographically_smallest_point():
    square = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]])
    assert invariant_start_index(square).tolist() == [2]
    copies = np.array([[[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [2.0, 0.0, 0.0], [-2.0, 0.0, 0.0], [-2.0, 0.0, 0.0]]])
    assert invariant_start_index(copies).tolist() == [3]  # lowest index among the copies
    batch = invariant_start_index(torch.tensor(np.concatenate([square, square[:, ::-1]])))
    assert batch.dtype == torch.int64 and batch.tolist() == [2, 1]
    same = invariant_start_index(np.zeros((1, 4, 3)))
    assert same.tolist() == [0]
    with pytest.raises(ValueError, match="invariant_start_index: expected clouds"):
        invariant_start_index(np.zeros((1, 0, 3)))


# ------------------------------------------------------------------ issue 64
def test_a_ragged_object_array_of_clouds_is_read_as_the_list_it_is():
    rng = np.random.RandomState(0)
    clouds = [rng.normal(size=(20, 3)), rng.normal(size=(9, 3)), rng.normal(size=(16, 4))]
    ragged = np.empty(3, dtype=object)
    ragged[:] = clouds
    with pytest.warns(UserWarning, match="4 channels"):
        expected = _check(clouds)
    with pytest.warns(UserWarning, match="4 channels"):
        np.testing.assert_array_equal(_check(ragged), expected)
    # Objects that are not clouds still get the list's message, not "1-D".
    bad = np.empty(2, dtype=object)
    bad[:] = [np.zeros((4, 3)), np.zeros(3)]
    with pytest.raises(ValueError, match=r"not all .n_points, 3. point clouds"):
        _check(bad)
