"""GIT (Wang et al., ICML 2025): a graph foundation model over task-trees.

Re-exported by :mod:`skicml.graph`; import from there.
"""

from ..._weights import register_weights
from ._classifier import GITClassifier
from ._data import TaskSet
from ._encoder import GITEncoder
from ._model import GITModel, GITPretrainObjective

__all__ = ["GITClassifier", "GITEncoder", "GITModel", "GITPretrainObjective", "TaskSet"]

register_weights(
    "git-sbm-qm9-small",
    "skicml.graph._git",
    "_weights/git_sbm_qm9_small.pt",
    sha256="ba5f5c971e06ff6930d20f42b9fd85fa732bbdbc1d0ca471e66ac039e99a5953",
    description="GIT backbone (64-d, 2 SAGE layers) pretrained on 36 SBM task sets and 20k QM9 molecules",
    benchmark="5-shot in-context node accuracy on 3 held-out SBM domains: 0.766 (random weights 0.626)",
)
