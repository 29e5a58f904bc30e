"""Whitened CLIP (Betser, Levi and Gilboa, ICML 2025): likelihoods of embeddings.

- :class:`WhitenedCLIPScorer`: the estimator to reach for. Log-likelihoods,
  whitened embeddings and outlier labels of images, captions or precomputed
  embeddings (2-D float arrays).
- :class:`CLIPEmbedder`: images or captions to CLIP embeddings through
  open_clip (the ``clip`` extra, imported lazily), from local checkpoints
  only, with batching and a ``memory=`` cache.

The modality-agnostic core works on any embedding and needs no open_clip:

- :class:`WhiteningLikelihood`: mean and whitening matrix fitted in float64,
  whitened coordinates and their Gaussian log-likelihood; loads published
  whitening matrices with :meth:`~WhiteningLikelihood.from_precomputed`.
- :class:`WhitenedLikelihoodOutlierDetector`: the same model as an outlier
  detector (``predict`` gives +1/-1).
- :func:`normality_report`, :func:`slerp`, :func:`full_circle`: the paper's
  normality checks and full-circle interpolation in whitened space.

Synthetic images and captions to try it on come from
:func:`skicml.datasets.make_shape_scenes`; ``skicml pretrain tiny-clip``
trains the tiny CLIP that skicml ships for them.
"""

from .._weights import register_weights
from ._analysis import full_circle, normality_report, slerp
from ._clip_scorer import WhitenedCLIPScorer
from ._embedder import CLIPEmbedder
from ._scorer import WhitenedLikelihoodOutlierDetector
from ._whitening import WhiteningLikelihood

__all__ = [
    "CLIPEmbedder",
    "WhitenedCLIPScorer",
    "WhitenedLikelihoodOutlierDetector",
    "WhiteningLikelihood",
    "full_circle",
    "normality_report",
    "slerp",
]

register_weights(
    "tiny-clip-shapes",
    "skicml.clip",
    "_weights/tiny_clip_shapes.pt",
    sha256="54389118a31ce68f2c14012ebbef614b19f74078b7d6c2f4d64e1763115dcd6f",
    description="Tiny open_clip CLIP (3.3M parameters, float16) trained contrastively on make_shape_scenes; "
                "a toy for demos and tests",
    benchmark="corrupted scenes at severity 3, AUROC: noise 0.84, blur 0.55, occlusion 0.95",
)
