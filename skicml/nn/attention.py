"""Attention blocks: multi-head attention with an optional "split" mask,
rotary embeddings and scalable softmax, and the induced self-attention block
of the Set Transformer.

Used by one family: ``tabicl`` (the TabICL v1 and v2 networks).

Parameter names follow :class:`torch.nn.TransformerEncoderLayer` with the
attention renamed ``attn`` (``attn.in_proj_weight``, ``attn.out_proj``,
``linear1``, ``linear2``, ``norm1``, ``norm2``, and ``attn.ssmax_layer`` when
the queries are length-scaled), which is the layout of TabICL's v1 and v2
checkpoints. The defaults are TabICL v1's block (pre-norm, GELU, no dropout,
no query scaling); the options are those TabICL v2's configurations use.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .ssmax import scalable_softmax

__all__ = ["BlockStack", "InducedSelfAttentionBlock", "MultiheadAttentionBlock", "PackedMultiheadAttention"]


#: Key counts up to which attention is two batched matmuls rather than SDPA:
#: for the many tiny problems of per-row and inducing-point attention (24 or
#: 16 keys), the fused kernels' per-problem overhead makes them 2-6x slower.
_SHORT_KEYS = 64


def _short_attention(q, k, v, mask=None, dropout_p=0.0):
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = scores + mask
    probs = scores.softmax(-1)
    if dropout_p:
        probs = F.dropout(probs, dropout_p)
    return torch.matmul(probs, v)


_ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu}


def _activation(activation):
    if callable(activation):
        return activation
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be 'gelu', 'relu' or a callable, got {activation!r}.")
    return _ACTIVATIONS[activation]


class PackedMultiheadAttention(nn.Module):
    """Multi-head attention with one packed QKV projection.

    ``split`` (an int ``s``) gives the prefix mask used for in-context
    learning: queries before ``s`` attend to keys before ``s``; queries from
    ``s`` on attend only to keys before ``s``.

    Parameters
    ----------
    embed_dim, num_heads : int
    ssmax : str or bool, default="none"
        Scalable softmax applied to the (rotated) queries before the scores,
        see :func:`skicml.nn.ssmax.scalable_softmax`; its module is
        ``ssmax_layer`` (``None`` without).
    dropout : float, default=0.0
        Dropout on the attention probabilities in training.
    """

    def __init__(self, embed_dim, num_heads, *, ssmax="none", dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}.")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.ssmax_layer = scalable_softmax(ssmax, num_heads, embed_dim)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def _heads(self, x):
        return x.unflatten(-1, (self.num_heads, -1)).transpose(-3, -2)

    def _merge(self, x):
        return x.transpose(-3, -2).flatten(-2)

    def project_query(self, x):
        w, b = self.in_proj_weight[: self.embed_dim], self.in_proj_bias[: self.embed_dim]
        return self._heads(F.linear(x, w, b))

    def project_key_value(self, key, value=None):
        e = self.embed_dim
        value = key if value is None else value
        k = F.linear(key, self.in_proj_weight[e: 2 * e], self.in_proj_bias[e: 2 * e])
        v = F.linear(value, self.in_proj_weight[2 * e:], self.in_proj_bias[2 * e:])
        return self._heads(k), self._heads(v)

    def attend(self, q, k, v, mask=None):
        """Attention of projected heads; returns the output projection."""
        if self.ssmax_layer is not None:
            # the factor depends on the number of keys, padded ones included (as officially)
            q = self.ssmax_layer(q, k.shape[-2])
        dropout_p = self.dropout if self.training else 0.0
        if k.shape[-2] <= _SHORT_KEYS:
            out = _short_attention(q, k, v, mask, dropout_p)
        else:
            lead = q.shape[:-3]
            if len(lead) > 1:
                # SDPA's fused CPU kernels take only 4-D inputs; 5-D falls back to the unfused math path
                if mask is not None:
                    mask = mask.expand(*lead, *mask.shape[-3:]).flatten(0, len(lead) - 1)
                q, k, v = (t.flatten(0, len(lead) - 1) for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
            if len(lead) > 1:
                out = out.unflatten(0, lead)
        return self.out_proj(self._merge(out))

    def forward(self, query, key, value, key_padding_mask=None, split=None, rope=None):
        q = self.project_query(query)
        if split is not None:
            # only the first ``split`` rows are keys: project nothing else
            key, value = key[..., :split, :], value[..., :split, :]
        k, v = self.project_key_value(key, value)
        if rope is not None:
            q, k = rope(q), rope(k)
        if split is not None:
            return self.attend(q, k, v)
        mask = None
        if key_padding_mask is not None:
            # (..., L_k) True = ignore  ->  additive (..., 1, 1, L_k)
            mask = torch.zeros(key_padding_mask.shape, dtype=q.dtype, device=q.device)
            mask = mask.masked_fill(key_padding_mask, float("-inf")).unsqueeze(-2).unsqueeze(-2)
        return self.attend(q, k, v, mask)


class MultiheadAttentionBlock(nn.Module):
    """Transformer block, pre-norm by default: ``x + attn(norm1(q), norm1(kv))``
    then ``x + ffn(norm2(x))``.

    The same ``norm1`` normalises queries and keys/values. With
    ``zero_init`` the output projection and the second FFN layer start at
    zero, so a fresh block is the identity.

    Parameters
    ----------
    d_model : int
    nhead : int
    dim_feedforward : int
    ssmax : str or bool, default="none"
        Scalable softmax of the attention (:class:`PackedMultiheadAttention`).
    activation : {"gelu", "relu"} or callable, default="gelu"
        Of the FFN.
    norm_first : bool, default=True
        Pre-norm; ``False`` is post-norm, ``norm2(y + ffn(y))`` with
        ``y = norm1(q + attn(q, kv))``.
    bias_free_ln : bool, default=False
        Layer norms without a bias.
    dropout : float, default=0.0
        On attention probabilities, attention output, FFN hidden layer and
        FFN output, in training.
    zero_init : bool, default=True
    """

    def __init__(self, d_model, nhead, dim_feedforward, *, ssmax="none", activation="gelu", norm_first=True,
                 bias_free_ln=False, dropout=0.0, zero_init=True):
        super().__init__()
        self.norm_first = norm_first
        self.dropout = dropout
        self.activation = _activation(activation)
        self.attn = PackedMultiheadAttention(d_model, nhead, ssmax=ssmax, dropout=dropout)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model, bias=not bias_free_ln)
        self.norm2 = nn.LayerNorm(d_model, bias=not bias_free_ln)
        if zero_init:
            for tensor in (self.attn.out_proj.weight, self.attn.out_proj.bias, self.linear2.weight, self.linear2.bias):
                nn.init.zeros_(tensor)

    def _drop(self, x):
        return F.dropout(x, self.dropout, self.training) if self.dropout else x

    def _ffn(self, x):
        return self._drop(self.linear2(self._drop(self.activation(self.linear1(x)))))

    def feed_forward(self, x):
        if self.norm_first:
            return x + self._ffn(self.norm2(x))
        return self.norm2(x + self._ffn(x))

    def _residual(self, q, attended):
        x = q + self._drop(attended)
        return x if self.norm_first else self.norm1(x)

    def forward(self, q, kv=None, key_padding_mask=None, split=None, rope=None):
        """``kv=None`` is self-attention; ``split`` the in-context prefix mask."""
        normed_q = self.norm1(q) if self.norm_first else q
        if kv is None:
            normed_kv = normed_q
        else:
            normed_kv = self.norm1(kv) if self.norm_first else kv
        x = self._residual(q, self.attn(normed_q, normed_kv, normed_kv, key_padding_mask, split, rope))
        return self.feed_forward(x)

    # -- cached in-context attention: keys/values of the context computed once
    def context_key_value(self, context):
        """Keys and values of the (already computed) context rows."""
        return self.attn.project_key_value(self.norm1(context) if self.norm_first else context)

    def forward_with_context(self, q, key, value):
        """Queries attending only to precomputed context keys and values."""
        normed_q = self.norm1(q) if self.norm_first else q
        x = self._residual(q, self.attn.attend(self.attn.project_query(normed_q), key, value))
        return self.feed_forward(x)


class InducedSelfAttentionBlock(nn.Module):
    """Induced set attention (ISAB): ``num_inds`` learned vectors summarise the
    context rows (``multihead_attn1``), then every row reads the summary
    (``multihead_attn2``). Linear in the number of rows.

    Only the first ``train_size`` rows are summarised, so test rows never
    influence each other or the training rows.

    Parameters
    ----------
    d_model, nhead, dim_feedforward, num_inds : int
    ssmax : str or bool, default="none"
        Scalable softmax of the summarising attention only (its key count is
        the number of rows; the reading attention always has ``num_inds``).
    **block_options
        ``activation``, ``norm_first``, ``bias_free_ln``, ``dropout``,
        ``zero_init`` of both :class:`MultiheadAttentionBlock`.
    """

    def __init__(self, d_model, nhead, dim_feedforward, num_inds, *, ssmax="none", **block_options):
        super().__init__()
        self.multihead_attn1 = MultiheadAttentionBlock(d_model, nhead, dim_feedforward, ssmax=ssmax, **block_options)
        self.multihead_attn2 = MultiheadAttentionBlock(d_model, nhead, dim_feedforward, **block_options)
        self.ind_vectors = nn.Parameter(torch.empty(num_inds, d_model))
        nn.init.trunc_normal_(self.ind_vectors, std=0.02)

    def summarise(self, context):
        """The inducing summary (..., num_inds, d) of context rows (..., n, d)."""
        inducing = self.ind_vectors.expand(*context.shape[:-2], *self.ind_vectors.shape)
        return self.multihead_attn1(inducing, context)

    def read(self, rows, summary):
        return self.multihead_attn2(rows, summary)

    def forward(self, src, train_size=None):
        context = src if train_size is None else src[..., :train_size, :]
        return self.read(src, self.summarise(context))


class BlockStack(nn.Module):
    """A stack of blocks (``.blocks``), with the rotary embedding they share (``.rope``) if any.

    A container only, so that parameter names read ``<stack>.blocks.<i>.*``
    and ``<stack>.rope.freqs`` as in TabICL's checkpoints; the model that owns
    it runs the blocks.
    """

    def __init__(self, blocks, rope=None):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        if rope is not None:
            self.rope = rope
