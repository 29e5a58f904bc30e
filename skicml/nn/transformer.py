"""The Llama-style transformer block: pre-RMSNorm attention with rotary
positions and a gated GELU MLP, no biases.

GraphGPT's backbone stacks it today; the models of the coming families that
need a plain decoder or encoder block (a VLM's text decoder, a video model's
spatial-temporal stack) reuse it instead of writing their own. Parameter names
(``attn_norm``, ``qkv``, ``out``, ``mlp_norm``, ``gate``, ``up``, ``down``) are
part of the shipped checkpoints and stay as they are.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .norm import RMSNorm

__all__ = ["LlamaBlock"]


class LlamaBlock(nn.Module):
    """One pre-norm transformer block with rotary attention and a gated MLP.

    Parameters
    ----------
    hidden_size : int
    head_dim : int
        Width of each attention head; ``hidden_size`` must be a multiple.
    mlp_ratio : int, default=4
        Width of the MLP's hidden layer, in multiples of ``hidden_size``.
    attn_dropout : float, default=0.0
    drop_path : float, default=0.0
        Stochastic depth: the probability that a sample skips each residual
        update in training.

    Examples
    --------
    >>> import torch
    >>> from skicml.nn import LlamaBlock, RotaryEmbedding
    >>> block = LlamaBlock(hidden_size=32, head_dim=8)
    >>> block(torch.randn(2, 5, 32), RotaryEmbedding(8)).shape
    torch.Size([2, 5, 32])
    """

    def __init__(self, hidden_size, head_dim, mlp_ratio=4, attn_dropout=0.0, drop_path=0.0):
        super().__init__()
        if hidden_size % head_dim:
            raise ValueError(f"hidden_size={hidden_size} is not a multiple of head_dim={head_dim}.")
        self.n_heads = hidden_size // head_dim
        self.attn_dropout = attn_dropout
        self.drop_path = drop_path
        self.attn_norm = RMSNorm(hidden_size)
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=False)
        self.out = nn.Linear(hidden_size, hidden_size, bias=False)
        self.mlp_norm = RMSNorm(hidden_size)
        inner = mlp_ratio * hidden_size
        self.gate = nn.Linear(hidden_size, inner, bias=False)
        self.up = nn.Linear(hidden_size, inner, bias=False)
        self.down = nn.Linear(inner, hidden_size, bias=False)

    def _residual(self, x, update):
        if self.training and self.drop_path > 0:
            # Stochastic depth: drop the whole update of some samples.
            keep = torch.rand(x.shape[0], 1, 1, device=x.device) >= self.drop_path
            update = update * keep / (1 - self.drop_path)
        return x + update

    def forward(self, x, rotary, mask=None):
        """``x`` (B, L, hidden_size); ``rotary`` a :class:`RotaryEmbedding`
        over ``head_dim``; ``mask`` a boolean attention mask broadcastable to
        (B, heads, L, L) (True attends) or ``None``."""
        q, k, v = self.qkv(self.attn_norm(x)).unflatten(-1, (3, self.n_heads, -1)).permute(2, 0, 3, 1, 4)
        q, k = rotary(q), rotary(k)
        attended = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.attn_dropout if self.training else 0.0
        )
        x = self._residual(x, self.out(attended.transpose(1, 2).flatten(-2)))
        h = self.mlp_norm(x)
        return self._residual(x, self.down(F.gelu(self.gate(h)) * self.up(h)))
