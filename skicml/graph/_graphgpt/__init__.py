"""GraphGPT (Zhao et al., ICML 2025): the network, its tokenizer and estimators.

Re-exported by :mod:`skicml.graph`; import from there.
"""

from ..._weights import register_weights
from ._encoder import GraphGPTEncoder
from ._model import GraphGPTModel, GraphPredictor, MaskedTokenObjective, NextTokenObjective, mask_cells
from ._supervised import GraphGPTClassifier, GraphGPTRegressor
from ._tokenizer import EulerTokenizer, pad_sequences

__all__ = [
    "EulerTokenizer",
    "GraphGPTClassifier",
    "GraphGPTEncoder",
    "GraphGPTModel",
    "GraphGPTRegressor",
    "GraphPredictor",
    "MaskedTokenObjective",
    "NextTokenObjective",
    "mask_cells",
    "pad_sequences",
]

register_weights(
    "graphgpt-qm9-small",
    "skicml.graph._graphgpt",
    "_weights/graphgpt_qm9_small.pt",
    sha256="f6eab54aadc751a678ba7d888180f351adc7b0ea3a2fce3ad08613a7ee1e9714",
    description="GraphGPT backbone (d=128, 4 layers) SMTP-pretrained on QM9 molecules",
    benchmark="QM9 HOMO-LUMO gap, ridge probe on the frozen backbone: MAE 0.489 eV",
)
