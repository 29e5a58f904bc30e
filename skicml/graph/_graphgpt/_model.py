"""The GraphGPT network: a Llama-style transformer over stacked graph tokens.

Input: int tokens of shape (B, L, F) from :class:`EulerTokenizer`, one row per
step of an Eulerian walk, ``F`` stacked tokens per row, 0 for padding rows.

1. the ``F`` token embeddings of a row are summed (or weighted per stacked
   slot and summed, ``stack_agg="gated"``);
2. ``num_layers`` pre-RMSNorm blocks: multi-head attention with rotary
   positions (bidirectional, or causal for next-token pretraining) and a
   gated GELU MLP, no biases;
3. a final RMSNorm gives the hidden states.

Pretraining heads predict tokens: a linear map ``d -> F*d`` turns a row's
hidden state into one vector per stacked slot, and a shared ``d -> V``
language-model head scores the vocabulary. Fine-tuning reads the hidden state
of the ``<eos>`` row (the last non-padding row) with a small head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...nn import LlamaBlock, RMSNorm, RotaryEmbedding

__all__ = [
    "GraphGPTModel",
    "GraphPredictor",
    "MaskedTokenObjective",
    "NextTokenObjective",
    "mask_cells",
]

PAD = 0
MASK = 1
IGNORE = -100


class GraphGPTModel(nn.Module):
    """Llama-style transformer over stacked Eulerian-walk tokens.

    Parameters
    ----------
    vocab_size : int
    n_stacked : int
        Tokens per row ``F``.
    hidden_size : int, default=128
    num_layers : int, default=4
    head_dim : int, default=32
    mlp_ratio : int, default=4
    attn_dropout : float, default=0.0
    drop_path : float, default=0.0
    stack_agg : {"sum", "gated"}, default="sum"
    causal : bool, default=False
        Causal attention (next-token pretraining); bidirectional otherwise.
    rope_theta : float, default=10000
    """

    def __init__(self, vocab_size, n_stacked, hidden_size=128, num_layers=4, head_dim=32, mlp_ratio=4,
                 attn_dropout=0.0, drop_path=0.0, stack_agg="sum", causal=False, rope_theta=1e4):
        super().__init__()
        if stack_agg not in ("sum", "gated"):
            raise ValueError(f"stack_agg={stack_agg!r}; expected 'sum' or 'gated'.")
        self.n_stacked = n_stacked
        self.hidden_size = hidden_size
        self.stack_agg = stack_agg
        self.causal = causal
        self.embed = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=0.02)
        with torch.no_grad():
            self.embed.weight[PAD].zero_()
        if stack_agg == "gated":
            self.stack_weight = nn.Parameter(torch.ones(n_stacked, hidden_size))
        self.rotary = RotaryEmbedding(head_dim, rope_theta)
        self.layers = nn.ModuleList(
            LlamaBlock(hidden_size, head_dim, mlp_ratio, attn_dropout, drop_path) for _ in range(num_layers)
        )
        self.norm = RMSNorm(hidden_size)
        self.token_proj = nn.Linear(hidden_size, hidden_size * n_stacked, bias=False)
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)

    def _mask(self, tokens):
        valid = tokens[..., 0] != PAD  # (B, L)
        allowed = valid[:, None, None, :]  # keys
        if self.causal:
            length = tokens.shape[1]
            allowed = allowed & torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()
        return allowed

    def forward(self, tokens):
        """Hidden states (B, L, hidden_size) of tokens (B, L, F)."""
        tokens = tokens.long()
        embedded = self.embed(tokens)  # (B, L, F, d)
        if self.stack_agg == "gated":
            embedded = embedded * self.stack_weight
        x = embedded.sum(dim=-2)
        mask = self._mask(tokens)
        for layer in self.layers:
            x = layer(x, self.rotary, mask)
        return self.norm(x)

    def cell_logits(self, hidden, cells):
        """Vocabulary logits of the stacked cells ``cells`` (B, L, F) bool."""
        rows = cells.any(dim=-1)
        per_slot = self.token_proj(hidden[rows]).unflatten(-1, (self.n_stacked, -1))
        return self.lm_head(per_slot[cells[rows]])

    def masked_pseudo_log_likelihood(self, tokens, n_passes=7):
        """Mean log-probability of every cell's true token when that cell is masked.

        Every non-padding cell is masked once, in ``n_passes`` forward passes
        that each hide every ``n_passes``-th cell of a sequence (about 14% for
        the default 7, close to the mask ratios of SMTP pretraining), and
        scored by the log-probability the model gives its true token. A
        sequence's score depends on that sequence only.

        Parameters
        ----------
        tokens : Tensor of shape (..., L, F)
            Any leading batch dimensions (graphs, serializations).
        n_passes : int, default=7

        Returns
        -------
        Tensor of shape tokens.shape[:-2], float64
            The mean over the sequence's cells (0 for an all-padding one).
        """
        flat = tokens.reshape(-1, *tokens.shape[-2:]).long()
        valid = (flat[..., :1] != PAD).expand_as(flat)
        cell = torch.arange(flat[0].numel(), device=flat.device).view_as(flat[0])
        total = torch.zeros(flat.shape[0], dtype=torch.float64, device=flat.device)
        for phase in range(n_passes):
            chosen = valid & (cell % n_passes == phase)
            inputs = flat.masked_fill(chosen, MASK)
            logp = torch.log_softmax(self.cell_logits(self(inputs), chosen).double(), -1)
            picked = torch.zeros(flat.shape, dtype=torch.float64, device=flat.device)
            picked[chosen] = logp.gather(1, flat[chosen].unsqueeze(1)).squeeze(1)
            total += picked.sum((1, 2))
        return (total / valid.sum((1, 2)).clamp_min(1)).view(tokens.shape[:-2])

    def pool(self, tokens, hidden, pooling="eos"):
        """One vector per graph: the last non-padding row (``<eos>``) or the mean."""
        valid = tokens[..., 0] != PAD
        if pooling == "mean":
            weights = valid.to(hidden.dtype).unsqueeze(-1)
            return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1)
        last = valid.sum(1).clamp_min(1) - 1
        return hidden[torch.arange(len(hidden), device=hidden.device), last]


def mask_cells(tokens, vocab_size, ratio_range=(0.01, 0.99), power=1.0, token_probs=(1.0, 0.0, 0.0),
               generator=None):
    """Scheduled masked-token corruption (SMTP) of a batch of sequences.

    Each graph draws ``t ~ U(ratio_range)`` and masks
    ``ceil((1 - t**power) * n_cells)`` of its non-padding cells, chosen
    uniformly over the whole (rows x F) grid; ``power=1`` makes the mask
    ratio uniform. A chosen cell becomes ``<mask>``, a random token or stays,
    with probabilities ``token_probs``.

    Returns
    -------
    inputs : LongTensor (B, L, F)
    labels : LongTensor (B, L, F)
        The original token on chosen cells, -100 elsewhere.
    """
    tokens = tokens.long()
    batch = tokens.shape[0]
    device = tokens.device
    valid = (tokens[..., :1] != PAD).expand_as(tokens).reshape(batch, -1)
    low, high = ratio_range
    t = low + (high - low) * torch.rand(batch, generator=generator, device=device)
    ratio = 1 - t ** power
    n_cells = valid.sum(1)
    k = torch.ceil(ratio * n_cells).long().clamp(1, None).minimum(n_cells)
    scores = torch.rand(valid.shape, generator=generator, device=device).masked_fill(~valid, 2.0)
    threshold = scores.sort(dim=1).values.gather(1, (k - 1).clamp_min(0).unsqueeze(1))
    chosen = (scores <= threshold) & valid & (n_cells > 0).unsqueeze(1)
    chosen = chosen.view_as(tokens)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))
    draw = torch.rand(tokens.shape, generator=generator, device=device)
    p_mask, p_random = token_probs[0], token_probs[1]
    random_tokens = torch.randint(MASK + 1, vocab_size, tokens.shape, generator=generator, device=device)
    corrupted = torch.where(draw < p_mask, torch.full_like(tokens, MASK),
                            torch.where(draw < p_mask + p_random, random_tokens, tokens))
    return torch.where(chosen, corrupted, tokens), labels


def _pick_view(tokens):
    """(B, V, L, F) -> (B, L, F): one random serialization per graph."""
    if tokens.dim() == 3:
        return tokens
    choice = torch.randint(tokens.shape[1], (tokens.shape[0],), device=tokens.device)
    return tokens[torch.arange(tokens.shape[0], device=tokens.device), choice]


class MaskedTokenObjective(nn.Module):
    """SMTP pretraining: ``forward(tokens)`` returns the masked-token loss.

    ``tokens`` is (B, L, F) or (B, V, L, F) with V serializations per graph,
    of which each step uses one at random.
    """

    def __init__(self, model, ratio_range=(0.01, 0.99), power=1.0, token_probs=(1.0, 0.0, 0.0)):
        super().__init__()
        self.model = model
        self.ratio_range = tuple(ratio_range)
        self.power = power
        self.token_probs = tuple(token_probs)

    def forward(self, tokens):
        tokens = _pick_view(tokens).long()
        inputs, labels = mask_cells(tokens, self.model.lm_head.out_features, self.ratio_range, self.power,
                                    self.token_probs)
        hidden = self.model(inputs)
        chosen = labels != IGNORE
        logits = self.model.cell_logits(hidden, chosen)
        return F.cross_entropy(logits.float(), labels[chosen])


class NextTokenObjective(nn.Module):
    """NTP pretraining: predict every token of the next row (causal model)."""

    def __init__(self, model):
        super().__init__()
        if not model.causal:
            raise ValueError("Next-token pretraining needs a GraphGPTModel built with causal=True.")
        self.model = model

    def forward(self, tokens):
        tokens = _pick_view(tokens).long()
        hidden = self.model(tokens)[:, :-1]
        targets = tokens[:, 1:]
        cells = (targets != PAD) & (targets[..., :1] != PAD)
        logits = self.model.cell_logits(hidden, cells)
        return F.cross_entropy(logits.float(), targets[cells])


class GraphPredictor(nn.Module):
    """A backbone and a head on the pooled graph vector.

    ``forward(tokens)`` takes (B, L, F) or (B, V, L, F); in training each graph
    uses one random serialization, in eval the outputs are averaged over
    the V serializations (test-time augmentation).

    Parameters
    ----------
    backbone : GraphGPTModel
    n_outputs : int
    head_hidden : int or None
        Width of a hidden layer of the head; ``None`` for a linear head.
    pooling : {"eos", "mean"}
    freeze_backbone : bool
    """

    def __init__(self, backbone, n_outputs, head_hidden=None, pooling="eos", freeze_backbone=False):
        super().__init__()
        self.backbone = backbone
        self.pooling = pooling
        d = backbone.hidden_size
        if head_hidden:
            self.head = nn.Sequential(nn.Linear(d, head_hidden), nn.GELU(), nn.Linear(head_hidden, n_outputs))
        else:
            self.head = nn.Linear(d, n_outputs)
        self.freeze_backbone = freeze_backbone
        if freeze_backbone:
            backbone.requires_grad_(False)

    def embed(self, tokens):
        tokens = tokens.long()
        return self.backbone.pool(tokens, self.backbone(tokens), self.pooling)

    def forward(self, tokens):
        if tokens.dim() == 3 or self.training:
            return self.head(self.embed(_pick_view(tokens)))
        batch, views = tokens.shape[:2]
        out = self.head(self.embed(tokens.flatten(0, 1)))
        return out.unflatten(0, (batch, views)).mean(1)
