"""Triton kernels of ``skicml::rbf_context_matmul`` and ``skicml::rbf_context_row_sums``.

Flash-attention-like: one program owns a block of rows (and, for the matmul,
a block of the output's columns) and walks through the anchors one block at
a time. Per anchor block and mask it builds the kernel tile in registers,

- ``cross = (x * mask) a^T`` with ``tl.dot`` (exact float32, looping over
  the features in blocks),
- ``d2 = max(|x|_mask^2 + |a|_mask^2 - 2 cross, 0)`` from squared norms the
  launcher computed once per mask,
- ``exp(-gamma d2)`` times the mask's row and column scales,

sums the masks' tiles and multiplies the sum by the anchor block of ``v``
(the matmul) or sums its rows (the row sums, one program per row block and
mask). The n x m kernel never reaches memory.

``tl.dot`` needs every dimension to be at least 16, so the blocks of rows,
anchors, features and output columns are powers of two >= 16, padded with
masked loads; padded anchors get a kernel value of 0. Rows and anchors are
shifted by the anchors' mean first (distances do not change; the expansion
cancels less). Accumulation is in float32; the op sends float64 tensors to
its reference instead.

Imported lazily (only when a CUDA tensor reaches the op, or by the tests under
``TRITON_INTERPRET=1``, which must be set before this module is imported).
"""

import torch
import triton
import triton.language as tl

from ._rbf_context import _check_args


@triton.jit
def _kernel_tile(
    x_ptr, a_ptr, mask_ptr, x_norm_ptr, a_norm_ptr, j, rows, cols, row_ok, col_ok,
    n, m, p, neg_gamma,
    BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_P: tl.constexpr,
):
    """exp(-gamma d2) of mask j on a (BLOCK_I, BLOCK_K) tile; 0 off the data."""
    cross = tl.zeros((BLOCK_I, BLOCK_K), dtype=tl.float32)
    for start in range(0, p, BLOCK_P):
        feats = start + tl.arange(0, BLOCK_P)
        feat_ok = feats < p
        keep = tl.load(mask_ptr + j * p + feats, mask=feat_ok, other=0.0)
        xb = tl.load(x_ptr + rows[:, None] * p + feats[None, :],
                     mask=row_ok[:, None] & feat_ok[None, :], other=0.0)
        ab = tl.load(a_ptr + cols[:, None] * p + feats[None, :],
                     mask=col_ok[:, None] & feat_ok[None, :], other=0.0)
        cross += tl.dot(xb * keep[None, :], tl.trans(ab), input_precision="ieee")
    x_norm = tl.load(x_norm_ptr + j * n + rows, mask=row_ok, other=0.0)
    a_norm = tl.load(a_norm_ptr + j * m + cols, mask=col_ok, other=0.0)
    # Rounding can push a point's distance to itself below 0.
    d2 = tl.maximum(x_norm[:, None] + a_norm[None, :] - 2.0 * cross, 0.0)
    return tl.where(row_ok[:, None] & col_ok[None, :], tl.exp(neg_gamma * d2), 0.0)


