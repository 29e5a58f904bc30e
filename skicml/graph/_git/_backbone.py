"""What the GIT estimators share: the inputs they read, the backbone they build or load, and the batches.

- the text encoder (:mod:`._text`): the estimator's own, fitted on the texts
  of ``fit``, or the one a pretrained backbone carries;
- the backbone: a fresh :class:`GITModel`, a shipped or saved file, or a
  fitted :class:`GITEncoder`; features of another width than it reads go
  through a learned input projection;
- :class:`TaskTreeNet`, the module the training loop sees: it holds a
  :class:`TaskGraph` and turns a batch of task ids into sampled task-trees
  (``fanout`` neighbours a hop in training, every neighbour otherwise, so
  that predictions are exact and do not depend on the batch).
"""

from __future__ import annotations

import os

import numpy as np
import torch
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.validation import check_is_fitted, validate_data

from ..._weights import load_module, save_module
from ...base import TorchEstimatorMixin, seeded, warn_user
from ...utils.param_validation import HasMethods, Integral, Interval, Real, StrOptions, shared_constraints
from ._data import knn_task_graph
from ._model import GITModel
from ._text import TfidfSVDTextEncoder, resolve_text_encoder

__all__ = ["GITBackboneMixin", "TaskTreeNet"]

#: Constructor arguments that define a fresh backbone.
BACKBONE_PARAMS = ("hidden_dim", "num_layers", "norm", "dropout")


class TaskTreeNet(torch.nn.Module):
    """A :class:`GITModel` (and an optional head or objective) reading task ids of one :class:`TaskGraph`.

    The graph is a plain attribute, not a buffer: sampling runs on the CPU
    and only the sampled trees move to the model's device.
    """

    def __init__(self, model, task_graph, fanout, head=None, objective=None):
        super().__init__()
        self.model, self.head, self.objective = model, head, objective
        self.task_graph, self.fanout = task_graph, int(fanout)

    def trees(self, tasks):
        fanouts = [self.fanout if self.training else -1] * self.model.num_layers
        reference = next(self.model.parameters())
        x, edge_index, edge_attr, task_of_root, roots = self.task_graph.sample(tasks, fanouts)
        device = reference.device
        if edge_attr is not None:
            edge_attr = edge_attr.to(device, reference.dtype)
        return [x.to(device, reference.dtype), edge_index.to(device), task_of_root.to(device), roots.to(device),
                len(tasks), edge_attr]

    def forward(self, tasks):
        x, edge_index, task_of_root, roots, n_tasks, edge_attr = self.trees(tasks)
        if self.objective is not None:
            return self.objective(x, edge_index, task_of_root, roots, n_tasks)
        z = self.model(x, edge_index, task_of_root, roots, n_tasks, edge_attr)
        return z if self.head is None else self.head(z)


