"""Normalisation layers."""

import torch
from torch import nn

from ..ops import rms_norm

__all__ = ["RMSNorm"]


class RMSNorm(nn.Module):
    """Root-mean-square layer norm with a learned scale (no bias, no centring).

    Backed by the ``skicml::rms_norm`` custom op, so CUDA tensors take the
    Triton kernel and everything else the plain-torch reference.

    Parameters
    ----------
    dim : int
        Size of the normalised last axis.
    eps : float, default=1e-6
    """

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"
