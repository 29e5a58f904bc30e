"""Point-cloud ops: FPS, kNN, group_points, inverse-distance interpolation, Chamfer.

Ground truth: numpy brute force (every pairwise squared distance, computed as
``(dx*dx + dy*dy) + dz*dz`` like the ops, so indices compare exactly), the
plain-torch references, and the properties of the GAPrompt spec (section 6).
The C kernel of FPS and the Triton kernels (in the interpreter here) must give
the references' indices bit for bit.
"""

import doctest
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.ops import (
    _dispatch,
    _point_cloud,
    chamfer_distance,
    chamfer_distance_reference,
    farthest_point_sample,
    farthest_point_sample_reference,
    group_points,
    group_points_reference,
    knn,
    knn_reference,
    three_nn_interpolate,
    three_nn_interpolate_reference,
)
from skicml.ops.testing import check_custom_op, gpu_kernel_device


def _triton():
    from skicml.ops import _point_cloud_triton

    return _point_cloud_triton


def _cloud(n_clouds, n_points, seed=0, dtype=torch.float64, grid=None):
    """Random clouds; with ``grid``, integer coordinates in [0, grid): many ties and duplicates."""
    g = torch.Generator().manual_seed(seed)
    if grid is None:
        return torch.randn(n_clouds, n_points, 3, generator=g, dtype=torch.float64).to(dtype)
    return torch.randint(0, grid, (n_clouds, n_points, 3), generator=g).to(dtype)


def _sq(a, b):
    """Brute-force squared distances (n, 3) x (m, 3) -> (n, m), the ops' arithmetic order."""
    d = [a[:, None, i] - b[None, :, i] for i in range(3)]
    return (d[0] * d[0] + d[1] * d[1]) + d[2] * d[2]


def _fps_brute(points, n_samples, start):
    """Greedy FPS from scratch at every step: max over points of the min over the picked set."""
    picked = [start]
    for _ in range(n_samples - 1):
        nearest = _sq(points, points[picked]).min(axis=1)
        picked.append(int(np.argmax(nearest)))  # the first maximum
    return picked


# --------------------------------------------------------------------------
# Registered ops and kernels


