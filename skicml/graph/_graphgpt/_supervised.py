"""``GraphGPTRegressor`` and ``GraphGPTClassifier``: fine-tuned GraphGPT."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ...base import LogitsClassifierMixin, seeded
from ...utils.param_validation import Integral, Interval, Real, StrOptions, fit_context
from ...utils.validation import check_no_missing_labels, check_regression_targets
from ._backbone import GraphGPTBackboneMixin
from ._model import GraphPredictor

__all__ = ["GraphGPTClassifier", "GraphGPTRegressor"]

_SHARED_DOC = """
    pretrained : str, GraphGPTEncoder or None, default=None
        Backbone to fine-tune: the name of a shipped backbone (see ``skicml
        info``; ``"graphgpt-qm9-small"`` reads molecules), the path of a file
        written by ``save``, or a fitted :class:`GraphGPTEncoder`. Its
        tokenizer and architecture replace the arguments below. ``None``
        trains from scratch.
    freeze_backbone : bool, default=False
        Train only the head (a linear probe of the pretrained backbone).
    hidden_size : int, default=128
    num_layers : int, default=4
    head_dim : int, default=32
    mlp_ratio : int, default=4
    attn_dropout : float, default=0.0
    drop_path : float, default=0.0
        Stochastic depth while fine-tuning.
    stack_agg : {"sum", "gated"}, default="sum"
    node_scope : int, default=64
    reindex : {"cyclic", "sequential"}, default="cyclic"
    node_attr, edge_attr : str, list of str or None, default="x", "edge_attr"
    n_bins : int, default=16
    head_hidden : int or None, default=None
        Width of the head's hidden layer; ``None`` for a linear head.
    pooling : {"eos", "mean"}, default="eos"
        The head reads the ``<eos>`` row (the paper) or the mean of the rows.
    n_views : int, default=4
        Serializations per graph: each training step uses one at random,
        predictions average over all of them.
    max_epochs : int, default=30
    batch_size : int, default=64
    lr : float, default=3e-4
    weight_decay : float, default=0.02
    warmup_fraction : float, default=0.1
    validation_fraction : float or None, default=None
        Hold out this share of the graphs to monitor the loss.
    n_iter_no_change : int or None, default=None
        Stop after this many epochs without improvement on the held-out
        graphs and keep the best weights.
    checkpoint_dir : str or None, default=None
        Save a resumable checkpoint here after every epoch.
    dtype : {"float32", "float64"}, default="float32"
    device : str, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.
        ``0`` is silent; ``1`` shows progress bars over the epochs of ``fit``
        and over the graphs of ``predict`` (and ``predict_proba`` and
        ``decision_function``); ``2`` keeps them on screen.
"""

_SHARED_ATTRIBUTES = """
    tokenizer_ : EulerTokenizer
    module_ : GraphPredictor
        Backbone and head, in eval mode.
    backbone_ : GraphGPTModel
        ``module_.backbone``.
    backbone_config_ : dict
    history_ : dict
        ``"train_loss"`` and ``"valid_loss"`` per epoch.
    provenance_ : dict
        Where the backbone came from.
    n_features_in_ : int
        Only when fitted on a feature matrix.
