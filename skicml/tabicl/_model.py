"""TabICL (Qu et al., ICML 2025), the v0.1.x architecture, in plain torch.

A table of ``T = n_train + n_test`` rows and ``H`` features goes through
three stages:

1. **Column embedding** (:class:`ColumnEmbedding`): every column is a set of
   ``T`` scalars. A Set Transformer of induced attention blocks, whose
   inducing points summarise only the *training* rows, turns each cell into
   a distribution-aware affine embedding ``value * w(cell) + b(cell)``.
2. **Row interaction** (:class:`RowInteraction`): per row, a transformer with
   rotary position embeddings over ``[CLS_1..CLS_C, cell_1..cell_H]``; the
   ``C`` CLS outputs, layer-normed and concatenated, are the row vector.
3. **In-context learning** (:class:`ICLearning`): training rows get a label
   embedding added, then a transformer over rows in which training rows
   attend to training rows and test rows attend only to training rows;
   a decoder maps every test row to ``max_classes`` logits. Problems with
   more classes are solved by a tree of at most ``max_classes``-way splits.

Constructor keys and ``state_dict`` names are those of the official
``tabicl`` 0.1.x checkpoints, so those files load as they are.

Since training rows never attend to test rows anywhere, everything computed
for the training rows can be cached and reused for any number of test
batches (:meth:`TabICLModel.build_context`, :meth:`TabICLModel.predict_with_context`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..nn.attention import BlockStack, InducedSelfAttentionBlock, MultiheadAttentionBlock
from ..nn.rope import RotaryEmbedding

__all__ = ["ColumnContext", "TabICLContext", "TabICLModel", "class_group_sizes"]


# --------------------------------------------------------------------------
# stage 1: column embedding
# --------------------------------------------------------------------------
class ColumnEmbedding(nn.Module):
    """Distribution-aware embedding of every cell from its column's values."""

    def __init__(self, embed_dim, num_blocks, nhead, dim_feedforward, num_inds):
        super().__init__()
        self.embed_dim = embed_dim
        self.in_linear = nn.Linear(1, embed_dim)
        self.tf_col = BlockStack([
            InducedSelfAttentionBlock(embed_dim, nhead, dim_feedforward, num_inds) for _ in range(num_blocks)
        ])
        self.out_w = nn.Linear(embed_dim, embed_dim)
        self.ln_w = nn.LayerNorm(embed_dim)
        self.out_b = nn.Linear(embed_dim, embed_dim)
        self.ln_b = nn.LayerNorm(embed_dim)

    def _affine(self, values, hidden):
        return values * self.ln_w(self.out_w(hidden)) + self.ln_b(self.out_b(hidden))

    def embed_sets(self, values, train_size):
        """Embed sets of scalars ``values`` (..., T, 1) -> (..., T, E)."""
        hidden = self.in_linear(values)
        for block in self.tf_col.blocks:
            hidden = block(hidden, train_size)
        return self._affine(values, hidden)

    def forward(self, X, train_size, n_features=None):
        """``X`` (B, T, H) -> cell embeddings (B, T, H, E).

        ``n_features`` (B,) marks real columns when tables are zero-padded;
        padded columns are not embedded and stay zero.
        """
        B, T, H = X.shape
        columns = X.transpose(1, 2).unsqueeze(-1)  # (B, H, T, 1)
        if n_features is None or bool((n_features == H).all()):
            return self.embed_sets(columns, train_size).transpose(1, 2)
        real = torch.arange(H, device=X.device).unsqueeze(0) < n_features.unsqueeze(1)
        out = columns.new_zeros(B, H, T, self.embed_dim)
        out[real] = self.embed_sets(columns[real], train_size)
        return out.transpose(1, 2)

    # -- fit-time cache -------------------------------------------------------
    def context(self, X_train):
        """Inducing summaries of every block for the training columns.

        Returns ``(summaries, train_embeddings)``: a list of (B, H, k, E)
        tensors and the (B, n_train, H, E) embeddings of the training cells.
        """
        values = X_train.transpose(1, 2).unsqueeze(-1)
        hidden = self.in_linear(values)
        summaries = []
        for block in self.tf_col.blocks:
            summary = block.summarise(hidden)
            summaries.append(summary)
            hidden = block.read(hidden, summary)
        return summaries, self._affine(values, hidden).transpose(1, 2)

    def embed_with_context(self, X, summaries):
        """Embed new rows ``X`` (B, m, H) against cached summaries."""
        values = X.transpose(1, 2).unsqueeze(-1)
        hidden = self.in_linear(values)
        for block, summary in zip(self.tf_col.blocks, summaries):
            hidden = block.read(hidden, summary)
        return self._affine(values, hidden).transpose(1, 2)


