"""Mamba-2 state-space blocks (Dao & Gu, 2024), in plain torch.

Used by one family: ``wearable`` (the wearable behavior model).

:class:`Mamba2Mixer` is the selective state-space mixer whose scan is the
``skicml::ssd_scan`` custom op; :class:`BidirectionalMamba2Layer` runs one
mixer forward and one backward in time and is the layer of the wearable
behavior model. Both run on the CPU: there is no dependency on the CUDA-only
``mamba_ssm`` kernels.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..ops import ssd_scan
from .norm import RMSNorm

__all__ = ["BidirectionalMamba2Layer", "Mamba2Mixer"]


class Mamba2Mixer(nn.Module):
    """The Mamba-2 mixer: projections, short causal convolution, SSD scan, gated norm.

    For an input ``u`` of shape ``(batch, T, d_model)``, per head ``h`` with a
    learned scalar ``A_h < 0``:
    ``S_t = exp(dt_t A_h) S_{t-1} + dt_t x_t B_t^T`` and
    ``y_t = S_t C_t + D_h x_t``, followed by ``RMSNorm(y * silu(gate))`` and
    the output projection. The mixer is causal.

    Parameters
    ----------
    d_model : int
    d_state : int, default=16
        Size ``N`` of the state per channel.
    head_dim : int, default=16
        Channels ``P`` per head; ``expand * d_model`` must be a multiple of it.
    expand : int, default=2
        Inner width ``expand * d_model``.
    d_conv : int, default=4
        Kernel size of the causal depthwise convolution.
    chunk_size : int, default=64
        Chunk length of the scan (a speed knob; results do not depend on it).
    dt_min, dt_max : float, default=0.001, 0.1
        Range of the initial step sizes (log-uniform), as in Mamba.
    """

    def __init__(self, d_model, d_state=16, head_dim=16, expand=2, d_conv=4, chunk_size=64,
                 dt_min=1e-3, dt_max=0.1):
        super().__init__()
        d_inner = expand * d_model
        if d_inner % head_dim:
            raise ValueError(
                f"expand * d_model = {d_inner} must be a multiple of head_dim={head_dim}."
            )
        self.d_inner, self.d_state, self.head_dim = d_inner, d_state, head_dim
        self.n_heads = d_inner // head_dim
        self.chunk_size = chunk_size
        conv_dim = d_inner + 2 * d_state
        self.in_proj = nn.Linear(d_model, 2 * d_inner + 2 * d_state + self.n_heads, bias=False)
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, d_conv, groups=conv_dim, padding=d_conv - 1)
        # Step sizes start log-uniform in [dt_min, dt_max]: short and long memories.
        dt = torch.exp(torch.rand(self.n_heads) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
        self.A_log = nn.Parameter(torch.log(torch.empty(self.n_heads).uniform_(1, 16)))
        self.D = nn.Parameter(torch.ones(self.n_heads))
        self.norm = RMSNorm(d_inner, eps=1e-5)
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)

    def forward(self, u):
        batch, length, _ = u.shape
        gate, xbc, dt = torch.split(
            self.in_proj(u), [self.d_inner, self.d_inner + 2 * self.d_state, self.n_heads], dim=-1
        )
        # Causal convolution: pad both sides, keep the first `length` outputs.
        xbc = F.silu(self.conv1d(xbc.transpose(1, 2))[..., :length].transpose(1, 2))
        x, B, C = torch.split(xbc, [self.d_inner, self.d_state, self.d_state], dim=-1)
        y = ssd_scan(
            x.reshape(batch, length, self.n_heads, self.head_dim),
            F.softplus(dt + self.dt_bias),
            -torch.exp(self.A_log),
            B.contiguous(),
            C.contiguous(),
            self.D,
            chunk_size=self.chunk_size,
        )
        y = self.norm(y.reshape(batch, length, self.d_inner) * F.silu(gate))
        return self.out_proj(y)


class BidirectionalMamba2Layer(nn.Module):
    """One forward and one time-reversed Mamba-2 mixer, then a post-norm FFN.

    ``y = W [mixer_f(x), flip(mixer_b(flip(x)))]``, ``x = LN(x + drop(y))``,
    ``x = LN(x + drop(FFN(x)))`` with ``FFN = Linear(d, 4d) -> GELU ->
    Linear(4d, d)``; with ``bidirectional=False`` only the forward mixer runs
    and the layer stays causal.

    Parameters
    ----------
    d_model : int
    bidirectional : bool, default=True
    dropout : float, default=0.1
    **mixer_kwargs
        Passed to :class:`Mamba2Mixer`.
    """

    def __init__(self, d_model, bidirectional=True, dropout=0.1, **mixer_kwargs):
        super().__init__()
        self.bidirectional = bidirectional
        self.forward_mixer = Mamba2Mixer(d_model, **mixer_kwargs)
        if bidirectional:
            self.backward_mixer = Mamba2Mixer(d_model, **mixer_kwargs)
            self.merge = nn.Linear(2 * d_model, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        y = self.forward_mixer(x)
        if self.bidirectional:
            backward = self.backward_mixer(x.flip(1)).flip(1)
            y = self.merge(torch.cat([y, backward], dim=-1))
        x = self.norm1(x + self.dropout(y))
        return self.norm2(x + self.dropout(self.ffn(x)))
