"""``skicml::rms_norm``: root-mean-square normalisation over the last axis.

The template every skicml custom op follows:

1. a plain-torch reference (:func:`rms_norm_reference`), which is the CPU
   kernel and the ground truth the GPU kernel is tested against;
2. the op itself, registered with :func:`torch.library.custom_op` under the
   ``skicml::`` namespace, with a fake (meta) implementation for tracing and
   an autograd formula;
3. a Triton kernel (``_rms_norm_triton.py``) registered for CUDA tensors and
   imported only the first time a CUDA tensor reaches the op.

Llama-style transformers (GraphGPT, Race-DiT) normalise every token with it.
"""

from __future__ import annotations

import torch

from ._dispatch import load_gpu_kernel

__all__ = ["rms_norm", "rms_norm_reference"]


def rms_norm_reference(x, weight, eps=1e-6):
    """``x / sqrt(mean(x**2, -1) + eps) * weight``, accumulated in float32 at least."""
    acc = _accumulation_dtype(x)
    x_acc = x.to(acc)
    scale = torch.rsqrt(x_acc.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (x_acc * scale * weight.to(acc)).to(x.dtype)


def _accumulation_dtype(x):
    # Half-precision inputs are accumulated in float32, float64 stays float64.
    return torch.promote_types(x.dtype, torch.float32)


@torch.library.custom_op("skicml::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Root-mean-square normalisation of the last axis of ``x``, scaled by ``weight``.

    Parameters
    ----------
    x : torch.Tensor of shape (..., d)
    weight : torch.Tensor of shape (d,)
    eps : float, default=1e-6

    Returns
    -------
    torch.Tensor of the shape and dtype of ``x``.
    """
    if x.shape[-1] != weight.shape[0] or weight.dim() != 1:
        raise ValueError(
            f"rms_norm: weight must have shape ({x.shape[-1]},) to match the last "
            f"axis of x, got {tuple(weight.shape)}."
        )
    return rms_norm_reference(x, weight, eps)


@rms_norm.register_fake
def _(x, weight, eps=1e-6):
    return torch.empty_like(x)


@torch.library.register_kernel("skicml::rms_norm", "cuda")
def _(x, weight, eps=1e-6):
    kernel = load_gpu_kernel("skicml.ops._rms_norm_triton", "rms_norm_triton")
    if kernel is None:
        return rms_norm_reference(x, weight, eps)
    return kernel(x, weight, eps)


def _setup_context(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _backward(ctx, grad_output):
    x, weight = ctx.saved_tensors
    acc = _accumulation_dtype(x)
    x32, g32, w32 = x.to(acc), grad_output.to(acc), weight.to(acc)
    scale = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + ctx.eps)
    x_hat = x32 * scale
    g_w = g32 * w32
    grad_x = scale * (g_w - x_hat * (g_w * x_hat).mean(dim=-1, keepdim=True))
    grad_weight = (g32 * x_hat).reshape(-1, x.shape[-1]).sum(dim=0)
    return grad_x.to(x.dtype), grad_weight.to(weight.dtype), None


rms_norm.register_autograd(_backward, setup_context=_setup_context)