# --------------------------------------------------------------------------
# stage 2: row interaction
# --------------------------------------------------------------------------
class RowInteraction(nn.Module):
    """Per-row transformer over CLS tokens and cells, pooled into CLS outputs."""

    def __init__(self, embed_dim, num_blocks, nhead, dim_feedforward, num_cls, rope_base):
        super().__init__()
        self.num_cls = num_cls
        self.tf_row = BlockStack(
            [MultiheadAttentionBlock(embed_dim, nhead, dim_feedforward) for _ in range(num_blocks)],
            rope=RotaryEmbedding(embed_dim // nhead, theta=rope_base),
        )
        self.cls_tokens = nn.Parameter(torch.empty(num_cls, embed_dim))
        nn.init.trunc_normal_(self.cls_tokens, std=0.02)
        self.out_ln = nn.LayerNorm(embed_dim)

    def forward(self, cells, n_features=None):
        """``cells`` (B, T, H, E) -> row vectors (B, T, C*E)."""
        B, T, H, E = cells.shape
        tokens = torch.cat([self.cls_tokens.to(cells.dtype).expand(B, T, self.num_cls, E), cells], dim=2)
        padding = None
        if n_features is not None and not bool((n_features == H).all()):
            positions = torch.arange(self.num_cls + H, device=cells.device)
            padding = (positions.view(1, 1, -1) >= (n_features + self.num_cls).view(B, 1, 1)).expand(B, T, -1)
        *inner, last = self.tf_row.blocks
        for block in inner:
            tokens = block(tokens, key_padding_mask=padding, rope=self.tf_row.rope)
        # only the CLS outputs of the last block are read: the cells need no queries there
        cls = last(tokens[:, :, : self.num_cls], kv=tokens, key_padding_mask=padding, rope=self.tf_row.rope)
        return self.out_ln(cls).flatten(-2)


# --------------------------------------------------------------------------
# stage 3: in-context learning
# --------------------------------------------------------------------------
def class_group_sizes(n_classes, max_classes=10):
    """Sizes of the contiguous class groups a node of the class tree splits into.

    ``min(ceil(K / max_classes), max_classes)`` groups, filled greedily with
    ``ceil(remaining / groups_left)`` classes: 25 -> [9, 8, 8].
    """
    if n_classes <= max_classes:
        return [n_classes]
    groups = min(math.ceil(n_classes / max_classes), max_classes)
    sizes, remaining = [], n_classes
    for left in range(groups, 0, -1):
        sizes.append(math.ceil(remaining / left))
        remaining -= sizes[-1]
    return sizes


class ICLearning(nn.Module):
    """Label-aware transformer over rows with the train/test prefix mask."""

    def __init__(self, max_classes, d_model, num_blocks, nhead, dim_feedforward):
        super().__init__()
        self.max_classes = max_classes
        self.tf_icl = BlockStack([MultiheadAttentionBlock(d_model, nhead, dim_feedforward) for _ in range(num_blocks)])
        self.ln = nn.LayerNorm(d_model)
        self.y_encoder = nn.Linear(max_classes, d_model)
        self.decoder = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(), nn.Linear(2 * d_model, max_classes))

    def embed_labels(self, y):
        return self.y_encoder(F.one_hot(y.long(), self.max_classes).to(self.y_encoder.weight.dtype))

    def forward(self, R, y_train):
        """Logits (B, n_test, max_classes) of the rows after the training rows."""
        n_train = y_train.shape[1]
        x = torch.cat([R[:, :n_train] + self.embed_labels(y_train), R[:, n_train:]], dim=1)
        *inner, last = self.tf_icl.blocks
        for block in inner:
            x = block(x, split=n_train)
        # the last block's outputs are read for test rows only: training rows need no queries there
        x = last(x[:, n_train:], kv=x[:, :n_train])
        return self.decoder(self.ln(x))

    # -- fit-time cache -------------------------------------------------------
    def context(self, R_train, y_train):
        """Per-block keys and values of the training rows."""
        x = R_train + self.embed_labels(y_train)
        *inner, last = self.tf_icl.blocks
        cache = []
        for block in inner:
            cache.append(block.context_key_value(x))
            x = block(x)
        # the last block's outputs for training rows are never read: only its keys and values
        return cache + [last.context_key_value(x)]

    def forward_with_context(self, R_test, cache):
        x = R_test
        for block, (key, value) in zip(self.tf_icl.blocks, cache):
            x = block.forward_with_context(x, key, value)
        return self.decoder(self.ln(x))


