"""The diffusion transformer (DiT) pieces: adaLN-Zero blocks, timestep and label embeddings, patches.

Peebles and Xie's DiT (*Scalable Diffusion Models with Transformers*, ICCV
2023) conditions every block on one vector ``c`` (timestep embedding plus
class embedding) through adaptive layer norm: ``c`` regresses a shift, a
scale and a gate for the attention and for the MLP, the gates initialised to
zero so that every block starts as the identity ("adaLN-Zero"). Race-DiT
replaces the block's MLP with :class:`~skicml.nn.ExpertRaceMoE`
(``DiTBlock(mlp=...)``), the physics world model and Lavender's teacher use
the same block; parameter names follow the official DiT code
(``adaLN_modulation``, ``attn.qkv``, ``attn.proj``, ``mlp.fc1``, ``mlp.fc2``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "DiTBlock",
    "DiTFinalLayer",
    "LabelEmbedder",
    "SelfAttention",
    "TimestepEmbedder",
    "modulate",
    "patchify",
    "sincos_position_embedding_2d",
    "timestep_embedding",
    "unpatchify",
]


def modulate(x, shift, scale):
    """``x * (1 + scale) + shift`` with one (shift, scale) per sample, broadcast over the tokens."""
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def timestep_embedding(t, dim, max_period=10000):
    """Sinusoidal embeddings ``(B, dim)`` of (possibly fractional) timesteps ``(B,)``: cosines, then sines.

    Examples
    --------
    >>> import torch
    >>> from skicml.nn.dit import timestep_embedding
    >>> timestep_embedding(torch.tensor([0.0, 10.0]), 4).shape
    torch.Size([2, 4])
    """
    half = dim // 2
    frequencies = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    angles = t.float()[:, None] * frequencies[None]
    embedding = torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
    if dim % 2:
        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
    return embedding


class TimestepEmbedder(nn.Module):
    """Timesteps to vectors: the sinusoidal embedding through a two-layer SiLU MLP.

    DiT draws these weights with standard deviation 0.02, about
    ``1 / sqrt(fan_in)`` at its widths (768-1152); here the deviation is
    ``1 / sqrt(fan_in)`` at every width, so that a small model's condition
    vector is as large as DiT's instead of fifty times smaller (at width 32
    the 0.02 draws left digits models nearly blind to the timestep and the
    class for hundreds of steps).
    """

    def __init__(self, dim, frequency_dim=256):
        super().__init__()
        self.frequency_dim = frequency_dim
        self.mlp = nn.Sequential(nn.Linear(frequency_dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        for layer in (self.mlp[0], self.mlp[2]):
            nn.init.normal_(layer.weight, std=layer.in_features ** -0.5)
            nn.init.zeros_(layer.bias)

    def forward(self, t):
        return self.mlp(timestep_embedding(t, self.frequency_dim).to(self.mlp[0].weight.dtype))


class LabelEmbedder(nn.Module):
    """Class labels to vectors, with a learned "no label" row for classifier-free guidance.

    Parameters
    ----------
    n_classes : int
    dim : int
    dropout : float, default=0.1
        Share of the labels replaced by the null label in training.

    The null label is ``n_classes``; ``forward(labels, drop=mask)`` forces it
    where ``mask`` is True (the unconditional half of guided sampling).
    """

    def __init__(self, n_classes, dim, dropout=0.1):
        super().__init__()
        self.n_classes = n_classes
        self.dropout = dropout
        self.embedding = nn.Embedding(n_classes + 1, dim)
        # Unit-norm rows at any width (DiT's 0.02 at width 1152 is about the same).
        nn.init.normal_(self.embedding.weight, std=dim ** -0.5)

    def forward(self, labels, drop=None):
        if drop is None and self.training and self.dropout > 0:
            drop = torch.rand(labels.shape, device=labels.device) < self.dropout
        if drop is not None:
            labels = torch.where(drop, self.n_classes, labels)
        return self.embedding(labels)


def patchify(images, patch_size):
    """``(B, C, H, W)`` images to ``(B, H/p * W/p, p * p * C)`` patch tokens, rows first.

    Examples
    --------
    >>> import torch
    >>> from skicml.nn.dit import patchify, unpatchify
    >>> images = torch.randn(2, 3, 8, 6)
    >>> tokens = patchify(images, 2)
    >>> tokens.shape, bool(torch.equal(unpatchify(tokens, 2, 3, (8, 6)), images))
    (torch.Size([2, 12, 12]), True)
    """
    batch, channels, height, width = images.shape
    if height % patch_size or width % patch_size:
        raise ValueError(f"Images of {height}x{width} pixels do not split into {patch_size}x{patch_size} patches.")
    grid = images.reshape(batch, channels, height // patch_size, patch_size, width // patch_size, patch_size)
    return grid.permute(0, 2, 4, 3, 5, 1).reshape(batch, -1, patch_size * patch_size * channels)


def unpatchify(tokens, patch_size, channels, image_size):
    """The inverse of :func:`patchify`: ``(B, L, p * p * C)`` tokens to ``(B, C, H, W)`` images."""
    height, width = image_size
    batch = tokens.shape[0]
    grid = tokens.reshape(batch, height // patch_size, width // patch_size, patch_size, patch_size, channels)
    return grid.permute(0, 5, 1, 3, 2, 4).reshape(batch, channels, height, width)


def sincos_position_embedding_2d(dim, grid_height, grid_width):
    """DiT's fixed 2-D sine-cosine position embedding ``(grid_height * grid_width, dim)``, rows first.

    Half the channels encode the row, half the column (``dim`` a multiple of 4).
    """
    if dim % 4:
        raise ValueError(f"dim={dim} must be a multiple of 4 for a 2-D sine-cosine embedding.")

    def one_axis(positions, width):
        omega = 1.0 / 10000 ** (torch.arange(width // 2, dtype=torch.float64) / (width / 2.0))
        angles = positions.double()[:, None] * omega[None]
        return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)

    rows, cols = torch.meshgrid(torch.arange(grid_height), torch.arange(grid_width), indexing="ij")
    return torch.cat([one_axis(cols.reshape(-1), dim // 2), one_axis(rows.reshape(-1), dim // 2)], dim=1).float()


class SelfAttention(nn.Module):
    """Multi-head self-attention (B, T, dim) -> (B, T, dim), fused, no mask: a DiT's and a DDPM's token mixer."""

    def __init__(self, dim, n_heads):
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"dim={dim} is not a multiple of n_heads={n_heads}.")
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).reshape(batch, length, 3, self.n_heads, dim // self.n_heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(batch, length, dim))


class _MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class DiTBlock(nn.Module):
    """One adaLN-Zero transformer block conditioned on a vector per sample.

    Parameters
    ----------
    dim : int
    n_heads : int
    mlp_ratio : float, default=4.0
        Hidden width of the default MLP, in multiples of ``dim``.
    mlp : torch.nn.Module or None, default=None
        A replacement for the MLP (an :class:`~skicml.nn.ExpertRaceMoE`, say)
        taking the modulated tokens ``(B, L, dim)`` and returning tokens, or
        ``(tokens, aux)``.

    ``forward(x, c)`` takes tokens ``(B, L, dim)`` and conditions ``(B, dim)``
    and returns ``(x, aux)``, ``aux`` the MLP's dict (empty for the default).
    With the zero-initialised modulation a new block is the identity.

    Examples
    --------
    >>> import torch
    >>> from skicml.nn import DiTBlock, ExpertRaceMoE
    >>> block = DiTBlock(16, n_heads=4, mlp=ExpertRaceMoE(16, n_experts=4, top_k=2))
    >>> x = torch.randn(2, 9, 16)
    >>> y, aux = block(x, torch.randn(2, 16))
    >>> bool(torch.equal(y, x)), sorted(aux)[:2]
    (True, ['balance_loss', 'logits'])
    """

    def __init__(self, dim, n_heads, mlp_ratio=4.0, mlp=None):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = SelfAttention(dim, n_heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = mlp if mlp is not None else _MLP(dim, int(dim * mlp_ratio))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        for layer in (self.attn.qkv, self.attn.proj) + ((self.mlp.fc1, self.mlp.fc2) if mlp is None else ()):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
        nn.init.zeros_(self.adaLN_modulation[-1].weight)
        nn.init.zeros_(self.adaLN_modulation[-1].bias)

    def forward(self, x, c):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=-1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa))
        out = self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))
        out, aux = out if isinstance(out, tuple) else (out, {})
        return x + gate_mlp.unsqueeze(1) * out, aux


class DiTFinalLayer(nn.Module):
    """adaLN then a linear map of each token to its patch of ``out_channels`` (zero-initialised)."""

    def __init__(self, dim, patch_size, out_channels):
        super().__init__()
        self.norm_final = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(dim, patch_size * patch_size * out_channels)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
        for layer in (self.linear, self.adaLN_modulation[-1]):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=-1)
        return self.linear(modulate(self.norm_final(x), shift, scale))
