"""Foundation models of behavioral wearable data (Erturk et al., ICML 2025).

- :class:`WearableEncoder`: self-supervised week embeddings (bidirectional
  Mamba-2 or Transformer over hourly tokens), with a shipped pretrained encoder.
- :class:`WeeklySummaryFeatures`: the summary-statistics baseline.
- :func:`evaluate_probes`: linear probes with person-level splits.
- :class:`WearableModel`: the network in plain torch.

Synthetic cohorts come from :func:`skicml.datasets.make_wearable_cohort`.
"""

from ._encoder import WearableEncoder
from ._evaluation import evaluate_probes
from ._features import WeeklySummaryFeatures
from ._model import WearableModel

__all__ = ["WearableEncoder", "WearableModel", "WeeklySummaryFeatures", "evaluate_probes"]
