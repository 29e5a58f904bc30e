"""skicml: methods of ICML 2025 papers as scikit-learn estimators.

Flagship estimators are re-exported here as their families land, so that
``from skicml import TabICLClassifier`` works; every estimator is also listed
by :func:`skicml.utils.all_estimators`.
"""

__version__ = "0.1.0.dev0"

__all__ = ["__version__"]
