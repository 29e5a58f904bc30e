"""Lavender: aligning a VLM's text-to-image attention with a diffusion model's during fine-tuning.

Re-exported by :mod:`skicml.vlm`; import from there.
"""

from ._align import Aligner, align_loss
from ._diffusion_teacher import TinyDiffusionTeacher
from ._teachers import OracleMaskTeacher
from ._tuner import LavenderTuner

__all__ = ["Aligner", "LavenderTuner", "OracleMaskTeacher", "TinyDiffusionTeacher", "align_loss"]
