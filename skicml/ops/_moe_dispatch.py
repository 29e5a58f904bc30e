"""``skicml::moe_dispatch``: two-layer GELU experts applied to the selected (token, expert) pairs.

Used by one family: ``moe`` (Race-DiT, through ``skicml.nn.ExpertRaceMoE``).

A mixture-of-experts layer routes each of ``N`` tokens to any subset of ``E``
experts (``mask``) and sums the chosen experts' outputs weighted by their
gates::

    y[n] = sum_e mask[n, e] * gates[n, e] * (gelu(x[n] @ w1[e] + b1[e]) @ w2[e] + b2[e])

Expert Race makes the loads very uneven by design (an expert may take no
token or most of them), so the CPU kernel is the loop over experts that
gathers each expert's tokens, runs its two matmuls and scatter-adds the gated
result: it does exactly the selected work whatever the imbalance, where
computing every expert densely costs ``E / k`` times the FLOPs and
capacity-padded batched matmuls waste work in proportion to the largest
load (``benchmarks/bench_moe_dispatch.py``). The backward pass is a second
op, ``skicml::moe_dispatch_backward``, written out by hand with the same
loop. On CUDA the forward is a Triton grouped GEMM over the selected pairs
(``_moe_dispatch_triton.py``); the backward runs the loop there too.

The GELU is the tanh approximation, as in DiT's MLPs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._dispatch import load_gpu_kernel

__all__ = ["moe_dispatch", "moe_dispatch_backward", "moe_dispatch_reference"]


def _check_args(x, mask, gates, w1, b1, w2, b2):
    if x.dim() != 2:
        raise ValueError(f"moe_dispatch: x must be (n_tokens, dim), got shape {tuple(x.shape)}.")
    n_tokens, dim = x.shape
    if w1.dim() != 3 or w1.shape[1] != dim:
        raise ValueError(f"moe_dispatch: w1 must be (n_experts, {dim}, hidden), got {tuple(w1.shape)}.")
    n_experts, _, hidden = w1.shape
    expected = {"mask": (mask, (n_tokens, n_experts)), "gates": (gates, (n_tokens, n_experts)),
                "b1": (b1, (n_experts, hidden)), "w2": (w2, (n_experts, hidden, dim)), "b2": (b2, (n_experts, dim))}
    for name, (tensor, shape) in expected.items():
        if tuple(tensor.shape) != shape:
            raise ValueError(f"moe_dispatch: {name} must have shape {shape}, got {tuple(tensor.shape)}.")
    if mask.dtype != torch.bool:
        raise ValueError(f"moe_dispatch: mask must be a bool tensor, got {mask.dtype}.")
    for name, tensor in (("gates", gates), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)):
        if tensor.dtype != x.dtype:
            raise ValueError(f"moe_dispatch: {name} is {tensor.dtype} but x is {x.dtype}; pass one dtype.")


def _expert_rows(mask):
    """The token indices each expert takes, from one transpose of the mask."""
    return [column.nonzero().squeeze(1) for column in mask.t()]


def moe_dispatch_reference(x, mask, gates, w1, b1, w2, b2):
    """The gated sum of the selected experts' outputs, one expert at a time (differentiable).

    Parameters
    ----------
    x : torch.Tensor of shape (n_tokens, dim)
    mask : torch.Tensor of shape (n_tokens, n_experts), bool
        The selected (token, expert) pairs; a token may select none or all.
    gates : torch.Tensor of shape (n_tokens, n_experts)
        Weights of the selected pairs (others are ignored).
    w1, b1 : torch.Tensor of shapes (n_experts, dim, hidden), (n_experts, hidden)
    w2, b2 : torch.Tensor of shapes (n_experts, hidden, dim), (n_experts, dim)

    Returns
    -------
    torch.Tensor of shape (n_tokens, dim)
    """
    out = torch.zeros_like(x)
    for expert, rows in enumerate(_expert_rows(mask)):
        if rows.numel() == 0:
            continue
        hidden = F.gelu(torch.addmm(b1[expert], x.index_select(0, rows), w1[expert]), approximate="tanh")
        result = torch.addmm(b2[expert], hidden, w2[expert])
        out = out.index_add(0, rows, result * gates[rows, expert].unsqueeze(1))
    return out


@torch.library.custom_op("skicml::moe_dispatch", mutates_args=())
def moe_dispatch(x: torch.Tensor, mask: torch.Tensor, gates: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                 w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """Two-layer GELU experts on the selected (token, expert) pairs, gated and summed per token.

    Parameters
    ----------
    x : torch.Tensor of shape (n_tokens, dim)
    mask : torch.Tensor of shape (n_tokens, n_experts), bool
    gates : torch.Tensor of shape (n_tokens, n_experts)
    w1, b1 : torch.Tensor of shapes (n_experts, dim, hidden), (n_experts, hidden)
    w2, b2 : torch.Tensor of shapes (n_experts, hidden, dim), (n_experts, dim)

    Returns
    -------
    torch.Tensor of shape (n_tokens, dim)
        Zero for a token that selected no expert.

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import moe_dispatch
    >>> x, w1, w2 = torch.randn(5, 4), torch.randn(3, 4, 8), torch.randn(3, 8, 4)
    >>> b1, b2 = torch.zeros(3, 8), torch.zeros(3, 4)
    >>> mask = torch.zeros(5, 3, dtype=torch.bool)
    >>> mask[0, 1] = True
    >>> y = moe_dispatch(x, mask, torch.ones(5, 3), w1, b1, w2, b2)
    >>> bool(y[1:].eq(0).all()), tuple(y.shape)
    (True, (5, 4))
    """
    _check_args(x, mask, gates, w1, b1, w2, b2)
    with torch.no_grad():
        return moe_dispatch_reference(x, mask, gates, w1, b1, w2, b2)


@moe_dispatch.register_fake
def _(x, mask, gates, w1, b1, w2, b2):
    _check_args(x, mask, gates, w1, b1, w2, b2)
    return torch.empty_like(x)


@torch.library.register_kernel("skicml::moe_dispatch", "cuda")
def _(x, mask, gates, w1, b1, w2, b2):
    _check_args(x, mask, gates, w1, b1, w2, b2)
    kernel = load_gpu_kernel("skicml.ops._moe_dispatch_triton", "moe_dispatch_triton")
    if kernel is None:
        with torch.no_grad():
            return moe_dispatch_reference(x, mask, gates, w1, b1, w2, b2)
    return kernel(x, mask, gates, w1, b1, w2, b2)


@torch.library.custom_op("skicml::moe_dispatch_backward", mutates_args=())
def moe_dispatch_backward(grad_out: torch.Tensor, x: torch.Tensor, mask: torch.Tensor, gates: torch.Tensor,
                          w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                     torch.Tensor]:
    """Gradients of :func:`moe_dispatch` with respect to ``x, gates, w1, b1, w2, b2``.

    The hidden activations are recomputed per expert rather than stored, so
    the forward keeps no ``(pairs, hidden)`` buffer alive.
    """
    _check_args(x, mask, gates, w1, b1, w2, b2)
    grad_x, grad_gates = torch.zeros_like(x), torch.zeros_like(gates)
    grad_w1, grad_b1 = torch.zeros_like(w1), torch.zeros_like(b1)
    grad_w2, grad_b2 = torch.zeros_like(w2), torch.zeros_like(b2)
    for expert, rows in enumerate(_expert_rows(mask)):
        if rows.numel() == 0:
            continue
        inputs = x.index_select(0, rows)
        pre = torch.addmm(b1[expert], inputs, w1[expert])
        hidden = F.gelu(pre, approximate="tanh")
        result = torch.addmm(b2[expert], hidden, w2[expert])
        grad_rows = grad_out.index_select(0, rows)
        grad_gates[rows, expert] = (grad_rows * result).sum(dim=1)
        grad_result = grad_rows * gates[rows, expert].unsqueeze(1)
        grad_w2[expert] = hidden.t() @ grad_result
        grad_b2[expert] = grad_result.sum(dim=0)
        grad_pre = torch.ops.aten.gelu_backward(grad_result @ w2[expert].t(), pre, approximate="tanh")
        grad_w1[expert] = inputs.t() @ grad_pre
        grad_b1[expert] = grad_pre.sum(dim=0)
        grad_x.index_add_(0, rows, grad_pre @ w1[expert].t())
    return grad_x, grad_gates, grad_w1, grad_b1, grad_w2, grad_b2


@moe_dispatch_backward.register_fake
def _(grad_out, x, mask, gates, w1, b1, w2, b2):
    _check_args(x, mask, gates, w1, b1, w2, b2)
    return tuple(torch.empty_like(t) for t in (x, gates, w1, b1, w2, b2))


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad_out):
    x, mask, gates, w1, b1, w2, b2 = ctx.saved_tensors
    grad_x, grad_gates, grad_w1, grad_b1, grad_w2, grad_b2 = moe_dispatch_backward(
        grad_out.contiguous(), x, mask, gates, w1, b1, w2, b2)
    return grad_x, None, grad_gates, grad_w1, grad_b1, grad_w2, grad_b2


moe_dispatch.register_autograd(_backward, setup_context=_setup_context)
