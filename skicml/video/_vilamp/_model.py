"""ViLAMP's compressor as torch modules, and the small classifier that trains it.

- :class:`DifferentialKeyframeSelector`: DKS, no parameters.
- :class:`DifferentialFeatureMerger`: DFM, parameter-free (cosines in the
  embedding space, through the fused op) or learnable (the official
  ``SigPooling``: four linear maps and a learned temperature).
- :class:`ViLAMPNetwork`: merger plus a small head over the compressed tokens
  (a stand-in for the paper's LLM), so the learnable merge trains end to end.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...nn import LlamaBlock, RMSNorm, RotaryEmbedding
from ._functional import (
    _EPS,
    check_keyframes,
    interleave_tokens,
    keyframe_references,
    merge_features,
    pool_keyframe_patches,
    select_keyframes,
)

__all__ = ["DifferentialFeatureMerger", "DifferentialKeyframeSelector", "ViLAMPNetwork"]


class DifferentialKeyframeSelector(nn.Module):
    """Differential keyframe selection (DKS) as a module without parameters.

    Parameters
    ----------
    max_keyframes, redundancy_threshold, min_relevance, fill
        As in :func:`skicml.video.select_keyframes`.

    Examples
    --------
    >>> import torch
    >>> from skicml.video import DifferentialKeyframeSelector
    >>> selector = DifferentialKeyframeSelector(max_keyframes=2)
    >>> selector(torch.eye(3), torch.tensor([1.0, 0.5, 0.0]))
    tensor([0, 1])
    """

    def __init__(self, max_keyframes=32, redundancy_threshold=0.85, min_relevance=None, fill="none"):
        super().__init__()
        self.max_keyframes = max_keyframes
        self.redundancy_threshold = redundancy_threshold
        self.min_relevance = min_relevance
        self.fill = fill

    @torch.no_grad()
    def forward(self, frames, query):
        """Keyframe indices of a (N, D) video, or a list of them for a list of videos."""
        return select_keyframes(frames, query, self.max_keyframes, self.redundancy_threshold,
                                self.min_relevance, self.fill)


class DifferentialFeatureMerger(nn.Module):
    """Differential feature merging (DFM): one token per non-keyframe.

    Parameter-free (``learnable=False``), a patch's score is
    ``cos(p, q) - merge_lambda * cos(p, r)`` in the embedding space itself
    (computed by :func:`skicml.ops.differential_merge`). Learnable, it is the
    official ``SigPooling``: ``cos(W_q q, W_iq p) - merge_lambda *
    cos(W_k r, W_ik p)`` with four linear maps initialised N(0, 0.02) (or,
    with ``init="identity"``, the identity plus N(0, 0.02) and zero bias, so
    that it starts as the parameter-free rule) and a temperature learned on
    the log scale (so it stays positive). Either way
    the token is the softmax-weighted mean of the frame's own patches.

    Parameters
    ----------
    dim : int or None, default=None
        Width of the patches and the query; needed when ``learnable``.
    learnable : bool, default=False
    merge_lambda, temperature, reference, keyframe_pool
        As in :func:`skicml.video.merge_features`; ``temperature`` is the
        initial value when ``learnable``.
    init : {"normal", "identity"}, default="normal"
        Initial linear maps when ``learnable``: the official N(0, 0.02), or
        the identity plus N(0, 0.02) with zero bias.

    Examples
    --------
    >>> import torch
    >>> from skicml.video import DifferentialFeatureMerger
    >>> merger = DifferentialFeatureMerger(dim=4, learnable=True)
    >>> tokens, types = merger(torch.randn(6, 9, 4), torch.randn(4), torch.tensor([0, 3]))
    >>> tokens.shape, int(types.sum())
    (torch.Size([22, 4]), 18)
    >>> near = DifferentialFeatureMerger(dim=4, learnable=True, init="identity")
    >>> bool((near.query_map.weight - torch.eye(4)).abs().max() < 0.2)
    True
    """

    def __init__(self, dim=None, learnable=False, merge_lambda=1.0, temperature=0.01, reference="preceding",
                 keyframe_pool=1, init="normal"):
        super().__init__()
        if init not in ("normal", "identity"):
            raise ValueError(f"init must be 'normal' or 'identity', got {init!r}.")
        self.learnable = learnable
        self.merge_lambda = merge_lambda
        self.temperature = temperature
        self.reference = reference
        self.keyframe_pool = keyframe_pool
        if learnable:
            if dim is None:
                raise ValueError("a learnable DifferentialFeatureMerger needs dim, the patches' width.")
            self.query_map = nn.Linear(dim, dim)
            self.patch_query_map = nn.Linear(dim, dim)
            self.reference_map = nn.Linear(dim, dim)
            self.patch_reference_map = nn.Linear(dim, dim)
            for layer in (self.query_map, self.patch_query_map, self.reference_map, self.patch_reference_map):
                nn.init.normal_(layer.weight, std=0.02)
                if init == "identity":
                    with torch.no_grad():
                        layer.weight += torch.eye(dim, dtype=layer.weight.dtype)
                        layer.bias.zero_()
            self.log_temperature = nn.Parameter(torch.tensor(math.log(temperature)))

    def forward(self, patches, query, keyframes, return_weights=False):
        """Compressed tokens and token types of a (N, M, D) video (lists for lists of videos)."""
        if not self.learnable:
            return merge_features(patches, query, keyframes, merge_lambda=self.merge_lambda,
                                  temperature=self.temperature, reference=self.reference,
                                  keyframe_pool=self.keyframe_pool, return_weights=return_weights)
        single = not isinstance(patches, (list, tuple))
        videos = [patches] if single else list(patches)
        keys = [keyframes] if single else list(keyframes)
        queries = query.expand(len(videos), -1) if query.dim() == 1 else query
        outputs = [self._merge_one(v, q, k, return_weights) for v, q, k in zip(videos, queries, keys)]
        outputs = tuple(zip(*outputs))
        return tuple(out[0] for out in outputs) if single else tuple(list(out) for out in outputs)

    def _merge_one(self, patches, query, keyframes, return_weights):
        n_frames = patches.shape[0]
        keyframes = check_keyframes(keyframes, n_frames)
        refs = keyframe_references(keyframes, n_frames, self.reference)
        merged = torch.ones(n_frames, dtype=torch.bool, device=patches.device)
        merged[keyframes] = False
        frame_index = merged.nonzero().flatten()
        ref_index = refs.to(patches.device)[frame_index]
        # "official" frames before the first keyframe are their own reference.
        ref_index = torch.where(ref_index < 0, frame_index, ref_index)
        own = patches[frame_index]
        relevance = F.cosine_similarity(self.patch_query_map(own), self.query_map(query)[None, None], dim=-1,
                                        eps=_EPS)
        redundancy = F.cosine_similarity(self.patch_reference_map(own), self.reference_map(patches[ref_index]),
                                         dim=-1, eps=_EPS)
        score = (relevance - self.merge_lambda * redundancy) / self.log_temperature.exp()
        weights = torch.softmax(score, dim=-1)
        tokens = torch.einsum("nm,nmd->nd", weights, own)
        keyframe_tokens = pool_keyframe_patches(patches[keyframes], self.keyframe_pool)
        sequence, types = interleave_tokens(keyframes, n_frames, keyframe_tokens, tokens)
        if not return_weights:
            return sequence, types
        full = torch.full(patches.shape[:2], math.nan, dtype=weights.dtype, device=patches.device)
        full[frame_index] = weights
        return sequence, types, full


_MERGED, _KEYFRAME, _QUERY, _CLS = range(4)


class ViLAMPNetwork(nn.Module):
    """A merger and a small head over the compressed tokens of each video.

    The head reads ``[CLS, query, tokens...]``: each token is projected to
    ``d_model`` and gets a learned type embedding (merged frame, keyframe
    patch, query, CLS); ``"transformer"`` runs ``n_layers`` pre-norm blocks
    with rotary positions over the token order (which is temporal) and reads
    the CLS token; ``"attention_pool"`` pools the tokens by their attention
    to the query, a learned score plus a learned multiple (initially 10) of
    the token's cosine with the query (linear in the sequence length, for
    uncompressed baselines too).

    Parameters
    ----------
    dim : int
        Width of the embeddings.
    n_classes : int
    merger : DifferentialFeatureMerger
    head : {"transformer", "attention_pool"}, default="transformer"
    d_model : int, default=64
    n_layers : int, default=2
    n_heads : int, default=4

    Examples
    --------
    >>> import torch
    >>> from skicml.video import DifferentialFeatureMerger, ViLAMPNetwork
    >>> network = ViLAMPNetwork(8, 3, DifferentialFeatureMerger(8, learnable=True), d_model=16)
    >>> videos = [torch.randn(5, 4, 8), torch.randn(7, 4, 8)]
    >>> network(videos, torch.randn(2, 8), [torch.tensor([1]), torch.tensor([0, 4])]).shape
    torch.Size([2, 3])
    """

    def __init__(self, dim, n_classes, merger, head="transformer", d_model=64, n_layers=2, n_heads=4):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not a multiple of n_heads={n_heads}.")
        self.head = head
        self.merger = merger
        self.embed = nn.Linear(dim, d_model)
        self.token_type = nn.Embedding(4, d_model)
        self.output_norm = RMSNorm(d_model)
        self.classify = nn.Linear(d_model, n_classes)
        if head == "transformer":
            self.rotary = RotaryEmbedding(d_model // n_heads)
            self.blocks = nn.ModuleList(LlamaBlock(d_model, d_model // n_heads) for _ in range(n_layers))
        else:
            self.pool_query = nn.Linear(d_model, d_model)
            # Attention starts at the tokens relevant to the query (their cosine
            # with it, sharpened): a few event tokens among thousands get a
            # gradient from the first step instead of 1 / n_tokens of it.
            self.relevance_scale = nn.Parameter(torch.tensor(10.0))

    def forward(self, patches, queries, keyframes):
        """Class logits (n_videos, n_classes) of lists of (N_i, M, D) patches, (n_videos, D) queries
        and the keyframes of each video."""
        tokens, types = self.merger(list(patches), queries, list(keyframes))
        lengths = torch.tensor([len(t) for t in tokens], device=queries.device)
        hidden = nn.utils.rnn.pad_sequence([self.embed(t) for t in tokens], batch_first=True)
        hidden = hidden + self.token_type(nn.utils.rnn.pad_sequence(types, batch_first=True).to(hidden.device))
        query = self.embed(queries) + self.token_type.weight[_QUERY]
        valid = torch.arange(hidden.shape[1], device=hidden.device)[None] < lengths[:, None]
        if self.head == "attention_pool":
            scores = torch.einsum("bld,bd->bl", hidden, self.pool_query(query)) / math.sqrt(hidden.shape[-1])
            units = nn.utils.rnn.pad_sequence([F.normalize(t, dim=-1, eps=_EPS) for t in tokens], batch_first=True)
            relevance = torch.einsum("bld,bd->bl", units, F.normalize(queries, dim=-1, eps=_EPS))
            scores = scores + self.relevance_scale * relevance
            attention = torch.softmax(scores.masked_fill(~valid, -math.inf), dim=1)
            pooled = torch.einsum("bl,bld->bd", attention, hidden) + query
            return self.classify(self.output_norm(pooled))
        cls = self.token_type.weight[_CLS].expand(len(tokens), 1, -1)
        sequence = torch.cat([cls, query[:, None], hidden], dim=1)
        keep = torch.cat([torch.ones(len(tokens), 2, dtype=torch.bool, device=hidden.device), valid], dim=1)
        mask = keep[:, None, None, :]
        for block in self.blocks:
            sequence = block(sequence, self.rotary, mask)
        return self.classify(self.output_norm(sequence[:, 0]))
