"""Lavender: aligning a VLM's text-to-image attention with a diffusion model's during fine-tuning.

Re-exported by :mod:`skicml.vlm`; import from there.
"""

from ..._weights import register_weights
from ._align import Aligner, align_loss
from ._diffusers_teacher import DiffusersTeacher
from ._diffusion_teacher import TinyDiffusionTeacher
from ._teachers import OracleMaskTeacher, PrecomputedTeacher, save_word_maps
from ._tuner import LavenderTuner

__all__ = [
    "Aligner",
    "DiffusersTeacher",
    "LavenderTuner",
    "OracleMaskTeacher",
    "PrecomputedTeacher",
    "TinyDiffusionTeacher",
    "align_loss",
    "save_word_maps",
]

register_weights(
    "tiny-diffusion-scenes",
    "skicml.vlm._lavender",
    "_weights/tiny_diffusion_scenes.pt",
    sha256="d6c9d37642890ae7daceaca6d3aff5275dab65736a71ec55095a4136ce203329",
    description=("TinyDiffusionTeacher (text-conditioned pixel DDPM, 64-d, 3 blocks, 8x8 patch grid) trained "
                 "on 12k biased make_object_scenes captions"),
    benchmark="pointing accuracy of its word maps on 300 unbiased held-out scenes: shape 0.369, colour 0.332",
)
