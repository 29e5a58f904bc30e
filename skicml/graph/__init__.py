"""GraphGPT: the Graph Eulerian Transformer (Zhao et al., ICML 2025).

- :class:`EulerTokenizer`: graphs to stacked token sequences along Eulerian
  walks, and back (lossless).
- :class:`GraphGPTEncoder`: self-supervised pretraining (masked or next-token
  prediction) and graph embeddings.
- :class:`GraphGPTRegressor`, :class:`GraphGPTClassifier`: fine-tuning with a
  head on the final row, from a shipped or user backbone or from scratch.
- :class:`GraphGPTModel`: the Llama-style network in plain torch.
- :func:`as_graph_list`: the graph inputs every estimator accepts.

The walks come from the ``skicml::euler_serialize`` custom op.
"""

from .._weights import register_weights
from ._encoder import GraphGPTEncoder
from ._graphs import Graph, as_graph_list
from ._model import GraphGPTModel, GraphPredictor, MaskedTokenObjective, NextTokenObjective, mask_cells
from ._supervised import GraphGPTClassifier, GraphGPTRegressor
from ._tokenizer import EulerTokenizer, pad_sequences

__all__ = [
    "EulerTokenizer",
    "Graph",
    "GraphGPTClassifier",
    "GraphGPTEncoder",
    "GraphGPTModel",
    "GraphGPTRegressor",
    "GraphPredictor",
    "MaskedTokenObjective",
    "NextTokenObjective",
    "as_graph_list",
    "mask_cells",
    "pad_sequences",
]

register_weights(
    "graphgpt-qm9-small",
    "skicml.graph",
    "_weights/graphgpt_qm9_small.pt",
    sha256="12fff0d9dc745898c5d6f6143f6cd87ff51f44cc98f2aa6986d6a3e9e792a8e5",
    description="GraphGPT backbone (d=128, 4 layers) SMTP-pretrained on QM9 molecules",
)
