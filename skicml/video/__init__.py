"""Long videos: methods that read frame arrays or their embeddings.

ViLAMP (Cheng et al., ICML 2025), "Scaling Video-Language Models to 10K
Frames via Hierarchical Differential Distillation":

- :func:`select_keyframes` and :func:`merge_features`, the two differential
  steps as torch functions; :class:`DifferentialKeyframeSelector` and
  :class:`DifferentialFeatureMerger` as modules (the merger also learnable).
- :class:`ViLAMPCompressor`, a training-free transformer from videos and a
  query to a short token sequence; :class:`ViLAMPClassifier`, a small head
  trained on it end to end; :class:`CLIPVideoEncoder`, frames and questions
  to CLIP embeddings.
- :class:`VideoEmbedding`, :func:`pack_videos` and :func:`unpack_videos`:
  videos as records or as the packed 2-D rows a ``Pipeline`` passes on.

Data: :func:`skicml.datasets.make_needle_embeddings`,
:func:`skicml.datasets.make_needle_videos` and
:func:`skicml.datasets.load_sample_videos`.
"""

from ._frames import check_video_frames
from ._vilamp import (
    CLIPVideoEncoder,
    DifferentialFeatureMerger,
    DifferentialKeyframeSelector,
    VideoEmbedding,
    ViLAMPClassifier,
    ViLAMPCompressor,
    ViLAMPNetwork,
    keyframe_references,
    merge_features,
    pack_videos,
    select_keyframes,
    unpack_videos,
)

__all__ = [
    "CLIPVideoEncoder",
    "DifferentialFeatureMerger",
    "DifferentialKeyframeSelector",
    "VideoEmbedding",
    "ViLAMPClassifier",
    "ViLAMPCompressor",
    "ViLAMPNetwork",
    "check_video_frames",
    "keyframe_references",
    "merge_features",
    "pack_videos",
    "select_keyframes",
    "unpack_videos",
]
