"""Point clouds: GAPrompt (Ai et al., ICML 2025) on a Point-MAE backbone.

"GAPrompt: Geometry-Aware Point Cloud Prompt for 3D Vision Model":

- :class:`GAPromptClassifier`: parameter-efficient fine-tuning of a frozen
  point-cloud transformer with point prompts, the Point Shift Prompter,
  deep token prompts, prompt propagation and adapters; the baselines (head
  only, full fine-tuning, token prompts only, adapters only) on the same
  code path through ``peft``.
- :class:`PointMAEPretrainer`: masked point modelling, the pretraining of
  the backbone; the shipped ``"tiny-pointmae"`` was made with it.
- :class:`PointMAEBackbone`, :class:`PointMAE` and :class:`GAPromptNetwork`:
  the networks in plain torch.
- :class:`ShapeDistributionFeatures`: D2 shape histograms, the plain baseline.
- :func:`check_point_clouds` and :func:`normalize_point_clouds`: the input
  rules the estimators apply.

The geometry runs on skicml's custom ops (:func:`skicml.ops.farthest_point_sample`,
:func:`skicml.ops.knn`, ...), which need no compiled extension. Data:
:func:`skicml.datasets.make_point_clouds`.
"""

from .._weights import register_weights
from ._classifier import GAPromptClassifier
from ._features import ShapeDistributionFeatures
from ._input import check_point_clouds, normalize_point_clouds
from ._model import GAPromptNetwork, PointMAE, PointMAEBackbone
from ._pretrainer import PointMAEPretrainer

__all__ = [
    "GAPromptClassifier",
    "GAPromptNetwork",
    "PointMAE",
    "PointMAEBackbone",
    "PointMAEPretrainer",
    "ShapeDistributionFeatures",
    "check_point_clouds",
    "normalize_point_clouds",
]

register_weights(
    "tiny-pointmae",
    "skicml.pointcloud",
    "_weights/tiny_pointmae.pt",
    sha256="31f3b0efed83ed451784f202ff7f708323f9d1cfaf243a1f7c28b41068a33eac",
    description="Point-MAE backbone (width 128, 6 blocks, 4 heads, 1.6M parameters, fp16) pretrained by "
                "masked point modelling on 96,000 clean primitive-shape clouds of 512 points, rotated over SO(3)",
    benchmark="see doc/performance.rst (GAPrompt on held-out 'hardest' clouds)",
)