# --------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------
class TabICLModel(nn.Module):
    """The TabICL network (v0.1.x), constructed from the official config keys.

    Parameters
    ----------
    max_classes : int, default=10
        Classes the decoder handles natively; more are solved hierarchically.
    embed_dim : int, default=128
        Cell embedding width ``E``; rows are ``row_num_cls * E`` wide.
    col_num_blocks, col_nhead, col_num_inds : int, default=3, 4, 128
        Induced attention blocks of the column stage, heads, inducing points.
    row_num_blocks, row_nhead, row_num_cls : int, default=3, 8, 4
        Blocks and heads of the row stage, number of CLS tokens.
    row_rope_base : float, default=100000
        Base of the rotary embedding over feature positions.
    icl_num_blocks, icl_nhead : int, default=12, 4
        Blocks and heads of the in-context stage.
    ff_factor : int, default=2
        Feed-forward width as a multiple of the block width.
    dropout : float, default=0.0
    activation : {"gelu"}, default="gelu"
    norm_first : bool, default=True
        Only the pre-norm, GELU, dropout-free variant is supported: it is the
        one every published checkpoint uses.
    """

    def __init__(self, max_classes=10, embed_dim=128, col_num_blocks=3, col_nhead=4, col_num_inds=128,
                 row_num_blocks=3, row_nhead=8, row_num_cls=4, row_rope_base=100000, icl_num_blocks=12,
                 icl_nhead=4, ff_factor=2, dropout=0.0, activation="gelu", norm_first=True):
        super().__init__()
        if dropout != 0.0 or activation != "gelu" or not norm_first:
            raise ValueError(
                "TabICLModel supports dropout=0.0, activation='gelu', norm_first=True (the "
                f"published variant); got dropout={dropout}, activation={activation!r}, "
                f"norm_first={norm_first}."
            )
        self.config = dict(
            max_classes=max_classes, embed_dim=embed_dim, col_num_blocks=col_num_blocks, col_nhead=col_nhead,
            col_num_inds=col_num_inds, row_num_blocks=row_num_blocks, row_nhead=row_nhead,
            row_num_cls=row_num_cls, row_rope_base=row_rope_base, icl_num_blocks=icl_num_blocks,
            icl_nhead=icl_nhead, ff_factor=ff_factor, dropout=dropout, activation=activation,
            norm_first=norm_first,
        )
        self.max_classes = max_classes
        self.col_embedder = ColumnEmbedding(embed_dim, col_num_blocks, col_nhead, embed_dim * ff_factor, col_num_inds)
        self.row_interactor = RowInteraction(
            embed_dim, row_num_blocks, row_nhead, embed_dim * ff_factor, row_num_cls, row_rope_base
        )
        width = embed_dim * row_num_cls
        self.icl_predictor = ICLearning(max_classes, width, icl_num_blocks, icl_nhead, width * ff_factor)

    # -- the two label-free stages --------------------------------------------
    def encode_rows(self, X, train_size, n_features=None):
        """Row vectors (B, T, row_num_cls * embed_dim) of a batch of tables."""
        return self.row_interactor(self.col_embedder(X, train_size, n_features), n_features)

    def forward(self, X, y_train, n_features=None):
        """Pretraining forward: logits (B, n_test, max_classes) for the test rows.

        Parameters
        ----------
        X : Tensor of shape (B, T, H)
            Training rows first, then test rows; tables may be zero-padded.
        y_train : Tensor of shape (B, n_train)
            Class ids in ``0..max_classes-1``.
        n_features : Tensor of shape (B,) or None
            Real feature count of each table when padded.
        """
        n_train = y_train.shape[1]
        return self.icl_predictor(self.encode_rows(X, n_train, n_features), y_train)

    # -- inference ------------------------------------------------------------
    def predict_logits(self, X, y_train, softmax_temperature=0.9):
        """Logits over the classes present, as the official inference returns them.

        All tables of the batch must have the same number of classes ``K``.
        For ``K <= max_classes`` these are raw logits (B, n_test, K); above,
        the class tree's probabilities ``p`` are returned as
        ``softmax_temperature * log(p + 1e-6)``.
        """
        n_train = y_train.shape[1]
        R = self.encode_rows(X, n_train)
        return self.logits_from_rows(R, y_train, softmax_temperature)

    def logits_from_rows(self, R, y_train, softmax_temperature=0.9):
        n_classes = int(torch.unique(y_train[0]).numel())
        if n_classes <= self.max_classes:
            return self.icl_predictor(R, y_train)[..., :n_classes]
        n_train = y_train.shape[1]
        probs = torch.stack([
            self._hierarchical_proba(r[:n_train], y, r[n_train:], softmax_temperature)
            for r, y in zip(R, y_train)
        ])
        return softmax_temperature * torch.log(probs + 1e-6)

    def _node_proba(self, R_train, labels, R_test, softmax_temperature):
        R = torch.cat([R_train, R_test]).unsqueeze(0)
        n_groups = int(labels.max()) + 1
        logits = self.icl_predictor(R, labels.unsqueeze(0))[0, :, :n_groups]
        return torch.softmax(logits / softmax_temperature, dim=-1)

    def _hierarchical_proba(self, R_train, y_train, R_test, softmax_temperature):
        """p(class | row) from the tree of at most ``max_classes``-way splits."""
        n_classes = int(y_train.max()) + 1
        out = R_test.new_zeros(R_test.shape[0], n_classes)

        def visit(rows, y, weight):
            classes = torch.unique(y)
            if classes.numel() <= self.max_classes:
                local = torch.searchsorted(classes, y)
                out[:, classes] += weight.unsqueeze(1) * self._node_proba(
                    R_train[rows], local, R_test, softmax_temperature
                )
                return
            sizes = class_group_sizes(classes.numel(), self.max_classes)
            group_of_class = torch.repeat_interleave(torch.arange(len(sizes), device=y.device),
                                                     torch.tensor(sizes, device=y.device))
            groups = group_of_class[torch.searchsorted(classes, y)]
            group_proba = self._node_proba(R_train[rows], groups, R_test, softmax_temperature)
            for g in range(len(sizes)):
                keep = groups == g
                visit(rows[keep], y[keep], weight * group_proba[:, g])

        rows = torch.arange(R_train.shape[0], device=R_train.device)
        visit(rows, y_train.long(), R_test.new_ones(R_test.shape[0]))
        return out

    # -- inference: what the training rows contribute, computed once -----------
    @property
    def row_dim(self):
        """Width of a row vector, ``row_num_cls * embed_dim``."""
        return self.icl_predictor.ln.normalized_shape[0]

    def context_nbytes(self, n_train):
        """Memory of the in-context keys and values of ``n_train`` training rows (one table)."""
        icl = self.icl_predictor
        return 2 * len(icl.tf_icl.blocks) * n_train * self.row_dim * icl.ln.weight.element_size()

    def column_context(self, X_train):
        """The column stage's summary of training columns ``X_train`` (B, n_train, H).

        Label-free, and the same for any order of the columns, since every
        column is embedded as a set of its own: tables that differ only in
        their labels or column order share it.
        """
        return ColumnContext(*self.col_embedder.context(X_train))

    def encode_with_context(self, columns, X=None, permutations=(None,), chunk_size=2048):
        """Row vectors of new rows, or of the training rows, for each column order.

        Parameters
        ----------
        columns : ColumnContext
        X : Tensor of shape (B, m, H) or None
            New rows, embedded against the training columns; ``None`` means
            the training rows themselves.
        permutations : sequence of (H,) int arrays or None
            Column orders to read the cells in (``None``: as given); the
            column stage runs once for all of them.
        chunk_size : int, default=2048
            Rows per pass of the row stage; bounds memory, not results.

        Returns
        -------
        list of Tensor of shape (B, m, row_dim), one per permutation
        """
        cells = columns.cells if X is None else self.col_embedder.embed_with_context(X, columns.summaries)
        rows = []
        for permutation in permutations:
            ordered = cells if permutation is None else cells[:, :, torch.as_tensor(permutation, device=cells.device)]
            rows.append(torch.cat([self.row_interactor(ordered[:, start:start + chunk_size])
                                   for start in range(0, ordered.shape[1], chunk_size)], dim=1))
        return rows

    def build_context(self, X_train, y_train, *, permutation=None, rows=None, cache=True):
        """Everything new rows need from the training rows of a batch of tables.

        All tables of the batch must have the same number of classes.

        Parameters
        ----------
        X_train : Tensor of shape (B, n_train, H) or ColumnContext
            The training rows, or their :meth:`column_context` when tables
            share it.
        y_train : Tensor of shape (B, n_train)
            Class ids.
        permutation : (H,) int array or None
            Column order the row stage reads.
        rows : Tensor of shape (B, n_train, row_dim) or None
            The training rows' vectors for that order, when already at hand
            (see :meth:`encode_with_context`).
        cache : bool, default=True
            Also compute the in-context keys and values, so that predictions
            only run the test rows; with more than ``max_classes`` classes
            they are never cached (every node of the class tree has its own).

        Returns
        -------
        TabICLContext
        """
        columns = X_train if isinstance(X_train, ColumnContext) else self.column_context(X_train)
        if rows is None:
            rows = self.encode_with_context(columns, permutations=[permutation])[0]
        n_classes = int(torch.unique(y_train[0]).numel())
        icl = self.icl_predictor.context(rows, y_train) if cache and n_classes <= self.max_classes else None
        return TabICLContext(columns, permutation, rows, y_train, n_classes, icl)

    def predict_with_context(self, context, X_test=None, *, rows=None, softmax_temperature=0.9):
        """Logits of new rows against a :meth:`build_context`, as :meth:`predict_logits` returns them.

        Parameters
        ----------
        context : TabICLContext
        X_test : Tensor of shape (B, m, H) or None
            New rows, in the column order of the training rows.
        rows : Tensor of shape (B, m, row_dim) or None
            Their row vectors instead (read in ``context.permutation``).
        softmax_temperature : float, default=0.9
            Temperature of the class tree's nodes (more than ``max_classes`` classes).

        Returns
        -------
        Tensor of shape (B, m, n_classes)
        """
        if rows is None:
            rows = self.encode_with_context(context.columns, X_test, [context.permutation])[0]
        if context.icl is not None:
            return self.icl_predictor.forward_with_context(rows, context.icl)[..., :context.n_classes]
        return self.logits_from_rows(torch.cat([context.rows, rows], dim=1), context.y, softmax_temperature)


