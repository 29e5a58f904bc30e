"""Scalable softmax: queries scaled with the number of keys they attend to.

Used by one family: ``tabicl`` (TabICL v2, through ``skicml.nn.attention``).

Softmax attention over ``n`` keys flattens as ``n`` grows: the largest score
has to beat ``n - 1`` others, so a model trained on short contexts attends
ever more uniformly on long ones. Scalable softmax (Nakanishi, 2025,
"Scalable-Softmax Is Superior for Attention") multiplies the queries by
``s * log n`` so that the peak keeps its weight; TabICLv2 learns the factor
and lets it depend on the query ("query-aware", QASSMax), which is what lets a
model pretrained on a few thousand rows read tens of thousands in context.

Every variant maps the projected, rotated queries ``q`` (..., heads, L,
head_dim) and the key count ``n`` to scaled queries of the same shape; the
attention then runs as usual (scores ``q k^T / sqrt(head_dim)``).

================================  =============================================
kind                              factor multiplying ``q``
================================  =============================================
``"ssmax"``                       ``s_h * log n``, one learned ``s_h`` per head
``"ssmax-mlp"``                   ``mlp(log n)_h``, one per head
``"ssmax-mlp-elementwise"``       ``mlp(log n)_{h,c}``, one per head channel
``"qassmax-mlp"``                 ``base(log n)_h * (1 + tanh(query(q)))``
``"qassmax-mlp-elementwise"``     the same per head channel
================================  =============================================

Parameter names (``scales``; ``mlp``; ``base_mlp``, ``query_mlp``) are those of
the official ``tabicl`` 2.x checkpoints.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["SSMAX_KINDS", "QASSMax", "SSMax", "SSMaxMLP", "scalable_softmax"]

#: The scalable-softmax kinds :func:`scalable_softmax` builds (``"none"``: no scaling).
SSMAX_KINDS = ("none", "ssmax", "ssmax-mlp", "ssmax-mlp-elementwise", "qassmax-mlp", "qassmax-mlp-elementwise")


def _log_keys(n, like):
    # log n as a 1x1 tensor of q's dtype; max(n, 1) keeps log finite for an empty context
    return torch.full((1, 1), math.log(max(n, 1)), device=like.device, dtype=like.dtype)


def _mlp(in_features, hidden, out_features):
    return nn.Sequential(nn.Linear(in_features, hidden), nn.GELU(), nn.Linear(hidden, out_features))


class SSMax(nn.Module):
    """``q * s_h * log n`` with one learned factor ``s_h`` per head (initialised to 1).

    Parameters
    ----------
    num_heads : int
    """

    def __init__(self, num_heads):
        super().__init__()
        self.scales = nn.Parameter(torch.ones(num_heads))

    def forward(self, q, n):
        """Scale ``q`` (..., heads, L, head_dim) for ``n`` keys."""
        return q * (self.scales.to(q.dtype).view(-1, 1, 1) * math.log(max(n, 1)))


class SSMaxMLP(nn.Module):
    """``q * mlp(log n)``: the factor a small MLP of ``log n``, per head or per head channel.

    Parameters
    ----------
    num_heads : int
    head_dim : int or None
        Required with ``elementwise=True``.
    n_hidden : int, default=64
    elementwise : bool, default=False
        One factor per channel of every head instead of one per head.
    """

    def __init__(self, num_heads, head_dim=None, n_hidden=64, elementwise=False):
        super().__init__()
        if elementwise and head_dim is None:
            raise ValueError("SSMaxMLP(elementwise=True) needs head_dim.")
        self.num_heads = num_heads
        self.elementwise = elementwise
        self.mlp = _mlp(1, n_hidden, num_heads * head_dim if elementwise else num_heads)

    def forward(self, q, n):
        """Scale ``q`` (..., heads, L, head_dim) for ``n`` keys."""
        factor = self.mlp(_log_keys(n, q)).view(self.num_heads, 1, -1)  # (heads, 1, head_dim or 1)
        return q * factor


class QASSMax(nn.Module):
    """Query-aware scalable softmax: ``q * base(log n) * (1 + tanh(query(q)))``.

    The length factor ``base`` is an MLP of ``log n`` (per head, or per head
    channel); the modulation ``query`` is an MLP of each query vector, shared
    by the heads, whose last layer starts at zero so that training starts from
    plain length scaling.

    Parameters
    ----------
    num_heads : int
    head_dim : int
    n_hidden : int, default=64
    elementwise : bool, default=False
        Factors per head channel instead of per head.
    """

    def __init__(self, num_heads, head_dim, n_hidden=64, elementwise=False):
        super().__init__()
        self.num_heads = num_heads
        self.base_mlp = _mlp(1, n_hidden, num_heads * head_dim if elementwise else num_heads)
        self.query_mlp = _mlp(head_dim, n_hidden, head_dim if elementwise else 1)
        nn.init.zeros_(self.query_mlp[-1].weight)
        nn.init.zeros_(self.query_mlp[-1].bias)

    def forward(self, q, n):
        """Scale ``q`` (..., heads, L, head_dim) for ``n`` keys."""
        base = self.base_mlp(_log_keys(n, q)).view(self.num_heads, 1, -1)
        return q * (base * (1 + torch.tanh(self.query_mlp(q))))


def scalable_softmax(kind, num_heads, embed_dim):
    """The scalable-softmax module of ``kind`` for attention of width ``embed_dim``.

    Parameters
    ----------
    kind : str or bool
        One of :data:`SSMAX_KINDS`; ``True`` means ``"qassmax-mlp-elementwise"``
        and ``False`` means ``"none"`` (the official conventions).
    num_heads : int
    embed_dim : int
        Width of all heads together.

    Returns
    -------
    nn.Module or None
        ``None`` for ``"none"``.
    """
    if isinstance(kind, bool):
        kind = "qassmax-mlp-elementwise" if kind else "none"
    head_dim = embed_dim // num_heads
    if kind == "none":
        return None
    if kind == "ssmax":
        return SSMax(num_heads)
    if kind == "ssmax-mlp":
        return SSMaxMLP(num_heads)
    if kind == "ssmax-mlp-elementwise":
        return SSMaxMLP(num_heads, head_dim, elementwise=True)
    if kind == "qassmax-mlp":
        return QASSMax(num_heads, head_dim)
    if kind == "qassmax-mlp-elementwise":
        return QASSMax(num_heads, head_dim, elementwise=True)
    raise ValueError(f"Unknown scalable softmax {kind!r}; expected a bool or one of {SSMAX_KINDS}.")
