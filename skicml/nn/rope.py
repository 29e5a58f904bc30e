"""Rotary position embedding (RoFormer), over interleaved pairs of channels
(``(x0, x1), (x2, x3), ...``, the RoFormer and TabICL v1 layout) or over the
two halves of the head (``(x_i, x_{i + dim/2})``, the GPT-NeoX layout some
TabICL v2 checkpoints use)."""

import torch
from torch import nn

__all__ = ["RotaryEmbedding", "apply_rotary", "apply_rotary_halves"]


def _rotate_pairs(x):
    # (x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...)
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


def apply_rotary(x, angles):
    """Rotate channel pairs of ``x`` (..., L, dim) by ``angles`` (L, dim)."""
    dtype = x.dtype
    if dtype in (torch.float32, torch.float64):
        # A pair rotation is a product of complex numbers: one fused kernel
        # instead of four full-size elementwise passes (6x faster on CPU).
        pairs = x.unflatten(-1, (-1, 2))
        if pairs.stride(-1) != 1 or any(stride % 2 for stride in pairs.stride()[:-1]):
            pairs = pairs.contiguous()
        half = angles[..., ::2].to(dtype)
        rotation = torch.polar(torch.ones_like(half), half)
        return torch.view_as_real(torch.view_as_complex(pairs) * rotation).flatten(-2)
    return (x * angles.cos() + _rotate_pairs(x) * angles.sin()).to(dtype)


def apply_rotary_halves(x, angles):
    """Rotate the channel pairs ``(x_i, x_{i + dim/2})`` of ``x`` (..., L, dim) by ``angles`` (L, dim/2)."""
    first, second = x.chunk(2, dim=-1)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


class RotaryEmbedding(nn.Module):
    """Rotary embedding of head dimension ``dim`` with base ``theta``.

    Channel pair ``i`` rotates by ``position / theta**(2i/dim)``; positions are
    the token indices ``0..L-1`` of the rotated axis. ``freqs`` is a frozen
    parameter (it is saved in the state dict, as in TabICL's checkpoints).

    Parameters
    ----------
    dim : int
        Head dimension (even).
    theta : float, default=10000
    interleaved : bool, default=True
        Rotate pairs of neighbouring channels; ``False`` rotates channel
        ``i`` with channel ``i + dim/2`` (same frequencies, other layout).
    """

    def __init__(self, dim, theta=10000.0, interleaved=True):
        super().__init__()
        if dim % 2:
            raise ValueError(f"RotaryEmbedding needs an even head dimension, got {dim}.")
        self.interleaved = interleaved
        freqs = 1.0 / theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim)
        self.freqs = nn.Parameter(freqs, requires_grad=False)

    def angles(self, length, device=None):
        positions = torch.arange(length, device=device or self.freqs.device, dtype=self.freqs.dtype)
        return torch.outer(positions, self.freqs).repeat_interleave(2, dim=-1)

    def forward(self, x):
        """Rotate ``x`` of shape (..., L, dim) along its second-to-last axis."""
        if not self.interleaved:
            positions = torch.arange(x.shape[-2], device=x.device, dtype=self.freqs.dtype)
            return apply_rotary_halves(x, torch.outer(positions, self.freqs))
        return apply_rotary(x, self.angles(x.shape[-2], x.device))