@triton.jit
def _matmul_kernel(
    x_ptr, a_ptr, v_ptr, mask_ptr, x_norm_ptr, a_norm_ptr, row_scale_ptr, col_scale_ptr, out_ptr,
    n, m, p, d, n_masks, neg_gamma,
    HAS_ROW_SCALE: tl.constexpr, HAS_COL_SCALE: tl.constexpr,
    BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # int64 row offsets: n * p or n * d can pass 2**31.
    rows = (tl.program_id(0) * BLOCK_I + tl.arange(0, BLOCK_I)).to(tl.int64)
    outs = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    row_ok = rows < n
    out_ok = outs < d
    acc = tl.zeros((BLOCK_I, BLOCK_D), dtype=tl.float32)
    for start in range(0, m, BLOCK_K):
        cols = (start + tl.arange(0, BLOCK_K)).to(tl.int64)
        col_ok = cols < m
        combined = tl.zeros((BLOCK_I, BLOCK_K), dtype=tl.float32)
        for j in range(0, n_masks):
            tile = _kernel_tile(x_ptr, a_ptr, mask_ptr, x_norm_ptr, a_norm_ptr, j, rows, cols,
                                row_ok, col_ok, n, m, p, neg_gamma, BLOCK_I, BLOCK_K, BLOCK_P)
            if HAS_ROW_SCALE:
                tile *= tl.load(row_scale_ptr + j * n + rows, mask=row_ok, other=0.0)[:, None]
            if HAS_COL_SCALE:
                tile *= tl.load(col_scale_ptr + j * m + cols, mask=col_ok, other=0.0)[None, :]
            combined += tile
        vb = tl.load(v_ptr + cols[:, None] * d + outs[None, :],
                     mask=col_ok[:, None] & out_ok[None, :], other=0.0)
        acc += tl.dot(combined, vb, input_precision="ieee")
    tl.store(out_ptr + rows[:, None] * d + outs[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=row_ok[:, None] & out_ok[None, :])


@triton.jit
def _row_sums_kernel(
    x_ptr, a_ptr, mask_ptr, x_norm_ptr, a_norm_ptr, out_ptr,
    n, m, p, neg_gamma,
    BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_P: tl.constexpr,
):
    rows = (tl.program_id(0) * BLOCK_I + tl.arange(0, BLOCK_I)).to(tl.int64)
    j = tl.program_id(1).to(tl.int64)
    row_ok = rows < n
    acc = tl.zeros((BLOCK_I,), dtype=tl.float32)
    for start in range(0, m, BLOCK_K):
        cols = (start + tl.arange(0, BLOCK_K)).to(tl.int64)
        col_ok = cols < m
        tile = _kernel_tile(x_ptr, a_ptr, mask_ptr, x_norm_ptr, a_norm_ptr, j, rows, cols,
                            row_ok, col_ok, n, m, p, neg_gamma, BLOCK_I, BLOCK_K, BLOCK_P)
        acc += tl.sum(tile, axis=1)
    tl.store(out_ptr + j * n + rows, acc, mask=row_ok)


def _block(size, high):
    return max(16, min(high, triton.next_power_of_2(max(size, 1))))


def _prepare(x, anchors, masks):
    """float32 centred copies, the masks as float32 and the masked squared norms."""
    x32, a32 = x.float(), anchors.float()
    if a32.shape[0]:
        center = a32.mean(dim=0)
        x32, a32 = x32 - center, a32 - center
    p = x.shape[1]
    if masks is None:
        masks32 = torch.ones(1, p, dtype=torch.float32, device=x.device)
    else:
        masks32 = masks.float()
    x_norms = ((x32 * x32) @ masks32.T).T.contiguous()  # (n_masks, n)
    a_norms = ((a32 * a32) @ masks32.T).T.contiguous()  # (n_masks, m)
    return x32.contiguous(), a32.contiguous(), masks32.contiguous(), x_norms, a_norms


def rbf_context_matmul_triton(x, anchors, v, gamma, masks=None, row_scale=None, col_scale=None):
    """Launch the matmul kernel: one program per (block of rows, block of d).

    Arguments and result as :func:`skicml.ops.rbf_context_matmul`; computed
    in float32 and returned in the dtype of ``x``.
    """
    n_masks = _check_args("rbf_context_matmul", x, anchors, gamma, masks, v, row_scale, col_scale)
    n, p = x.shape
    m, d = v.shape
    out = torch.zeros(n, d, dtype=torch.float32, device=x.device)
    if n == 0 or d == 0 or m == 0:
        return out.to(x.dtype)
    x32, a32, masks32, x_norms, a_norms = _prepare(x, anchors, masks)
    v32 = v.float().contiguous()
    # Unused pointers when a scale is absent: any float32 tensor will do.
    rs = x_norms if row_scale is None else row_scale.float().contiguous()
    cs = a_norms if col_scale is None else col_scale.float().contiguous()
    block_i, block_k = _block(n, 64), _block(m, 64)
    block_p, block_d = _block(p, 32), _block(d, 64)
    grid = (triton.cdiv(n, block_i), triton.cdiv(d, block_d))
    _matmul_kernel[grid](
        x32, a32, v32, masks32, x_norms, a_norms, rs, cs, out,
        n, m, p, d, n_masks, -float(gamma),
        HAS_ROW_SCALE=row_scale is not None, HAS_COL_SCALE=col_scale is not None,
        BLOCK_I=block_i, BLOCK_K=block_k, BLOCK_P=block_p, BLOCK_D=block_d,
    )
    return out.to(x.dtype)


def rbf_context_row_sums_triton(x, anchors, gamma, masks=None):
    """Launch the row-sums kernel: one program per (block of rows, mask).

    Arguments and result as :func:`skicml.ops.rbf_context_row_sums`.
    """
    n_masks = _check_args("rbf_context_row_sums", x, anchors, gamma, masks)
    n, p = x.shape
    m = anchors.shape[0]
    out = torch.zeros(n_masks, n, dtype=torch.float32, device=x.device)
    if n == 0 or m == 0:
        return out.to(x.dtype)
    x32, a32, masks32, x_norms, a_norms = _prepare(x, anchors, masks)
    block_i, block_k, block_p = _block(n, 64), _block(m, 64), _block(p, 32)
    grid = (triton.cdiv(n, block_i), n_masks)
    _row_sums_kernel[grid](
        x32, a32, masks32, x_norms, a_norms, out, n, m, p, -float(gamma),
        BLOCK_I=block_i, BLOCK_K=block_k, BLOCK_P=block_p,
    )
    return out.to(x.dtype)
