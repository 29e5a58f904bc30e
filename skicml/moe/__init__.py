"""Race-DiT: diffusion transformers whose MLPs are Expert Race mixture-of-experts layers.

The Expert Race layer itself is :class:`skicml.nn.ExpertRaceMoE`, for any
transformer; this family holds the image generator built on it.
"""

from ._generator import RaceDiTGenerator
from ._metrics import frechet_distance, sample_quality
from ._model import RaceDiT

__all__ = ["RaceDiT", "RaceDiTGenerator", "frechet_distance", "sample_quality"]
