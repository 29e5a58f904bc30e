"""Causal vision-language models: the backbone protocol, TinyVLM, and the methods that steer or tune them.

VISTA (:class:`VISTASteerer`) steers decoding against object hallucination
(measured by :func:`chair` on captions and by POPE's yes/no probe,
:func:`pope_questions` and :func:`pope_score`);
Lavender (:class:`LavenderTuner`) fine-tunes a model so that its
text-to-image attention follows a teacher's per-word maps
(:class:`TinyDiffusionTeacher`, :class:`OracleMaskTeacher`,
:class:`DiffusersTeacher`). The protocol
(:func:`as_backbone`, :class:`HFLlavaAdapter`, :class:`CallableAdapter`)
lets VISTA drive any causal VLM with forward hooks, and :class:`TinyVLM` is
the small model skicml trains and ships for both.
"""

from .._weights import register_weights
from ._backbone import CallableAdapter, HFLlavaAdapter, as_backbone, check_backbone
from ._chair import chair, chair_mentions, make_chair_scorer
from ._generate import generate
from ._grounding import pointing_accuracy
from ._lavender import (
    Aligner,
    DiffusersTeacher,
    LavenderTuner,
    OracleMaskTeacher,
    PrecomputedTeacher,
    TinyDiffusionTeacher,
    align_loss,
    save_word_maps,
)
from ._model import TinyVLM
from ._pope import caption_answers, pope_answers, pope_questions, pope_score
from ._pretrained import load_tiny_vlm, save_tiny_vlm
from ._text import scene_vocabulary
from ._vista import VISTA_PRESETS, VISTASteerer, VisualSteeringVector

__all__ = [
    "Aligner",
    "CallableAdapter",
    "DiffusersTeacher",
    "HFLlavaAdapter",
    "LavenderTuner",
    "OracleMaskTeacher",
    "PrecomputedTeacher",
    "TinyDiffusionTeacher",
    "TinyVLM",
    "VISTA_PRESETS",
    "VISTASteerer",
    "VisualSteeringVector",
    "align_loss",
    "as_backbone",
    "caption_answers",
    "chair",
    "chair_mentions",
    "check_backbone",
    "generate",
    "load_tiny_vlm",
    "make_chair_scorer",
    "pointing_accuracy",
    "pope_answers",
    "pope_questions",
    "pope_score",
    "save_tiny_vlm",
    "save_word_maps",
    "scene_vocabulary",
]

register_weights(
    "tiny-vlm-scenes",
    "skicml.vlm",
    "_weights/tiny_vlm_scenes.pt",
    sha256="1ff591f0a83cebaa28faf8da30af84014cfc2d00e4bff65fc73232f0c4f65db9",
    description="TinyVLM (96-d, 6 layers, 9 image tokens) trained on 20k biased make_object_scenes captions",
    benchmark="greedy captions of 500 unbiased held-out scenes: CHAIR_I 0.107, recall 0.883",
)
