"""skicml: methods of ICML 2025 papers as scikit-learn estimators.

Flagship estimators are re-exported here (``from skicml import
TabICLClassifier``); every estimator is listed by
:func:`skicml.utils.all_estimators`.
"""

__version__ = "0.1.0.dev0"

from .clip import WhitenedCLIPScorer  # noqa: E402
from .graph import GraphGPTClassifier, GraphGPTRegressor  # noqa: E402
from .tabicl import TabICLClassifier  # noqa: E402
from .wearable import WearableEncoder  # noqa: E402

__all__ = ["GraphGPTClassifier", "GraphGPTRegressor", "TabICLClassifier", "WearableEncoder", "WhitenedCLIPScorer",
           "__version__"]
