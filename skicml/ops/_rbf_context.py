"""``skicml::rbf_context_matmul``: Gaussian-kernel products without the kernel.

Used by one family: ``contexture`` (the RBF contexts).

The RBF (and masked-RBF) contexts of :mod:`skicml.contexture` need products
with the dense n x m kernel

.. math::

    K_j[i, k] = \\exp\\Big(-\\gamma \\sum_f M_{jf} (x_{if} - a_{kf})^2\\Big)

between n rows ``x`` and m anchors ``a``, one kernel per feature mask
``M_j`` (1 = feature kept). Two ops compute what the context needs, tile by
tile, so that memory stays O((n + m) (p + d)) instead of O(n m):

- :func:`rbf_context_matmul`: ``sum_j diag(row_scale_j) K_j diag(col_scale_j) v``;
- :func:`rbf_context_row_sums`: ``r_j = K_j 1`` for every mask, what the
  context divides by to make its rows sum to 1.

A tile of squared distances is ``|x|^2 + |a|^2 - 2 x a^T`` (one matrix
product), clamped at 0 before ``exp``: rounding can make the expansion
slightly negative for a point and itself. Rows and anchors are first
shifted by the anchors' mean, which leaves the distances unchanged but
keeps the expansion from cancelling catastrophically far from the origin.

Transposed products need no op of their own: ``K_j(x, a)^T = K_j(a, x)``,
so ``K^T u`` is ``rbf_context_matmul(anchors, x, u, ...)`` with the roles of
the scales swapped. That is how a :class:`scipy.sparse.linalg.LinearOperator`
for the context's ``Q = diag(1 / sqrt(N r)) K diag(1 / sqrt(p))`` is built:

>>> import torch
>>> from skicml.ops import rbf_context_matmul, rbf_context_row_sums
>>> g = torch.Generator().manual_seed(0)
>>> x = torch.randn(6, 3, generator=g, dtype=torch.float64)
>>> r = rbf_context_row_sums(x, x, 0.5)              # (1, 6): rows of K
>>> W = lambda v: rbf_context_matmul(x, x, v, 0.5, row_scale=1 / r)
>>> W(torch.ones(6, 1, dtype=torch.float64)).flatten().round(decimals=12)  # rows of W sum to 1
tensor([1., 1., 1., 1., 1., 1.], dtype=torch.float64)
>>> u = torch.randn(6, 2, generator=g, dtype=torch.float64)
>>> Wt_u = rbf_context_matmul(x, x, u, 0.5, col_scale=1 / r)  # W^T u, x as anchors
>>> dense = torch.exp(-0.5 * torch.cdist(x, x) ** 2) / r.T
>>> torch.allclose(Wt_u, dense.T @ u)
True

Neither op is differentiable (no autograd formula is registered): the
contexts use them inside linear algebra on fixed data, never in training.
The CPU kernel is the plain-torch reference; CUDA float32 tensors go to the
Triton kernel of ``_rbf_context_triton.py``, CUDA float64 tensors to the
reference on the GPU (the kernel accumulates in float32).
"""

from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

from ._dispatch import load_gpu_kernel

__all__ = [
    "rbf_context_matmul",
    "rbf_context_matmul_reference",
    "rbf_context_row_sums",
    "rbf_context_row_sums_reference",
]

# Elements of one tile of kernel values (all masks of a tile together):
# 2**19 is 4 MiB in float64. Read at call time, so tests can shrink it.
_TILE_ELEMENTS = 2**19


def _accumulation_dtype(dtype):
    # Half precision is accumulated in float32, float64 stays float64.
    return torch.promote_types(dtype, torch.float32)