def test_gpu_kernel_is_testable_here():
    assert gpu_kernel_device() in ("cpu", "cuda")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_fps_and_kernel(dtype):
    points = _cloud(2, 23, dtype=dtype)
    starts = torch.tensor([0, 7])
    samples = [(points, 9, starts), (points[:1, :1], 1, starts[:1]), (points, 0, starts),
               (_cloud(3, 17, seed=1, dtype=dtype, grid=3), 17, torch.tensor([1, 2, 3]))]
    report = check_custom_op(_point_cloud._fps_op, samples,
                             reference=farthest_point_sample_reference,
                             kernel=_triton().farthest_point_sample_triton, atol=0, rtol=0)
    assert report["opcheck"] == 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fps_triton_tiled_path(dtype, monkeypatch):
    # Clouds larger than _FPS_MAX_BLOCK are walked in tiles with a scratch buffer.
    module = _triton()
    monkeypatch.setattr(module, "_FPS_MAX_BLOCK", 8)
    monkeypatch.setattr(module, "_FPS_TILE", 8)
    for points in (_cloud(2, 29, seed=2, dtype=dtype), _cloud(2, 24, seed=3, dtype=dtype, grid=2)):
        starts = torch.tensor([3, 0])
        got = module.farthest_point_sample_triton(points, 20, starts)
        assert torch.equal(got, farthest_point_sample_reference(points, 20, starts))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_knn_and_kernel(dtype):
    points = _cloud(2, 21, dtype=dtype)
    grid = _cloud(2, 30, seed=1, dtype=dtype, grid=3)  # ties everywhere
    samples = [(points[:, :6], points, 4), (points, points, 21), (grid[:, :9], grid, 5),
               (points[:, :1], points[:, :1], 1)]
    check_custom_op(_point_cloud._knn_op, samples, reference=knn_reference, atol=0, rtol=0)
    for query, cloud, k in samples:
        got = _triton().knn_triton(query, cloud, k)
        expected = knn_reference(query, cloud, k)
        assert torch.equal(got[1], expected[1])
        assert torch.equal(got[0], expected[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_chamfer_nearest_and_kernel(dtype):
    a = _cloud(2, 19, dtype=dtype).requires_grad_()
    b = _cloud(2, 13, seed=1, dtype=dtype).requires_grad_()
    grid = _cloud(2, 25, seed=2, dtype=dtype, grid=3)
    samples = [(a, b), (b, a), (grid, grid[:, :7]), (a[:, :1].detach(), b[:, :1].detach())]
    check_custom_op(_point_cloud._nearest_op, samples, reference=_point_cloud._nearest_reference,
                    atol=0, rtol=0)
    for x, y in samples:
        got = _triton().nearest_triton(x.detach(), y.detach())
        expected = _point_cloud._nearest_reference(x, y)
        assert torch.equal(got[1], expected[1]) and torch.equal(got[0], expected[0])


def test_opcheck_group_points():
    features = _cloud(2, 9).requires_grad_()
    indices = torch.randint(0, 9, (2, 4, 3), generator=torch.Generator().manual_seed(0))
    samples = [(features, indices), (features[:, :, :2], indices[:, :1, :1])]
    report = check_custom_op(_point_cloud._group_op, samples, reference=group_points_reference,
                             atol=0, rtol=0)
    assert report["opcheck"] == 2


# --------------------------------------------------------------------------
# The C kernel of FPS


@settings(max_examples=25, deadline=None)
@given(n_clouds=st.integers(1, 3), n_points=st.integers(1, 70), data=st.data(),
       grid=st.sampled_from([None, 2, 4]), dtype=st.sampled_from([torch.float32, torch.float64]),
       seed=st.integers(0, 2**16))
def test_c_kernel_equals_reference_bit_for_bit(n_clouds, n_points, data, grid, dtype, seed):
    points = _cloud(n_clouds, n_points, seed=seed, dtype=dtype, grid=grid)
    n_samples = data.draw(st.integers(0, n_points))
    starts = torch.tensor(data.draw(st.lists(st.integers(0, n_points - 1), min_size=n_clouds,
                                             max_size=n_clouds)))
    kernels = _point_cloud._load_fps_kernel()
    assert kernels is not None  # a compiler is present here
    got = _point_cloud._run_fps_kernel(kernels, points, n_samples, starts)
    assert torch.equal(got, farthest_point_sample_reference(points, n_samples, starts))
    assert torch.equal(farthest_point_sample(points, n_samples, starts), got)


def test_c_kernel_across_threads_and_half_precision():
    points = _cloud(5, 1500, seed=4, dtype=torch.float32)
    expected = farthest_point_sample_reference(points, 50, 3)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # clouds split across two ctypes calls
    try:
        assert torch.equal(farthest_point_sample(points, 50, 3), expected)
    finally:
        torch.set_num_threads(threads)
    half = points.half()
    assert torch.equal(farthest_point_sample(half, 50, 3),
                       farthest_point_sample_reference(half, 50, 3))


@pytest.fixture
def fresh_fps_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("SKICML_CACHE_DIR", str(tmp_path))
    _point_cloud._reset_fps_kernel()
    yield tmp_path
    _point_cloud._reset_fps_kernel()


def test_c_kernel_is_compiled_into_the_cache(fresh_fps_kernel):
    points = _cloud(2, 40, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = farthest_point_sample(points, 10)
    assert torch.equal(got, farthest_point_sample_reference(points, 10))
    (library,) = fresh_fps_kernel.iterdir()
    assert library.name.startswith("fps_kernel-") and library.suffix == ".so"


def test_falls_back_to_reference_without_compiler(fresh_fps_kernel, monkeypatch):
    monkeypatch.setattr(_dispatch, "find_c_compiler", lambda: None)
    points = _cloud(2, 40, seed=6)
    expected = farthest_point_sample_reference(points, 12)
    with pytest.warns(RuntimeWarning, match="farthest_point_sample runs its plain-torch "
                                            "reference .*no C compiler was found"):
        assert torch.equal(farthest_point_sample(points, 12), expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once, not on every call
        assert torch.equal(farthest_point_sample(points, 12), expected)
    assert list(fresh_fps_kernel.glob("*.so")) == []


def test_disable_custom_kernels_runs_reference(monkeypatch):
    def no_kernel():
        raise AssertionError("the kernel must not be loaded")

    monkeypatch.setenv("SKICML_DISABLE_CUSTOM_KERNELS", "1")
    monkeypatch.setattr(_point_cloud, "_load_fps_kernel", no_kernel)
    points = _cloud(1, 30, seed=7)
    assert torch.equal(farthest_point_sample(points, 5), farthest_point_sample_reference(points, 5))


# --------------------------------------------------------------------------
# The C kernel of kNN (and of the nearest neighbour, its k = 1)


def _assert_same_knn(got, expected):
    assert got[0].dtype == expected[0].dtype
    assert torch.equal(got[1], expected[1]) and torch.equal(got[0], expected[0])


# Up to 150 points: clouds of at least 2 * 16 points take the kernel's bounded
# candidate path, smaller ones (or a large k) the plain one.
@settings(max_examples=40, deadline=None)
@given(n_clouds=st.integers(1, 3), n_query=st.integers(1, 20), n_points=st.integers(1, 150),
       data=st.data(), grid=st.sampled_from([None, 2, 4]),
       dtype=st.sampled_from([torch.float32, torch.float64]), seed=st.integers(0, 2**16))
def test_knn_c_kernel_equals_reference_bit_for_bit(n_clouds, n_query, n_points, data, grid, dtype,
                                                   seed):
    points = _cloud(n_clouds, n_points, seed=seed, dtype=dtype, grid=grid)
    query = _cloud(n_clouds, n_query, seed=seed + 1, dtype=dtype, grid=grid)
    k = data.draw(st.one_of(st.integers(1, min(n_points, 40)), st.just(n_points)))
    kernels = _point_cloud._load_knn_kernel()
    assert kernels is not None  # a compiler is present here
    expected = knn_reference(query, points, k)
    got = _point_cloud._run_knn_kernel(kernels, query, points, k)
    _assert_same_knn(got, expected)
    _assert_same_knn(knn(query, points, k), expected)
    nearest = _point_cloud._nearest_op(query, points)
    reference = _point_cloud._nearest_reference(query, points)
    assert torch.equal(nearest[1], reference[1]) and torch.equal(nearest[0], reference[0])


def test_knn_c_kernel_duplicates_and_ties_go_to_the_lowest_index():
    kernels = _point_cloud._load_knn_kernel()
    same = torch.zeros(2, 70, 3)
    distances, indices = _point_cloud._run_knn_kernel(kernels, same[:, :3], same, 20)
    assert torch.equal(indices, torch.arange(20).expand(2, 3, 20))
    assert torch.all(distances == 0)
    # Points on a line at 0, +-1, +-2, ... from the query: each distance twice
    # (bar 0), the lower index first; the shuffled order makes the ties
    # arrive in every order relative to the buffer's contents.
    offsets = torch.arange(-40, 41, dtype=torch.float64)
    order = torch.randperm(81, generator=torch.Generator().manual_seed(0))
    points = torch.zeros(1, 81, 3, dtype=torch.float64)
    points[0, :, 0] = offsets[order]
    query = torch.zeros(1, 1, 3, dtype=torch.float64)
    for k in (1, 2, 3, 16, 17, 32, 80, 81):
        got = _point_cloud._run_knn_kernel(kernels, query, points, k)
        _assert_same_knn(got, knn_reference(query, points, k))
        pairs = [(offsets[order[i]].abs().item(), i) for i in range(81)]
        assert got[1][0, 0].tolist() == [i for _, i in sorted(pairs)[:k]]


def test_knn_c_kernel_across_threads_and_half_precision(monkeypatch):
    points = _cloud(3, 300, seed=4, dtype=torch.float32, grid=6)
    query = _cloud(3, 41, seed=5, dtype=torch.float32, grid=6)
    expected = knn_reference(query, points, 12)
    threads = torch.get_num_threads()
    monkeypatch.setattr(_point_cloud, "_C_PARALLEL_WORK", 0)
    torch.set_num_threads(2)  # the 123 rows split inside the second cloud
    try:
        _assert_same_knn(knn(query, points, 12), expected)
    finally:
        torch.set_num_threads(threads)
    half = (points / 6).half(), (query / 6).half()
    _assert_same_knn(knn(half[1], half[0], 5), knn_reference(half[1], half[0], 5))


def test_knn_beyond_the_c_limit_runs_the_reference(monkeypatch):
    def no_kernel(*args):
        raise AssertionError("the C kernel must not run for k > _C_MAX_K")

    points = _cloud(2, 30, seed=8, grid=3)
    expected = knn_reference(points, points, 9)
    monkeypatch.setattr(_point_cloud, "_C_MAX_K", 8)
    monkeypatch.setattr(_point_cloud, "_run_knn_kernel", no_kernel)
    _assert_same_knn(knn(points, points, 9), expected)


@pytest.fixture
def fresh_knn_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("SKICML_CACHE_DIR", str(tmp_path))
    _point_cloud._reset_knn_kernel()
    yield tmp_path
    _point_cloud._reset_knn_kernel()


def test_knn_c_kernel_is_compiled_into_the_cache(fresh_knn_kernel):
    points = _cloud(2, 40, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _assert_same_knn(knn(points, points, 7), knn_reference(points, points, 7))
    (library,) = fresh_knn_kernel.iterdir()
    assert library.name.startswith("knn_kernel-") and library.suffix == ".so"


def test_knn_falls_back_to_reference_without_compiler(fresh_knn_kernel, monkeypatch):
    monkeypatch.setattr(_dispatch, "find_c_compiler", lambda: None)
    a, b = _cloud(2, 40, seed=10), _cloud(2, 33, seed=11)
    expected = knn_reference(a, b, 6)
    with pytest.warns(RuntimeWarning, match="knn runs its plain-torch reference .*no C compiler"):
        _assert_same_knn(knn(a, b, 6), expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once, not on every call, nor for chamfer
        _assert_same_knn(knn(a, b, 6), expected)
        torch.testing.assert_close(chamfer_distance(a, b), chamfer_distance_reference(a, b),
                                   rtol=0, atol=0)
    assert list(fresh_knn_kernel.glob("*.so")) == []


def test_knn_disable_custom_kernels_runs_reference(monkeypatch):
    def no_kernel():
        raise AssertionError("the kernel must not be loaded")

    monkeypatch.setenv("SKICML_DISABLE_CUSTOM_KERNELS", "1")
    monkeypatch.setattr(_point_cloud, "_load_knn_kernel", no_kernel)
    points = _cloud(1, 30, seed=12)
    _assert_same_knn(knn(points, points, 5), knn_reference(points, points, 5))
    assert torch.equal(chamfer_distance(points, points[:, :9]),
                       chamfer_distance_reference(points, points[:, :9]))


# --------------------------------------------------------------------------
# FPS properties (spec section 6.1)


@settings(max_examples=30, deadline=None)
@given(n_points=st.integers(1, 40), data=st.data(), grid=st.sampled_from([None, 3]),
       dtype=st.sampled_from([torch.float32, torch.float64]), seed=st.integers(0, 2**16))
def test_fps_is_greedy_max_min(n_points, data, grid, dtype, seed):
    points = _cloud(1, n_points, seed=seed, dtype=dtype, grid=grid)
    n_samples = data.draw(st.integers(1, n_points))
    start = data.draw(st.integers(0, n_points - 1))
    got = farthest_point_sample(points, n_samples, start)[0].tolist()
    assert got[0] == start
    assert got == _fps_brute(points[0].numpy(), n_samples, start)
    distinct = len(np.unique(points[0].numpy(), axis=0))
    if n_samples <= distinct:
        assert len(set(got)) == n_samples
    # Prefix property: fewer samples from the same start are a prefix.
    shorter = data.draw(st.integers(1, n_samples))
    assert farthest_point_sample(points, shorter, start)[0].tolist() == got[:shorter]


@settings(max_examples=15, deadline=None)
@given(n_clouds=st.integers(1, 4), n_points=st.integers(2, 30), seed=st.integers(0, 2**16))
def test_fps_batched_equals_per_cloud(n_clouds, n_points, seed):
    points = _cloud(n_clouds, n_points, seed=seed)
    starts = torch.randint(0, n_points, (n_clouds,), generator=torch.Generator().manual_seed(seed))
    n_samples = n_points // 2 + 1
    batched = farthest_point_sample(points, n_samples, starts)
    for b in range(n_clouds):
        alone = farthest_point_sample(points[b:b + 1], n_samples, int(starts[b]))
        assert torch.equal(batched[b:b + 1], alone)


def test_fps_duplicate_points_repeat_the_lowest_index():
    # 3 distinct points, 8 picks: after the distinct ones, ties at distance 0.
    points = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 2, 0], [1, 0, 0]]])
    assert farthest_point_sample(points, 3, 4)[0].tolist() == [4, 3, 0]
    assert farthest_point_sample(points, 5, 4)[0].tolist() == [4, 3, 0, 0, 0]
    same = torch.zeros(2, 6, 3)
    assert farthest_point_sample(same, 4, torch.tensor([2, 5])).tolist() == [[2, 0, 0, 0],
                                                                           [5, 0, 0, 0]]


# --------------------------------------------------------------------------
# kNN properties (spec section 6.2)


@settings(max_examples=30, deadline=None)
@given(n_query=st.integers(1, 12), n_points=st.integers(1, 40), data=st.data(),
       grid=st.sampled_from([None, 2, 3]), seed=st.integers(0, 2**16))
def test_knn_equals_brute_force(n_query, n_points, data, grid, seed):
    points = _cloud(2, n_points, seed=seed, grid=grid)
    query = _cloud(2, n_query, seed=seed + 1, grid=grid)
    k = data.draw(st.integers(1, n_points))
    distances, indices = knn(query, points, k)
    for b in range(2):
        d = _sq(query[b].numpy(), points[b].numpy())
        # argsort(cdist) with the ties going to the lowest index: a stable sort.
        order = np.argsort(d, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(indices[b].numpy(), order)
        np.testing.assert_array_equal(distances[b].numpy(), np.take_along_axis(d, order, 1))


@pytest.mark.parametrize("budget", [1, 7, 2**24])
def test_knn_chunking_changes_nothing(monkeypatch, budget):
    points, query = _cloud(3, 25, grid=3), _cloud(3, 17, seed=1, grid=3)
    expected = knn(query, points, 6)
    monkeypatch.setattr(_point_cloud, "_CHUNK_ELEMENTS", budget)
    got = knn(query, points, 6)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


@settings(max_examples=15, deadline=None)
@given(n_points=st.integers(1, 40), seed=st.integers(0, 2**16), k=st.integers(1, 5))
def test_center_is_its_own_first_neighbour(n_points, seed, k):
    points = _cloud(2, n_points, seed=seed, dtype=torch.float32)
    k = min(k, n_points)
    centers = farthest_point_sample(points, max(1, n_points // 3))
    query = torch.gather(points, 1, centers[..., None].expand(-1, -1, 3))
    distances, indices = knn(query, points, k)
    assert torch.equal(indices[..., 0], centers)
    assert torch.all(distances[..., 0] == 0)
    assert torch.all(distances.diff(dim=-1) >= 0)


def test_knn_is_detached_and_float32_for_half():
    points = _cloud(1, 10, dtype=torch.float32).requires_grad_()
    distances, indices = knn(points, points, 3)
    assert not distances.requires_grad and indices.dtype == torch.int64
    distances, _ = knn(points.detach().half(), points.detach().half(), 3)
    assert distances.dtype == torch.float32


# --------------------------------------------------------------------------
# group_points


def test_group_points_never_reads_another_sample():
    # Features are their own (sample, point) ids; every index value is valid
    # in every sample, so a gather across samples would show.
    n_clouds, n_points = 3, 5
    ids = torch.arange(n_clouds * n_points, dtype=torch.float64).view(n_clouds, n_points, 1)
    features = ids.clone().requires_grad_()
    indices = torch.randint(0, n_points, (n_clouds, 4, 3),
                            generator=torch.Generator().manual_seed(0))
    grouped = group_points(features, indices)
    assert torch.equal(grouped[..., 0], (indices + n_points * torch.arange(n_clouds)[:, None, None])
                       .double())
    (grad,) = torch.autograd.grad(grouped[1].sum(), features)
    assert torch.all(grad[0] == 0) and torch.all(grad[2] == 0)
    assert grad[1].sum() == indices[1].numel()


def test_group_points_gradient():
    features = _cloud(2, 6).requires_grad_()
    indices = torch.tensor([[[0, 0, 5], [2, 3, 0]], [[1, 1, 1], [4, 5, 2]]])
    assert torch.autograd.gradcheck(lambda f: group_points(f, indices), (features,))
    assert torch.autograd.gradgradcheck(lambda f: group_points(f, indices), (features,))


# --------------------------------------------------------------------------
# Interpolation (spec section 6.3)


@settings(max_examples=20, deadline=None)
@given(n_query=st.integers(1, 10), n_points=st.integers(1, 20), k=st.integers(1, 6),
       seed=st.integers(0, 2**16))
def test_interpolation_weights_are_a_distribution_over_the_k_nearest(n_query, n_points, k, seed):
    k = min(k, n_points)
    points, query = _cloud(2, n_points, seed=seed), _cloud(2, n_query, seed=seed + 1)
    # One-hot features: the output rows are the weights themselves.
    eye = torch.eye(n_points, dtype=torch.float64).expand(2, -1, -1)
    weights = three_nn_interpolate(query, points, eye, k=k)
    assert torch.all(weights >= 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, n_query, dtype=torch.float64))
    _, nearest = knn(query, points, k)
    outside = torch.ones_like(weights, dtype=torch.bool).scatter_(2, nearest, False)
    assert torch.all(weights[outside] == 0)
    # Constant features stay constant.
    constant = torch.full((2, n_points, 3), 2.5, dtype=torch.float64)
    torch.testing.assert_close(three_nn_interpolate(query, points, constant, k=k),
                               torch.full((2, n_query, 3), 2.5, dtype=torch.float64))


def test_interpolating_at_a_data_point_returns_its_feature():
    points = _cloud(2, 15, seed=3)
    features = _cloud(2, 15, seed=4)[..., :2]
    # The other neighbours keep a weight of about eps / d^2 each.
    for eps, atol in ((1e-8, 1e-5), (1e-14, 1e-11)):
        at = three_nn_interpolate(points[:, 4:9], points, features, k=3, eps=eps)
        torch.testing.assert_close(at, features[:, 4:9], atol=atol, rtol=0)


def test_interpolation_equals_reference_and_is_differentiable():
    points, query = _cloud(2, 12, seed=5), _cloud(2, 7, seed=6)
    features = _cloud(2, 12, seed=7).requires_grad_()
    torch.testing.assert_close(three_nn_interpolate(query, points, features, k=4),
                               three_nn_interpolate_reference(query, points, features, k=4))
    assert torch.autograd.gradcheck(lambda f: three_nn_interpolate(query, points, f), (features,))


# --------------------------------------------------------------------------
# Chamfer distance


@settings(max_examples=20, deadline=None)
@given(n_a=st.integers(1, 25), n_b=st.integers(1, 25), seed=st.integers(0, 2**16),
       grid=st.sampled_from([None, 3]))
def test_chamfer_equals_brute_force(n_a, n_b, seed, grid):
    a, b = _cloud(2, n_a, seed=seed, grid=grid), _cloud(2, n_b, seed=seed + 1, grid=grid)
    got = chamfer_distance(a, b)
    for i in range(2):
        d = _sq(a[i].numpy(), b[i].numpy())
        expected = d.min(axis=1).mean() + d.min(axis=0).mean()
        np.testing.assert_allclose(got[i].item(), expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got, chamfer_distance_reference(a, b))
    torch.testing.assert_close(chamfer_distance(b, a), got)


def test_chamfer_is_zero_for_identical_clouds():
    a = _cloud(3, 20, seed=8, dtype=torch.float32)
    assert torch.all(chamfer_distance(a, a) == 0)
    assert torch.all(chamfer_distance(a, a.flip(1)) == 0)


def test_chamfer_gradients():
    a = _cloud(2, 9, seed=9).requires_grad_()
    b = _cloud(2, 6, seed=10).requires_grad_()
    assert torch.autograd.gradcheck(chamfer_distance, (a, b))
    got = torch.autograd.grad(chamfer_distance(a, b).sum(), (a, b))
    expected = torch.autograd.grad(chamfer_distance_reference(a, b).sum(), (a, b))
    for x, y in zip(got, expected):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("budget", [1, 5, 2**24])
def test_chamfer_chunking_changes_nothing(monkeypatch, budget):
    a, b = _cloud(2, 21, seed=11), _cloud(2, 14, seed=12)
    expected = chamfer_distance(a, b)
    monkeypatch.setattr(_point_cloud, "_CHUNK_ELEMENTS", budget)
    assert torch.equal(chamfer_distance(a, b), expected)


# --------------------------------------------------------------------------
# Errors and docs


_P = torch.zeros(2, 64, 3)


@pytest.mark.parametrize("call, match", [
    (lambda: farthest_point_sample(_P, 70),
     "farthest_point_sample: n_samples=70 exceeds the 64 points of each cloud"),
    (lambda: farthest_point_sample(_P, -1), "n_samples must be >= 0"),
    (lambda: farthest_point_sample(_P, 2.0), "n_samples must be an int"),
    (lambda: farthest_point_sample(_P[..., :2], 3), r"points must have shape \(B, N, 3\)"),
    (lambda: farthest_point_sample(_P[:0], 3), "at least one cloud"),
    (lambda: farthest_point_sample(_P.long(), 3), "floating-point"),
    (lambda: farthest_point_sample(_P, 3, 64), r"start_index must lie in \[0, 63\]"),
    (lambda: farthest_point_sample(_P, 3, torch.tensor([0, 64])),
     r"start_index must lie in \[0, 63\]"),
    (lambda: farthest_point_sample(_P, 3, torch.tensor([0])), r"shape \(2,\)"),
    (lambda: knn(_P, _P, 65), "knn: k=65 exceeds the 64 points of each cloud"),
    (lambda: knn(_P, _P, 0), "k must be >= 1"),
    (lambda: knn(_P[:1], _P, 3), "same batch size"),
    (lambda: knn(_P.double(), _P, 3), "same dtype and device"),
    (lambda: group_points(_P, torch.zeros(2, 3, 2)), "indices must be an int64 tensor"),
    (lambda: group_points(_P, torch.full((2, 3, 2), 64)), r"indices must lie in \[0, 63\]"),
    (lambda: group_points(_P, torch.zeros(1, 3, 2, dtype=torch.int64)), "batch size"),
    (lambda: three_nn_interpolate(_P, _P[:, :2], _P[:, :2]), "k=3 exceeds the 2 points"),
    (lambda: three_nn_interpolate(_P, _P, _P[:, :5]), r"features must have shape \(B, S, C\)"),
    (lambda: chamfer_distance(_P, _P[:1]), "chamfer_distance: a and b must have the same batch"),
])
def test_bad_arguments_raise_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_examples_are_doctested():
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    names = set()
    for test in finder.find(_point_cloud, "m", globs={}):
        if test.examples:
            names.add(test.name.rsplit(".", 1)[-1])
            runner.run(test)
    assert runner.failures == 0
    assert {"farthest_point_sample", "knn", "group_points", "three_nn_interpolate",
            "chamfer_distance"} <= names
