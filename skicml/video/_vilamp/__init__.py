"""ViLAMP (Cheng et al., ICML 2025): differential keyframe selection and feature merging."""

from ._classifier import ViLAMPClassifier
from ._cluster import ClusterKeyframeCompressor, cluster_keyframes
from ._compressor import ViLAMPCompressor
from ._encoder import CLIPVideoEncoder
from ._functional import keyframe_references, merge_features, select_keyframes
from ._layout import VideoEmbedding, pack_videos, unpack_videos
from ._model import DifferentialFeatureMerger, DifferentialKeyframeSelector, ViLAMPNetwork

__all__ = [
    "CLIPVideoEncoder",
    "ClusterKeyframeCompressor",
    "DifferentialFeatureMerger",
    "DifferentialKeyframeSelector",
    "VideoEmbedding",
    "ViLAMPClassifier",
    "ViLAMPCompressor",
    "ViLAMPNetwork",
    "cluster_keyframes",
    "keyframe_references",
    "merge_features",
    "pack_videos",
    "select_keyframes",
    "unpack_videos",
]