def _check_args(name, x, anchors, gamma, masks, v=None, row_scale=None, col_scale=None):
    """Validate shapes, dtypes and gamma; return the number of masks."""
    for arg, tensor in (("x", x), ("anchors", anchors), ("v", v)):
        if tensor is None:
            continue
        if tensor.dim() != 2:
            raise ValueError(
                f"{name}: {arg} must be a 2-D tensor, got shape {tuple(tensor.shape)}."
            )
        if not tensor.is_floating_point():
            raise ValueError(f"{name}: {arg} must be a floating-point tensor, got {tensor.dtype}.")
    n, p = x.shape
    m = anchors.shape[0]
    if anchors.shape[1] != p:
        raise ValueError(
            f"{name}: anchors must have shape (m, {p}) to match x of shape {tuple(x.shape)}, "
            f"got {tuple(anchors.shape)}."
        )
    if v is not None and v.shape[0] != m:
        raise ValueError(
            f"{name}: v must have shape ({m}, d), one row per anchor, got {tuple(v.shape)}."
        )
    for arg, tensor in (("anchors", anchors), ("v", v)):
        if tensor is not None and tensor.dtype != x.dtype:
            raise ValueError(
                f"{name}: {arg} must have the dtype of x, {x.dtype}, got {tensor.dtype}."
            )
    if isinstance(gamma, bool) or not (
        isinstance(gamma, numbers.Real) and math.isfinite(gamma) and gamma > 0
    ):
        raise ValueError(f"{name}: gamma must be a finite float > 0, got {gamma!r}.")
    n_masks = 1
    if masks is not None:
        if masks.dim() != 2 or masks.shape[1] != p or masks.shape[0] < 1:
            raise ValueError(
                f"{name}: masks must have shape (n_masks, {p}) with n_masks >= 1, one 0/1 row "
                f"per mask over the features of x, got {tuple(masks.shape)}."
            )
        n_masks = masks.shape[0]
    for arg, tensor, length in (("row_scale", row_scale, n), ("col_scale", col_scale, m)):
        if tensor is None:
            continue
        if tuple(tensor.shape) != (n_masks, length) or not tensor.is_floating_point():
            raise ValueError(
                f"{name}: {arg} must be a floating-point tensor of shape (n_masks, "
                f"{'n' if arg == 'row_scale' else 'm'}) = ({n_masks}, {length}), got "
                f"{tuple(tensor.shape)} ({tensor.dtype})."
            )
    return n_masks


