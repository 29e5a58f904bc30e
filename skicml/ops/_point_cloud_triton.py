"""Triton kernels of the point-cloud ops (``_point_cloud.py``).

- ``farthest_point_sample_triton``: one program per cloud loops over the
  ``n_samples`` picks. A cloud of at most ``_FPS_MAX_BLOCK`` points stays on
  chip for the whole loop (coordinates and the running minimum distance in
  registers, one launch instead of about three per pick); a larger one is
  walked tile by tile with its running minimum in a global scratch buffer.
- ``knn_triton``: one program per (cloud, block of queries). Pick ``j`` is
  the lexicographically smallest (distance, index) pair above pick ``j-1``,
  found in one pass over the cloud's points that recomputes the distances:
  ``k`` passes and no distance matrix in memory; for small ``k`` (the op
  sends larger ones to the reference).
- ``nearest_triton``: fused distance + min + argmin, one program per (cloud,
  block of points of ``a``), looping over tiles of ``b``.

Squared distances are ``(dx*dx + dy*dy) + dz*dz`` in the accumulation dtype
(float32, float64 for float64 input) with fused multiply-adds turned off
(``enable_fp_fusion=False``), and every minimum or maximum takes the lowest
index among equal values: the indices are the references' exactly.

Imported lazily (only when a CUDA tensor reaches an op, or by the tests under
``TRITON_INTERPRET=1``, which must be set before this module is imported).
"""

import torch
import triton
import triton.language as tl

# Points a cloud may have to stay in registers during FPS (4 values each).
_FPS_MAX_BLOCK = 8192
# The tile of the larger clouds, and of the other kernels' point loops.
_FPS_TILE = 2048
_KNN_BLOCK_Q = 16
_KNN_BLOCK_N = 128
_NEAREST_BLOCK_A = 32
_NEAREST_BLOCK_B = 128


