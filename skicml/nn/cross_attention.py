"""Cross-attention of query tokens to a padded context (text-conditioned diffusion, readers of captions).

Used by one family: ``vlm`` (Lavender's diffusion teacher).

:class:`CrossAttention` is multi-head attention whose keys and values come
from another sequence, a caption's word embeddings say, with a padding mask
over that sequence. It can hand back its attention probabilities (queries x
context tokens, per head), which is what Lavender's teacher reads as word
maps and what prompt-to-prompt style editing would change.
:class:`CrossAttentionBlock` wraps it as a pre-norm residual step (the query
and context norms are separate, the output projection starts at zero, so a
new block is the identity), the layout of PixArt-alpha's and Stable
Diffusion's cross-attention between self-attention and the MLP.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CrossAttention", "CrossAttentionBlock"]


class CrossAttention(nn.Module):
    """Multi-head attention of ``x`` (B, L, dim) to ``context`` (B, S, context_dim).

    Parameters
    ----------
    dim : int
        Width of the queries and of the output.
    n_heads : int
        Heads; ``dim`` must be a multiple of it.
    context_dim : int or None, default=None
        Width of the context tokens (``dim`` when None).

    Notes
    -----
    ``forward(x, context, key_padding_mask=None, return_attention=False)``:
    ``key_padding_mask`` (B, S) is True at context positions to ignore
    (torch's convention). A query whose keys are all padding gets zero
    probabilities and the output projection's bias, never NaN. With
    ``return_attention=True`` the result is ``(out, probabilities)``, the
    probabilities (B, n_heads, L, S) summing to 1 over the real context
    tokens and 0 on padding; without it the fused kernel computes the same
    output.

    Examples
    --------
    >>> import torch
    >>> from skicml.nn import CrossAttention
    >>> attention = CrossAttention(8, n_heads=2, context_dim=4)
    >>> x, context = torch.randn(3, 5, 8), torch.randn(3, 6, 4)
    >>> padding = torch.arange(6) >= torch.tensor([[6], [4], [1]])  # 6, 4 and 1 real tokens
    >>> out, probabilities = attention(x, context, padding, return_attention=True)
    >>> out.shape, probabilities.shape
    (torch.Size([3, 5, 8]), torch.Size([3, 2, 5, 6]))
    >>> probabilities.sum(-1).allclose(torch.ones(3, 2, 5)), float(probabilities[1, :, :, 4:].sum())
    (True, 0.0)
    """

    def __init__(self, dim, n_heads, context_dim=None):
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"dim={dim} is not a multiple of n_heads={n_heads}.")
        context_dim = dim if context_dim is None else context_dim
        self.n_heads = n_heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(context_dim, dim)
        self.v = nn.Linear(context_dim, dim)
        self.proj = nn.Linear(dim, dim)

    def _heads(self, x):
        return x.unflatten(-1, (self.n_heads, -1)).transpose(1, 2)

    def forward(self, x, context, key_padding_mask=None, return_attention=False):
        batch, length, dim = x.shape
        q, k, v = self._heads(self.q(x)), self._heads(self.k(context)), self._heads(self.v(context))
        keep = None if key_padding_mask is None else ~key_padding_mask.bool()[:, None, None, :]
        if return_attention:
            scores = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
            if keep is not None:
                scores = scores.masked_fill(~keep, float("-inf"))
            probabilities = scores.softmax(-1)
            if keep is not None:
                # Rows with no real key are all -inf: softmax gives NaN there.
                probabilities = probabilities.masked_fill(~keep, 0.0)
            out = torch.matmul(probabilities, v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            if keep is not None:
                out = out.masked_fill(~keep.any(-1, keepdim=True), 0.0)
        out = self.proj(out.transpose(1, 2).reshape(batch, length, dim))
        return (out, probabilities) if return_attention else out


class CrossAttentionBlock(nn.Module):
    """Pre-norm residual cross-attention: ``x + CrossAttention(norm(x), context_norm(context))``.

    Parameters
    ----------
    dim : int
    n_heads : int
    context_dim : int or None, default=None

    ``forward(x, context, key_padding_mask=None, return_attention=False)``
    returns the updated tokens, or ``(tokens, probabilities)``. The output
    projection starts at zero, so a new block is the identity.

    Examples
    --------
    >>> import torch
    >>> from skicml.nn import CrossAttentionBlock
    >>> block = CrossAttentionBlock(8, n_heads=2)
    >>> x = torch.randn(2, 4, 8)
    >>> bool(torch.equal(block(x, torch.randn(2, 3, 8)), x))
    True
    """

    def __init__(self, dim, n_heads, context_dim=None):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.context_norm = nn.LayerNorm(dim if context_dim is None else context_dim, eps=1e-6)
        self.attn = CrossAttention(dim, n_heads, context_dim)
        nn.init.zeros_(self.attn.proj.weight)
        nn.init.zeros_(self.attn.proj.bias)

    def forward(self, x, context, key_padding_mask=None, return_attention=False):
        out = self.attn(self.norm(x), self.context_norm(context), key_padding_mask, return_attention)
        if return_attention:
            out, probabilities = out
            return x + out, probabilities
        return x + out
