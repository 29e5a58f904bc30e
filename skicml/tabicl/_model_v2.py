"""TabICLv2 (Qu et al., ICML 2026), the network of ``tabicl`` 2.x, in plain torch.

The three stages of v1 (:mod:`skicml.tabicl._model`) stay, with these changes:

1. **Column embedding** (:class:`ColumnEmbedding`) is *target-aware*: the
   training cells get their row's label embedded and added before the Set
   Transformer summarises each column, so the column statistics the model
   sees are conditional on the target. Cells can be embedded in *groups* of
   ``feature_group_size`` columns (``"same"``: group ``j`` reads columns
   ``j + 1, j + 2, j + 4, ...`` modulo ``H``, so there are still ``H`` groups
   and every column is in ``size`` of them; ``"valid"``: consecutive columns,
   zero-padded, ``ceil(H / size)`` groups). The summarising attention uses query-aware scalable softmax
   (:mod:`skicml.nn.ssmax`), so it reads 50K rows as it read 2K in
   pretraining. The affine head of v1 is optional (off in v2).
2. **Row interaction** (:class:`RowInteraction`) is v1's, with the rotary
   embedding optionally over head halves instead of interleaved pairs.
3. **In-context learning** (:class:`ICLearning`): v1's, with scalable softmax
   in every block, and a regression variant (``max_classes=0``) whose labels
   are embedded by a linear map of the scalar target and whose decoder
   outputs ``num_quantiles`` quantiles of it.

With more classes than ``max_classes`` the column stage runs once per digit of
a mixed-radix code of the labels (each digit at most ``max_classes`` values)
and averages; the in-context stage solves the tree of v1 (every node with the
official node temperature 0.9).

Constructor keys and ``state_dict`` names are those of the official
``tabicl`` 2.2.0 ``TabICL``, so its checkpoints load as they are
(:func:`load_tabicl_network` also recognises v1 files).

Nothing a training row computes depends on a test row, so everything the
training rows contribute (the column stage's summaries, as the keys and values
the cells read; the in-context keys and values) is computed once by
:meth:`TabICLv2Model.build_context` and reused by
:meth:`TabICLv2Model.predict_with_context`. Unlike v1, labels enter the
column stage, so a context belongs to one labelling of the training rows.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..nn.attention import BlockStack, InducedSelfAttentionBlock, MultiheadAttentionBlock
from ..nn.rope import RotaryEmbedding
from ._model import TabICLModel, class_group_sizes
from ._quantiles import QuantileDistribution, quantile_levels

__all__ = ["V1_CONFIG_KEYS", "TabICLv2Context", "TabICLv2Model", "load_tabicl_network", "mixed_radix_bases"]

#: The official placeholder value: a cell whose inputs all equal it is embedded as it.
SKIP_VALUE = -100.0

#: Cells (rows x columns) per pass of the column stage at inference; bounds memory, not results.
COLUMN_CELLS = 2**19

#: Tokens (tables x rows x (CLS + column groups)) per pass of the row stage at inference.
ROW_TOKENS = 2**19

#: Test rows per pass of :meth:`TabICLv2Model.predict_with_context`.
ROW_CHUNK = 2048

#: Temperature of the class tree's nodes: the official inference does not pass the caller's on.
NODE_TEMPERATURE = 0.9


def _maybe_checkpoint(recompute, function, *args, **kwargs):
    """``function(*args, **kwargs)``, recomputed in the backward pass when ``recompute`` and training."""
    if recompute and torch.is_grad_enabled():
        return checkpoint(function, *args, use_reentrant=False, **kwargs)
    return function(*args, **kwargs)


def _embed_labels(linear, y, max_classes):
    """Label embeddings (..., n, width): one-hot classes, or the scalar target (``max_classes=0``)."""
    if max_classes > 0:
        return F.linear(F.one_hot(y.long(), max_classes).to(linear.weight.dtype), linear.weight, linear.bias)
    return linear(y.unsqueeze(-1).to(linear.weight.dtype))


def _average(total, count):
    # one pass is returned as it is (the official code divides only with several)
    return total / count if count > 1 else total


def mixed_radix_bases(n_classes, max_classes):
    """Digit bases of the mixed-radix label code the column stage uses beyond ``max_classes``.

    ``D = ceil(log(K) / log(max_classes))`` digits of near-equal base, each
    at most ``max_classes``, whose product covers ``K``: 25 classes with 10
    natively -> ``[5, 5]``; 101 -> ``[5, 5, 5]``.
    """
    if n_classes <= max_classes:
        return [n_classes]
    digits = math.ceil(math.log(n_classes) / math.log(max_classes))
    base = min(math.ceil(n_classes ** (1.0 / digits)), max_classes)
    bases, product = [base] * digits, base**digits
    for i in range(digits):
        if product >= n_classes:
            break
        if bases[i] < max_classes:
            product = product // bases[i] * (bases[i] + 1)
            bases[i] += 1
    return bases


# --------------------------------------------------------------------------
# stage 1: target-aware column embedding
# --------------------------------------------------------------------------
class ColumnEmbedding(nn.Module):
    """Distribution- and target-aware embedding of every cell from its column (group)'s values.

    Works on *sets*: ``sets`` (N, T, s) are N columns (or groups of ``s``
    columns) of T cells, the first ``n_train`` of them training cells.
    ``labels`` is one (N, n_train) tensor per pass of the Set Transformer (one
    per mixed-radix digit, usually one), or ``[None]`` when not target-aware.
    """

    def __init__(self, embed_dim, num_blocks, nhead, dim_feedforward, num_inds, *, affine, feature_group,
                 feature_group_size, target_aware, max_classes, ssmax, block_options, recompute=False):
        super().__init__()
        if feature_group is True:
            feature_group = "same"
        if feature_group not in (False, "same", "valid"):
            raise ValueError(f"col_feature_group must be False, True, 'same' or 'valid', got {feature_group!r}.")
        grouped = feature_group is not False
        if affine and grouped and feature_group_size != 1:
            raise ValueError("col_affine=True multiplies each cell's value into its embedding, which needs "
                             "col_feature_group=False (or groups of one column).")
        self.embed_dim = embed_dim
        self.feature_group = feature_group
        self.group_size = feature_group_size if grouped else 1
        self.target_aware = target_aware
        self.max_classes = max_classes
        self.affine = affine
        self.recompute = recompute
        self.in_linear = nn.Linear(self.group_size, embed_dim)
        self.tf_col = BlockStack([
            InducedSelfAttentionBlock(embed_dim, nhead, dim_feedforward, num_inds, ssmax=ssmax, **block_options)
            for _ in range(num_blocks)
        ])
        if target_aware:
            self.y_encoder = nn.Linear(max_classes if max_classes > 0 else 1, embed_dim)
        if affine:
            norm = (lambda: nn.LayerNorm(embed_dim, bias=not block_options["bias_free_ln"])) \
                if block_options["norm_first"] else nn.Identity
            self.out_w = nn.Linear(embed_dim, embed_dim)
            self.ln_w = norm()
            self.out_b = nn.Linear(embed_dim, embed_dim)
            self.ln_b = norm()

    # -- from a table to sets --------------------------------------------------
    def groups(self, X):
        """``X`` (B, T, H) -> sets (B, G, T, s) of the columns each group reads."""
        H = X.shape[-1]
        if self.feature_group is False:
            return X.transpose(1, 2).unsqueeze(-1)
        if self.feature_group == "same":
            # group j reads columns j + 2^i (mod H), i < s: every column is in s groups
            offsets = 2 ** torch.arange(self.group_size, device=X.device)
            index = (torch.arange(H, device=X.device).unsqueeze(1) + offsets) % H
            return X[:, :, index].permute(0, 2, 1, 3)
        padded = F.pad(X, (0, -H % self.group_size))
        return padded.unflatten(-1, (-1, self.group_size)).permute(0, 2, 1, 3)

    def label_passes(self, y_train):
        """Labels per pass of the Set Transformer for ``y_train`` (B, n_train): a list of (B, n_train)."""
        if not self.target_aware:
            return [None]
        if self.max_classes == 0:
            return [y_train]
        bases = mixed_radix_bases(int(y_train.max()) + 1, self.max_classes)
        if len(bases) == 1:
            return [y_train]
        y = y_train.long()
        return [(y // math.prod(bases[i + 1:])) % bases[i] for i in range(len(bases))]

    # -- the set transformer ---------------------------------------------------
    def _input(self, sets, labels, n_train):
        hidden = self.in_linear(sets)
        skipped = (sets == SKIP_VALUE).all(-1, keepdim=True)
        if bool(skipped.any()):
            hidden = hidden.masked_fill(skipped, SKIP_VALUE)
        if labels is None:
            return hidden
        label_embedding = _embed_labels(self.y_encoder, labels, self.max_classes)
        return torch.cat([hidden[..., :n_train, :] + label_embedding, hidden[..., n_train:, :]], dim=-2)

    def _output(self, sets, hidden):
        if not self.affine:
            return hidden
        return sets * self.ln_w(self.out_w(hidden)) + self.ln_b(self.out_b(hidden))

    def forward(self, sets, labels, n_train):
        """Cell embeddings (N, T, E) of ``sets`` (N, T, s), summaries over the first ``n_train`` cells."""
        total = 0
        for label in labels:
            hidden = self._input(sets, label, n_train)
            for block in self.tf_col.blocks:
                hidden = _maybe_checkpoint(self.recompute and self.training, block, hidden, n_train)
            total = total + hidden
        return self._output(sets, _average(total, len(labels)))

    # -- fit-time cache --------------------------------------------------------
    def context(self, sets, labels):
        """What training cells ``sets`` (N, n_train, s) leave for new cells, and their own embeddings.

        Returns ``(key_values, cells)``: per label pass, per block, the keys
        and values (N, heads, num_inds, head_dim) of the inducing summary that
        cells read; and the (N, n_train, E) embeddings of the training cells.
        """
        n_train = sets.shape[-2]
        key_values, total = [], 0
        for label in labels:
            hidden = self._input(sets, label, n_train)
            per_block = []
            for block in self.tf_col.blocks:
                key, value = block.multihead_attn2.context_key_value(block.summarise(hidden))
                hidden = block.multihead_attn2.forward_with_context(hidden, key, value)
                per_block.append((key, value))
            key_values.append(per_block)
            total = total + hidden
        return key_values, self._output(sets, _average(total, len(labels)))

    def embed_with_context(self, sets, key_values):
        """Cell embeddings (N, m, E) of new cells ``sets`` (N, m, s) against :meth:`context`'s keys and values."""
        start = self._input(sets, None, 0)
        total = 0
        for per_block in key_values:
            hidden = start
            for block, (key, value) in zip(self.tf_col.blocks, per_block):
                hidden = block.multihead_attn2.forward_with_context(hidden, key, value)
            total = total + hidden
        return self._output(sets, _average(total, len(key_values)))


