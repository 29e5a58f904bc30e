"""Graphs: GraphGPT, the Graph Eulerian Transformer (Zhao et al., ICML 2025).

The domain's graph input (networkx graphs, PyG ``Data``, SMILES, adjacency
rows) lives here at the root (``_graphs.py``, ``_chem.py``) and is shared by
every graph method; each method has its own subpackage (``_graphgpt/``).

- :class:`EulerTokenizer`: graphs to stacked token sequences along Eulerian
  walks, and back (lossless).
- :class:`GraphGPTEncoder`: self-supervised pretraining (masked or next-token
  prediction) and graph embeddings.
- :class:`GraphGPTRegressor`, :class:`GraphGPTClassifier`: fine-tuning with a
  head on the final row, from a shipped or user backbone or from scratch.
- :class:`GraphGPTModel`: the Llama-style network in plain torch.
- :func:`as_graph_list`: the graph inputs every estimator accepts.
- :func:`smiles_to_graph`, :func:`smiles_to_graphs`: SMILES strings to molecular
  graphs (needs RDKit).

The walks come from the ``skicml::euler_serialize`` custom op.
"""

from ._graphgpt import (
    EulerTokenizer,
    GraphGPTClassifier,
    GraphGPTEncoder,
    GraphGPTModel,
    GraphGPTRegressor,
    GraphPredictor,
    MaskedTokenObjective,
    NextTokenObjective,
    mask_cells,
    pad_sequences,
)
from ._chem import smiles_to_graph, smiles_to_graphs
from ._graphs import Graph, as_graph_list

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
    "smiles_to_graph",
    "smiles_to_graphs",
]
