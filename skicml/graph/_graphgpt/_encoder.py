"""``GraphGPTEncoder``: self-supervised GraphGPT pretraining and graph embeddings."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ...utils.param_validation import Interval, Real, StrOptions, fit_context
from ._backbone import GraphGPTBackboneMixin
from ._model import MaskedTokenObjective, NextTokenObjective

__all__ = ["GraphGPTEncoder"]


class GraphGPTEncoder(ClassNamePrefixFeaturesOutMixin, GraphGPTBackboneMixin, TransformerMixin, BaseEstimator):
    """Self-supervised GraphGPT backbone: pretraining and graph embeddings.

    GraphGPT (Zhao et al., ICML 2025) serializes each graph along a random
    Eulerian walk (:class:`EulerTokenizer`) and trains a Llama-style
    transformer on the token sequences, with no message passing. ``fit``
    pretrains by scheduled masked-token prediction (``objective="smtp"``,
    the paper's best: a random share of the tokens, uniform in 1-99%, is
    masked and predicted) or next-token prediction (``"ntp"``, causal).
    ``transform`` returns one embedding per graph; :meth:`save` writes a
    backbone that :class:`GraphGPTRegressor` and :class:`GraphGPTClassifier`
    fine-tune with ``pretrained=``.

    Parameters
    ----------
    objective : {"smtp", "ntp"}, default="smtp"
    hidden_size : int, default=128
    num_layers : int, default=4
    head_dim : int, default=32
    mlp_ratio : int, default=4
    attn_dropout : float, default=0.0
    stack_agg : {"sum", "gated"}, default="sum"
        How the stacked tokens of a row are combined.
    node_scope : int, default=64
        Node index tokens, i.e. the largest graph the model reads.
    reindex : {"cyclic", "sequential"}, default="cyclic"
    node_attr, edge_attr : str, list of str or None, default="x", "edge_attr"
        Attribute keys of networkx graphs.
    n_bins : int, default=16
        Quantile bins of non-integer attribute columns.
    mask_ratio_range : tuple of float, default=(0.01, 0.99)
    mask_power : float, default=1.0
        ``ratio = 1 - t**power`` with ``t ~ U(mask_ratio_range)``.
    mask_token_probs : tuple of float, default=(1.0, 0.0, 0.0)
        Chance that a chosen cell becomes ``<mask>``, a random token, or
        stays unchanged.
    n_views : int, default=4
        Serializations (random walks and index offsets) drawn per graph;
        each training step uses one at random, and ``transform`` averages
        the embeddings over all of them.
    pooling : {"mean", "eos"}, default="mean"
        The graph embedding: mean of the hidden rows, or the ``<eos>`` row
        (the row the fine-tuning head reads, untrained by pretraining alone).
    max_epochs : int, default=10
        ``0`` keeps the randomly initialised network (a control).
    batch_size : int, default=64
    lr : float, default=3e-4
    weight_decay : float, default=0.1
    warmup_fraction : float, default=0.1
    validation_fraction : float or None, default=None
    n_iter_no_change : int or None, default=None
        Early stopping patience on the held-out pretraining loss.
    checkpoint_dir : str or None, default=None
        Save a resumable checkpoint here after every epoch.
    pretrained : str, GraphGPTEncoder or None, default=None
        Name of a shipped backbone (see ``skicml info``), path of a file from
        :meth:`save`, or a fitted encoder: ``fit`` then continues
        pretraining from it for ``max_epochs`` epochs (0: only checks ``X``).
    dtype : {"float32", "float64"}, default="float32"
    device : str, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.
        ``0`` is silent; ``1`` shows progress bars over the epochs of ``fit``
        and over the graphs of ``transform`` and ``score_samples``; ``2``
        keeps them on screen.

    Attributes
    ----------
    tokenizer_ : EulerTokenizer
    backbone_ : GraphGPTModel
        In eval mode.
    backbone_config_ : dict
    history_ : list of float
        Pretraining loss per epoch.
    provenance_ : dict
    embedding_dim_ : int
    n_features_in_ : int
        Only when fitted on a feature matrix.

    Examples
    --------
    >>> import networkx as nx
    >>> from skicml.graph import GraphGPTEncoder
    >>> graphs = [nx.cycle_graph(n) for n in range(3, 9)]
    >>> encoder = GraphGPTEncoder(hidden_size=16, num_layers=1, head_dim=8, max_epochs=2, random_state=0)
    >>> encoder.fit_transform(graphs).shape
    (6, 16)
    """

    _parameter_constraints = {
        **GraphGPTBackboneMixin._parameter_constraints,
        "objective": [StrOptions({"smtp", "ntp"})],
        "mask_ratio_range": ["array-like"],
        "mask_power": [Interval(Real, 0, None, closed="neither")],
        "mask_token_probs": ["array-like"],
        "pooling": [StrOptions({"mean", "eos"})],
    }

    def __init__(self, objective="smtp", hidden_size=128, num_layers=4, head_dim=32, mlp_ratio=4,
                 attn_dropout=0.0, stack_agg="sum", node_scope=64, reindex="cyclic", node_attr="x",
                 edge_attr="edge_attr", n_bins=16, mask_ratio_range=(0.01, 0.99), mask_power=1.0,
                 mask_token_probs=(1.0, 0.0, 0.0), n_views=4, pooling="mean", max_epochs=10, batch_size=64,
                 lr=3e-4, weight_decay=0.1, warmup_fraction=0.1, validation_fraction=None,
                 n_iter_no_change=None, checkpoint_dir=None, pretrained=None, dtype="float32",
                 device="auto", random_state=None, verbose="auto"):
        self.objective = objective
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.head_dim = head_dim
        self.mlp_ratio = mlp_ratio
        self.attn_dropout = attn_dropout
        self.stack_agg = stack_agg
        self.node_scope = node_scope
        self.reindex = reindex
        self.node_attr = node_attr
        self.edge_attr = edge_attr
        self.n_bins = n_bins
        self.mask_ratio_range = mask_ratio_range
        self.mask_power = mask_power
        self.mask_token_probs = mask_token_probs
        self.n_views = n_views
        self.pooling = pooling
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.warmup_fraction = warmup_fraction
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.checkpoint_dir = checkpoint_dir
        self.pretrained = pretrained
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    @property
    def _causal(self):
        return self.objective == "ntp"

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Pretrain on graphs ``X`` (or continue from ``pretrained``).

        Parameters
        ----------
        X : sequence of graphs or 2-D array
            networkx graphs, torch_geometric ``Data``, graph dicts or SMILES
            strings (see :func:`skicml.graph.as_graph_list`); a feature
            matrix is read row by row as path graphs over the features.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        dtype = self._torch_dtype()
        graphs = self._read(X, reset=True)
        backbone = self._setup_backbone(graphs).to(dtype)
        if self.pretrained is not None and backbone.causal != self._causal:
            raise ValueError(
                f"The pretrained backbone is {'causal' if backbone.causal else 'bidirectional'}; "
                f"objective={self.objective!r} needs the other kind."
            )
        self.embedding_dim_ = self.backbone_config_["hidden_size"]
        if self.max_epochs == 0:
            self.backbone_, self.history_, self.n_iter_ = backbone.eval(), [], 0
            return self
        if self.objective == "smtp":
            objective = MaskedTokenObjective(backbone, self.mask_ratio_range, self.mask_power,
                                             self.mask_token_probs)
        else:
            objective = NextTokenObjective(backbone)
        objective, history = self._fit_module(
            objective, {"tokens": self._tokens(graphs)}, loss=None, grad_clip=1.0
        )
        self.backbone_ = objective.model.eval()
        self.history_ = list(history.train_loss)
        self.n_iter_ = history.n_epochs
        self.provenance_ = {
            **self.provenance_, "objective": self.objective, "n_graphs": len(graphs),
            "epochs": history.n_epochs, "train_minutes": round(sum(history.epoch_seconds) / 60, 1),
        }
        return self

    @property
    def _n_features_out(self):
        return self.embedding_dim_

    def transform(self, X):
        """Graph embeddings, averaged over ``n_views`` serializations.

        Parameters
        ----------
        X : sequence of graphs or 2-D array

        Returns
        -------
        ndarray of shape (n_graphs, embedding_dim)
            ``embedding_dim = embedding_dim_``, the backbone's width.
        """
        check_is_fitted(self)
        tokens = self._tokens(self._read(X, reset=False))
        backbone = self.backbone_.to(self._device()).eval()

        def embed(batch):
            flat = batch.flatten(0, 1).long()
            pooled = backbone.pool(flat, backbone(flat), self.pooling)
            return pooled.unflatten(0, batch.shape[:2]).mean(1)

        return self._batched(embed, tokens, "transform").double().numpy()

    def score_samples(self, X):
        """Masked-token pseudo log-likelihood per graph (higher = more typical).

        Every cell of every serialization is masked once, in seven passes
        that each hide every seventh cell (about 14% of a sequence, close to
        the mask ratios the model trained on), and scored by the
        log-probability the model gives its true token. Returns the mean over
        cells and views: a novelty score for graphs unlike the training set.
        Deterministic, and independent of the other graphs in ``X``.

        Parameters
        ----------
        X : sequence of graphs or 2-D array

        Returns
        -------
        ndarray of shape (n_graphs,)
        """
        check_is_fitted(self)
        tokens = self._tokens(self._read(X, reset=False))
        backbone = self.backbone_.to(self._device()).eval()

        def score(batch):
            # (graphs, views, L, F) -> one score per graph, the mean over its views
            return backbone.masked_pseudo_log_likelihood(batch).mean(1)

        return self._batched(score, tokens, "score_samples").numpy().astype(np.float64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = []
        return tags
