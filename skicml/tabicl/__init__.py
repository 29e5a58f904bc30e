"""TabICL (Qu et al., ICML 2025): tabular classification by in-context learning.

- :class:`TabICLClassifier`: the estimator, with the shipped pretrained model.
- :class:`TabICLEmbedder`: label-free row representations for pipelines.
- :class:`TabICLRegressor`: regression with a predictive distribution (TabICL v2's quantile head).
- :class:`TabICLImputer`: missing values filled by in-context prediction of each column from the others.
- :class:`TabICLOutlierDetector`: outlier scores from the chain-rule joint density, and synthetic rows.
- :class:`TabICLModel`: the network (official v0.1.x config keys and state-dict names).
- :mod:`skicml.tabicl.prior`: the synthetic prior the shipped model is pretrained on.
"""

from .._weights import register_weights
from ._classifier import TabICLClassifier, TabICLEmbedder
from ._model import TabICLModel
from ._model_v2 import TabICLv2Model
from ._regressor import TabICLRegressor
from ._unsupervised import TabICLImputer, TabICLOutlierDetector

__all__ = ["TabICLClassifier", "TabICLEmbedder", "TabICLImputer", "TabICLModel", "TabICLOutlierDetector",
           "TabICLRegressor", "TabICLv2Model"]

register_weights(
    "tabicl-small",
    "skicml.tabicl",
    "_weights/tabicl_small.pt",
    sha256="b825cb6a3791b9b19edc1957a35cc6cbf167801e29bf4bf885a1a95192fc7388",
    description="TabICL small (0.46M parameters) pretrained on skicml's synthetic prior",
    benchmark="real tables: log loss 0.111, accuracy 0.961 (LogisticRegression 0.099)",
)

register_weights(
    "tabicl-regressor-small",
    "skicml.tabicl",
    "_weights/tabicl_regressor_small.pt",
    sha256="067d5bca2d73f1120f51b94075434a308871ff37bc8d5ecb58a2967ceef7d118",
    description="TabICL v2 regressor small (0.76M parameters, 999 quantiles), warm-started from tabicl-small "
                "and pretrained on skicml's regression prior (up to 64 columns and 1,152 rows)",
    benchmark="16 real tables at 128 / 512 training rows: R^2 0.420 / 0.442 (RidgeCV 0.456 / 0.479), "
              "RMSE rank 2.31 / 2.36 of 4; 80% intervals cover 0.77 / 0.83",
)
