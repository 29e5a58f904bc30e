"""``GITClassifier``: node, edge and graph classification and link prediction over task-trees, fine-tuned, in
context or zero-shot."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ...base import LogitsClassifierMixin, seeded
from ...utils.param_validation import Integral, Interval, Real, StrOptions, fit_context
from ...utils.validation import check_no_missing_labels
from .._graphs import is_graph_collection
from ._backbone import GITBackboneMixin, TaskTreeNet
from ._data import TaskSet, build_task_graph, read_task_sets, task_index, texts_of
from ._links import LinkNet, link_loss, multitask_loss
from ._model import class_prototypes, prototype_logits

__all__ = ["GITClassifier"]


class GITClassifier(LogitsClassifierMixin, ClassifierMixin, TransformerMixin, GITBackboneMixin, BaseEstimator):
    """Node, edge and graph classification with GIT's task-tree encoder (Wang et al., ICML 2025).

    Every example is a task-tree (the computation trees of the nodes it is
    about) embedded by a GraphSAGE encoder, fresh or pretrained
    (:class:`GITEncoder`). Three ways to predict:

    - ``mode="finetune"``: the encoder and a linear head trained with
      cross-entropy on the labelled examples;
    - ``mode="in_context"``: no training; each class's prototype is the mean
      unit embedding of its labelled examples, and a query goes to the
      nearest prototype (``fit`` on a few examples a class: few-shot);
    - ``mode="zero_shot"``: no labelled examples at all; the prototypes are
      the classes' embeddings (``class_embeddings``, or ``class_texts`` in
      the node texts' space), which needs ``hidden_dim`` equal to their width.

    ``specialize=True`` first regresses the task-tree embeddings of the
    labelled examples onto their class embeddings (GIT's specialization);
    a classifier so specialised on one graph of a domain serves as the
    ``pretrained`` backbone of a zero-shot classifier on another.

    Inputs by ``task``:

    - ``"node"``: ``graph=`` one graph and ``X`` node ids ``(n,)`` or ``(n, 1)``;
      with ``graph=None``, ``X`` is a feature matrix whose rows are nodes of a
      k-nearest-neighbour graph (new rows hear from their nearest training
      rows, so each prediction depends on its row alone);
    - ``"edge"``: ``graph=`` and ``X`` node pairs ``(n, 2)``. A pair need not
      be an edge of the graph: its tree joins the two end nodes' trees either
      way;
    - ``"graph"``: ``X`` a sequence of graphs (networkx, PyG ``Data``, dicts
      or SMILES);
    - ``"link"``: ``graph=`` and ``X`` node pairs ``(n, 2)``, ``y`` 1 for a
      link and 0 for none (``None``: every pair is a link). As the official
      link prediction: a pair's logit is the dot product of its two end
      nodes' task-tree embeddings; ``"finetune"`` trains it with binary
      cross-entropy, each batch joined by as many uniformly drawn non-edges
      of ``graph``; ``"zero_shot"`` scores the cosine of the embeddings
      over ``temperature``, no training (it ranks pairs; its probabilities
      are not calibrated). ``graph`` is the observed graph: leave the pairs
      you test out of it.

    A 2-D ``y`` of shape ``(n, T)`` (0, 1, NaN for a missing label) holds
    ``T`` binary tasks, GIT's molecule protocol: ``"in_context"`` takes each
    task's positive and negative prototypes from the examples labelled 1 and
    0, ``"zero_shot"`` reads ``2T`` class embeddings or texts (the positive
    descriptions, then the negative ones), and a task's logit is its
    positive prototype's logit minus its negative one's; ``"finetune"``
    trains ``T`` logits with binary cross-entropy over the labels present;
    ``specialize`` regresses onto the mean positive embedding of the tasks
    an example is positive on plus the mean negative one of the others.
    ``predict_proba`` then gives ``(n, T)`` positive probabilities, whose
    per-task ROC AUC is the paper's metric.

    Node features are numbers or texts (``node_text`` with a
    ``text_encoder``). An isolated node's tree is the node alone.

    Parameters
    ----------
    pretrained : str, path-like, GITEncoder, GITClassifier or None, default=None
        Backbone to start from: a file written by ``save``, or a fitted GIT
        estimator (wrap it in :class:`sklearn.frozen.FrozenEstimator` inside
        a grid search). Its architecture replaces ``hidden_dim``,
        ``num_layers``, ``norm`` and ``dropout``, and its TF-IDF text encoder
        is used when ``text_encoder=None``. Features of another width reach it
        through an input projection started on their principal axes (and
        trained in ``"finetune"``). ``None``: random weights, which the
        prototype modes use as a baseline.
    task : {"node", "edge", "graph", "link"}, default="node"
    graph : graph or None, default=None
        The graph of node, edge and link tasks: a networkx graph, a PyG
        ``Data`` or a dict with ``x``, ``edge_index`` (and optionally node
        texts).
    mode : {"finetune", "in_context", "zero_shot"}, default="finetune"
        ``task="link"`` takes ``"finetune"`` or ``"zero_shot"``.
    class_embeddings : array-like of shape (n_classes, d), dict or None, default=None
        The classes' embeddings for ``"zero_shot"`` and ``specialize``: rows
        in the order of ``classes_`` (sorted labels), or ``{label: vector}``.
    class_texts : sequence of str, dict or None, default=None
        Class descriptions embedded by the text encoder instead; a
        ``"tfidf-svd"`` encoder is fitted on them with the node texts.
    specialize : bool, default=False
        Regress the labelled examples' task-tree embeddings onto their class
        embeddings (mean squared error) before ``mode`` runs.
    sft_epochs : int, default=50
    sft_lr : float, default=1e-3
    temperature : float, default=0.1
        Prototype logits ``-(2 - 2 cos)`` lie in [-4, 0]; they are divided by
        this before the softmax, so that probabilities are not all near
        uniform. Unused in ``"finetune"``.
    freeze_backbone : bool, default=False
        In ``"finetune"``, train the head (and an input projection) only.
    hidden_dim : int or None, default=128
        Width of a fresh encoder's embeddings; ``None`` keeps the features'.
    num_layers : int, default=2
    norm : {"batch"} or None, default="batch"
    dropout : float, default=0.15
    text_encoder : {"tfidf-svd", "minilm"}, str, callable or None, default=None
        See :class:`GITEncoder`.
    text_dim : int, default=128
    node_attr : str, list of str or None, default="x"
    node_text : str or None, default="text"
    fanout : int or "all", default=10
        Neighbours sampled a hop in training; prediction reads all of them.
    n_neighbors : int, default=10
        Neighbours of each row in the 2-D path.
    max_epochs : int, default=100
    batch_size : int, default=256
    lr : float, default=1e-3
    weight_decay : float, default=1e-6
    validation_fraction : float or None, default=None
        Held-out share (stratified) for early stopping in ``"finetune"``.
    n_iter_no_change : int or None, default=None
    edge_attr : str, list of str or None, default=None
        Edge features for the encoder: every message becomes ``relu(z_j +
        e_ij)`` (the official ``MySAGEConv``, which GIT uses for the edge
        tasks of graphs with edge texts), through a learned map where the
        widths differ. A string or list names networkx edge attributes; with
        any value, dicts, PyG ``Data`` and SMILES give their ``edge_attr``
        (SMILES: bond type, stereo, conjugation codes). ``None`` ignores edge
        features.
    dtype : {"float32", "float64"}, default="float32"
    device : str or torch.device, default="auto"
    random_state : int, RandomState instance or None, default=None
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    model_ : GITModel
    head_ : torch.nn.Linear or None
        The fine-tuned head (``"finetune"``).
    prototypes_ : ndarray of shape (n_classes, hidden_dim) or None
        The class prototypes (``"in_context"``, ``"zero_shot"``); with T
        binary tasks ``(2T, hidden_dim)``, the positive ones then the
        negative ones.
    edge_dim_ : int
        Width of the edge features read (0: none).
    n_outputs_ : int
        1, or T for a 2-D ``y`` of T binary tasks (then ``classes_`` is
        ``arange(T)``).
    text_encoder_ : object or None
    graph_ : TaskGraph or None
        The read ``graph`` (node and edge tasks).
    history_ : dict
        ``train_loss`` (and ``valid_loss``, ``sft_loss``) per epoch.
    provenance_ : dict
    n_features_in_ : int
        Only when fitted on a feature matrix.

    See Also
    --------
    GITEncoder : Pretraining the backbone.

    Examples
    --------
    >>> from skicml.datasets import make_graph_domains
    >>> from skicml.graph import GITClassifier
    >>> domain = make_graph_domains(1, n_nodes=200, n_features=16, random_state=0)[0]
    >>> graph = {"x": domain.x, "edge_index": domain.edge_index}
    >>> support = [i for c in range(5) for i in (domain.target == c).nonzero()[0][:5]]
    >>> model = GITClassifier(graph=graph, mode="in_context", hidden_dim=16, random_state=0)
    >>> model.fit(support, domain.target[support]).predict([0, 1, 2]).shape
    (3,)

    Link prediction, from the graph's edges:

    >>> links = GITClassifier(task="link", graph=graph, hidden_dim=16, max_epochs=2, random_state=0)
    >>> links.fit(domain.edge_index.T).predict_proba([[0, 1], [2, 3]]).shape
    (2, 2)

    Two binary tasks of whole graphs, from positive and negative prototypes:

    >>> import numpy as np
    >>> graphs = make_graph_domains(1, task="graph", n_graphs=40, n_features=16, random_state=0)[0]
    >>> Y = np.stack([graphs.target == 0, graphs.target == 1], axis=1).astype(float)
    >>> multi = GITClassifier(task="graph", mode="in_context", hidden_dim=16, random_state=0)
    >>> multi.fit(graphs.graphs, Y).predict_proba(graphs.graphs[:3]).shape
    (3, 2)
    """

    _parameter_constraints = {
        **GITBackboneMixin._parameter_constraints,
        "task": [StrOptions({"node", "edge", "graph", "link"})],
        "graph": "no_validation",
        "mode": [StrOptions({"finetune", "in_context", "zero_shot"})],
        "class_embeddings": ["array-like", dict, None],
        "class_texts": [list, tuple, dict, None],
        "specialize": ["boolean"],
        "sft_epochs": [Interval(Integral, 0, None, closed="left")],
        "sft_lr": [Interval(Real, 0, None, closed="neither")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "freeze_backbone": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), None],
        "edge_attr": [str, list, None],
    }

    def __init__(self, pretrained=None, task="node", graph=None, mode="finetune", class_embeddings=None,
                 class_texts=None, specialize=False, sft_epochs=50, sft_lr=1e-3, temperature=0.1,
                 freeze_backbone=False, hidden_dim=128, num_layers=2, norm="batch", dropout=0.15,
                 text_encoder=None, text_dim=128, node_attr="x", node_text="text", fanout=10, n_neighbors=10,
                 max_epochs=100, batch_size=256, lr=1e-3, weight_decay=1e-6, validation_fraction=None,
                 n_iter_no_change=None, edge_attr=None, dtype="float32", device="auto", random_state=None,
                 verbose="auto"):
        self.pretrained = pretrained
        self.task = task
        self.graph = graph
        self.mode = mode
        self.class_embeddings = class_embeddings
        self.class_texts = class_texts
        self.specialize = specialize
        self.sft_epochs = sft_epochs
        self.sft_lr = sft_lr
        self.temperature = temperature
        self.freeze_backbone = freeze_backbone
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.norm = norm
        self.dropout = dropout
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
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.edge_attr = edge_attr
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------ inputs
    def _class_text_list(self):
        texts = self.class_texts
        if texts is None:
            return []
        values = list(texts.values()) if isinstance(texts, dict) else list(texts)
        bad = [type(t).__name__ for t in values if not isinstance(t, str)]
        if bad:
            raise TypeError(f"class_texts must be strings; found {bad[0]}.")
        return values

    def _read(self, X, reset):
        """The :class:`TaskGraph` of ``X``'s tasks (fitting the text encoder when ``reset``)."""
        if self.task == "graph":
            if not is_graph_collection(X):
                raise TypeError(
                    "task='graph' reads a sequence of graphs (networkx graphs, PyG Data, dicts or SMILES), "
                    f"got {type(X).__name__}."
                )
            read = read_task_sets([TaskSet(X, "graph")], node_attr=self.node_attr, node_text=self.node_text,
                                  edge_attr=self.edge_attr)
            if reset:
                self.graph_ = None
                self._setup_text_encoder(texts_of(read) + self._class_text_list())
            task_graph = build_task_graph(read, self.text_encoder_)
            return task_graph if reset else self._check_feature_width(task_graph)
        if self.graph is None:
            if self.task == "edge":
                raise ValueError("task='edge' needs graph=: X holds node pairs of that graph.")
            one_d = (isinstance(X, np.ndarray) and X.ndim == 1) or (
                isinstance(X, (list, tuple)) and len(X) > 0 and np.isscalar(X[0]) and not isinstance(X[0], str))
            if one_d:
                raise ValueError(
                    "X is 1-D. Node ids need graph= (the graph they index); with graph=None, X is a 2-D "
                    "feature matrix whose rows are nodes. Reshape your data with X.reshape(-1, 1) if it holds "
                    "a single feature."
                )
            if is_graph_collection(X):
                raise TypeError("X is a sequence of graphs: pass task='graph' to classify whole graphs.")
            if reset:
                self.graph_ = None
                self._setup_text_encoder(self._class_text_list())
                return self._fit_rows(X)
            if not hasattr(self, "n_features_in_"):
                raise ValueError("The classifier was fitted with graph=; X must hold node ids or pairs.")
            return self._rows(X)
        if reset:
            self.__dict__.pop("n_features_in_", None)
            self.graph_ = self._read_graph_parameter()
        elif self.graph_ is None:
            raise ValueError("The classifier was fitted without graph=; pass what it was fitted on.")
        return self.graph_.for_tasks(self.task, X)

    def _read_graph_parameter(self):
        """The :class:`TaskGraph` of ``graph=``, whose errors name ``graph=`` (the shared reader says "X")."""
        try:
            read = read_task_sets([TaskSet(self.graph, "node")], node_attr=self.node_attr,
                                  node_text=self.node_text, edge_attr=self.edge_attr)
            texts = texts_of(read)
        except (TypeError, ValueError) as error:
            raise _graph_parameter_error(error, self.graph) from None
        self._setup_text_encoder(texts + self._class_text_list())
        try:
            return build_task_graph(read, self.text_encoder_)
        except (TypeError, ValueError) as error:
            raise _graph_parameter_error(error, self.graph) from None

    def _labels(self, y, n_tasks):
        """Set ``classes_`` and return ``y`` as class positions (``None`` in zero-shot without ``y``).

        In zero-shot the classes are those of the class embeddings (a dict's
        sorted keys, or the row positions of an array) and ``y``, when
        given, must name some of them.
        """
        if self.mode == "zero_shot":
            source = self.class_embeddings if self.class_embeddings is not None else self.class_texts
            self.classes_ = np.array(sorted(source)) if isinstance(source, dict) else np.arange(len(source))
            if y is None:
                return None
        elif y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        y = column_or_1d(y, warn=True)
        if len(y) != n_tasks:
            raise ValueError(f"X has {n_tasks} examples but y has {len(y)} labels.")
        check_no_missing_labels(y)
        check_classification_targets(y)
        if self.mode != "zero_shot":
            encoder = LabelEncoder().fit(y)
            self.classes_ = encoder.classes_
            return encoder.transform(y)
        unknown = np.setdiff1d(y, self.classes_)
        if len(unknown):
            raise ValueError(f"y holds labels {unknown[:5].tolist()} that have no class embedding; the zero-shot "
                             f"classes are {self.classes_[:10].tolist()}.")
        return np.searchsorted(self.classes_, y)

    def _class_vectors(self):
        """``(n_classes, d)`` class embeddings in the order of ``classes_``, or ``None`` when none are given."""
        if self.class_embeddings is not None:
            source = self.class_embeddings
            if isinstance(source, dict) and self.n_outputs_ > 1:
                raise ValueError("With T binary tasks, class_embeddings is an array of 2T rows (the positive "
                                 "embeddings, then the negative ones), not a dict.")
            if isinstance(source, dict):
                missing = [c for c in self.classes_ if c not in source]
                if missing:
                    raise ValueError(f"class_embeddings has no vector for classes {missing[:5]}.")
                vectors = np.stack([np.asarray(source[c], dtype=np.float64) for c in self.classes_])
            else:
                vectors = np.asarray(source, dtype=np.float64)
                if self.n_outputs_ > 1 and (vectors.ndim != 2 or len(vectors) != 2 * self.n_outputs_):
                    raise ValueError(
                        f"class_embeddings has shape {vectors.shape}; y holds {self.n_outputs_} binary tasks, so "
                        f"expected ({2 * self.n_outputs_}, d): the tasks' positive class embeddings, then their "
                        "negative ones."
                    )
                if vectors.ndim != 2 or (self.n_outputs_ == 1 and len(vectors) != len(self.classes_)):
                    raise ValueError(
                        f"class_embeddings has shape {vectors.shape}; expected ({len(self.classes_)}, d), one "
                        "row per class in the order of classes_ (or pass a dict {label: vector})."
                    )
            if not np.isfinite(vectors).all():
                raise ValueError("class_embeddings contains NaN or infinite values.")
        elif self.class_texts is not None:
            texts = self.class_texts
            expected = 2 * self.n_outputs_ if self.n_outputs_ > 1 else len(self.classes_)
            if isinstance(texts, dict) and self.n_outputs_ > 1:
                raise ValueError("With T binary tasks, class_texts is a list of 2T texts (the positive "
                                 "descriptions, then the negative ones), not a dict.")
            if isinstance(texts, dict):
                missing = [c for c in self.classes_ if c not in texts]
                if missing:
                    raise ValueError(f"class_texts has no text for classes {missing[:5]}.")
                texts = [texts[c] for c in self.classes_]
            elif len(texts) != expected:
                raise ValueError(f"class_texts has {len(texts)} texts; expected {expected}"
                                 + (f" ({self.n_outputs_} positive, then {self.n_outputs_} negative)."
                                    if self.n_outputs_ > 1 else f" for {len(self.classes_)} classes."))
            if self.text_encoder_ is None:
                raise ValueError("class_texts need a text_encoder to embed them.")
            vectors = np.asarray(self.text_encoder_.encode(list(texts)), dtype=np.float64)
        else:
            return None
        if vectors.shape[1] != self.model_.hidden_dim:
            raise ValueError(
                f"The class embeddings are {vectors.shape[1]}-d but the task-tree embeddings are "
                f"{self.model_.hidden_dim}-d; zero-shot prediction and specialize compare the two. Pass "
                "hidden_dim=None (the node features' width, when the class embeddings share their space) or "
                "a pretrained backbone of that width."
            )
        return torch.as_tensor(vectors, dtype=getattr(torch, self.dtype))

    # ------------------------------------------------------------ fitting
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit on the labelled examples ``X``, ``y`` (see ``mode``).

        Parameters
        ----------
        X : array-like or sequence of graphs
            Node ids or node pairs of ``graph``, graphs (``task="graph"``),
            or a feature matrix (``graph=None``).
        y : array-like of shape (n_samples,) or None
            Labels of any type. In ``"zero_shot"`` the classes are those of
            ``class_embeddings`` or ``class_texts`` (a dict's sorted keys, or
            row positions) and ``y`` is optional: when given it must name
            some of them (``specialize`` trains on it).

        Returns
        -------
        self
        """
        if self.task == "link":
            return self._fit_link(X, y)
        if self.mode == "zero_shot" and self.class_embeddings is None and self.class_texts is None:
            raise ValueError("mode='zero_shot' needs class_embeddings or class_texts for the prototypes.")
        if self.specialize and self.class_embeddings is None and self.class_texts is None:
            raise ValueError("specialize=True regresses onto class embeddings: pass class_embeddings or "
                             "class_texts.")
        self._load_pretrained()
        task_graph = self._read(X, reset=True)
        if _is_multitask(y):
            labels = self._multitask_labels(y, task_graph.n_tasks)
        else:
            self.n_outputs_ = 1
            labels = self._labels(y, task_graph.n_tasks)
        self.edge_dim_ = task_graph.edge_dim
        self.model_ = self._setup_model(task_graph.x, self.edge_dim_)
        vectors = self._class_vectors()
        self.history_, self.head_, self.prototypes_ = {}, None, None
        tasks = {"tasks": torch.arange(task_graph.n_tasks)}
        if self.specialize and labels is not None:
            targets = (_multitask_targets(vectors, labels) if self.n_outputs_ > 1
                       else vectors[torch.as_tensor(labels)])
            self.model_ = self._specialize(task_graph, tasks, targets)
        if self.mode == "finetune":
            self._finetune(task_graph, tasks, labels)
        elif self.mode == "in_context":
            embeddings = self._embed(task_graph)
            if self.n_outputs_ > 1:
                self.prototypes_ = _multitask_prototypes(embeddings, labels).numpy()
            else:
                self.prototypes_ = class_prototypes(embeddings, labels, len(self.classes_)).numpy()
        else:
            self.prototypes_ = vectors.numpy()
        self.model_.eval()
        return self

    def _multitask_labels(self, y, n_tasks):
        """``y`` of shape (n, T), 0 / 1 with NaN for missing, as a float array; ``classes_`` = the T tasks."""
        try:
            labels = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("A 2-D y holds T binary tasks: 0, 1, or NaN for a missing label.") from None
        if len(labels) != n_tasks:
            raise ValueError(f"X has {n_tasks} examples but y has {len(labels)} rows.")
        present = labels[~np.isnan(labels)]
        if not np.isin(present, (0.0, 1.0)).all():
            raise ValueError(f"A 2-D y holds T binary tasks (0, 1, or NaN for missing); found the values "
                             f"{np.setdiff1d(present, (0.0, 1.0))[:5].tolist()}.")
        if self.mode == "in_context":
            for t in range(labels.shape[1]):
                if not (labels[:, t] == 1).any() or not (labels[:, t] == 0).any():
                    raise ValueError(f"In context, every task needs a positive and a negative example; task "
                                     f"(column) {t} of y has {int((labels[:, t] == 1).sum())} and "
                                     f"{int((labels[:, t] == 0).sum())}.")
        self.n_outputs_ = labels.shape[1]
        self.classes_ = np.arange(labels.shape[1])
        return labels

    def _specialize(self, task_graph, tasks, targets):
        net = TaskTreeNet(self.model_, task_graph, self._fanout())
        net, history = self._fit_module(net, tasks, targets, loss="mse", max_epochs=self.sft_epochs,
                                        lr=self.sft_lr, validation_fraction=None, n_iter_no_change=None,
                                        grad_clip=1.0)
        self.history_["sft_loss"] = list(history.train_loss)
        self.provenance_ = {**self.provenance_, "specialized": {"n_tasks": int(task_graph.n_tasks),
                                                                "epochs": int(history.n_epochs)}}
        return net.model

    def _finetune(self, task_graph, tasks, labels):
        seed = self._seed()
        multitask = self.n_outputs_ > 1
        with seeded(seed):
            head = torch.nn.Linear(self.model_.hidden_dim, len(self.classes_)).to(getattr(torch, self.dtype))
        if self.freeze_backbone:
            for name, parameter in self.model_.named_parameters():
                parameter.requires_grad_(name.startswith("project."))
        net = TaskTreeNet(self.model_, task_graph, self._fanout(), head=head)
        net, history = self._fit_module(net, tasks, torch.as_tensor(labels),
                                        loss=multitask_loss if multitask else "cross_entropy",
                                        grad_clip=1.0, stratify=not multitask, seed=seed)
        for parameter in net.model.parameters():
            parameter.requires_grad_(True)
        self.model_, self.head_ = net.model, net.head.eval()
        self.history_.update(train_loss=list(history.train_loss), valid_loss=list(history.valid_loss))
        self.n_iter_ = history.n_epochs

    # --------------------------------------------------------------- links
    def _fit_link(self, X, y):
        if self.mode == "in_context":
            raise ValueError(
                "task='link' predicts with mode='finetune' (the end nodes' dot product, trained with binary "
                "cross-entropy against sampled non-edges) or mode='zero_shot' (their cosine, no training); for "
                "prototypes of labelled node pairs use task='edge'."
            )
        if self.specialize:
            raise ValueError("specialize=True regresses onto class embeddings, which links do not have; pass "
                             "specialize=False with task='link'.")
        if self.graph is None:
            raise ValueError("task='link' needs graph=: X holds node pairs of that graph.")
        self._load_pretrained()
        self.__dict__.pop("n_features_in_", None)
        self.graph_ = self._read_graph_parameter()
        pairs = task_index("edge", X, self.graph_.n_nodes)
        if pairs is None:
            raise ValueError("task='link' reads node pairs (n, 2) as X, got None.")
        if y is None:
            target = np.ones(len(pairs))
        else:
            target = column_or_1d(y, warn=True)
            if len(target) != len(pairs):
                raise ValueError(f"X has {len(pairs)} node pairs but y has {len(target)} labels.")
            check_no_missing_labels(target)
            values = np.unique(target)
            if not np.isin(values, (0, 1)).all():
                raise ValueError(f"task='link' reads y as 1 (a link) or 0 (none); found {values[:5].tolist()}.")
            target = target.astype(np.float64)
        self.classes_, self.n_outputs_ = np.array([0, 1]), 1
        self.edge_dim_ = self.graph_.edge_dim
        self.model_ = self._setup_model(self.graph_.x, self.edge_dim_)
        self.history_, self.head_, self.prototypes_ = {}, None, None
        if self.mode == "finetune":
            net = LinkNet(self.model_, self.graph_, self._fanout())
            net, history = self._fit_module(net, {"pairs": pairs}, torch.as_tensor(target), loss=link_loss,
                                            grad_clip=1.0)
            self.model_ = net.model
            self.history_.update(train_loss=list(history.train_loss), valid_loss=list(history.valid_loss))
            self.n_iter_ = history.n_epochs
        self.model_.eval()
        return self

    def _pair_embeddings(self, X):
        """The task-tree embeddings of the end nodes of the pairs ``X``: two arrays ``(n, d)``."""
        if self.graph_ is None:
            raise ValueError("The classifier was fitted without graph=; pass what it was fitted on.")
        pairs = task_index("edge", X, self.graph_.n_nodes)
        nodes, inverse = torch.unique(pairs.reshape(-1), return_inverse=True)
        z = self._embed(self.graph_.for_tasks("node", nodes))[inverse].reshape(len(pairs), 2, -1)
        return z[:, 0], z[:, 1]

    def _link_scores(self, X):
        """Link logits of node pairs: the dot product (fine-tuned) or cosine over ``temperature`` (zero-shot)."""
        u, v = self._pair_embeddings(X)
        if self.mode == "finetune":
            return (u * v).sum(-1).double().numpy()
        return (torch.nn.functional.cosine_similarity(u, v, dim=-1) / self.temperature).double().numpy()

    # ---------------------------------------------------------- prediction
    def transform(self, X):
        """Task-tree embeddings of ``X``.

        For ``task="link"``, the element-wise product of the two end nodes'
        embeddings (its sum is the fine-tuned link logit).

        Returns
        -------
        ndarray of shape (n_samples, hidden_dim)
        """
        check_is_fitted(self)
        if self.task == "link":
            u, v = self._pair_embeddings(X)
            return (u * v).numpy()
        return self._embed(self._read(X, reset=False)).numpy()

    def _class_logits(self, X):
        check_is_fitted(self)
        if self.task == "link":
            scores = self._link_scores(X)
            return np.stack([np.zeros_like(scores), scores], axis=1)
        embeddings = self._embed(self._read(X, reset=False))
        if self.head_ is not None:
            with torch.inference_mode():
                logits = self.head_.cpu()(embeddings)
        else:
            prototypes = torch.as_tensor(self.prototypes_, dtype=embeddings.dtype)
            logits = prototype_logits(embeddings, prototypes)
            if getattr(self, "n_outputs_", 1) > 1:
                # Each task's positive prototype against its negative one (the official protocol).
                n = self.n_outputs_
                logits = logits[:, :n] - logits[:, n:]
            logits = logits / self.temperature
        return logits.double().numpy()

    def decision_function(self, X):
        """Class logits: the head's, or the prototype logits divided by ``temperature``.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            For two classes, the second class's logit minus the first's
            (``task="link"``: the link logit). With T binary tasks (a 2-D
            ``y``), ``(n_samples, T)``: each task's logit, the head's or the
            positive prototype's logit minus the negative one's.
        """
        if getattr(self, "n_outputs_", 1) > 1:
            return self._class_logits(X)
        return super().decision_function(X)

    def predict_proba(self, X):
        """Class probabilities, the softmax of the logits.

        Returns
        -------
        ndarray of shape (n_samples, n_classes) or (n_samples, T)
            With T binary tasks (a 2-D ``y``), each task's probability of
            the positive label, the sigmoid of its logit.
        """
        if getattr(self, "n_outputs_", 1) > 1:
            return 1.0 / (1.0 + np.exp(-self._class_logits(X)))
        return super().predict_proba(X)

    def predict(self, X):
        """The most probable class of each sample.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, T)
            With T binary tasks (a 2-D ``y``), 1 where a task's logit is
            positive, else 0.
        """
        if getattr(self, "n_outputs_", 1) > 1:
            return (self._class_logits(X) > 0).astype(np.int64)
        return super().predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = [self.dtype]
        return tags


def _is_multitask(y):
    """Whether ``y`` holds T >= 2 binary tasks, one column each (GIT's molecule protocol)."""
    if y is None:
        return False
    shape = np.asarray(y).shape  # asarray, not np.ndim: array-likes may refuse numpy's array functions
    return len(shape) == 2 and shape[1] >= 2


def _multitask_prototypes(embeddings, labels):
    """``(2T, d)``: per task the mean unit embedding of its positive examples, then of its negative ones."""
    unit = torch.nn.functional.normalize(embeddings, dim=-1)
    labels = torch.as_tensor(labels, dtype=unit.dtype)
    parts = []
    for value in (1.0, 0.0):
        member = (labels == value).to(unit.dtype)
        parts.append(member.t() @ unit / member.sum(0).clamp_min(1.0)[:, None])
    return torch.cat(parts)


def _multitask_targets(vectors, labels, eps=1e-6):
    """Specialization targets of T binary tasks (the official ``sft_graph``): the mean positive class
    embedding of the tasks an example is positive on plus the mean negative one of those it is negative on."""
    n = vectors.shape[0] // 2
    labels = torch.as_tensor(labels, dtype=vectors.dtype)
    positive, negative = (labels == 1).to(vectors.dtype), (labels == 0).to(vectors.dtype)
    return (positive @ vectors[:n] / (positive.sum(1, keepdim=True) + eps)
            + negative @ vectors[n:] / (negative.sum(1, keepdim=True) + eps))


#: What the shared graph reader calls the one graph of ``graph=``, and what it is called here.
_GRAPH_NAMES = (("graph 0 of X: ", "graph=: "), ("graph 0 of X ", "graph= "), ("graph 0 ", "graph= "))


def _graph_parameter_error(error, graph):
    """``error`` of reading ``graph=``, its message naming ``graph=`` instead of X's first graph."""
    message = str(error)
    for said, meant in _GRAPH_NAMES:
        if message.startswith(said):
            message = meant + message[len(said):]
            break
    else:
        if message.startswith("A TaskSet of node tasks holds one graph"):
            message = (f"graph= is one graph, got a sequence of {len(graph)}; node and edge tasks index one graph "
                       "(task='graph' classifies a sequence of graphs passed as X).")
    if isinstance(graph, (str, bytes)):
        message += (" graph= takes one graph: a networkx graph, a PyG Data, a dict with 'x' and 'edge_index', or "
                    "a molecule's SMILES string.")
    return type(error)(message)
