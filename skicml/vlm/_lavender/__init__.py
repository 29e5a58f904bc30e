"""Lavender: aligning a VLM's text-to-image attention with a diffusion model's during fine-tuning.

Re-exported by :mod:`skicml.vlm`; import from there.
"""

from ._diffusion_teacher import TinyDiffusionTeacher

__all__ = ["TinyDiffusionTeacher"]