# --------------------------------------------------------------------------
# stage 2: row interaction
# --------------------------------------------------------------------------
class RowInteraction(nn.Module):
    """Per-row transformer over CLS tokens and cells, pooled into the CLS outputs."""

    def __init__(self, embed_dim, num_blocks, nhead, dim_feedforward, num_cls, rope_base, rope_interleaved,
                 block_options, recompute=False):
        super().__init__()
        self.num_cls = num_cls
        self.recompute = recompute
        self.tf_row = BlockStack(
            [MultiheadAttentionBlock(embed_dim, nhead, dim_feedforward, **block_options) for _ in range(num_blocks)],
            rope=RotaryEmbedding(embed_dim // nhead, theta=rope_base, interleaved=rope_interleaved),
        )
        self.cls_tokens = nn.Parameter(torch.empty(num_cls, embed_dim))
        nn.init.trunc_normal_(self.cls_tokens, std=0.02)
        self.out_ln = (nn.LayerNorm(embed_dim, bias=not block_options["bias_free_ln"])
                       if block_options["norm_first"] else nn.Identity())

    def forward(self, cells, n_features=None):
        """``cells`` (B, T, G, E) -> row vectors (B, T, C*E); ``n_features`` (B,) masks padded columns."""
        B, T, G, E = cells.shape
        tokens = torch.cat([self.cls_tokens.to(cells.dtype).expand(B, T, self.num_cls, E), cells], dim=2)
        padding = None
        if n_features is not None:
            positions = torch.arange(self.num_cls + G, device=cells.device)
            padding = (positions.view(1, 1, -1) >= (n_features + self.num_cls).view(B, 1, 1)).expand(B, T, -1)
        recompute = self.recompute and self.training
        rope = self.tf_row.rope
        *inner, last = self.tf_row.blocks
        for block in inner:
            tokens = _maybe_checkpoint(recompute, block, tokens, key_padding_mask=padding, rope=rope)
        # only the CLS outputs of the last block are read: the cells need no queries there
        cls = _maybe_checkpoint(recompute, last, tokens[:, :, : self.num_cls], kv=tokens,
                                key_padding_mask=padding, rope=rope)
        return self.out_ln(cls).flatten(-2)


# --------------------------------------------------------------------------
# stage 3: in-context learning
# --------------------------------------------------------------------------
class ICLearning(nn.Module):
    """Label-aware transformer over rows (training rows are the only keys) and its decoder."""

    def __init__(self, max_classes, out_dim, d_model, num_blocks, nhead, dim_feedforward, *, ssmax, block_options,
                 recompute=False):
        super().__init__()
        self.max_classes = max_classes
        self.norm_first = block_options["norm_first"]
        self.recompute = recompute
        self.tf_icl = BlockStack([
            MultiheadAttentionBlock(d_model, nhead, dim_feedforward, ssmax=ssmax, **block_options)
            for _ in range(num_blocks)
        ])
        if self.norm_first:
            self.ln = nn.LayerNorm(d_model, bias=not block_options["bias_free_ln"])
        self.y_encoder = nn.Linear(max_classes if max_classes > 0 else 1, d_model)
        self.decoder = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(), nn.Linear(2 * d_model, out_dim))

    def _head(self, x, quantile_mean=False):
        x = self.ln(x) if self.norm_first else x
        if not quantile_mean:
            return self.decoder(x)
        # The mean of a linear layer's outputs is one output with the layer's
        # averaged weights: the mean of the quantiles without computing them.
        first, activation, last = self.decoder
        weight, bias = last.weight.mean(0, keepdim=True), last.bias.mean(0, keepdim=True)
        return F.linear(activation(first(x)), weight, bias)[..., 0]

    def with_labels(self, R_train, y_train):
        return R_train + _embed_labels(self.y_encoder, y_train, self.max_classes)

    def forward(self, R, y_train, quantile_mean=False):
        """Outputs (B, n_test, out_dim) of the rows after the ``n_train`` training rows of ``R`` (B, T, D).

        With ``quantile_mean`` (regression) only their mean over ``out_dim``, (B, n_test).
        """
        n_train = y_train.shape[1]
        x = torch.cat([self.with_labels(R[:, :n_train], y_train), R[:, n_train:]], dim=1)
        recompute = self.recompute and self.training
        *inner, last = self.tf_icl.blocks
        for block in inner:
            x = _maybe_checkpoint(recompute, block, x, split=n_train)
        # the last block's outputs are read for test rows only: training rows need no queries there
        x = _maybe_checkpoint(recompute, last, x[:, n_train:], kv=x[:, :n_train])
        return self._head(x, quantile_mean)

    # -- fit-time cache --------------------------------------------------------
    def context(self, R_train, y_train):
        """Per-block keys and values (B, heads, n_train, head_dim) of the training rows."""
        x = self.with_labels(R_train, y_train)
        *inner, last = self.tf_icl.blocks
        cache = []
        for block in inner:
            # the training rows attend to themselves: the keys and values just cached are theirs
            key, value = block.context_key_value(x)
            cache.append((key, value))
            x = block.forward_with_context(x, key, value)
        # the last block's outputs for training rows are never read: only its keys and values
        return cache + [last.context_key_value(x)]

    def forward_with_context(self, R_test, cache, quantile_mean=False):
        x = R_test
        for block, (key, value) in zip(self.tf_icl.blocks, cache):
            x = block.forward_with_context(x, key, value)
        return self._head(x, quantile_mean)


