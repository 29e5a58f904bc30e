"""``skicml::subblock_attention_probs``: attention probabilities of a key sub-block from the log-sum-exp.

Used by one family: ``vlm`` (the VLM backbones' attention maps for Lavender).

Lavender (ICML 2025, "Diffusion Instruction Tuning") aligns a
vision-language model's text-to-image attention with a teacher's maps. The
official code gets the probabilities by switching the model to eager
attention (``output_attentions=True``), which materialises the whole
``(T, T)`` probability matrix per head and layer and gives up the fused
forward. Only a sub-block is needed: the text queries' attention to the
image keys. A fused attention forward (flash, or
``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu``) already
returns each query's log-sum-exp ``lse`` over all its keys, and then

.. math::

    P_{ij} = \\exp(\\text{scale}\\; q_i \\cdot k_j - \\text{lse}_i)

for just the chosen queries ``i`` and keys ``j``, exactly (the softmax's
normaliser is the log-sum-exp). Masked keys are the caller's to leave out.

The op is differentiable in ``q``, ``k`` and ``lse``: with
``G = grad * P``, ``dq = scale G k``, ``dk = scale G^T q`` and
``dlse = -sum_j G``. A fused forward's ``lse`` carries no gradient; where
the alignment loss must reach the queries and keys through the normaliser
too, compute ``lse`` for the chosen query rows with
:func:`row_logsumexp` (an ``(n_queries, T)`` block, never ``(T, T)``).

- the CPU kernel is :func:`subblock_attention_probs_reference`, the plain
  formula and the ground truth of the tests;
- the CUDA kernel (``_subblock_attention_triton.py``) computes a tile of
  ``P`` per program from one read of a query tile and a key tile.
"""

from __future__ import annotations

import math
import numbers

import torch

from ._dispatch import load_gpu_kernel

__all__ = ["row_logsumexp", "subblock_attention_probs", "subblock_attention_probs_reference"]

_NAME = "subblock_attention_probs"


def _check_args(q, k, lse, scale):
    for arg, tensor in (("q", q), ("k", k), ("lse", lse)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{_NAME}: {arg} must be a torch.Tensor, got {type(tensor).__name__}.")
        if not tensor.is_floating_point():
            raise TypeError(f"{_NAME}: {arg} must be a floating-point tensor, got {tensor.dtype}.")
    if q.dim() != 4:
        raise ValueError(f"{_NAME}: q must have shape (batch, heads, n_queries, head_dim), got {tuple(q.shape)}.")
    batch, heads, n_queries, head_dim = q.shape
    if k.dim() != 4 or k.shape[:2] != (batch, heads) or k.shape[3] != head_dim:
        raise ValueError(f"{_NAME}: k must have shape ({batch}, {heads}, n_keys, {head_dim}) to match q of shape "
                         f"{tuple(q.shape)}, got {tuple(k.shape)}.")
    if lse.shape != (batch, heads, n_queries):
        raise ValueError(f"{_NAME}: lse must have shape ({batch}, {heads}, {n_queries}), one log-sum-exp per query "
                         f"of q, got {tuple(lse.shape)}.")
    if k.device != q.device or lse.device != q.device:
        raise ValueError(f"{_NAME}: q, k and lse must share a device; got {q.device}, {k.device}, {lse.device}.")
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"{_NAME}: scale must be a finite float > 0, got {scale!r}.")


def subblock_attention_probs_reference(q, k, lse, scale):
    """``exp(scale * q k^T - lse)``, the plain formula of :func:`subblock_attention_probs`.

    Computed in float32 at least and cast back to ``q``'s dtype.
    Differentiable by autograd.

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import subblock_attention_probs_reference
    >>> q, k = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 5, 4)
    >>> lse = torch.logsumexp(q @ k.transpose(-1, -2) / 2, dim=-1)
    >>> p = subblock_attention_probs_reference(q, k[:, :, :2], lse, 0.5)
    >>> torch.allclose(p, torch.softmax(q @ k.transpose(-1, -2) / 2, -1)[..., :2])
    True
    """
    acc = torch.promote_types(q.dtype, torch.float32)
    scores = (q.to(acc) @ k.to(acc).transpose(-1, -2)) * scale
    return torch.exp(scores - lse.to(acc)[..., None]).to(q.dtype)