"""


class _GraphGPTSupervised(GraphGPTBackboneMixin, BaseEstimator):
    _parameter_constraints = {
        **GraphGPTBackboneMixin._parameter_constraints,
        "freeze_backbone": ["boolean"],
        "drop_path": [Interval(Real, 0, 1, closed="both")],
        "head_hidden": [Interval(Integral, 1, None, closed="left"), None],
        "pooling": [StrOptions({"eos", "mean"})],
    }

    def __init__(self, pretrained=None, freeze_backbone=False, hidden_size=128, num_layers=4, head_dim=32,
                 mlp_ratio=4, attn_dropout=0.0, drop_path=0.0, stack_agg="sum", node_scope=64,
                 reindex="cyclic", node_attr="x", edge_attr="edge_attr", n_bins=16, head_hidden=None,
                 pooling="eos", n_views=4, max_epochs=30, batch_size=64, lr=3e-4, weight_decay=0.02,
                 warmup_fraction=0.1, validation_fraction=None, n_iter_no_change=None, checkpoint_dir=None,
                 dtype="float32", device="auto", random_state=None, verbose="auto"):
        self.pretrained = pretrained
        self.freeze_backbone = freeze_backbone
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.head_dim = head_dim
        self.mlp_ratio = mlp_ratio
        self.attn_dropout = attn_dropout
        self.drop_path = drop_path
        self.stack_agg = stack_agg
        self.node_scope = node_scope
        self.reindex = reindex
        self.node_attr = node_attr
        self.edge_attr = edge_attr
        self.n_bins = n_bins
        self.head_hidden = head_hidden
        self.pooling = pooling
        self.n_views = n_views
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.warmup_fraction = warmup_fraction
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.checkpoint_dir = checkpoint_dir
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _fit(self, X, targets, n_outputs, loss, stratify):
        dtype = self._torch_dtype()
        graphs = self._read(X, reset=True)
        if len(graphs) != len(targets):
            raise ValueError(f"X has {len(graphs)} graphs but y has {len(targets)} targets.")
        backbone = self._setup_backbone(graphs)
        if backbone.causal:
            raise ValueError("The pretrained backbone is causal (NTP); fine-tuning needs a bidirectional one.")
        for block in backbone.layers:
            block.drop_path = self.drop_path
        seed = self._seed()
        with seeded(seed):
            module = GraphPredictor(backbone, n_outputs, self.head_hidden, self.pooling,
                                    self.freeze_backbone).to(dtype)
        if targets.dtype.kind == "f":
            targets = torch.as_tensor(targets, dtype=dtype)
        else:
            targets = torch.as_tensor(targets)
        module, history = self._fit_module(
            module, {"tokens": self._tokens(graphs)}, targets,
            loss=loss, grad_clip=1.0, stratify=stratify, seed=seed,
        )
        self.module_ = module.eval()
        self.backbone_ = module.backbone
        self.history_ = {"train_loss": list(history.train_loss), "valid_loss": list(history.valid_loss)}
        self.n_iter_ = history.n_epochs
        return self

    def _outputs(self, X):
        check_is_fitted(self)
        tokens = self._tokens(self._read(X, reset=False))
        module = self.module_.to(self._device()).eval()
        return self._batched(module, tokens, "predict").double().numpy()


class GraphGPTRegressor(RegressorMixin, _GraphGPTSupervised):
    __doc__ = """GraphGPT fine-tuned for graph-level regression.

    Graphs are serialized along Eulerian walks (:class:`EulerTokenizer`), read
    by a Llama-style transformer (:class:`GraphGPTModel`) and a head on the
    ``<eos>`` row predicts the targets (Zhao et al., ICML 2025). Start from a
    pretrained backbone with ``pretrained=`` (the paper's recipe) or train
    from scratch. Targets are standardised for training and the L1 loss of
    the paper is minimised; several targets are predicted jointly.

    Parameters
    ----------
    loss : {"l1", "mse"}, default="l1"
""" + _SHARED_DOC + """
    Attributes
    ----------""" + _SHARED_ATTRIBUTES + """    y_mean_, y_scale_ : ndarray of shape (n_targets,)
        Standardisation of the targets.

    See Also
    --------
    GraphGPTEncoder : Self-supervised pretraining of the backbone.

    Examples
    --------
    >>> import networkx as nx
    >>> from skicml.graph import GraphGPTRegressor
    >>> graphs = [nx.path_graph(n) for n in range(2, 12)]
    >>> sizes = [g.number_of_nodes() for g in graphs]
    >>> model = GraphGPTRegressor(hidden_size=16, num_layers=1, head_dim=8, max_epochs=2, random_state=0)
    >>> model.fit(graphs, sizes).predict(graphs).shape
    (10,)
    """

    _parameter_constraints = {
        **_GraphGPTSupervised._parameter_constraints,
        "loss": [StrOptions({"l1", "mse"})],
    }

    def __init__(self, loss="l1", pretrained=None, freeze_backbone=False, hidden_size=128, num_layers=4,
                 head_dim=32, mlp_ratio=4, attn_dropout=0.0, drop_path=0.0, stack_agg="sum", node_scope=64,
                 reindex="cyclic", node_attr="x", edge_attr="edge_attr", n_bins=16, head_hidden=None,
                 pooling="eos", n_views=4, max_epochs=30, batch_size=64, lr=3e-4, weight_decay=0.02,
                 warmup_fraction=0.1, validation_fraction=None, n_iter_no_change=None, checkpoint_dir=None,
                 dtype="float32", device="auto", random_state=None, verbose="auto"):
        self.loss = loss
        super().__init__(
            pretrained=pretrained, freeze_backbone=freeze_backbone, hidden_size=hidden_size,
            num_layers=num_layers, head_dim=head_dim, mlp_ratio=mlp_ratio, attn_dropout=attn_dropout,
            drop_path=drop_path, stack_agg=stack_agg, node_scope=node_scope, reindex=reindex,
            node_attr=node_attr, edge_attr=edge_attr, n_bins=n_bins, head_hidden=head_hidden,
            pooling=pooling, n_views=n_views, max_epochs=max_epochs, batch_size=batch_size, lr=lr,
            weight_decay=weight_decay, warmup_fraction=warmup_fraction,
            validation_fraction=validation_fraction, n_iter_no_change=n_iter_no_change,
            checkpoint_dir=checkpoint_dir, dtype=dtype, device=device, random_state=random_state,
            verbose=verbose,
        )

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fine-tune on graphs ``X`` and targets ``y``.

        Parameters
        ----------
        X : sequence of graphs or 2-D array
            networkx graphs, torch_geometric ``Data``, graph dicts or SMILES
            strings; a feature matrix is read row by row as path graphs.
        y : array-like of shape (n_graphs,) or (n_graphs, n_targets)

        Returns
        -------
        self
        """
        _require_y(self, y)
        y = check_regression_targets(y, multi_output=True)
        self._single_output = y.ndim == 1
        targets = y.reshape(len(y), -1)
        self.y_mean_ = targets.mean(0)
        self.y_scale_ = np.where(targets.std(0) > 0, targets.std(0), 1.0)
        return self._fit(X, (targets - self.y_mean_) / self.y_scale_, targets.shape[1], self.loss, False)

    def predict(self, X):
        """Predicted targets, averaged over ``n_views`` serializations.

        Returns
        -------
        ndarray of shape (n_graphs,) or (n_graphs, n_targets)
        """
        out = self._outputs(X) * self.y_scale_ + self.y_mean_
        return out.ravel() if self._single_output else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class GraphGPTClassifier(LogitsClassifierMixin, ClassifierMixin, _GraphGPTSupervised):
    __doc__ = """GraphGPT fine-tuned for graph classification.

    Graphs are serialized along Eulerian walks (:class:`EulerTokenizer`), read
    by a Llama-style transformer (:class:`GraphGPTModel`) and a head on the
    ``<eos>`` row predicts the class (Zhao et al., ICML 2025), trained with
    cross-entropy. Start from a pretrained backbone with ``pretrained=`` or
    train from scratch.

    Parameters
    ----------""" + _SHARED_DOC + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)""" + _SHARED_ATTRIBUTES + """
    See Also
    --------
    GraphGPTEncoder : Self-supervised pretraining of the backbone.

    Examples
    --------
    >>> import networkx as nx
    >>> from skicml.graph import GraphGPTClassifier
    >>> graphs = [nx.cycle_graph(n) for n in range(3, 9)] + [nx.path_graph(n) for n in range(3, 9)]
    >>> labels = ["cycle"] * 6 + ["path"] * 6
    >>> model = GraphGPTClassifier(hidden_size=16, num_layers=1, head_dim=8, max_epochs=2, random_state=0)
    >>> model.fit(graphs, labels).predict_proba(graphs).shape
    (12, 2)
    """

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fine-tune on graphs ``X`` and labels ``y``.

        Parameters
        ----------
        X : sequence of graphs or 2-D array
        y : array-like of shape (n_graphs,)
            Labels of any type.

        Returns
        -------
        self
        """
        _require_y(self, y)
        y = column_or_1d(y, warn=True)
        if len(y) == 0:
            raise ValueError("y is empty; at least one labelled graph is needed.")
        check_no_missing_labels(y)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        return self._fit(X, encoder.transform(y).astype(np.int64), len(self.classes_), "cross_entropy",
                         True)

    def decision_function(self, X):
        """Class logits, averaged over ``n_views`` serializations.

        Returns
        -------
        ndarray of shape (n_graphs,) or (n_graphs, n_classes)
            For two classes, the logit of the second class minus that of the
            first (scikit-learn's binary convention).
        """
        return super().decision_function(X)

    def _class_logits(self, X):
        return self._outputs(X)


def _require_y(estimator, y):
    if y is None:
        raise ValueError(
            f"{type(estimator).__name__} requires y to be passed, but the target y is None."
        )
