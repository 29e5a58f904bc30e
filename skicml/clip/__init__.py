"""Whitened CLIP (Betser, Levi and Gilboa, ICML 2025): likelihoods of embeddings.

This first part is the modality-agnostic core, on precomputed embeddings
(2-D float arrays of CLIP image or text features, or any other embedding):

- :class:`WhiteningLikelihood`: mean and whitening matrix fitted in float64,
  whitened coordinates and their Gaussian log-likelihood; loads published
  whitening matrices with :meth:`~WhiteningLikelihood.from_precomputed`.
- :class:`WhitenedLikelihoodOutlierDetector`: the same model as an outlier
  detector (``predict`` gives +1/-1).
- :func:`normality_report`, :func:`slerp`, :func:`full_circle`: the paper's
  normality checks and full-circle interpolation in whitened space.

Still to come: the open_clip image and text encoders (``CLIPEmbedder``,
``make_wclip``) and the shipped tiny CLIP; until then, bring your own
embeddings.
"""

from ._analysis import full_circle, normality_report, slerp
from ._scorer import WhitenedLikelihoodOutlierDetector
from ._whitening import WhiteningLikelihood

__all__ = [
    "WhitenedLikelihoodOutlierDetector",
    "WhiteningLikelihood",
    "full_circle",
    "normality_report",
    "slerp",
]
