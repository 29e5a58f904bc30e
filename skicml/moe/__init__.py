"""Race-DiT: diffusion transformers whose MLPs are Expert Race mixture-of-experts layers.

The Expert Race layer itself is :class:`skicml.nn.ExpertRaceMoE`, for any
transformer; this family holds the image generator built on it.
"""

from .._weights import register_weights
from ._generator import RaceDiTGenerator
from ._metrics import frechet_distance, sample_quality
from ._model import RaceDiT

__all__ = ["RaceDiT", "RaceDiTGenerator", "frechet_distance", "sample_quality"]

register_weights(
    "race-dit-digits",
    "skicml.moe",
    "_weights/race_dit_digits.pt",
    sha256="da76bf14c89474940ef2016ae94b19f51b857d291a11060f1c679dc3ea55a435",
    description="Race-DiT (width 64, depth 4, 8 experts, 2 per token on average, 0.75M parameters) trained on the "
                "1,797 scikit-learn digits, 1,200 steps of a 4,000-step schedule, EMA weights",
    benchmark="guided samples read as their class 1.000 (20 per class, guidance 3, 50 steps)",
)
