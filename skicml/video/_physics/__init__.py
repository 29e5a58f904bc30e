"""The physics world-model testbed of Kang et al. (ICML 2025): the video model, evaluators and references.

The simulator, renderer and data live in :mod:`skicml.datasets`
(:func:`~skicml.datasets.simulate_physics`, :func:`~skicml.datasets.render_videos`,
:func:`~skicml.datasets.make_physics_videos`, the evaluation grids and splits).
"""

from ._evaluation import (
    abnormal_rollouts,
    attribute_priority_report,
    infer_attributes,
    nearest_training_case,
    parse_object_states,
    summarize_by_bucket,
    velocity_error,
    video_similarity,
)
from ._predictors import CaseBasedVideoPredictor, PhysicsOraclePredictor
from ._world_model import VideoWorldModel

__all__ = [
    "CaseBasedVideoPredictor",
    "PhysicsOraclePredictor",
    "VideoWorldModel",
    "abnormal_rollouts",
    "attribute_priority_report",
    "infer_attributes",
    "nearest_training_case",
    "parse_object_states",
    "summarize_by_bucket",
    "velocity_error",
    "video_similarity",
]
