"""Custom operators of skicml, registered under the ``skicml::`` namespace.

Each op lives in its own module with a plain-torch reference (the CPU kernel),
a fake implementation for tracing, an autograd formula where training needs
one, and a GPU kernel registered for CUDA tensors. See the "Custom ops" page
of the documentation for the pattern and :mod:`skicml.ops.testing` for the
test helper every op's tests call.
"""

from ._differential_merge import differential_merge, differential_merge_reference
from ._euler import euler_serialize, euler_serialize_reference
from ._kth_largest import kth_largest, kth_largest_reference
from ._moe_dispatch import moe_dispatch, moe_dispatch_backward, moe_dispatch_reference
from ._point_cloud import (
    chamfer_distance,
    chamfer_distance_reference,
    farthest_point_sample,
    farthest_point_sample_reference,
    group_points,
    group_points_reference,
    knn,
    knn_reference,
    three_nn_interpolate,
    three_nn_interpolate_reference,
)
from ._rbf_context import (
    rbf_context_matmul,
    rbf_context_matmul_reference,
    rbf_context_row_sums,
    rbf_context_row_sums_reference,
)
from ._rms_norm import rms_norm, rms_norm_reference
from ._ssd_scan import ssd_scan, ssd_scan_backward, ssd_scan_reference, ssd_scan_sequential
from ._subblock_attention import row_logsumexp, subblock_attention_probs, subblock_attention_probs_reference
from ._vsv_steer import vsv_steer, vsv_steer_reference

__all__ = [
    "chamfer_distance",
    "chamfer_distance_reference",
    "differential_merge",
    "differential_merge_reference",
    "euler_serialize",
    "euler_serialize_reference",
    "farthest_point_sample",
    "farthest_point_sample_reference",
    "group_points",
    "group_points_reference",
    "knn",
    "knn_reference",
    "kth_largest",
    "kth_largest_reference",
    "moe_dispatch",
    "moe_dispatch_backward",
    "moe_dispatch_reference",
    "rbf_context_matmul",
    "rbf_context_matmul_reference",
    "rbf_context_row_sums",
    "rbf_context_row_sums_reference",
    "rms_norm",
    "rms_norm_reference",
    "row_logsumexp",
    "ssd_scan",
    "ssd_scan_backward",
    "ssd_scan_reference",
    "ssd_scan_sequential",
    "subblock_attention_probs",
    "subblock_attention_probs_reference",
    "three_nn_interpolate",
    "three_nn_interpolate_reference",
    "vsv_steer",
    "vsv_steer_reference",
]
