"""Point-cloud ops: farthest point sampling, k nearest neighbours, gathers,
inverse-distance interpolation and the Chamfer distance.

Used by one family: ``pointcloud`` (GAPrompt's input checks and Point-MAE
backbone).

The building blocks of Point-MAE-style backbones (GAPrompt spec section 8).
Point tensors are batch first, ``(B, N, 3)``, float32 or float64 (half
precision is computed in float32); index outputs are int64. Every op works per
cloud: nothing reads another row of the batch.

Exactness. Squared distances are always computed as
``(dx*dx + dy*dy) + dz*dz`` in the accumulation dtype (float32 at least,
float64 for float64 input), in this order, by the references and the kernels
alike, and ties go to the lowest index. So FPS and kNN indices are exact and
reproducible: the C kernels of FPS and kNN and the Triton kernels give the
references' indices (and kNN distances) bit for bit.

Memory. The kNN and nearest-neighbour references work on chunks of query
points of at most ``_CHUNK_ELEMENTS`` distance entries, never the whole
``(B, Q, N)`` matrix at once.

Implementations:

- ``skicml::farthest_point_sample``: a C loop (``_fps_kernel.c``, compiled on
  first use) on CPU, a Triton kernel on CUDA (one program per cloud);
- ``skicml::knn``: a C loop (``_knn_kernel.c``, compiled on first use; the
  chunked torch reference for ``k`` above ``_C_MAX_K``) on CPU, a fused
  distance + top-k Triton kernel on CUDA for small ``k``;
- ``skicml::group_points``: a gather per sample, its backward a scatter-add;
- ``skicml::chamfer_nearest``: for every point of ``a`` the squared distance
  to its nearest point of ``b`` and that point's index (the kNN C loop with
  ``k = 1`` on CPU), differentiable through the pairs; :func:`chamfer_distance` is the mean of both directions;
- :func:`three_nn_interpolate`: plain composition of ``knn`` and
  ``group_points``.
"""

from __future__ import annotations

import ctypes
import itertools
import numbers
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from ._dispatch import (
    C_FLAGS,
    gpu_kernels_enabled,
    load_c_kernel,
    load_gpu_kernel,
    reset_c_kernel,
)

__all__ = [
    "chamfer_distance",
    "chamfer_distance_reference",
    "farthest_point_sample",
    "farthest_point_sample_reference",
    "group_points",
    "group_points_reference",
    "knn",
    "knn_reference",
    "three_nn_interpolate",
    "three_nn_interpolate_reference",
]

# Distance entries of one chunk of query rows: 2**24 is 64 MiB in float32.
# Read at call time, so tests can shrink it.
_CHUNK_ELEMENTS = 2**24
# The kNN Triton kernel makes one pass over the points per neighbour: larger
# k go to the reference (topk), which is then cheaper.
_TRITON_MAX_K = 64
_TRITON = "skicml.ops._point_cloud_triton"

_FPS_SOURCE = Path(__file__).with_name("_fps_kernel.c")
_FPS_LIBRARY = "fps_kernel"
# No fused multiply-add: the C loop must round like the reference's torch ops.
# Finite math and no signed zeros let its max reduction vectorise (see the
# comment at the top of _fps_kernel.c for why they change no result).
_FPS_CFLAGS = ("-O3", *C_FLAGS[1:], "-ffp-contract=off", "-ffinite-math-only",
               "-fno-signed-zeros")

_KNN_SOURCE = Path(__file__).with_name("_knn_kernel.c")
_KNN_LIBRARY = "knn_kernel"
_KNN_CFLAGS = ("-O3", *C_FLAGS[1:], "-ffp-contract=off")
# The C kernel keeps the k nearest by insertion, O(k) per entering candidate:
# beyond this k the reference's topk is cheaper.
_C_MAX_K = 128
# Below this many distance entries a call stays on one thread: starting the
# pool would cost more than it saves.
_C_PARALLEL_WORK = 2**18


def _accumulation_dtype(dtype):
    # Half precision is computed in float32, float64 stays float64.
    return torch.promote_types(dtype, torch.float32)