def row_logsumexp(q, keys, scale, key_mask=None):
    """Differentiable log-sum-exp of ``scale * q keys^T`` over the allowed keys, one per query.

    Parameters
    ----------
    q : Tensor of shape (B, H, N, D)
        The chosen queries.
    keys : Tensor of shape (B, H, T, D)
        Every key they attend to.
    scale : float
    key_mask : Tensor of shape broadcastable to (B, H, N, T), bool, or None
        True where the query may attend (causal and padding masks).

    Returns
    -------
    Tensor of shape (B, H, N)
    """
    scores = (q @ keys.transpose(-1, -2)) * scale
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask, float("-inf"))
    return torch.logsumexp(scores, dim=-1)


@torch.library.custom_op("skicml::subblock_attention_probs", mutates_args=())
def _subblock_attention_probs_op(q: torch.Tensor, k: torch.Tensor, lse: torch.Tensor, scale: float) -> torch.Tensor:
    _check_args(q, k, lse, scale)
    return subblock_attention_probs_reference(q, k, lse, scale)


@_subblock_attention_probs_op.register_fake
def _(q, k, lse, scale):
    _check_args(q, k, lse, scale)
    return q.new_empty((*q.shape[:3], k.shape[2]))


@torch.library.register_kernel("skicml::subblock_attention_probs", "cuda")
def _(q, k, lse, scale):
    _check_args(q, k, lse, scale)
    kernel = load_gpu_kernel("skicml.ops._subblock_attention_triton", "subblock_attention_probs_triton")
    if kernel is None or q.dtype == torch.float64:
        return subblock_attention_probs_reference(q, k, lse, scale)
    return kernel(q, k, lse, scale)


def _setup_context(ctx, inputs, output):
    q, k, _, scale = inputs
    ctx.save_for_backward(q, k, output)
    ctx.scale = scale


def _backward(ctx, grad):
    q, k, probabilities = ctx.saved_tensors
    acc = torch.promote_types(q.dtype, torch.float32)
    weighted = grad.to(acc) * probabilities.to(acc)
    grad_q = (weighted @ k.to(acc)) * ctx.scale
    grad_k = (weighted.transpose(-1, -2) @ q.to(acc)) * ctx.scale
    grad_lse = -weighted.sum(-1)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_lse.to(q.dtype), None


_subblock_attention_probs_op.register_autograd(_backward, setup_context=_setup_context)


def subblock_attention_probs(q, k, lse, scale):
    """Attention probabilities of chosen queries to a sub-block of keys, from the queries' log-sum-exp.

    Parameters
    ----------
    q : Tensor of shape (B, H, N, D)
        The chosen queries (after any rotary embedding).
    k : Tensor of shape (B, H, M, D)
        The keys of the sub-block (the image tokens, say).
    lse : Tensor of shape (B, H, N)
        Each query's log-sum-exp of ``scale * q . key`` over *all* the keys
        it attends to: what a fused attention forward returns, or
        :func:`row_logsumexp`.
    scale : float
        The attention's score scale, usually ``D ** -0.5``.

    Returns
    -------
    Tensor of shape (B, H, N, M)
        The rows of the softmax over all keys, restricted to the sub-block.

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import row_logsumexp, subblock_attention_probs
    >>> q, keys = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 10, 8)
    >>> lse = row_logsumexp(q, keys, 8 ** -0.5)
    >>> p = subblock_attention_probs(q, keys[:, :, :6], lse, 8 ** -0.5)
    >>> p.shape
    torch.Size([2, 4, 3, 6])
    >>> full = torch.softmax(q @ keys.transpose(-1, -2) * 8 ** -0.5, dim=-1)
    >>> torch.allclose(p, full[..., :6], atol=1e-6)
    True
    """
    _check_args(q, k, lse, scale)
    return _subblock_attention_probs_op(q, k, lse, float(scale))
