"""What the GraphGPT estimators share: tokenizing graphs into tensors of
views, building or loading the backbone, and writing checkpoints."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from ..._weights import load_weights, save_weights
from ...base import TorchEstimatorMixin, seeded
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

    def _torch_dtype(self):
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype={self.dtype!r}; expected 'float32' or 'float64'.")
        return getattr(torch, self.dtype)

    def _check_views(self):
        if not isinstance(self.n_views, (int, np.integer)) or self.n_views < 1:
            raise ValueError(f"n_views must be a positive integer, got {self.n_views!r}.")

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
            payload = load_weights(self.pretrained)
            self.tokenizer_ = EulerTokenizer.from_state(payload["config"]["tokenizer"])
            # Files without the flag (the pretraining recipe's) are bidirectional.
            self.backbone_config_ = {"causal": False, **payload["config"]["backbone"]}
            backbone = self._build_backbone()
            backbone.load_state_dict(payload["state_dict"])
            self.provenance_ = dict(payload["provenance"])
        self.tokenizer_._check_layout(graphs)
        return backbone

    def _build_backbone(self):
        tokenizer = self.tokenizer_
        return GraphGPTModel(tokenizer.vocab_size_, tokenizer.n_stacked_, **self.backbone_config_)

    def _batched(self, fn, tokens):
        """``fn`` over batches of ``tokens`` in inference mode, concatenated."""
        device = self._device()
        out = []
        with torch.inference_mode():
            for start in range(0, len(tokens), max(1, self.batch_size)):
                out.append(fn(tokens[start:start + self.batch_size].to(device)).cpu())
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
        state = {k: v.float() for k, v in self.backbone_.state_dict().items()}
        return save_weights(path, state, config, dict(self.provenance_))
