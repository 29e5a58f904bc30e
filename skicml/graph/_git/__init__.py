"""GIT (Wang et al., ICML 2025): a graph foundation model over task-trees.

Re-exported by :mod:`skicml.graph`; import from there.
"""

from ._classifier import GITClassifier
from ._data import TaskSet
from ._encoder import GITEncoder
from ._model import GITModel, GITPretrainObjective

__all__ = ["GITClassifier", "GITEncoder", "GITModel", "GITPretrainObjective", "TaskSet"]
