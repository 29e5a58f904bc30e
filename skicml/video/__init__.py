"""Long videos: methods that read frame arrays or their embeddings.

ViLAMP (Cheng et al., ICML 2025), "Scaling Video-Language Models to 10K
Frames via Hierarchical Differential Distillation":

- :func:`select_keyframes` and :func:`merge_features`, the two differential
  steps as torch functions; :class:`DifferentialKeyframeSelector` and
  :class:`DifferentialFeatureMerger` as modules (the merger also learnable).
- :class:`ViLAMPCompressor`, a training-free transformer from videos and a
  query to a short token sequence; :class:`ViLAMPClassifier`, a small head
  trained on it end to end; :class:`CLIPVideoEncoder`, frames and questions
  to CLIP embeddings; :class:`ClusterKeyframeCompressor` and
  :func:`cluster_keyframes`, the official code's KMeans keyframe baseline on
  the same merge.
- :class:`VideoEmbedding`, :func:`pack_videos` and :func:`unpack_videos`:
  videos as records or as the packed 2-D rows a ``Pipeline`` passes on.

The physics world-model testbed (Kang et al., ICML 2025), "How Far is
Video Generation from World Model: A Physical Law Perspective":

- :func:`parse_object_states`, :func:`velocity_error`,
  :func:`summarize_by_bucket`: object states read back from frames, and the
  velocity errors of predicted frames against the law, per OOD bucket.
- :func:`nearest_training_case`, :func:`infer_attributes`,
  :func:`attribute_priority_report`, :func:`video_similarity`: the
  case-based analyses, and PSNR / SSIM.
- :class:`VideoWorldModel`: a conditional video diffusion transformer
  (factorised space-time attention, flow matching) that predicts the
  future frames.
- :class:`CaseBasedVideoPredictor` and :class:`PhysicsOraclePredictor`: the
  memorising and the law-abiding reference predictors.

Data: :func:`skicml.datasets.make_physics_videos` and its evaluation grids
and splits; :func:`skicml.datasets.make_needle_embeddings`,
:func:`skicml.datasets.make_needle_videos` and
:func:`skicml.datasets.load_sample_videos`.
"""

from .._weights import register_weights
from ._frames import check_video_frames
from ._physics import (
    CaseBasedVideoPredictor,
    PhysicsOraclePredictor,
    VideoWorldModel,
    abnormal_rollouts,
    attribute_priority_report,
    infer_attributes,
    nearest_training_case,
    parse_object_states,
    summarize_by_bucket,
    velocity_error,
    video_similarity,
)
from ._vilamp import (
    CLIPVideoEncoder,
    ClusterKeyframeCompressor,
    DifferentialFeatureMerger,
    DifferentialKeyframeSelector,
    VideoEmbedding,
    ViLAMPClassifier,
    ViLAMPCompressor,
    ViLAMPNetwork,
    cluster_keyframes,
    keyframe_references,
    merge_features,
    pack_videos,
    select_keyframes,
    unpack_videos,
)

__all__ = [
    "CLIPVideoEncoder",
    "CaseBasedVideoPredictor",
    "ClusterKeyframeCompressor",
    "DifferentialFeatureMerger",
    "DifferentialKeyframeSelector",
    "PhysicsOraclePredictor",
    "VideoEmbedding",
    "VideoWorldModel",
    "abnormal_rollouts",
    "ViLAMPClassifier",
    "ViLAMPCompressor",
    "ViLAMPNetwork",
    "attribute_priority_report",
    "check_video_frames",
    "cluster_keyframes",
    "infer_attributes",
    "keyframe_references",
    "merge_features",
    "nearest_training_case",
    "pack_videos",
    "parse_object_states",
    "select_keyframes",
    "summarize_by_bucket",
    "unpack_videos",
    "velocity_error",
    "video_similarity",
]

register_weights(
    "physics-world-model-uniform32",
    "skicml.video",
    "_weights/physics_world_model_uniform32.pt",
    sha256="c559e0bf54f6c272f68e4a21a952c78536d457d6edec6a71b1140d0f8fe23cc3",
    description=("VideoWorldModel (64-d, 2 space-time layers, patch 8), 3,200 steps on 3,000 clips of 32-px uniform "
                 "motion, 3 + 5 frames"),
    benchmark=("velocity error ID 0.12, speed-OOD 0.71-0.82 units/s, generated speed follows the given one "
               "(correlation 0.99; copy last frame 2.45, 1.89; oracle 0.003, 0.004)"),
)
