"""skicml: methods of ICML 2025 papers as scikit-learn estimators.

Flagship estimators are re-exported here (``from skicml import
TabICLClassifier``); every estimator is listed by
:func:`skicml.utils.all_estimators`.

Families load on first use, as scikit-learn's subpackages do: ``import
skicml`` imports none of them (not even torch), and ``from skicml import
TabICLClassifier`` imports TabICL alone, so a user of one method never pays
for the others' dependencies.
"""

import importlib
import pkgutil

__version__ = "0.1.0.dev0"

# Public name -> the subpackage that defines it.
_FLAGSHIPS = {
    "ContextureEmbedding": "contexture",
    "GAPromptClassifier": "pointcloud",
    "GraphGPTClassifier": "graph",
    "GraphGPTRegressor": "graph",
    "RaceDiTGenerator": "moe",
    "TabICLClassifier": "tabicl",
    "TabICLRegressor": "tabicl",
    "ViLAMPCompressor": "video",
    "WearableEncoder": "wearable",
    "WhitenedCLIPScorer": "clip",
}
# The public subpackages (every family and layer folder), found on the package
# directory rather than listed by hand, so that a new family is reachable as
# ``skicml.<family>`` without an edit here. Listing the directory imports no
# subpackage.
_SUBPACKAGES = sorted(info.name for info in pkgutil.iter_modules(__path__) if info.ispkg and not info.name.startswith("_"))

# skicml-wide settings (torch's threads while an estimator works), as sklearn.set_config.
_CONFIG = ("config_context", "get_config", "set_config")

__all__ = [*sorted(_FLAGSHIPS), *_CONFIG, "__version__"]


def __getattr__(name):
    if name in _CONFIG:
        # The settings module imports the standard library alone, so these stay cheap.
        return getattr(importlib.import_module(".utils._config", __name__), name)
    if name in _FLAGSHIPS:
        return getattr(importlib.import_module(f".{_FLAGSHIPS[name]}", __name__), name)
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_FLAGSHIPS, *_CONFIG, *_SUBPACKAGES})
