"""What the GraphGPT estimators share: tokenizing graphs into tensors of
views, building or loading the backbone, and writing checkpoints."""

from __future__ import annotations

import os

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from ..._weights import load_module, save_module
from ...base import TorchEstimatorMixin, progress, seeded
from ...utils.param_validation import HasMethods, Integral, Interval, Real, StrOptions, shared_constraints
from .._graphs import read_graphs
from ._model import GraphGPTModel
from ._tokenizer import EulerTokenizer, pad_sequences

__all__ = ["GraphGPTBackboneMixin"]

#: Constructor arguments that define the backbone network.
BACKBONE_PARAMS = ("hidden_size", "num_layers", "head_dim", "mlp_ratio", "attn_dropout", "stack_agg")
#: Constructor arguments that define the tokenizer.
TOKENIZER_PARAMS = ("node_scope", "reindex", "node_attr", "edge_attr", "n_bins")


class GraphGPTBackboneMixin(TorchEstimatorMixin):
    """Tokenizer, backbone and persistence shared by the GraphGPT estimators.

    Subclasses have the constructor parameters named in
    :data:`BACKBONE_PARAMS` and :data:`TOKENIZER_PARAMS`, plus ``pretrained``,
    ``n_views``, ``dtype``, ``batch_size``, ``device`` and ``random_state``.
    """

    _causal = False

    #: The rules of the parameters every GraphGPT estimator has.
    _parameter_constraints = {
        "hidden_size": [Interval(Integral, 1, None, closed="left")],
        "num_layers": [Interval(Integral, 1, None, closed="left")],
        "head_dim": [Interval(Integral, 1, None, closed="left")],
        "mlp_ratio": [Interval(Integral, 1, None, closed="left")],
        "attn_dropout": [Interval(Real, 0, 1, closed="both")],
        "stack_agg": [StrOptions({"sum", "gated"})],
        **{name: EulerTokenizer._parameter_constraints[name] for name in TOKENIZER_PARAMS},
        "n_views": [Interval(Integral, 1, None, closed="left")],
        # A fitted GraphGPT estimator (or one wrapped in FrozenEstimator) also serves.
        "pretrained": [str, os.PathLike, HasMethods(["get_params"]), None],
        "dtype": [StrOptions({"float32", "float64"})],
        **shared_constraints("max_epochs", "batch_size", "lr", "weight_decay", "warmup_fraction",
                             "validation_fraction", "n_iter_no_change", "checkpoint_dir", "device",
                             "random_state", "verbose"),
    }

    def _torch_dtype(self):
        return getattr(torch, self.dtype)

    # ------------------------------------------------------------ tokens
    def _read(self, X, reset):
        node_attr, edge_attr = self.node_attr, self.edge_attr
        if not reset:
            node_attr, edge_attr = self.tokenizer_.node_attr, self.tokenizer_.edge_attr
        graphs, from_rows = read_graphs(self, X, reset=reset, node_attr=node_attr, edge_attr=edge_attr)
        if reset and not from_rows:
            self.__dict__.pop("n_features_in_", None)
        return graphs

    def _tokens(self, graphs):
        """Tensor (n, n_views, L, F) of ``graphs``' serializations."""
        views = [self.tokenizer_._serialize(graphs, view=v) for v in range(self.n_views)]
        longest = max(len(s) for view in views for s in view)
        # int32 keeps the cached views of a large dataset at half the memory.
        stacked = np.stack([pad_sequences(view, longest, dtype=np.int32) for view in views], axis=1)
        return torch.from_numpy(stacked)

    # ---------------------------------------------------------- backbone
    def _setup_backbone(self, graphs):
        """Fit the tokenizer and build the backbone, or load ``pretrained``."""
        if self.pretrained is None:
            self.tokenizer_ = EulerTokenizer(
                **{name: getattr(self, name) for name in TOKENIZER_PARAMS}, random_state=self._seed()
            )._fit_graphs(graphs)
            self.backbone_config_ = {name: getattr(self, name) for name in BACKBONE_PARAMS}
            self.backbone_config_["causal"] = self._causal
            with seeded(self._seed()):
                backbone = self._build_backbone()
            self.provenance_ = {"trained_by": "fit"}
            return backbone
        if hasattr(self.pretrained, "get_params") and not hasattr(self.pretrained, "tokenizer_"):
            raise ValueError(
                f"pretrained is an unfitted {type(self.pretrained).__name__}. clone() (and so GridSearchCV "
                "and cross_validate) copies an estimator parameter unfitted: fit it first and wrap it in "
                "sklearn.frozen.FrozenEstimator, or pass the path of the file its save() writes."
            )
        if hasattr(self.pretrained, "tokenizer_"):  # a fitted GraphGPTEncoder
            source = self.pretrained
            check_is_fitted(source)
            self.tokenizer_ = EulerTokenizer.from_state(source.tokenizer_.get_state())
            self.backbone_config_ = dict(source.backbone_config_)
            backbone = self._build_backbone()
            backbone.load_state_dict(source.backbone_.state_dict())
            self.provenance_ = dict(source.provenance_)
        else:
            backbone, _, self.provenance_ = load_module(self.pretrained, self._backbone_from_config)
        self.tokenizer_._check_layout(graphs)
        return backbone

    def _backbone_from_config(self, config):
        """The tokenizer and an untrained backbone a saved file's ``config`` describes."""
        self.tokenizer_ = EulerTokenizer.from_state(config["tokenizer"])
        # Files without the flag (the pretraining recipe's) are bidirectional.
        self.backbone_config_ = {"causal": False, **config["backbone"]}
        return self._build_backbone()

    def _build_backbone(self):
        tokenizer = self.tokenizer_
        return GraphGPTModel(tokenizer.vocab_size_, tokenizer.n_stacked_, **self.backbone_config_)

    def _batched(self, fn, tokens, desc):
        """``fn`` over batches of ``tokens`` in inference mode, concatenated.

        With ``verbose``, a progress bar labelled ``desc`` counts the graphs.
        """
        device = self._device()
        out = []
        with torch.inference_mode(), progress(total=len(tokens), verbose=self.verbose,
                                              desc=f"{type(self).__name__} {desc}", unit="graph") as bar:
            for start in range(0, len(tokens), max(1, self.batch_size)):
                batch = tokens[start:start + self.batch_size]
                out.append(fn(batch.to(device)).cpu())
                bar.update(len(batch))
        return torch.cat(out)

    def save(self, path):
        """Write the fitted backbone and tokenizer to ``path``.

        The file loads with ``pretrained=path`` in any GraphGPT estimator.

        Returns
        -------
        str
            The file's SHA-256.
        """
        check_is_fitted(self)
        config = {"backbone": dict(self.backbone_config_), "tokenizer": self.tokenizer_.get_state()}
        return save_module(path, self.backbone_, config, dict(self.provenance_), dtype=torch.float32)