# --------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------
class TabICLv2Model(nn.Module):
    """The TabICLv2 network, constructed from the official ``tabicl`` 2.2.0 ``TabICL`` keywords.

    Parameters
    ----------
    max_classes : int, default=10
        Classes the decoder handles natively (more go through a mixed-radix
        column stage and a class tree); ``0`` makes a regression model.
    num_quantiles : int, default=999
        Quantiles a regression model predicts, at levels
        ``linspace(0, 1, num_quantiles + 2)[1:-1]``.
    embed_dim : int, default=128
        Cell embedding width ``E``; rows are ``row_num_cls * E`` wide.
    col_num_blocks, col_nhead, col_num_inds : int, default=3, 8, 128
        Induced attention blocks of the column stage, heads, inducing points.
    col_affine : bool, default=False
        Embed a cell as ``value * w + b`` (v1) instead of the Set Transformer's output.
    col_feature_group : {False, True, "same", "valid"}, default="same"
        Embed cells in groups of columns (``True`` is ``"same"``), see the module docstring.
    col_feature_group_size : int, default=3
    col_target_aware : bool, default=True
        Add the training cells' label embeddings before the column stage.
    col_ssmax, icl_ssmax : str or bool, default="qassmax-mlp-elementwise"
        Scalable softmax of the column stage's summarising attention and of
        every in-context block: ``"none"``, ``"ssmax"``, ``"ssmax-mlp"``,
        ``"ssmax-mlp-elementwise"``, ``"qassmax-mlp"``,
        ``"qassmax-mlp-elementwise"``, or a bool (see :mod:`skicml.nn.ssmax`).
    row_num_blocks, row_nhead, row_num_cls : int, default=3, 8, 4
        Blocks and heads of the row stage, number of CLS tokens.
    row_rope_base : float, default=100000
    row_rope_interleaved : bool, default=True
        Rotary embedding over neighbouring channel pairs; ``False`` over head halves.
    icl_num_blocks, icl_nhead : int, default=12, 8
        Blocks and heads of the in-context stage.
    ff_factor : int, default=2
        Feed-forward width as a multiple of the block width.
    dropout : float, default=0.0
    activation : {"gelu", "relu"} or callable, default="gelu"
    norm_first : bool, default=True
        Pre-norm blocks (and the final layer norms); ``False`` is post-norm.
    bias_free_ln : bool, default=False
        Layer norms without a bias.
    zero_init : bool, default=True
        Start every block as the identity (zero output projections).
    recompute : bool, default=False
        Recompute blocks in the backward pass (activation checkpointing) in training.

    Attributes
    ----------
    config : dict
        The constructor arguments, as a checkpoint stores them.

    Examples
    --------
    >>> import torch
    >>> from skicml.tabicl import TabICLv2Model
    >>> model = TabICLv2Model(embed_dim=16, col_num_blocks=1, col_num_inds=4, row_num_blocks=1,
    ...                       row_num_cls=2, icl_num_blocks=1).eval()
    >>> X, y = torch.randn(1, 30, 5), (torch.arange(20) % 3).unsqueeze(0)
    >>> context = model.build_context(X[:, :20], y)
    >>> model.predict_with_context(context, X[:, 20:]).shape
    torch.Size([1, 10, 3])
    """

    def __init__(self, max_classes=10, num_quantiles=999, embed_dim=128, col_num_blocks=3, col_nhead=8,
                 col_num_inds=128, col_affine=False, col_feature_group="same", col_feature_group_size=3,
                 col_target_aware=True, col_ssmax="qassmax-mlp-elementwise", row_num_blocks=3, row_nhead=8,
                 row_num_cls=4, row_rope_base=100000, row_rope_interleaved=True, icl_num_blocks=12, icl_nhead=8,
                 icl_ssmax="qassmax-mlp-elementwise", ff_factor=2, dropout=0.0, activation="gelu", norm_first=True,
                 bias_free_ln=False, zero_init=True, recompute=False):
        super().__init__()
        if max_classes < 0:
            raise ValueError(f"max_classes must be >= 0 (0: regression), got {max_classes}.")
        if max_classes == 0 and num_quantiles <= 0:
            raise ValueError(f"A regression model (max_classes=0) needs num_quantiles > 0, got {num_quantiles}.")
        self.config = dict(
            max_classes=max_classes, num_quantiles=num_quantiles, embed_dim=embed_dim,
            col_num_blocks=col_num_blocks, col_nhead=col_nhead, col_num_inds=col_num_inds, col_affine=col_affine,
            col_feature_group=col_feature_group, col_feature_group_size=col_feature_group_size,
            col_target_aware=col_target_aware, col_ssmax=col_ssmax, row_num_blocks=row_num_blocks,
            row_nhead=row_nhead, row_num_cls=row_num_cls, row_rope_base=row_rope_base,
            row_rope_interleaved=row_rope_interleaved, icl_num_blocks=icl_num_blocks, icl_nhead=icl_nhead,
            icl_ssmax=icl_ssmax, ff_factor=ff_factor, dropout=dropout, activation=activation,
            norm_first=norm_first, bias_free_ln=bias_free_ln, zero_init=zero_init, recompute=recompute,
        )
        self.max_classes = max_classes
        self.num_quantiles = num_quantiles
        block_options = dict(activation=activation, norm_first=norm_first, bias_free_ln=bias_free_ln,
                             dropout=dropout, zero_init=zero_init)
        self.col_embedder = ColumnEmbedding(
            embed_dim, col_num_blocks, col_nhead, embed_dim * ff_factor, col_num_inds, affine=col_affine,
            feature_group=col_feature_group, feature_group_size=col_feature_group_size,
            target_aware=col_target_aware, max_classes=max_classes, ssmax=col_ssmax, block_options=block_options,
            recompute=recompute,
        )
        self.row_interactor = RowInteraction(
            embed_dim, row_num_blocks, row_nhead, embed_dim * ff_factor, row_num_cls, row_rope_base,
            row_rope_interleaved, block_options, recompute=recompute,
        )
        width = embed_dim * row_num_cls
        self.icl_predictor = ICLearning(
            max_classes, num_quantiles if max_classes == 0 else max_classes, width, icl_num_blocks, icl_nhead,
            width * ff_factor, ssmax=icl_ssmax, block_options=block_options, recompute=recompute,
        )

    @property
    def is_regression(self):
        """Whether this is a regression (quantile) model, ``max_classes == 0``."""
        return self.max_classes == 0

    @property
    def row_dim(self):
        """Width of a row vector, ``row_num_cls * embed_dim``."""
        return self.config["row_num_cls"] * self.config["embed_dim"]

    @property
    def quantile_levels(self):
        """Levels (num_quantiles,) of a regression model's outputs."""
        return quantile_levels(self.num_quantiles)

    def distribution(self, quantiles):
        """The :class:`~skicml.tabicl._quantiles.QuantileDistribution` of raw quantiles (..., num_quantiles)."""
        return QuantileDistribution(quantiles)

    # -- the stages over whole tables -------------------------------------------
    def _cells(self, X, y_train, n_features=None):
        """Cell embeddings (B, T, G, E) of tables ``X`` (B, T, H), the column stage chunked over columns."""
        n_train = y_train.shape[1]
        sets = self.col_embedder.groups(X)  # (B, G, T, s)
        B, G, T, _ = sets.shape
        labels = self.col_embedder.label_passes(y_train)
        if n_features is not None:
            # padded columns are not embedded: they stay zero and are masked in the row stage
            real = torch.arange(G, device=X.device).unsqueeze(0) < n_features.unsqueeze(1)
            table = torch.arange(B, device=X.device).unsqueeze(1).expand(B, G)[real]
            out = sets.new_zeros(B, G, T, self.config["embed_dim"])
            out[real] = self.col_embedder(sets[real], [None if y is None else y[table] for y in labels], n_train)
            return out.transpose(1, 2)
        if self.training:
            return self.col_embedder(sets, [None if y is None else y.unsqueeze(1) for y in labels],
                                     n_train).transpose(1, 2)
        flat, table = sets.flatten(0, 1), torch.arange(B, device=X.device).repeat_interleave(G)
        out = flat.new_empty(B * G, T, self.config["embed_dim"])
        for part in _chunks(B * G, max(1, COLUMN_CELLS // max(T, 1))):
            out[part] = self.col_embedder(flat[part], [None if y is None else y[table[part]] for y in labels],
                                          n_train)
        return out.unflatten(0, (B, G)).transpose(1, 2)

    def _rows(self, cells, n_features=None):
        """Row vectors (B, T, D) of cells (B, T, G, E), chunked over rows outside training."""
        if self.training:
            return self.row_interactor(cells, n_features)
        B, T, G, _ = cells.shape
        per_pass = max(1, ROW_TOKENS // (B * (G + self.config["row_num_cls"])))
        return torch.cat([self.row_interactor(cells[:, part], n_features) for part in _chunks(T, per_pass)], dim=1)

    def encode_rows(self, X, y_train, n_features=None):
        """Row vectors (B, T, row_dim) of tables ``X`` whose first ``n_train`` rows are labelled ``y_train``."""
        if n_features is not None and bool((n_features == X.shape[-1]).all()):
            n_features = None
        if n_features is not None and self.col_embedder.feature_group is not False:
            raise ValueError("n_features (padded tables) needs col_feature_group=False: with feature "
                             "groups, pass zero-padded tables with n_features=None, as the official training does.")
        return self._rows(self._cells(X, y_train, n_features), n_features)

    def forward(self, X, y_train, n_features=None):
        """Pretraining forward: outputs (B, n_test, out_dim) for the rows after the training rows.

        ``out_dim`` is ``max_classes`` (logits of every class, present or not)
        or ``num_quantiles`` (raw quantiles) for regression.

        Parameters
        ----------
        X : Tensor of shape (B, T, H)
            Training rows first, then test rows; tables may be zero-padded.
        y_train : Tensor of shape (B, n_train)
            Class ids in ``0..max_classes-1``, or targets for regression.
        n_features : Tensor of shape (B,) or None
            Real feature count of each table when padded (only without feature groups).
        """
        return self.icl_predictor(self.encode_rows(X, y_train, n_features), y_train)

    # -- inference without cache -------------------------------------------------
    def predict_logits(self, X, y_train, *, softmax_temperature=0.9, node_temperature=NODE_TEMPERATURE):
        """Logits over the classes present, as the official inference returns them.

        Parameters
        ----------
        X : Tensor of shape (B, T, H)
            The ``n_train`` training rows, then the test rows.
        y_train : Tensor of shape (B, n_train)
            Class ids ``0..K-1``; every table has the same ``K``.
        softmax_temperature : float, default=0.9
            Beyond ``max_classes`` classes, the class tree's probabilities
            ``p`` come back as ``softmax_temperature * log(p + 1e-6)``.
        node_temperature : float, default=0.9
            Softmax temperature of the tree's nodes (the official constant).

        Returns
        -------
        Tensor of shape (B, n_test, K)
            Raw logits for ``K <= max_classes``.
        """
        n_classes = self._check_classes(y_train)
        R = self.encode_rows(X, y_train)
        return self._logits_from_rows(R, y_train, n_classes, softmax_temperature, node_temperature)

    def predict_quantiles(self, X, y_train):
        """Raw quantiles (B, n_test, num_quantiles) of a regression model (``max_classes=0``).

        ``X`` (B, T, H) holds the ``n_train`` training rows, then the test
        rows; ``y_train`` (B, n_train) the (standardised) targets. The
        quantiles are unsorted, as the network outputs them; see
        :meth:`distribution`.
        """
        self._check_regression(y_train)
        return self.icl_predictor(self.encode_rows(X, y_train), y_train)

    # -- inference with a fit-time context ----------------------------------------
    def context_nbytes(self, n_train):
        """Memory of the in-context keys and values of ``n_train`` training rows (one table)."""
        element = self.icl_predictor.y_encoder.weight.element_size()
        return 2 * len(self.icl_predictor.tf_icl.blocks) * n_train * self.row_dim * element

    def build_context(self, X_train, y_train, *, permutation=None, cache=True):
        """Everything new rows need from the training rows of a batch of tables.

        Parameters
        ----------
        X_train : Tensor of shape (B, n_train, H)
        y_train : Tensor of shape (B, n_train)
            Class ids ``0..K-1`` (the same ``K`` in every table), or the
            targets of a regression model.
        permutation : (H,) int array or None
            Column order to read the tables in (``X[:, :, permutation]``);
            new rows are read in it too.
        cache : bool, default=True
            Also compute the in-context keys and values, so that predictions
            run only the new rows through the in-context stage; with more
            than ``max_classes`` classes they are never cached (every node of
            the class tree has its own). The column stage is always cached.

        Returns
        -------
        TabICLv2Context
        """
        n_classes = self._check_regression(y_train) if self.is_regression else self._check_classes(y_train)
        self._check_table(X_train, y_train, "X_train", exact=True)
        X_train = _ordered(X_train, permutation)
        sets = self.col_embedder.groups(X_train)  # (B, G, n, s)
        B, G, n_train, _ = sets.shape
        labels = self.col_embedder.label_passes(y_train)
        flat, table = sets.flatten(0, 1), torch.arange(B, device=sets.device).repeat_interleave(G)
        cells = flat.new_empty(B * G, n_train, self.config["embed_dim"])
        parts = []  # per chunk of columns: per label pass, per block, (key, value)
        for part in _chunks(B * G, max(1, COLUMN_CELLS // max(n_train, 1))):
            key_values, cells[part] = self.col_embedder.context(
                flat[part], [None if y is None else y[table[part]] for y in labels])
            parts.append(key_values)
        columns = [[tuple(torch.cat(pieces).unflatten(0, (B, G)) for pieces in zip(*(chunk[d][b] for chunk in parts)))
                    for b in range(len(parts[0][d]))] for d in range(len(parts[0]))]
        rows = self._rows(cells.unflatten(0, (B, G)).transpose(1, 2))
        icl = None
        if cache and (self.is_regression or n_classes <= self.max_classes):
            icl = self.icl_predictor.context(rows, y_train)
        return TabICLv2Context(columns, rows, y_train, n_classes, permutation, icl)

    def encode_with_context(self, context, X):
        """Row vectors (B, m, row_dim) of new rows ``X`` (B, m, H) against a :meth:`build_context`."""
        self._check_table(X, context.y, "X")
        sets = self.col_embedder.groups(_ordered(X, context.permutation))  # (B, G, m, s)
        B, G, m, _ = sets.shape
        if G != context.columns[0][0][0].shape[1]:
            raise ValueError(f"X has {X.shape[-1]} columns, which is not what the context was built from.")
        flat = sets.flatten(0, 1)
        columns = [[(key.flatten(0, 1), value.flatten(0, 1)) for key, value in per_block]
                   for per_block in context.columns]
        out = flat.new_empty(B * G, m, self.config["embed_dim"])
        for part in _chunks(B * G, max(1, COLUMN_CELLS // max(m, 1))):
            out[part] = self.col_embedder.embed_with_context(
                flat[part], [[(key[part], value[part]) for key, value in per_block] for per_block in columns])
        return self._rows(out.unflatten(0, (B, G)).transpose(1, 2))

    def predict_with_context(self, context, X_test, *, softmax_temperature=0.9, node_temperature=NODE_TEMPERATURE,
                             quantile_mean=False):
        """Outputs for new rows against a :meth:`build_context`, as the uncached predictions return them.

        Parameters
        ----------
        context : TabICLv2Context
        X_test : Tensor of shape (B, m, H)
            New rows, in the column order of the training rows (the
            context's ``permutation`` is applied here).
        softmax_temperature, node_temperature : float, default=0.9
            As in :meth:`predict_logits` (classification beyond ``max_classes``).
        quantile_mean : bool, default=False
            Regression only: return the mean of every row's raw quantiles,
            shape (B, m), without computing the quantiles (the decoder's
            widest layer, averaged, gives it in one output).

        Returns
        -------
        Tensor of shape (B, m, n_classes), (B, m, num_quantiles) or (B, m)
            Logits over the classes present (see :meth:`predict_logits`), a
            regression model's raw quantiles, or their means.
        """
        if quantile_mean and not self.is_regression:
            raise ValueError("quantile_mean=True needs a regression model (max_classes=0); this one classifies.")
        outputs = []
        for part in _chunks(X_test.shape[1], ROW_CHUNK):
            rows = self.encode_with_context(context, X_test[:, part])
            if context.icl is not None:
                out = self.icl_predictor.forward_with_context(rows, context.icl, quantile_mean)
                outputs.append(out if self.is_regression else out[..., : context.n_classes])
            elif self.is_regression:
                outputs.append(self.icl_predictor(torch.cat([context.rows, rows], dim=1), context.y, quantile_mean))
            else:
                outputs.append(self._logits_from_rows(torch.cat([context.rows, rows], dim=1), context.y,
                                                      context.n_classes, softmax_temperature, node_temperature))
        return torch.cat(outputs, dim=1)

    # -- classes -----------------------------------------------------------------
    def _logits_from_rows(self, R, y_train, n_classes, softmax_temperature, node_temperature):
        if n_classes <= self.max_classes:
            return self.icl_predictor(R, y_train)[..., :n_classes]
        n_train = y_train.shape[1]
        probs = torch.stack([self._tree_proba(r[:n_train], y, r[n_train:], node_temperature)
                             for r, y in zip(R, y_train)])
        return softmax_temperature * torch.log(probs + 1e-6)

    def _node_proba(self, R_train, labels, R_test, temperature):
        R = torch.cat([R_train, R_test]).unsqueeze(0)
        n_groups = int(labels.max()) + 1
        logits = self.icl_predictor(R, labels.unsqueeze(0))[0, :, :n_groups]
        return torch.softmax(logits / temperature, dim=-1)

    def _tree_proba(self, R_train, y_train, R_test, temperature):
        """p(class | row) from the tree of at most ``max_classes``-way splits (as v1's)."""
        out = R_test.new_zeros(R_test.shape[0], int(y_train.max()) + 1)

        def visit(rows, y, weight):
            classes = torch.unique(y)
            if classes.numel() <= self.max_classes:
                local = torch.searchsorted(classes, y)
                out[:, classes] += weight.unsqueeze(1) * self._node_proba(R_train[rows], local, R_test, temperature)
                return
            sizes = class_group_sizes(classes.numel(), self.max_classes)
            group_of_class = torch.repeat_interleave(torch.arange(len(sizes), device=y.device),
                                                     torch.tensor(sizes, device=y.device))
            groups = group_of_class[torch.searchsorted(classes, y)]
            group_proba = self._node_proba(R_train[rows], groups, R_test, temperature)
            for g in range(len(sizes)):
                keep = groups == g
                visit(rows[keep], y[keep], weight * group_proba[:, g])

        visit(torch.arange(R_train.shape[0], device=R_train.device), y_train.long(), R_test.new_ones(R_test.shape[0]))
        return out

    # -- input checks ---------------------------------------------------------------
    def _check_classes(self, y_train):
        if self.is_regression:
            raise ValueError("This is a regression model (max_classes=0): use predict_quantiles.")
        if y_train.ndim != 2 or y_train.shape[1] == 0:
            raise ValueError(f"y_train must have shape (B, n_train) with n_train >= 1, got {tuple(y_train.shape)}.")
        counts = {int(torch.unique(y).numel()) for y in y_train}
        if len(counts) != 1:
            raise ValueError(f"All tables of a batch must have the same number of classes, got {sorted(counts)}.")
        n_classes = counts.pop()
        if bool((y_train != y_train.round()).any()) or int(y_train.min()) < 0 or int(y_train.max()) >= n_classes:
            raise ValueError(f"Class labels must be the integers 0..K-1 with every class present; got labels in "
                             f"[{y_train.min().item()}, {y_train.max().item()}] for K={n_classes}.")
        return n_classes

    def _check_regression(self, y_train):
        if not self.is_regression:
            raise ValueError(f"This is a classifier (max_classes={self.max_classes}): use predict_logits.")
        if y_train.ndim != 2 or y_train.shape[1] == 0:
            raise ValueError(f"y_train must have shape (B, n_train) with n_train >= 1, got {tuple(y_train.shape)}.")
        return 0

    @staticmethod
    def _check_table(X, y_train, name, exact=False):
        if X.ndim != 3 or X.shape[0] != y_train.shape[0]:
            raise ValueError(f"{name} must have shape (B, rows, H) with B={y_train.shape[0]} tables, "
                             f"got {tuple(X.shape)}.")
        if exact and X.shape[1] != y_train.shape[1]:
            raise ValueError(f"{name} has {X.shape[1]} rows but y_train has {y_train.shape[1]} labels.")


def _chunks(n, size):
    """Consecutive slices of ``range(n)`` of at most ``size`` items (one empty slice for ``n = 0``)."""
    return [slice(start, start + size) for start in range(0, n, size)] or [slice(0, 0)]


def _ordered(X, permutation):
    if permutation is None:
        return X
    return X[:, :, torch.as_tensor(permutation, device=X.device, dtype=torch.long)]


@dataclass
class TabICLv2Context:
    """What the training rows of a batch of tables contribute to predicting new rows.

    Attributes
    ----------
    columns : list of list of (Tensor, Tensor)
        Per label pass of the column stage (one, or one per mixed-radix digit
        beyond ``max_classes`` classes), per block: the keys and values
        (B, G, heads, num_inds, head_dim) of the inducing summary new cells read.
    rows : Tensor of shape (B, n_train, row_dim)
        The training rows' vectors (labels not added).
    y : Tensor of shape (B, n_train)
    n_classes : int
        ``0`` for regression.
    permutation : (H,) int array or None
        Column order the tables are read in.
    icl : list of (key, value) Tensors, or None
        Per-block keys and values (B, heads, n_train, head_dim) of the
        in-context stage; ``None`` when not cached, in which case every
        prediction runs the training rows through it again.
    """

    columns: list
    rows: torch.Tensor
    y: torch.Tensor
    n_classes: int
    permutation: object = None
    icl: list | None = None

    @property
    def n_train(self):
        return self.rows.shape[1]


# --------------------------------------------------------------------------
# loading v1 or v2 networks
# --------------------------------------------------------------------------
def _keywords(cls):
    return frozenset(inspect.signature(cls).parameters)


#: Config keys a v1 (tabicl 0.1.x) checkpoint may hold; any other key means v2.
V1_CONFIG_KEYS = _keywords(TabICLModel)


def load_tabicl_network(checkpoint, map_location="cpu"):
    """The TabICL network (v1 or v2) a checkpoint describes, with its weights, in eval mode.

    Parameters
    ----------
    checkpoint : str, path or dict
        A file saved with ``torch.save({"config": ..., "state_dict": ...})``
        (ours and the official ``tabicl`` 0.1.x and 2.x checkpoints alike; it
        is read with ``weights_only=True``), or that dict.
    map_location : str or torch.device, default="cpu"

    Returns
    -------
    TabICLModel or TabICLv2Model
        v1 when every config key is a v0.1.x ``TabICL`` keyword, else v2.
    """
    if isinstance(checkpoint, (str, Path)):
        path = Path(checkpoint)
        if not path.is_file():
            raise FileNotFoundError(f"No TabICL checkpoint at {str(path)!r}.")
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(checkpoint, dict) or not {"config", "state_dict"} <= set(checkpoint):
        found = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise ValueError(f"A TabICL checkpoint is a dict with 'config' and 'state_dict'; got {found}.")
    config = dict(checkpoint["config"])
    network = TabICLModel if set(config) <= V1_CONFIG_KEYS else TabICLv2Model
    unknown = set(config) - _keywords(TabICLv2Model)
    if network is TabICLv2Model and unknown:
        raise ValueError(f"Unknown TabICL config keys {sorted(unknown)}.")
    model = network(**config)
    model.load_state_dict(checkpoint["state_dict"])
    return model.eval()