class GITBackboneMixin(TorchEstimatorMixin):
    """Backbone, text encoder, 2-D path and persistence shared by the GIT estimators."""

    _parameter_constraints = {
        "pretrained": [str, os.PathLike, HasMethods(["get_params"]), None],
        "hidden_dim": [Interval(Integral, 1, None, closed="left"), None],
        "num_layers": [Interval(Integral, 0, None, closed="left")],
        "norm": [StrOptions({"batch"}), None],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        # "tfidf-svd", "minilm" or a published sentence-transformers name, checked when it is resolved
        "text_encoder": [str, callable, None],
        "text_dim": [Interval(Integral, 1, None, closed="left")],
        "node_attr": [str, list, None],
        "node_text": [str, None],
        "fanout": [Interval(Integral, 1, None, closed="left"), StrOptions({"all"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "dtype": [StrOptions({"float32", "float64"})],
        **shared_constraints("max_epochs", "batch_size", "lr", "weight_decay", "device", "random_state",
                             "verbose"),
    }

    # ------------------------------------------------------------ texts
    def _setup_text_encoder(self, texts):
        """``text_encoder_``: the pretrained backbone's when ``text_encoder=None``, else this estimator's."""
        inherited = getattr(self, "_pretrained_text_encoder", None)
        if self.text_encoder is None and inherited is not None:
            self.text_encoder_ = inherited
        elif self.text_encoder == "tfidf-svd" and not texts:
            self.text_encoder_ = None  # no texts to fit on: the features are numeric
        else:
            self.text_encoder_ = resolve_text_encoder(self.text_encoder, texts, dim=self.text_dim,
                                                      random_state=self._seed())

    # ---------------------------------------------------------- backbone
    def _load_pretrained(self):
        """Read ``pretrained`` (before the inputs, which may need its text encoder)."""
        self._pretrained_model, self._pretrained_text_encoder = None, None
        if self.pretrained is None:
            self.provenance_ = {"trained_by": "fit"}
            return
        source = self.pretrained
        if hasattr(source, "get_params"):
            if not hasattr(source, "model_"):
                raise ValueError(
                    f"pretrained is an unfitted {type(source).__name__}. clone() (and so GridSearchCV) copies an "
                    "estimator parameter unfitted: fit it first and wrap it in sklearn.frozen.FrozenEstimator, "
                    "or pass the path of the file its save() writes."
                )
            check_is_fitted(source)
            model = _build(source._config())
            model.load_state_dict(source.model_.state_dict())
            self._pretrained_model, self._pretrained_text_encoder = model, source.text_encoder_
            self.provenance_ = dict(source.provenance_)
            return
        model, config, self.provenance_ = load_module(source, _build)
        state = config.get("text_encoder")
        self._pretrained_model = model
        self._pretrained_text_encoder = TfidfSVDTextEncoder.from_state(state) if state else None

    def _setup_model(self, features, edge_dim=0):
        """``model_`` for node features ``features`` (n_nodes, width) and ``edge_dim``-wide edge features
        (0: none): the pretrained one (behind an input projection when its width differs, with new edge
        maps when it read no edge features of that width) or a fresh one seeded by ``random_state``."""
        feature_dim = features.shape[1]
        model = self._pretrained_model
        del self._pretrained_model
        if model is None:
            hidden = feature_dim if self.hidden_dim is None else self.hidden_dim
            if self.num_layers == 0 and hidden != feature_dim:
                raise ValueError(
                    f"num_layers=0 leaves the {feature_dim}-d features as they are; pass hidden_dim=None."
                )
            with seeded(self._seed()):
                model = GITModel(feature_dim, hidden, self.num_layers, self.norm, self.dropout,
                                 getattr(self, "predictor_dropout", 0.5), edge_dim=edge_dim or None)
            return model.to(getattr(torch, self.dtype))
        if feature_dim != model.feature_dim:
            model.add_input_projection(feature_dim)
            _principal_projection(model.project, features)
        if edge_dim and model.edge_dim != edge_dim:
            with seeded(self._seed()):
                model.add_edge_features(edge_dim)
        return model.to(getattr(torch, self.dtype))

    def _config(self):
        model = self.model_
        config = {"model": {"input_dim": model.input_dim, "hidden_dim": model.hidden_dim,
                            "num_layers": model.num_layers, "norm": _norm_of(model),
                            "dropout": model.dropout.p, "predictor_dropout": model.predictor[3].p,
                            "edge_dim": model.edge_dim},
                  "feature_dim": model.feature_dim}
        encoder = self.text_encoder_
        config["text_encoder"] = encoder.get_state() if hasattr(encoder, "get_state") else None
        return config

    def save(self, path):
        """Write the fitted backbone (and its TF-IDF text encoder) to ``path``.

        The file loads with ``pretrained=path`` in :class:`GITEncoder` and
        :class:`GITClassifier`. A ``"minilm"`` or callable text encoder is
        not written: pass it again as ``text_encoder`` when loading.

        Returns
        -------
        str
            The file's SHA-256.
        """
        check_is_fitted(self)
        return save_module(path, self.model_, self._config(), dict(self.provenance_), dtype=torch.float32,
                           create_folder=False)

    # ---------------------------------------------------------- 2-D path
    def _fit_rows(self, X):
        """The k-nearest-neighbour graph over the rows of a feature matrix (the 2-D path)."""
        X = validate_data(self, X, dtype=np.float32)
        if self.n_neighbors > len(X) - 1:
            warn_user(
                f"n_neighbors={self.n_neighbors} but X has {len(X)} rows: each row of the k-nearest-neighbour "
                f"graph is linked to the {max(len(X) - 1, 0)} others, and a new row to the {len(X)} training rows.",
                UserWarning,
            )
        self.train_rows_ = X
        self.neighbors_ = NearestNeighbors().fit(X)
        return knn_task_graph(X, self.neighbors_, self.n_neighbors)

    def _rows(self, X):
        X = validate_data(self, X, dtype=np.float32, reset=False)
        return knn_task_graph(self.train_rows_, self.neighbors_, self.n_neighbors, rows=X)

    def _check_feature_width(self, task_graph):
        """Refuse node features of another width than ``fit``'s, in the user's terms (not a matmul error)."""
        width, fitted = task_graph.x.shape[1], self.model_.feature_dim
        if width != fitted:
            raise ValueError(f"The graphs have {width}-d node features; the {type(self).__name__} was fitted on "
                             f"{fitted}-d ones.")
        fitted_edges = getattr(self, "edge_dim_", 0)
        if task_graph.edge_dim != fitted_edges:
            raise ValueError(f"The graphs have {task_graph.edge_dim}-d edge features (edge_attr); the "
                             f"{type(self).__name__} was fitted on {fitted_edges}-d ones (0: none).")
        return task_graph

    # ------------------------------------------------------------ batches
    def _fanout(self):
        return -1 if self.fanout == "all" else self.fanout

    def _embed(self, task_graph, model=None):
        """Task-tree embeddings ``(n_tasks, hidden_dim)`` of every task of ``task_graph``, exact trees."""
        model = (self.model_ if model is None else model).to(self._device()).eval()
        net = TaskTreeNet(model, task_graph, -1).eval()
        out = []
        with torch.inference_mode():
            for start in range(0, task_graph.n_tasks, self.batch_size):
                tasks = torch.arange(start, min(start + self.batch_size, task_graph.n_tasks))
                out.append(net(tasks).cpu())
        return torch.cat(out)


def _principal_projection(linear, features):
    """Start ``linear`` as the map onto the features' leading principal axes, scaled to unit mean norm.

    The backbone was pretrained on unit-norm sentence vectors; a random map
    of another domain's features would hand it noise. Fine-tuning trains the
    map further; the prototype modes use it as it is.
    """
    x = features.double()
    mean = x.mean(0)
    _, _, v = torch.linalg.svd(x - mean, full_matrices=False)
    k = min(linear.out_features, v.shape[0])
    weight = torch.zeros(linear.out_features, linear.in_features, dtype=torch.float64)
    weight[:k] = v[:k]
    scale = ((x - mean) @ weight.t()).norm(dim=1).mean().clamp_min(1e-12)
    with torch.no_grad():
        linear.weight.copy_(weight / scale)
        linear.bias.copy_(-(weight / scale) @ mean)


def _norm_of(model):
    if model.num_layers == 0:
        return "batch"  # nothing to normalise; the constructor's default
    return "batch" if isinstance(model.norms[0], torch.nn.BatchNorm1d) else None


def _build(config):
    model = GITModel(**config["model"])
    if config.get("feature_dim") not in (None, model.input_dim):
        model.add_input_projection(config["feature_dim"])
    return model
