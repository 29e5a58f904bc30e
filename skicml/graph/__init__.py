"""Graphs: GraphGPT (Zhao et al., ICML 2025) and GIT (Wang et al., ICML 2025).

The domain's graph input (networkx graphs, PyG ``Data``, SMILES, adjacency
rows) lives here at the root (``_graphs.py``, ``_chem.py``) and is shared by
every graph method; each method has its own subpackage (``_graphgpt/``,
``_git/``).

GraphGPT, the Graph Eulerian Transformer:

- :class:`EulerTokenizer`: graphs to stacked token sequences along Eulerian
  walks, and back (lossless).
- :class:`GraphGPTEncoder`: self-supervised pretraining (masked or next-token
  prediction) and graph embeddings.
- :class:`GraphGPTRegressor`, :class:`GraphGPTClassifier`: fine-tuning with a
  head on the final row, from a shipped or user backbone or from scratch.
- :class:`GraphGPTModel`: the Llama-style network in plain torch.
- :func:`as_graph_list`: the graph inputs every estimator accepts.
- :func:`smiles_to_graph`, :func:`smiles_to_graphs`: SMILES strings to molecular
  graphs (needs RDKit); :func:`atom_descriptions`, their atoms as texts.

The walks come from the ``skicml::euler_serialize`` custom op.

GIT, a graph foundation model over task-trees:

- :class:`GITEncoder`: pretraining on the task-trees of node, edge and graph
  tasks (:class:`TaskSet`) of several graphs, and their embeddings.
- :class:`GITClassifier`: node, edge and graph classification, fine-tuned, in
  context (class prototypes from a few labelled examples) or zero-shot (from
  class embeddings or texts); link prediction (``task="link"``, dot-product
  scores) and the multi-task binary protocol of molecules (a 2-D ``y``,
  positive and negative prototypes).
- :class:`GITModel`, :class:`GITPretrainObjective`: the network and its loss.
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
from ._git import GITClassifier, GITEncoder, GITModel, GITPretrainObjective, TaskSet
from ._chem import atom_descriptions, smiles_to_graph, smiles_to_graphs
from ._graphs import Graph, as_graph_list

__all__ = [
    "EulerTokenizer",
    "GITClassifier",
    "GITEncoder",
    "GITModel",
    "GITPretrainObjective",
    "Graph",
    "GraphGPTClassifier",
    "GraphGPTEncoder",
    "GraphGPTModel",
    "GraphGPTRegressor",
    "GraphPredictor",
    "MaskedTokenObjective",
    "NextTokenObjective",
    "TaskSet",
    "as_graph_list",
    "atom_descriptions",
    "mask_cells",
    "pad_sequences",
    "smiles_to_graph",
    "smiles_to_graphs",
]