@dataclass
class ColumnContext:
    """What training columns contribute to the column stage (label-free).

    Attributes
    ----------
    summaries : list of Tensor of shape (B, H, num_inds, embed_dim)
        The inducing summaries of every block.
    cells : Tensor of shape (B, n_train, H, embed_dim)
        Embeddings of the training cells.
    """

    summaries: list
    cells: torch.Tensor


@dataclass
class TabICLContext:
    """What the training rows of a batch of tables contribute to predicting new rows.

    Attributes
    ----------
    columns : ColumnContext
    permutation : (H,) int array or None
        Column order the row stage reads.
    rows : Tensor of shape (B, n_train, row_dim)
        The training rows' vectors.
    y : Tensor of shape (B, n_train)
    n_classes : int
    icl : list of (key, value) Tensors, or None
        Per-block keys and values of the in-context stage; ``None`` when not
        cached, in which case every prediction runs the training rows again.
    """

    columns: ColumnContext
    permutation: object
    rows: torch.Tensor
    y: torch.Tensor
    n_classes: int
    icl: list | None = None

    def select(self, index):
        """The context of the training rows ``index`` only (not cached)."""
        y = self.y[:, index]
        return TabICLContext(self.columns, self.permutation, self.rows[:, index], y,
                             int(torch.unique(y[0]).numel()))