def _tl_dtype(dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


@triton.jit
def _squared(dx, dy, dz):
    return (dx * dx + dy * dy) + dz * dz


@triton.jit
def _load_xyz(base, index, mask):
    """The coordinates of the points ``index`` of a contiguous (N, 3) cloud at ``base``, 0 where masked."""
    x = tl.load(base + index * 3, mask=mask, other=0.0)
    y = tl.load(base + index * 3 + 1, mask=mask, other=0.0)
    z = tl.load(base + index * 3 + 2, mask=mask, other=0.0)
    return x, y, z


@triton.jit
def _load_point(base, index):
    return tl.load(base + index * 3), tl.load(base + index * 3 + 1), tl.load(base + index * 3 + 2)


@triton.jit
def _fps_kernel(p_ptr, start_ptr, out_ptr, scratch_ptr, N, S,
                BLOCK: tl.constexpr, ONE_TILE: tl.constexpr, ACC: tl.constexpr):
    cloud = tl.program_id(0).to(tl.int64)
    base = p_ptr + cloud * N * 3
    out = out_ptr + cloud * S
    current = tl.load(start_ptr + cloud)
    offs = tl.arange(0, BLOCK)
    if ONE_TILE:
        ok = offs < N
        x, y, z = _load_xyz(base, offs, ok)
        # -1 below any distance: padding lanes are never picked.
        nearest = tl.where(ok, float("inf"), -1.0).to(ACC)
        for i in range(S):
            tl.store(out + i, current)
            cx, cy, cz = _load_point(base, current)
            d = _squared(x - cx, y - cy, z - cz)
            nearest = tl.where(ok, tl.minimum(nearest, d), nearest)
            best = tl.max(nearest, axis=0)
            current = tl.min(tl.where(nearest == best, offs, N), axis=0).to(tl.int64)
    else:
        scratch = scratch_ptr + cloud * N
        for i in range(S):
            tl.store(out + i, current)
            cx, cy, cz = _load_point(base, current)
            best = tl.max(tl.full((BLOCK,), -1.0, ACC), axis=0)
            best_index = current * 0
            for start in range(0, N, BLOCK):
                j = start + offs
                ok = j < N
                x, y, z = _load_xyz(base, j, ok)
                d = _squared(x - cx, y - cy, z - cz)
                m = tl.minimum(tl.load(scratch + j, mask=ok, other=0.0), d)
                tl.store(scratch + j, m, mask=ok)
                m = tl.where(ok, m, -1.0)
                tile_best = tl.max(m, axis=0)
                tile_index = tl.min(tl.where(m == tile_best, j, N), axis=0).to(tl.int64)
                # Tiles come in index order: only a strictly larger maximum
                # moves the pick, so ties keep the lowest index.
                better = tile_best > best
                best_index = tl.where(better, tile_index, best_index)
                best = tl.where(better, tile_best, best)
            current = best_index


def farthest_point_sample_triton(points, n_samples, start_index):
    """FPS of (B, N, 3) ``points`` from the (B,) int64 ``start_index``: (B, n_samples) int64."""
    acc = torch.float64 if points.dtype == torch.float64 else torch.float32
    xyz = points.detach().to(acc).contiguous()
    n_clouds, n_points = xyz.shape[:2]
    out = torch.empty((n_clouds, n_samples), dtype=torch.int64, device=xyz.device)
    if n_samples == 0:
        return out
    one_tile = n_points <= _FPS_MAX_BLOCK
    if one_tile:
        block = triton.next_power_of_2(n_points)
        scratch = xyz  # unused
    else:
        block = _FPS_TILE
        scratch = torch.full((n_clouds, n_points), float("inf"), dtype=acc, device=xyz.device)
    warps = 4 if block <= 1024 else (8 if block <= 4096 else 16)
    _fps_kernel[(n_clouds,)](
        xyz, start_index.contiguous(), out, scratch, n_points, n_samples,
        BLOCK=block, ONE_TILE=one_tile, ACC=_tl_dtype(acc), num_warps=warps,
        enable_fp_fusion=False,
    )
    return out


@triton.jit
def _knn_kernel(q_ptr, p_ptr, dist_ptr, index_ptr, Q, N, K,
                BLOCK_Q: tl.constexpr, BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    cloud = tl.program_id(0).to(tl.int64)
    rows = tl.program_id(1) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    row_ok = rows < Q
    q_base = q_ptr + cloud * Q * 3
    qx, qy, qz = _load_xyz(q_base, rows, row_ok)
    p_base = p_ptr + cloud * N * 3
    out = (cloud * Q + rows) * K
    cols = tl.arange(0, BLOCK_N)
    # The previous pick, as a (distance, index) pair; (-1, -1) before the first.
    previous = tl.full((BLOCK_Q,), -1.0, ACC)
    previous_index = tl.full((BLOCK_Q,), -1, tl.int64)
    for pick in range(K):
        best = tl.full((BLOCK_Q,), float("inf"), ACC)
        best_index = tl.full((BLOCK_Q,), -1, tl.int64)
        for start in range(0, N, BLOCK_N):
            j = start + cols
            ok = j < N
            px, py, pz = _load_xyz(p_base, j, ok)
            d = _squared(qx[:, None] - px[None, :], qy[:, None] - py[None, :],
                         qz[:, None] - pz[None, :])
            jj = j.to(tl.int64)[None, :]
            after = (d > previous[:, None]) | ((d == previous[:, None])
                                                & (jj > previous_index[:, None]))
            candidate = tl.where(after & ok[None, :], d, float("inf"))
            tile_best = tl.min(candidate, axis=1)
            tile_index = tl.min(tl.where((candidate == tile_best[:, None]) & after & ok[None, :],
                                         jj, N), axis=1)
            better = tile_best < best
            best_index = tl.where(better, tile_index, best_index)
            best = tl.where(better, tile_best, best)
        tl.store(dist_ptr + out + pick, best, mask=row_ok)
        tl.store(index_ptr + out + pick, best_index, mask=row_ok)
        previous = best
        previous_index = best_index


def knn_triton(query, points, k):
    """The ``k`` nearest ``points`` (B, N, 3) of every ``query`` (B, Q, 3) point."""
    acc = torch.float64 if query.dtype == torch.float64 else torch.float32
    q = query.detach().to(acc).contiguous()
    p = points.detach().to(acc).contiguous()
    n_clouds, n_query = q.shape[:2]
    distances = torch.empty((n_clouds, n_query, k), dtype=acc, device=q.device)
    indices = torch.empty((n_clouds, n_query, k), dtype=torch.int64, device=q.device)
    if n_query and k:
        grid = (n_clouds, triton.cdiv(n_query, _KNN_BLOCK_Q))
        _knn_kernel[grid](q, p, distances, indices, n_query, p.shape[1], k,
                          BLOCK_Q=_KNN_BLOCK_Q, BLOCK_N=_KNN_BLOCK_N, ACC=_tl_dtype(acc),
                          enable_fp_fusion=False)
    return distances, indices


@triton.jit
def _nearest_kernel(a_ptr, b_ptr, dist_ptr, index_ptr, NA, NB,
                    BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr, ACC: tl.constexpr):
    cloud = tl.program_id(0).to(tl.int64)
    rows = tl.program_id(1) * BLOCK_A + tl.arange(0, BLOCK_A)
    row_ok = rows < NA
    a_base = a_ptr + cloud * NA * 3
    ax, ay, az = _load_xyz(a_base, rows, row_ok)
    b_base = b_ptr + cloud * NB * 3
    cols = tl.arange(0, BLOCK_B)
    best = tl.full((BLOCK_A,), float("inf"), ACC)
    best_index = tl.full((BLOCK_A,), 0, tl.int64)
    for start in range(0, NB, BLOCK_B):
        j = start + cols
        ok = j < NB
        bx, by, bz = _load_xyz(b_base, j, ok)
        d = _squared(ax[:, None] - bx[None, :], ay[:, None] - by[None, :],
                     az[:, None] - bz[None, :])
        d = tl.where(ok[None, :], d, float("inf"))
        tile_best = tl.min(d, axis=1)
        tile_index = tl.min(tl.where(d == tile_best[:, None], j.to(tl.int64)[None, :], NB),
                            axis=1)
        better = tile_best < best
        best_index = tl.where(better, tile_index, best_index)
        best = tl.where(better, tile_best, best)
    out = cloud * NA + rows
    tl.store(dist_ptr + out, best, mask=row_ok)
    tl.store(index_ptr + out, best_index, mask=row_ok)


def nearest_triton(a, b):
    """For each point of ``a`` (B, N, 3): min squared distance to ``b`` (B, M, 3), argmin."""
    acc = torch.float64 if a.dtype == torch.float64 else torch.float32
    pa = a.detach().to(acc).contiguous()
    pb = b.detach().to(acc).contiguous()
    n_clouds, n_a = pa.shape[:2]
    distances = torch.empty((n_clouds, n_a), dtype=acc, device=pa.device)
    indices = torch.empty((n_clouds, n_a), dtype=torch.int64, device=pa.device)
    if n_a:
        grid = (n_clouds, triton.cdiv(n_a, _NEAREST_BLOCK_A))
        _nearest_kernel[grid](pa, pb, distances, indices, n_a, pb.shape[1],
                              BLOCK_A=_NEAREST_BLOCK_A, BLOCK_B=_NEAREST_BLOCK_B,
                              ACC=_tl_dtype(acc), enable_fp_fusion=False)
    return distances, indices