def _kernel_tiles(x, anchors, gamma, masks):
    """Yield ``(rows, cols, masks, K)`` with K of shape (masks, rows, cols).

    ``rows``, ``cols`` and ``masks`` are slices; every (row, anchor, mask)
    triple is covered exactly once. At most ``_TILE_ELEMENTS`` kernel values
    (plus a few tiles' worth of temporaries) live at a time.
    """
    acc = _accumulation_dtype(x.dtype)
    x, anchors = x.to(acc), anchors.to(acc)
    n, p = x.shape
    m = anchors.shape[0]
    if masks is None:
        masks = torch.ones(1, p, dtype=acc, device=x.device)
    else:
        masks = masks.to(acc)
    if m:
        center = anchors.mean(dim=0)
        x, anchors = x - center, anchors - center
    n_masks = masks.shape[0]
    x_norms = (x * x) @ masks.T  # (n, n_masks): masked squared norms
    a_norms = (anchors * anchors) @ masks.T  # (m, n_masks)

    budget = max(int(_TILE_ELEMENTS), 1)
    # The masked copies of a row block, (masks, rows, p), count too: many
    # features take fewer masks per tile.
    mask_block = min(n_masks, max(1, budget // (64 * max(p, 1))))
    side = max(1, math.isqrt(budget // mask_block))
    row_block, col_block = min(max(n, 1), side), min(max(m, 1), side)
    # Use the whole budget when the anchors are few.
    row_block = min(
        max(n, 1),
        max(row_block, budget // (mask_block * col_block)),
        max(1, budget // (mask_block * max(p, 1))),
    )
    for j0 in range(0, n_masks, mask_block):
        js = slice(j0, min(j0 + mask_block, n_masks))
        mask_j = masks[js]
        for i0 in range(0, n, row_block):
            rows = slice(i0, min(i0 + row_block, n))
            x_masked = x[rows].unsqueeze(0) * mask_j.unsqueeze(1)  # (masks, rows, p)
            x_norm = x_norms[rows, js].T.unsqueeze(2)
            for k0 in range(0, m, col_block):
                cols = slice(k0, min(k0 + col_block, m))
                tile = torch.matmul(x_masked, anchors[cols].T).mul_(-2.0)
                tile.add_(x_norm).add_(a_norms[cols, js].T.unsqueeze(1))
                tile.clamp_(min=0.0).mul_(-float(gamma)).exp_()
                yield rows, cols, js, tile


def rbf_context_matmul_reference(x, anchors, v, gamma, masks=None, row_scale=None, col_scale=None):
    """Plain-torch :func:`rbf_context_matmul`: the CPU kernel and the ground truth.

    Same arguments and result; tiles of at most ``_TILE_ELEMENTS`` kernel
    values (4 MiB in float64) are built and consumed one at a time.
    """
    n_masks = _check_args("rbf_context_matmul", x, anchors, gamma, masks, v, row_scale, col_scale)
    acc = _accumulation_dtype(x.dtype)
    v_acc = v.to(acc)
    out = torch.zeros(x.shape[0], v.shape[1], dtype=acc, device=x.device)
    row_scale = None if row_scale is None else row_scale.to(acc)
    col_scale = None if col_scale is None else col_scale.to(acc)
    for rows, cols, js, tile in _kernel_tiles(x, anchors, gamma, masks):
        if row_scale is not None:
            tile.mul_(row_scale[js, rows].unsqueeze(2))
        if col_scale is not None:
            tile.mul_(col_scale[js, cols].unsqueeze(1))
        # v is shared by the masks: sum the scaled kernels first, then one product.
        combined = tile[0] if n_masks == 1 else tile.sum(dim=0)
        out[rows].addmm_(combined, v_acc[cols])
    return out.to(x.dtype)


def rbf_context_row_sums_reference(x, anchors, gamma, masks=None):
    """Plain-torch :func:`rbf_context_row_sums`: the CPU kernel and the ground truth."""
    n_masks = _check_args("rbf_context_row_sums", x, anchors, gamma, masks)
    acc = _accumulation_dtype(x.dtype)
    out = torch.zeros(n_masks, x.shape[0], dtype=acc, device=x.device)
    for rows, _, js, tile in _kernel_tiles(x, anchors, gamma, masks):
        out[js, rows] += tile.sum(dim=2)
    return out.to(x.dtype)


@torch.library.custom_op("skicml::rbf_context_matmul", mutates_args=())
def rbf_context_matmul(
    x: torch.Tensor,
    anchors: torch.Tensor,
    v: torch.Tensor,
    gamma: float,
    masks: Optional[torch.Tensor] = None,
    row_scale: Optional[torch.Tensor] = None,
    col_scale: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """``sum_j diag(row_scale_j) K_j diag(col_scale_j) v`` without forming any ``K_j``.

    ``K_j[i, k] = exp(-gamma * sum_f masks[j, f] * (x[i, f] - anchors[k, f])**2)``.
    The kernel is built one tile of rows and anchors at a time and consumed
    at once, so memory is O((n + m) (p + d)) whatever n and m. Not
    differentiable: no autograd formula is registered.

    Parameters
    ----------
    x : torch.Tensor of shape (n, p)
        Rows.
    anchors : torch.Tensor of shape (m, p)
        Anchors, of the dtype of ``x``.
    v : torch.Tensor of shape (m, d)
        What the kernel multiplies, of the dtype of ``x``.
    gamma : float
        Kernel width, > 0.
    masks : torch.Tensor of shape (n_masks, p) or None, default=None
        Feature masks, 0/1 (bool or float; 1 = feature kept). Other
        non-negative values weight the features. None is one mask keeping
        every feature (n_masks = 1).
    row_scale : torch.Tensor of shape (n_masks, n) or None, default=None
        Per-mask scale of the kernel's rows; None means 1.
    col_scale : torch.Tensor of shape (n_masks, m) or None, default=None
        Per-mask scale of the kernel's columns; None means 1.

    Returns
    -------
    torch.Tensor of shape (n, d) and the dtype of ``x``
        Accumulated in float32, or in float64 for float64 inputs.

    Raises
    ------
    ValueError
        On a shape that does not match, a dtype that differs from ``x``'s,
        or ``gamma <= 0``.

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import rbf_context_matmul
    >>> x = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    >>> rbf_context_matmul(x, x, torch.eye(2, dtype=torch.float64), 1.0)  # K itself
    tensor([[1.0000, 0.3679],
            [0.3679, 1.0000]], dtype=torch.float64)
    """
    return rbf_context_matmul_reference(x, anchors, v, gamma, masks, row_scale, col_scale)


@rbf_context_matmul.register_fake
def _(x, anchors, v, gamma, masks=None, row_scale=None, col_scale=None):
    _check_args("rbf_context_matmul", x, anchors, gamma, masks, v, row_scale, col_scale)
    return x.new_empty((x.shape[0], v.shape[1]))


@torch.library.register_kernel("skicml::rbf_context_matmul", "cuda")
def _(x, anchors, v, gamma, masks=None, row_scale=None, col_scale=None):
    _check_args("rbf_context_matmul", x, anchors, gamma, masks, v, row_scale, col_scale)
    kernel = load_gpu_kernel("skicml.ops._rbf_context_triton", "rbf_context_matmul_triton")
    if kernel is None or x.dtype == torch.float64:
        # The kernel accumulates in float32; float64 keeps its precision here.
        return rbf_context_matmul_reference(x, anchors, v, gamma, masks, row_scale, col_scale)
    return kernel(x, anchors, v, gamma, masks, row_scale, col_scale)


@torch.library.custom_op("skicml::rbf_context_row_sums", mutates_args=())
def rbf_context_row_sums(
    x: torch.Tensor,
    anchors: torch.Tensor,
    gamma: float,
    masks: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Row sums ``r_j[i] = sum_k K_j[i, k]`` of every mask's kernel, tile by tile.

    The kernels ``K_j`` are those of :func:`rbf_context_matmul`; dividing by
    ``r_j`` makes them row-stochastic. Not differentiable: no autograd
    formula is registered.

    Parameters
    ----------
    x : torch.Tensor of shape (n, p)
        Rows.
    anchors : torch.Tensor of shape (m, p)
        Anchors, of the dtype of ``x``.
    gamma : float
        Kernel width, > 0.
    masks : torch.Tensor of shape (n_masks, p) or None, default=None
        Feature masks as in :func:`rbf_context_matmul`; None is one mask
        keeping every feature.

    Returns
    -------
    torch.Tensor of shape (n_masks, n) and the dtype of ``x``
        ``n_masks = 1`` when ``masks`` is None.

    Raises
    ------
    ValueError
        On a shape that does not match, a dtype that differs from ``x``'s,
        or ``gamma <= 0``.

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import rbf_context_row_sums
    >>> x = torch.tensor([[0.0, 5.0], [1.0, -5.0]], dtype=torch.float64)
    >>> masks = torch.tensor([[1, 1], [1, 0]], dtype=torch.bool)  # all, first feature
    >>> rbf_context_row_sums(x, x, 1.0, masks)
    tensor([[1.0000, 1.0000],
            [1.3679, 1.3679]], dtype=torch.float64)
    """
    return rbf_context_row_sums_reference(x, anchors, gamma, masks)


@rbf_context_row_sums.register_fake
def _(x, anchors, gamma, masks=None):
    n_masks = _check_args("rbf_context_row_sums", x, anchors, gamma, masks)
    return x.new_empty((n_masks, x.shape[0]))


@torch.library.register_kernel("skicml::rbf_context_row_sums", "cuda")
def _(x, anchors, gamma, masks=None):
    _check_args("rbf_context_row_sums", x, anchors, gamma, masks)
    kernel = load_gpu_kernel("skicml.ops._rbf_context_triton", "rbf_context_row_sums_triton")
    if kernel is None or x.dtype == torch.float64:
        return rbf_context_row_sums_reference(x, anchors, gamma, masks)
    return kernel(x, anchors, gamma, masks)


# doctest does not look inside CustomOpDef objects: hand it the functions the
# ops wrap, so that their Examples run with the module's (tests/test_docstrings.py).
__test__ = {
    name: getattr(op, "_init_fn", "")
    for name, op in (("rbf_context_matmul", rbf_context_matmul),
                     ("rbf_context_row_sums", rbf_context_row_sums))
}