# --------------------------------------------------------------------------
# Argument checks


def _check_points(name, arg, points):
    if not isinstance(points, torch.Tensor):
        raise ValueError(f"{name}: {arg} must be a torch.Tensor, got {type(points).__name__}.")
    if points.dim() != 3 or points.shape[2] != 3:
        raise ValueError(
            f"{name}: {arg} must have shape (B, N, 3), got {tuple(points.shape)}."
        )
    if not points.is_floating_point():
        raise ValueError(f"{name}: {arg} must be a floating-point tensor, got {points.dtype}.")
    if points.shape[0] < 1 or points.shape[1] < 1:
        raise ValueError(
            f"{name}: {arg} needs at least one cloud and one point per cloud, got shape "
            f"{tuple(points.shape)}."
        )


def _check_pair(name, query, points, query_arg="query", points_arg="points"):
    _check_points(name, query_arg, query)
    _check_points(name, points_arg, points)
    if query.shape[0] != points.shape[0]:
        raise ValueError(
            f"{name}: {query_arg} and {points_arg} must have the same batch size, got "
            f"{query.shape[0]} and {points.shape[0]}."
        )
    if query.dtype != points.dtype or query.device != points.device:
        raise ValueError(
            f"{name}: {query_arg} and {points_arg} must have the same dtype and device, got "
            f"{query.dtype} on {query.device} and {points.dtype} on {points.device}."
        )


def _check_count(name, arg, value, n_points, what, minimum=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: {arg} must be an int, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name}: {arg} must be >= {minimum}, got {value}.")
    if value > n_points:
        raise ValueError(
            f"{name}: {arg}={value} exceeds the {n_points} {what} of each cloud."
        )


def _start_tensor(points, start_index):
    """``start_index`` (an int or a (B,) int64 tensor) as a (B,) int64 tensor; checked."""
    name = "farthest_point_sample"
    n_clouds, n_points = points.shape[:2]
    if isinstance(start_index, torch.Tensor):
        if start_index.dtype != torch.int64 or start_index.shape != (n_clouds,):
            raise ValueError(
                f"{name}: start_index must be an int or an int64 tensor of shape ({n_clouds},), "
                f"got a {start_index.dtype} tensor of shape {tuple(start_index.shape)}."
            )
        start = start_index.to(points.device)
        if not torch.compiler.is_compiling():
            lowest, highest = (int(v) for v in torch.aminmax(start))
            if lowest < 0 or highest >= n_points:
                raise ValueError(
                    f"{name}: start_index must lie in [0, {n_points - 1}], got values from "
                    f"{lowest} to {highest}."
                )
        return start
    if isinstance(start_index, bool) or not isinstance(start_index, numbers.Integral):
        raise ValueError(
            f"{name}: start_index must be an int or an int64 tensor, got {start_index!r}."
        )
    if not 0 <= start_index < n_points:
        raise ValueError(f"{name}: start_index must lie in [0, {n_points - 1}], got {start_index}.")
    return torch.full((n_clouds,), int(start_index), dtype=torch.int64, device=points.device)


def _check_indices(name, features, indices):
    if not isinstance(features, torch.Tensor) or features.dim() != 3:
        shape = tuple(features.shape) if isinstance(features, torch.Tensor) else type(features)
        raise ValueError(f"{name}: features must have shape (B, N, C), got {shape}.")
    if not isinstance(indices, torch.Tensor) or indices.dim() != 3 or indices.dtype != torch.int64:
        got = (f"a {indices.dtype} tensor of shape {tuple(indices.shape)}"
               if isinstance(indices, torch.Tensor) else type(indices).__name__)
        raise ValueError(f"{name}: indices must be an int64 tensor of shape (B, Q, k), got {got}.")
    if indices.shape[0] != features.shape[0]:
        raise ValueError(
            f"{name}: indices must have the batch size of features, {features.shape[0]}, got "
            f"{indices.shape[0]}."
        )
    if indices.device != features.device:
        raise ValueError(
            f"{name}: indices must be on the device of features, {features.device}, got "
            f"{indices.device}."
        )


