"""Foundation models of behavioral wearable data (Erturk et al., ICML 2025).

- :class:`WearableEncoder`: self-supervised week embeddings (bidirectional
  Mamba-2 or Transformer over hourly tokens), with a shipped pretrained encoder.
- :class:`WeeklySummaryFeatures`: the summary-statistics baseline.
- :func:`evaluate_probes`: linear probes with person-level splits.
- :class:`WearableModel`: the network in plain torch, and :func:`augment_week`,
  the random view its contrastive objective compares.

Synthetic cohorts come from :func:`skicml.datasets.make_wearable_cohort`.
"""

from .._weights import register_weights
from ._encoder import WearableEncoder
from ._evaluation import evaluate_probes
from ._features import WeeklySummaryFeatures
from ._model import WearableModel, augment_week

__all__ = ["WearableEncoder", "WearableModel", "WeeklySummaryFeatures", "augment_week", "evaluate_probes"]

register_weights(
    "wearable-core-small",
    "skicml.wearable",
    "_weights/wearable_core_small.pt",
    sha256="ead2e2c4afdd9dc9840988464f1bb7de92350acec4117157f4045ddd5140fed7",
    description="Wearable encoder (bidirectional Mamba-2, width 128, day-context tokens, 0.78M "
                "parameters, 384-d embedding read from every layer) pretrained by masked "
                "reconstruction of hidden and shown hours on 8,000 synthetic weeks of the 12 core "
                "variables",
    benchmark="linear probes: 4 of 6 labels above the summary statistics (infection 0.911 vs 0.970)",
)
