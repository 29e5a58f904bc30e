"""Contexture: representations from contexts (Zhai et al., ICML 2025).

A *context* pairs every input with a context variable: its neighbours, a
kernel, masked views, its label, its neighbours in a graph, a teacher's
features. The representation a context defines is the span of the top
singular functions of its expectation operator (the *contexture*), and the
spectrum alone scores the context without labels.

- :class:`ContextureEmbedding` computes the top singular functions exactly,
  embeds new rows, and scores its context (``score`` is ``-tau``).
- :class:`NeuralContexture` learns them with a torch encoder (spectral
  contrastive, VICReg or low-rank objective), also from sampling contexts
  (augmentations) that have no exact operator, and recovers the spectrum
  by the paper's post-hoc eigenproblem.
- The contexts (:class:`KNNContext`, :class:`RBFContext`,
  :class:`MaskedContext`, :class:`LabelContext`, :class:`GraphContext`,
  :class:`TeacherFeatureContext`, :class:`MixtureContext`,
  :class:`ConvolutionContext`, and the sampling contexts) are estimators,
  so a grid search tunes them through ``context__<parameter>``.
- :mod:`skicml.contexture.metrics`: the context score ``tau``, the spectral
  decay rate, kernel diagnostics and alignment measures.
"""

from ._contexts import (
    ConvolutionContext,
    CutmixContext,
    FeatureCorruptionContext,
    GaussianNoiseContext,
    GraphContext,
    KNNContext,
    LabelContext,
    MaskedContext,
    MixtureContext,
    RandomCropContext,
    RBFContext,
    TeacherFeatureContext,
)
from ._embedding import ContextureEmbedding
from ._neural import NeuralContexture

__all__ = [
    "ContextureEmbedding",
    "ConvolutionContext",
    "CutmixContext",
    "FeatureCorruptionContext",
    "GaussianNoiseContext",
    "GraphContext",
    "KNNContext",
    "LabelContext",
    "MaskedContext",
    "MixtureContext",
    "NeuralContexture",
    "RBFContext",
    "RandomCropContext",
    "TeacherFeatureContext",
]