def _check_index_values(name, indices, n_points):
    # Reads the indices (a sync on a GPU): skipped while tracing.
    if torch.compiler.is_compiling() or indices.numel() == 0:
        return
    lowest, highest = (int(v) for v in torch.aminmax(indices))
    if lowest < 0 or highest >= n_points:
        raise ValueError(
            f"{name}: indices must lie in [0, {n_points - 1}], got values from {lowest} to "
            f"{highest}."
        )


# --------------------------------------------------------------------------
# Squared distances and exact k smallest


def _squared_distances(query, points):
    """``(dx*dx + dy*dy) + dz*dz`` between (B, Q, 3) and (B, N, 3): (B, Q, N)."""
    d = query[:, :, None, 0] - points[:, None, :, 0]
    out = d * d
    d = torch.sub(query[:, :, None, 1], points[:, None, :, 1], out=d)
    out += d * d
    d = torch.sub(query[:, :, None, 2], points[:, None, :, 2], out=d)
    out += d * d
    return out


def _rows_per_chunk(n_points):
    return max(1, int(_CHUNK_ELEMENTS) // max(1, n_points))


def _smallest_k(dist, k):
    """The k smallest of each row of ``dist`` (R, N), ascending, ties to the lowest index."""
    n = dist.shape[-1]
    if k == 0:
        empty = dist.new_empty(dist.shape[:-1] + (0,))
        return empty, empty.long()
    values, index = torch.topk(dist, min(k + 1, n), dim=-1, largest=False, sorted=True)
    # A row whose k-th value equals its (k+1)-th may have picked a higher
    # index than an unpicked equal one; it is redone exactly below.
    tied = (values[..., k] == values[..., k - 1]).nonzero().flatten() if k < n else None
    # topk's order among equal values is unspecified: sort the picks by index,
    # then stably by value, so equal distances come lowest index first.
    index, order = torch.sort(index[..., :k], dim=-1)
    values = torch.gather(values[..., :k], -1, order)
    values, order = torch.sort(values, dim=-1, stable=True)
    index = torch.gather(index, -1, order)
    if tied is not None and tied.numel():
        rows = dist[tied]
        threshold = values[tied, k - 1 : k]
        below = rows < threshold
        need = k - below.sum(dim=-1, keepdim=True)
        equal = rows == threshold
        keep = below | (equal & (torch.cumsum(equal, dim=-1) <= need))
        picked = keep.nonzero()[:, 1].view(-1, k)
        picked_values, order = torch.sort(torch.gather(rows, -1, picked), dim=-1, stable=True)
        values[tied] = picked_values
        index[tied] = torch.gather(picked, -1, order)
    return values, index


# --------------------------------------------------------------------------
# References


def farthest_point_sample_reference(points, n_samples, start_index=0):
    """Greedy farthest point sampling in plain torch, vectorised over the batch.

    The ground truth of :func:`farthest_point_sample` (same arguments, same
    indices): ``n_samples`` steps, each updating the running minimum squared
    distance to the picked set and taking its argmax (lowest index on ties).
    """
    name = "farthest_point_sample"
    _check_points(name, "points", points)
    n_clouds, n_points = points.shape[:2]
    _check_count(name, "n_samples", n_samples, n_points, "points", minimum=0)
    start = _start_tensor(points, start_index)
    acc = _accumulation_dtype(points.dtype)
    xyz = points.detach().to(acc)
    x, y, z = xyz.unbind(-1)
    picked = torch.empty((n_clouds, n_samples), dtype=torch.int64, device=points.device)
    nearest = torch.full((n_clouds, n_points), float("inf"), dtype=acc, device=points.device)
    rows = torch.arange(n_clouds, device=points.device)
    current = start
    for i in range(n_samples):
        picked[:, i] = current
        center = xyz[rows, current]
        dx = x - center[:, 0:1]
        dy = y - center[:, 1:2]
        dz = z - center[:, 2:3]
        dist = (dx * dx + dy * dy) + dz * dz
        torch.minimum(nearest, dist, out=nearest)
        # argmax returns the first maximum: the lowest index on ties.
        current = nearest.argmax(dim=1)
    return picked


def knn_reference(query, points, k):
    """The k nearest ``points`` of every ``query`` point in plain torch, chunked over queries.

    Same arguments and results as :func:`knn`.
    """
    name = "knn"
    _check_pair(name, query, points)
    _check_count(name, "k", k, points.shape[1], "points")
    acc = _accumulation_dtype(query.dtype)
    q, p = query.detach().to(acc), points.detach().to(acc)
    n_clouds, n_query = q.shape[:2]
    distances = q.new_empty((n_clouds, n_query, k))
    indices = torch.empty((n_clouds, n_query, k), dtype=torch.int64, device=q.device)
    step = max(1, _rows_per_chunk(p.shape[1]) // n_clouds)
    for a in range(0, n_query, step):
        b = min(a + step, n_query)
        dist = _squared_distances(q[:, a:b], p)
        values, index = _smallest_k(dist.reshape(-1, p.shape[1]), k)
        distances[:, a:b] = values.view(n_clouds, b - a, k)
        indices[:, a:b] = index.view(n_clouds, b - a, k)
    return distances, indices


def group_points_reference(features, indices):
    """``features[b, indices[b]]`` for every sample ``b``: (B, Q, k, C). Differentiable."""
    name = "group_points"
    _check_indices(name, features, indices)
    n_clouds, n_query, k = indices.shape
    flat = indices.reshape(n_clouds, n_query * k, 1).expand(-1, -1, features.shape[2])
    return torch.gather(features, 1, flat).view(n_clouds, n_query, k, features.shape[2])


def _nearest_reference(a, b):
    """For each point of ``a`` its min squared distance to ``b`` and the argmin (lowest index)."""
    acc = _accumulation_dtype(a.dtype)
    qa, pb = a.detach().to(acc), b.detach().to(acc)
    n_clouds, n_a = qa.shape[:2]
    dist_out = qa.new_empty((n_clouds, n_a))
    index_out = torch.empty((n_clouds, n_a), dtype=torch.int64, device=qa.device)
    step = max(1, _rows_per_chunk(pb.shape[1]) // n_clouds)
    for s in range(0, n_a, step):
        e = min(s + step, n_a)
        # min returns the first minimum: the lowest index on ties.
        values, index = _squared_distances(qa[:, s:e], pb).min(dim=-1)
        dist_out[:, s:e] = values
        index_out[:, s:e] = index
    return dist_out, index_out


def chamfer_distance_reference(a, b):
    """Chamfer-L2 distance in plain torch: ``mean_i min_j |a_i - b_j|^2 + mean_j min_i |...|^2``.

    Differentiable by autograd (through the nearest pairs, found without
    gradients and re-gathered). Same arguments and results as
    :func:`chamfer_distance`.
    """
    _check_pair("chamfer_distance", a, b, "a", "b")
    acc = _accumulation_dtype(a.dtype)
    a_acc, b_acc = a.to(acc), b.to(acc)
    total = 0
    for x, y in ((a_acc, b_acc), (b_acc, a_acc)):
        _, index = _nearest_reference(x, y)
        nearest = torch.gather(y, 1, index[..., None].expand(-1, -1, 3))
        diff = x - nearest
        total = total + ((diff[..., 0] ** 2 + diff[..., 1] ** 2) + diff[..., 2] ** 2).mean(dim=1)
    return total.to(a.dtype)


def three_nn_interpolate_reference(query, points, features, k=3, eps=1e-8):
    """Inverse-distance interpolation with the references; arguments as :func:`three_nn_interpolate`."""
    return _interpolate(query, points, features, k, eps, knn_reference, group_points_reference)


def _interpolate(query, points, features, k, eps, knn_fn, group_fn):
    name = "three_nn_interpolate"
    _check_pair(name, query, points)
    if not isinstance(features, torch.Tensor) or features.dim() != 3 or (
        features.shape[:2] != points.shape[:2]
    ):
        shape = tuple(features.shape) if isinstance(features, torch.Tensor) else type(features)
        raise ValueError(
            f"{name}: features must have shape (B, S, C) = ({points.shape[0]}, {points.shape[1]}, "
            f"C) to match points, got {shape}."
        )
    _check_count(name, "k", k, points.shape[1], "points")
    distances, index = knn_fn(query, points, k)
    weights = 1.0 / (distances + eps)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    gathered = group_fn(features, index)
    return (gathered * weights.to(gathered.dtype)[..., None]).sum(dim=2)


# --------------------------------------------------------------------------
# FPS: the C kernel (CPU) and the op


def _bind_fps(library):
    kernels = {}
    for dtype, name, ctype in ((torch.float32, "fps_float32", ctypes.c_float),
                               (torch.float64, "fps_float64", ctypes.c_double)):
        fn = getattr(library, name)
        fn.restype = ctypes.c_int64
        fn.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 3
        kernels[dtype] = fn
    return kernels


def _load_fps_kernel():
    """The C kernels by dtype, or None (warned once) when they cannot be built."""
    return load_c_kernel(_FPS_LIBRARY, _FPS_SOURCE, _bind_fps,
                         op="skicml::farthest_point_sample",
                         fallback="its plain-torch reference", flags=_FPS_CFLAGS)


def _reset_fps_kernel():
    """Forget the loaded kernel (and the fallback decision); for tests."""
    reset_c_kernel(_FPS_LIBRARY)


def _run_fps_kernel(kernels, points, n_samples, start):
    acc = _accumulation_dtype(points.dtype)
    xyz = points.detach().to(acc).contiguous()
    start = start.contiguous()
    n_clouds, n_points = xyz.shape[:2]
    out = torch.empty((n_clouds, n_samples), dtype=torch.int64)
    kernel = kernels[acc]
    per_cloud = n_points * 3 * xyz.element_size()

    def run(first, stop):
        status = kernel(stop - first, n_points, n_samples,
                        xyz.data_ptr() + first * per_cloud,
                        start.data_ptr() + first * 8, out.data_ptr() + first * n_samples * 8)
        if status < 0:
            raise MemoryError("farthest_point_sample: the C kernel could not allocate its work "
                              f"space ({4 * per_cloud // 3} bytes).")

    _split_across_threads(run, n_clouds, parallel=n_points * n_samples >= 2**16)
    return out


def _split_across_threads(run, n_items, parallel):
    """``run(first, stop)`` over ``[0, n_items)``, in equal slices on torch's intra-op threads.

    ctypes releases the GIL, so the slices of a C kernel run concurrently.
    One call on this thread when ``parallel`` is false or one thread is set.
    """
    n_threads = min(torch.get_num_threads(), n_items)
    if n_threads <= 1 or not parallel:
        run(0, n_items)
        return
    bounds = [n_items * t // n_threads for t in range(n_threads + 1)]
    with ThreadPoolExecutor(n_threads) as pool:
        for future in [pool.submit(run, a, b) for a, b in itertools.pairwise(bounds)]:
            future.result()


# --------------------------------------------------------------------------
# kNN and nearest neighbour: the C kernel (CPU)


def _bind_knn(library):
    kernels = {}
    for dtype, name in ((torch.float32, "knn_float32"), (torch.float64, "knn_float64")):
        fn = getattr(library, name)
        fn.restype = ctypes.c_int64
        fn.argtypes = [ctypes.c_int64] * 5 + [ctypes.c_void_p] * 4
        kernels[dtype] = fn
    return kernels


def _load_knn_kernel():
    """The C kernels by dtype, or None (warned once) when they cannot be built."""
    return load_c_kernel(_KNN_LIBRARY, _KNN_SOURCE, _bind_knn, op="skicml::knn",
                         fallback="its plain-torch reference", flags=_KNN_CFLAGS)


def _reset_knn_kernel():
    """Forget the loaded kernel (and the fallback decision); for tests."""
    reset_c_kernel(_KNN_LIBRARY)


def _c_knn_kernels(query, k):
    """The C kernels when they should run ``knn`` on ``query``'s device for this ``k``, else None."""
    if query.device.type != "cpu" or k > _C_MAX_K or not gpu_kernels_enabled():
        return None
    return _load_knn_kernel()


def _run_knn_kernel(kernels, query, points, k):
    """``knn`` by the C kernel (any 1 <= k <= N): the reference's results bit for bit."""
    acc = _accumulation_dtype(query.dtype)
    q = query.detach().to(acc).contiguous()
    p = points.detach().to(acc).contiguous()
    n_clouds, n_query = q.shape[:2]
    n_points = p.shape[1]
    distances = torch.empty((n_clouds, n_query, k), dtype=acc)
    indices = torch.empty((n_clouds, n_query, k), dtype=torch.int64)
    kernel = kernels[acc]

    def run(first, stop):
        # Rows are (cloud, query point) pairs: a slice may start inside a cloud.
        status = kernel(n_query, n_points, k, first, stop, q.data_ptr(), p.data_ptr(),
                        distances.data_ptr(), indices.data_ptr())
        if status < 0:
            raise MemoryError("knn: the C kernel could not allocate its work space "
                              f"({4 * n_points * p.element_size()} bytes).")

    n_rows = n_clouds * n_query
    _split_across_threads(run, n_rows, parallel=n_rows * n_points >= _C_PARALLEL_WORK)
    return distances, indices


@torch.library.custom_op("skicml::farthest_point_sample", mutates_args=())
def _fps_op(points: torch.Tensor, n_samples: int, start_index: torch.Tensor) -> torch.Tensor:
    # The CPU kernel; the checks are in farthest_point_sample.
    kernels = _load_fps_kernel() if gpu_kernels_enabled() else None
    if kernels is None:
        return farthest_point_sample_reference(points, n_samples, start_index)
    return _run_fps_kernel(kernels, points, n_samples, start_index)


@_fps_op.register_fake
def _(points, n_samples, start_index):
    return points.new_empty((points.shape[0], n_samples), dtype=torch.int64)


@torch.library.register_kernel("skicml::farthest_point_sample", "cuda")
def _(points, n_samples, start_index):
    kernel = load_gpu_kernel(_TRITON, "farthest_point_sample_triton")
    if kernel is None:
        return farthest_point_sample_reference(points, n_samples, start_index)
    return kernel(points, n_samples, start_index)


# --------------------------------------------------------------------------
# kNN, gathers and nearest neighbours: the ops


@torch.library.custom_op("skicml::knn", mutates_args=())
def _knn_op(query: torch.Tensor, points: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    # The CPU kernel; the checks are in knn.
    kernels = _c_knn_kernels(query, k)
    if kernels is None:
        return knn_reference(query, points, k)
    return _run_knn_kernel(kernels, query, points, k)


@_knn_op.register_fake
def _(query, points, k):
    shape = (query.shape[0], query.shape[1], k)
    return (query.new_empty(shape, dtype=_accumulation_dtype(query.dtype)),
            query.new_empty(shape, dtype=torch.int64))


@torch.library.register_kernel("skicml::knn", "cuda")
def _(query, points, k):
    kernel = load_gpu_kernel(_TRITON, "knn_triton")
    if kernel is None or k > _TRITON_MAX_K:
        return knn_reference(query, points, k)
    return kernel(query, points, k)


@torch.library.custom_op("skicml::group_points", mutates_args=())
def _group_op(features: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    # One gather per sample (torch.gather along the point axis): a sample
    # never reads another's rows, on any device.
    return group_points_reference(features, indices)


@_group_op.register_fake
def _(features, indices):
    return features.new_empty((*indices.shape, features.shape[2]))


def _group_setup_context(ctx, inputs, output):
    features, indices = inputs
    ctx.save_for_backward(indices)
    ctx.n_points = features.shape[1]


def _group_backward(ctx, grad_output):
    (indices,) = ctx.saved_tensors
    n_clouds, n_query, k = indices.shape
    channels = grad_output.shape[3]
    flat = indices.reshape(n_clouds, n_query * k, 1).expand(-1, -1, channels)
    grad = grad_output.new_zeros((n_clouds, ctx.n_points, channels))
    grad = grad.scatter_add(1, flat, grad_output.reshape(n_clouds, n_query * k, channels))
    return grad, None


_group_op.register_autograd(_group_backward, setup_context=_group_setup_context)


@torch.library.custom_op("skicml::chamfer_nearest", mutates_args=())
def _nearest_op(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # The CPU kernel: the nearest neighbour is knn's k = 1 (the first minimum).
    kernels = _c_knn_kernels(a, 1)
    if kernels is None:
        return _nearest_reference(a, b)
    distances, indices = _run_knn_kernel(kernels, a, b, 1)
    return distances.squeeze(-1), indices.squeeze(-1)


@_nearest_op.register_fake
def _(a, b):
    shape = a.shape[:2]
    return (a.new_empty(shape, dtype=_accumulation_dtype(a.dtype)),
            a.new_empty(shape, dtype=torch.int64))


@torch.library.register_kernel("skicml::chamfer_nearest", "cuda")
def _(a, b):
    kernel = load_gpu_kernel(_TRITON, "nearest_triton")
    if kernel is None:
        return _nearest_reference(a, b)
    return kernel(a, b)


def _nearest_setup_context(ctx, inputs, output):
    a, b = inputs
    _, index = output
    ctx.save_for_backward(a, b, index)


def _nearest_backward(ctx, grad_distance, grad_index):
    # d_i = |a_i - b_{n(i)}|^2: the gradient flows through the nearest pairs.
    a, b, index = ctx.saved_tensors
    acc = _accumulation_dtype(a.dtype)
    gathered = torch.gather(b.to(acc), 1, index[..., None].expand(-1, -1, 3))
    grad_a = 2.0 * grad_distance.to(acc)[..., None] * (a.to(acc) - gathered)
    grad_b = torch.zeros(b.shape, dtype=acc, device=b.device).scatter_add(
        1, index[..., None].expand(-1, -1, 3), -grad_a)
    return grad_a.to(a.dtype), grad_b.to(b.dtype)


_nearest_op.register_autograd(_nearest_backward, setup_context=_nearest_setup_context)


# --------------------------------------------------------------------------
# Public entry points


def farthest_point_sample(points, n_samples, start_index=0):
    """Indices of ``n_samples`` points of each cloud picked by greedy farthest point sampling.

    The first pick is ``start_index``; each next pick is the point whose
    minimum squared Euclidean distance to the points already picked is the
    largest, ties going to the lowest index. The result is exact and
    reproducible (it does not depend on the device or the kernel).

    Once every distinct point of a cloud has been picked, all remaining
    distances are 0 and the next picks are the lowest indices, so a cloud
    with fewer than ``n_samples`` distinct points (duplicates) gets repeated
    indices.

    Parameters
    ----------
    points : torch.Tensor of shape (B, N, 3)
        Float coordinates; B >= 1, N >= 1.
    n_samples : int
        Points to pick per cloud, at most N.
    start_index : int or torch.Tensor of shape (B,), int64, default=0
        The first pick, one for all clouds or one per cloud.

    Returns
    -------
    torch.Tensor of shape (B, n_samples), int64

    Raises
    ------
    ValueError
        On a wrong shape or dtype, ``n_samples > N`` or a start outside the cloud.

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import farthest_point_sample
    >>> points = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [3, 0, 0], [2, 0, 0]]])
    >>> farthest_point_sample(points, 3)
    tensor([[0, 2, 1]])
    """
    name = "farthest_point_sample"
    _check_points(name, "points", points)
    _check_count(name, "n_samples", n_samples, points.shape[1], "points", minimum=0)
    return _fps_op(points, int(n_samples), _start_tensor(points, start_index))


def knn(query, points, k):
    """The ``k`` nearest ``points`` of every ``query`` point, per cloud.

    Parameters
    ----------
    query : torch.Tensor of shape (B, Q, 3)
    points : torch.Tensor of shape (B, N, 3)
        Same batch size, dtype and device as ``query``.
    k : int
        Neighbours per query point, 1 <= k <= N.

    Returns
    -------
    distances : torch.Tensor of shape (B, Q, k)
        Squared Euclidean distances, ascending; float32, or float64 for
        float64 input. Detached: recompute them from the gathered points
        where gradients are needed.
    indices : torch.Tensor of shape (B, Q, k), int64
        Indices into ``points``; equal distances come lowest index first.

    Raises
    ------
    ValueError
        On wrong shapes or dtypes, or ``k > N``.

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import knn
    >>> points = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [3, 0, 0]]])
    >>> distances, indices = knn(points[:, :1], points, 2)
    >>> indices, distances
    (tensor([[[0, 1]]]), tensor([[[0., 1.]]]))
    """
    _check_pair("knn", query, points)
    _check_count("knn", "k", k, points.shape[1], "points")
    return _knn_op(query.detach(), points.detach(), int(k))


def group_points(features, indices):
    """Gather rows of ``features`` per sample: ``out[b, q, j] = features[b, indices[b, q, j]]``.

    A gather never reads another sample of the batch. Differentiable with
    respect to ``features`` (the backward is a scatter-add).

    Parameters
    ----------
    features : torch.Tensor of shape (B, N, C)
    indices : torch.Tensor of shape (B, Q, k), int64
        Values in ``[0, N)``.

    Returns
    -------
    torch.Tensor of shape (B, Q, k, C)

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import group_points
    >>> features = torch.arange(6.0).view(1, 3, 2)
    >>> group_points(features, torch.tensor([[[2, 0]]]))
    tensor([[[[4., 5.],
              [0., 1.]]]])
    """
    _check_indices("group_points", features, indices)
    _check_index_values("group_points", indices, features.shape[1])
    return _group_op(features, indices)


def three_nn_interpolate(query, points, features, k=3, eps=1e-8):
    """Inverse-distance interpolation of ``features`` from ``points`` at ``query`` points.

    For each query point the ``k`` nearest points ``j`` get the weights
    ``w_j = 1 / (d_j^2 + eps)`` normalised to sum 1 (``d_j^2`` the squared
    distance), and the output is ``sum_j w_j features[j]`` (PointNet++'s
    feature propagation, with a top-k instead of a full sort).
    Differentiable with respect to ``features``; the weights are constants.

    Parameters
    ----------
    query : torch.Tensor of shape (B, Q, 3)
    points : torch.Tensor of shape (B, S, 3)
    features : torch.Tensor of shape (B, S, C)
    k : int, default=3
        Neighbours used, 1 <= k <= S.
    eps : float, default=1e-8

    Returns
    -------
    torch.Tensor of shape (B, Q, C)

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import three_nn_interpolate
    >>> points = torch.tensor([[[0.0, 0, 0], [2, 0, 0]]])
    >>> features = torch.tensor([[[0.0], [1.0]]])
    >>> three_nn_interpolate(torch.tensor([[[1.0, 0, 0]]]), points, features, k=2)
    tensor([[[0.5000]]])
    """
    return _interpolate(query, points, features, k, eps, knn, group_points)


def chamfer_distance(a, b):
    """Chamfer-L2 distance of each pair of clouds (Point-MAE's ``ChamferDistanceL2``).

    ``mean_i min_j |a_i - b_j|^2 + mean_j min_i |b_j - a_i|^2``.
    Differentiable with respect to ``a`` and ``b`` (through the nearest pairs).

    Parameters
    ----------
    a : torch.Tensor of shape (B, N, 3)
    b : torch.Tensor of shape (B, M, 3)
        Same batch size, dtype and device as ``a``.

    Returns
    -------
    torch.Tensor of shape (B,)

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import chamfer_distance
    >>> a = torch.tensor([[[0.0, 0, 0], [1, 0, 0]]])
    >>> chamfer_distance(a, a + torch.tensor([0.0, 0, 0.5]))
    tensor([0.5000])
    """
    _check_pair("chamfer_distance", a, b, "a", "b")
    forward, _ = _nearest_op(a, b)
    backward, _ = _nearest_op(b, a)
    return (forward.mean(dim=1) + backward.mean(dim=1)).to(a.dtype)
