"""One command that checks and measures every CUDA path of skicml: ``python benchmarks/gpu_check.py``.

GPU run (the exact command for the device tool, from the repository root with
the project's environment; about 3-5 minutes on one H100, under eight by
construction: every child has a time limit and the whole run a budget)::

    python benchmarks/gpu_check.py --out $OUT

For every registered custom op with a Triton kernel (``OPS`` below: rms_norm,
ssd_scan, moe_dispatch, kth_largest, farthest_point_sample, knn,
chamfer_nearest, rbf_context_matmul, rbf_context_row_sums,
differential_merge, vsv_steer, subblock_attention_probs) it

1. checks the kernel against the plain-torch reference on several shapes, in
   float32 and bfloat16: the launcher called directly and the registered op
   (which on CUDA dispatches to the kernel), and ``torch.library.opcheck`` on
   the op once per dtype;
2. times the kernel, the reference and the best library alternative
   (interleaved rounds, ``torch.cuda.synchronize`` around every call, median);
3. prints the fraction of the roofline the kernel reaches: the bytes it must
   move over the device's memory bandwidth and its useful flops over the
   matmul peak that applies (the FP32 CUDA-core peak for float32 and for
   ``input_precision="ieee"`` dots, which use no tensor cores; the bfloat16
   tensor-core peak for bfloat16 ``tl.dot``), whichever bound is larger, over
   the measured time. Peaks come from the device's reported properties (SM
   count, SM clock, memory clock and bus width) and the FLOP per clock of its
   architecture.

Then it fits each estimator with a ``device`` parameter on ``device="cuda"``
at its test size (``skicml.utils._test_common``), and compares its outputs
with the same estimator fitted on the CPU. Each op family and the
estimators run in a child process with a time limit, so that a kernel that
fails to compile, hangs or breaks the CUDA context costs only its own rows.
It writes ``gpu_check.json`` (everything) and ``gpu_check.rst`` (the tables
for the "GPU" section of ``doc/performance.rst``) to ``--out`` or ``$OUT``,
and exits 1 when a kernel check or an estimator failed. Without CUDA it says
so and exits 0.

``--dry-run`` runs the same code on CPU tensors, the kernels in Triton's
interpreter (``TRITON_INTERPRET=1``, set for the child before any kernel is
defined), at tiny shapes and one timing round. It also compiles every
kernel, with the block sizes and dtypes the GPU run will launch, for an H100
(sm_90) ahead of time: Triton's compiler and ``ptxas`` run without a GPU,
so what the interpreter accepts but a GPU would refuse (a dot smaller than
16, a non-power-of-two range, an unsupported dtype, more shared memory than
the device has) is caught here. The test suite runs it
(``tests/ops/test_gpu_check.py``)::

    python benchmarks/gpu_check.py --dry-run --out /tmp/gpu_check

Options: ``--ops NAME ...`` (a subset), ``--skip-estimators``,
``--compile {gpu,tiny,none}`` (which configurations the dry run compiles
for sm_90: the GPU run's, the default; the dry run's own, quicker; none),
``--repeats N``, ``--budget-s S`` (the whole run's limit; default 450 s,
of which the ops leave 120 s to the estimators; 900 s for a dry run).
"""

import argparse
import contextlib
import datetime
import io
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------- the ops

#: Op name -> (Triton module, launcher, what the family is for)
OPS = {
    "rms_norm": ("_rms_norm_triton", "rms_norm_triton"),
    "ssd_scan": ("_ssd_scan_triton", "ssd_scan_triton"),
    "moe_dispatch": ("_moe_dispatch_triton", "moe_dispatch_triton"),
    "kth_largest": ("_kth_largest_triton", "kth_largest_triton"),
    "farthest_point_sample": ("_point_cloud_triton", "farthest_point_sample_triton"),
    "knn": ("_point_cloud_triton", "knn_triton"),
    "chamfer_nearest": ("_point_cloud_triton", "nearest_triton"),
    "rbf_context_matmul": ("_rbf_context_triton", "rbf_context_matmul_triton"),
    "rbf_context_row_sums": ("_rbf_context_triton", "rbf_context_row_sums_triton"),
    "differential_merge": ("_differential_merge_triton", "differential_merge_triton"),
    "vsv_steer": ("_vsv_steer_triton", "vsv_steer_triton"),
    "subblock_attention_probs": ("_subblock_attention_triton", "subblock_attention_probs_triton"),
}

#: Ops whose CUDA registration sends float64 to the Triton kernel too (the
#: others run their reference for it): checked in float64 as well.
FLOAT64_TO_KERNEL = ("rms_norm", "moe_dispatch", "farthest_point_sample", "knn", "chamfer_nearest")

#: Children of the GPU run: ops that share a Triton module share a process.
GROUPS = (
    ("rms_norm",), ("ssd_scan",), ("moe_dispatch",), ("kth_largest",),
    ("farthest_point_sample", "knn", "chamfer_nearest"),
    ("rbf_context_matmul", "rbf_context_row_sums"), ("differential_merge",), ("vsv_steer",),
    ("subblock_attention_probs",),
)

#: Seconds a child may run (a hung kernel costs this, not the whole run).
OP_CHILD_LIMIT_S = 100
ESTIMATOR_CHILD_LIMIT_S = 180
COMPILE_CHILD_LIMIT_S = 600

#: Largest shared memory a block may opt into, by compute capability (bytes).
SHARED_MEMORY_LIMIT = {80: 166912, 86: 101376, 89: 101376, 90: 232448}


def _gen(seed):
    import torch

    return torch.Generator().manual_seed(seed)


def _randn(g, *shape, dtype=None):
    import torch

    return torch.randn(*shape, generator=g).to(dtype or torch.float32)


class Case:
    """One call of an op: a label, a dtype and its positional arguments (CPU tensors)."""

    def __init__(self, label, dtype, args, cost):
        self.label, self.dtype, self.args, self.cost = label, dtype, args, cost


def _esize(dtype):
    import torch

    return torch.empty((), dtype=dtype).element_size()


def _nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


# Each builder returns the cases of one op at ``size`` ("tiny" for the dry
# run, "gpu" for the device) in ``dtype``. ``cost`` is (bytes the kernel
# must move, useful flops, which peak applies: "fp32" or "bf16_tc").

def _rms_norm_cases(size, dtype):
    shapes = ((3, 37), (5, 64)) if size == "tiny" else ((16384, 512), (4096, 4096), (256, 16384))
    cases = []
    for i, (rows, cols) in enumerate(shapes):
        g = _gen(i)
        x, w = _randn(g, rows, cols, dtype=dtype), _randn(g, cols, dtype=dtype).abs().add(0.5)
        cases.append(Case(f"{rows}x{cols}", dtype, (x, w, 1e-6), (2 * _nbytes(x) + _nbytes(w), 0, "fp32")))
    return cases


def _ssd_scan_cases(size, dtype):
    import torch

    # The last GPU shape has the widest state the kernel takes (MAX_STATE_SIZE).
    shapes = ((2, 21, 2, 5, 3),) if size == "tiny" else (
        (64, 168, 8, 64, 64), (16, 512, 8, 64, 128), (4, 256, 4, 64, 256))
    chunk = 16 if size == "tiny" else 64
    cases = []
    for i, (batch, T, H, P, N) in enumerate(shapes):
        g = _gen(i)
        x = _randn(g, batch, T, H, P, dtype=dtype)
        dt = torch.nn.functional.softplus(_randn(g, batch, T, H) - 2.0).to(dtype)
        A = (-torch.empty(H).uniform_(1.0, 16.0, generator=g)).to(dtype)
        B, C = _randn(g, batch, T, N, dtype=dtype), _randn(g, batch, T, N, dtype=dtype)
        D = torch.ones(H, dtype=dtype)
        L = max(16, min(64, chunk))
        chunks = math.ceil(T / L)
        flops = batch * H * chunks * (2 * L * L * N + 2 * L * L * P + 4 * L * N * P)
        cost = (2 * _nbytes(x) + _nbytes(dt, B, C), flops, "fp32")
        cases.append(Case(f"b{batch} T{T} H{H} P{P} N{N}", dtype, (x, dt, A, B, C, D, chunk), cost))
    return cases


def _moe_dispatch_cases(size, dtype):
    import torch

    shapes = ((13, 6, 4, 10, 2),) if size == "tiny" else ((4096, 256, 8, 1024, 2), (16384, 512, 16, 1024, 2))
    cases = []
    for i, (n, dim, n_experts, hidden, top) in enumerate(shapes):
        g = _gen(i)
        x = _randn(g, n, dim, dtype=dtype)
        logits = torch.randn(n, n_experts, generator=g)
        mask = torch.zeros(n, n_experts, dtype=torch.bool)
        mask.scatter_(1, logits.topk(top, dim=1).indices, True)
        gates = torch.softmax(logits, dim=1).to(dtype)
        w1 = (_randn(g, n_experts, dim, hidden) / math.sqrt(dim)).to(dtype)
        b1 = (_randn(g, n_experts, hidden) * 0.1).to(dtype)
        w2 = (_randn(g, n_experts, hidden, dim) / math.sqrt(hidden)).to(dtype)
        b2 = (_randn(g, n_experts, dim) * 0.1).to(dtype)
        pairs = int(mask.sum())
        # Each expert's weights read once; the token rows gathered once per pair.
        traffic = _nbytes(w1, b1, w2, b2) + pairs * dim * _esize(dtype) * 2 + _nbytes(x)
        cost = (traffic, 4 * pairs * dim * hidden, "bf16_tc" if dtype == torch.bfloat16 else "fp32")
        cases.append(Case(f"n{n} d{dim} E{n_experts} h{hidden} top{top}", dtype,
                          (x, mask, gates, w1, b1, w2, b2), cost))
    return cases


def _kth_largest_cases(size, dtype):
    sizes = ((37 * 8, 5), (3000, 1500)) if size == "tiny" else ((1 << 24, 1 << 20), (1 << 22, 100))
    cases = []
    for i, (n, k) in enumerate(sizes):
        values = _randn(_gen(i), n, dtype=dtype)
        cases.append(Case(f"n={n} k={k}", dtype, (values, k), (_nbytes(values), 0, "fp32")))
    return cases


def _points(g, clouds, n, dtype):
    return _randn(g, clouds, n, 3, dtype=dtype)


def _fps_cases(size, dtype):
    import torch

    shapes = ((2, 37, 9),) if size == "tiny" else ((8, 8192, 512), (1, 65536, 1024))
    cases = []
    for i, (clouds, n, picks) in enumerate(shapes):
        points = _points(_gen(i), clouds, n, dtype)
        start = torch.zeros(clouds, dtype=torch.int64)
        # Useful work: one distance update (8 flops) per point and pick.
        cases.append(Case(f"B{clouds} N{n} S{picks}", dtype, (points, picks, start),
                          (_nbytes(points), 8 * clouds * n * picks, "fp32")))
    if size == "tiny":
        # A cloud larger than the on-chip limit takes the tiled loop.
        from skicml.ops import _point_cloud_triton as module

        n = module._FPS_MAX_BLOCK + 5
        points = _points(_gen(9), 1, n, dtype)
        cases.append(Case(f"B1 N{n} S3 (tiled)", dtype, (points, 3, torch.zeros(1, dtype=torch.int64)),
                          (_nbytes(points), 8 * n * 3, "fp32")))
    return cases


def _knn_cases(size, dtype):
    shapes = ((2, 11, 37, 5),) if size == "tiny" else ((32, 512, 2048, 16), (32, 64, 512, 32))
    cases = []
    for i, (clouds, q, n, k) in enumerate(shapes):
        g = _gen(i)
        query, points = _points(g, clouds, q, dtype), _points(g, clouds, n, dtype)
        cost = (_nbytes(query, points) + clouds * q * k * 12, 8 * clouds * q * n, "fp32")
        cases.append(Case(f"B{clouds} Q{q} N{n} k{k}", dtype, (query, points, k), cost))
    return cases


def _nearest_cases(size, dtype):
    shapes = ((3, 13, 40),) if size == "tiny" else ((2048, 32, 32), (64, 2048, 2048))
    cases = []
    for i, (clouds, na, nb) in enumerate(shapes):
        g = _gen(i)
        a, b = _points(g, clouds, na, dtype), _points(g, clouds, nb, dtype)
        cost = (_nbytes(a, b) + clouds * na * 12, 8 * clouds * na * nb, "fp32")
        cases.append(Case(f"B{clouds} {na}x{nb}", dtype, (a, b), cost))
    return cases


def _rbf_inputs(g, n, m, p, n_masks, dtype, scales):
    import torch

    x, anchors = _randn(g, n, p, dtype=dtype), _randn(g, m, p, dtype=dtype)
    masks = None
    if n_masks > 1:
        masks = torch.rand(n_masks, p, generator=g) < 0.6
        masks[:, 0] = True
    row_scale = col_scale = None
    if scales:
        row_scale = torch.rand(n_masks, n, generator=g).to(dtype)
        col_scale = torch.rand(n_masks, m, generator=g).to(dtype)
    return x, anchors, masks, row_scale, col_scale


def _rbf_matmul_cases(size, dtype):
    shapes = ((19, 23, 5, 7, 1, False), (21, 17, 6, 3, 3, True)) if size == "tiny" else \
        ((4096, 4096, 16, 64, 1, False), (8192, 2048, 32, 128, 4, True))
    cases = []
    for i, (n, m, p, d, n_masks, scales) in enumerate(shapes):
        g = _gen(i)
        x, anchors, masks, row_scale, col_scale = _rbf_inputs(g, n, m, p, n_masks, dtype, scales)
        v = _randn(g, m, d, dtype=dtype)
        gamma = 1.0 / p
        flops = n * m * (n_masks * (2 * p + 6) + 2 * d)
        cost = (_nbytes(x, anchors, v, row_scale, col_scale) + n * d * _esize(dtype), flops, "fp32")
        cases.append(Case(f"n{n} m{m} p{p} d{d} masks{n_masks}", dtype,
                          (x, anchors, v, gamma, masks, row_scale, col_scale), cost))
    return cases


def _rbf_row_sums_cases(size, dtype):
    shapes = ((19, 23, 5, 1), (21, 17, 6, 3)) if size == "tiny" else ((4096, 4096, 16, 1), (8192, 4096, 32, 4))
    cases = []
    for i, (n, m, p, n_masks) in enumerate(shapes):
        g = _gen(i)
        x, anchors, masks, _, _ = _rbf_inputs(g, n, m, p, n_masks, dtype, False)
        flops = n * m * n_masks * (2 * p + 7)
        cost = (_nbytes(x, anchors) + n * n_masks * _esize(dtype), flops, "fp32")
        cases.append(Case(f"n{n} m{m} p{p} masks{n_masks}", dtype, (x, anchors, 1.0 / p, masks), cost))
    return cases


def _merge_cases(size, dtype):
    import torch

    # The last GPU shape has the widest dim the kernel takes (_TRITON_MAX_DIM).
    shapes = ((7, 5, 9, 2),) if size == "tiny" else (
        (1000, 49, 512, 32), (256, 196, 1024, 16), (64, 16, 16384, 8))
    cases = []
    for i, (frames, patches_per_frame, dim, keyframes) in enumerate(shapes):
        g = _gen(i)
        patches = _randn(g, frames, patches_per_frame, dim, dtype=dtype)
        queries = _randn(g, 2, dim, dtype=dtype)
        keys = torch.linspace(0, frames - 1, keyframes).long().unique()
        is_key = torch.zeros(frames, dtype=torch.bool)
        is_key[keys] = True
        frame_index = torch.nonzero(~is_key).flatten()
        # Each frame's preceding keyframe (every frame after frame 0 has one).
        reference = torch.cummax(torch.where(is_key, torch.arange(frames), -1), 0).values[frame_index]
        query_index = torch.zeros_like(frame_index)
        if size == "tiny":
            reference[0] = -1  # a row without a reference
            query_index[1::2] = 1
        rows = len(frame_index)
        cost = (_nbytes(patches) + rows * dim * _esize(dtype) + 3 * rows * patches_per_frame * 4,
                rows * patches_per_frame * dim * 8, "fp32")
        cases.append(Case(f"{frames}x{patches_per_frame}x{dim} rows{rows}", dtype,
                          (patches, queries, frame_index, reference, query_index, 1.0, 0.01), cost))
    return cases


def _vsv_cases(size, dtype):
    shapes = ((2, 3, 37, "mlp_output", True), (3, 1, 20, "residual", False)) if size == "tiny" else \
        ((8, 256, 4096, "mlp_output", True), (64, 1, 4096, "residual", False),
         (4, 16, 32768, "mlp_output", True))  # the widest dim the kernel takes
    cases = []
    for i, (batch, seq, dim, site, adaptive) in enumerate(shapes):
        g = _gen(i)
        x, v = _randn(g, batch, seq, dim, dtype=dtype), _randn(g, batch, dim, dtype=dtype)
        cases.append(Case(f"B{batch} T{seq} d{dim} {site}", dtype, (x, v, 0.17, site, adaptive),
                          (2 * _nbytes(x) + _nbytes(v), 0, "fp32")))
    return cases


def _subblock_cases(size, dtype):
    from skicml.ops import row_logsumexp

    # The second tiny shape takes two slices of the head dimension (64 + 16 masked).
    shapes = ((2, 2, 5, 9, 12), (1, 2, 3, 20, 80)) if size == "tiny" else (
        (1, 32, 64, 576, 128), (4, 16, 32, 256, 64), (1, 8, 64, 576, 256))
    cases = []
    for i, (batch, heads, n_q, n_k, dim) in enumerate(shapes):
        g = _gen(i)
        q = _randn(g, batch, heads, n_q, dim, dtype=dtype)
        keys = _randn(g, batch, heads, n_k + 7, dim, dtype=dtype)
        scale = dim ** -0.5
        lse = row_logsumexp(q.float(), keys.float(), scale).to(dtype)
        k = keys[:, :, :n_k].contiguous()
        out = batch * heads * n_q * n_k * _esize(dtype)
        cases.append(Case(f"B{batch} H{heads} {n_q}x{n_k} d{dim}", dtype, (q, k, lse, scale),
                          (_nbytes(q, k, lse) + out, 2 * batch * heads * n_q * n_k * dim, "fp32")))
    return cases


CASES = {
    "rms_norm": _rms_norm_cases, "ssd_scan": _ssd_scan_cases, "moe_dispatch": _moe_dispatch_cases,
    "kth_largest": _kth_largest_cases, "farthest_point_sample": _fps_cases, "knn": _knn_cases,
    "chamfer_nearest": _nearest_cases, "rbf_context_matmul": _rbf_matmul_cases,
    "rbf_context_row_sums": _rbf_row_sums_cases, "differential_merge": _merge_cases,
    "vsv_steer": _vsv_cases, "subblock_attention_probs": _subblock_cases,
}

#: Relative tolerance of kernel against reference (max abs error over the
#: reference's largest magnitude), by op and dtype; bfloat16 outputs are one
#: or two roundings away.
TOLERANCE = {"float32": 1e-4, "bfloat16": 2e-2, "float64": 1e-9}
TOLERANCE_OVERRIDE = {
    # The kernel computes float64 rows in float32 (the op's documented precision on CUDA).
    ("rms_norm", "float64"): 1e-6,
    # exp of a cumulative sum of decays over a chunk, and four products.
    ("ssd_scan", "float32"): 1e-3,
    # scores divided by a temperature of 0.01: cosine rounding times 100.
    ("differential_merge", "float32"): 1e-3,
    # kernel tiles summed over anchor blocks in another order than the reference.
    ("rbf_context_matmul", "float32"): 1e-3, ("rbf_context_row_sums", "float32"): 1e-3,
    ("moe_dispatch", "float32"): 1e-3,
}


def _reference(name):
    from skicml import ops
    from skicml.ops import _point_cloud

    if name == "chamfer_nearest":
        return _point_cloud._nearest_reference
    return getattr(ops, f"{name}_reference")


def _alternative(name):
    """(label, callable or None, why none) of the best library route that computes the same result."""
    import torch

    def cdist2(a, b):
        return torch.cdist(a.float(), b.float()).square()

    if name == "rms_norm":
        return "F.rms_norm", lambda x, w, eps: torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps), None
    if name == "kth_largest":
        return "torch.topk", lambda v, k: v.reshape(-1).topk(k).values[-1], None
    if name == "knn":
        return "cdist+topk", lambda q, p, k: cdist2(q, p).topk(k, dim=-1, largest=False), None
    if name == "chamfer_nearest":
        return "cdist+min", lambda a, b: cdist2(a, b).min(dim=-1), None
    if name == "rbf_context_matmul":
        def dense(x, a, v, gamma, masks=None, row_scale=None, col_scale=None):
            if masks is not None:
                return None  # the dense route has one mask
            return torch.exp(-gamma * cdist2(x, a)) @ v.float()
        return "dense cdist/exp/mm", dense, None
    if name == "rbf_context_row_sums":
        def dense_sums(x, a, gamma, masks=None):
            if masks is not None:
                return None
            return torch.exp(-gamma * cdist2(x, a)).sum(dim=1)
        return "dense cdist/exp/sum", dense_sums, None
    if name == "moe_dispatch":
        def dense_experts(x, mask, gates, w1, b1, w2, b2):
            # Every expert on every token (one batched matmul each way), then the masked gates.
            hidden = torch.nn.functional.gelu(torch.einsum("nd,edh->enh", x, w1) + b1[:, None], approximate="tanh")
            out = torch.einsum("enh,ehd->end", hidden, w2) + b2[:, None]
            return torch.einsum("end,ne->nd", out, gates * mask)
        return "all experts (bmm)", dense_experts, None
    if name == "ssd_scan":
        try:
            from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
        except Exception:  # noqa: BLE001 - not installed, or built for another torch
            return "mamba_ssm", None, "mamba_ssm not installed"

        def mamba(x, dt, A, B, C, D, chunk_size):
            return mamba_chunk_scan_combined(x, dt, A, B[:, :, None], C[:, :, None], chunk_size, D=D)
        return "mamba_chunk_scan_combined", mamba, None
    if name == "farthest_point_sample":
        try:
            from torch_cluster import fps
        except Exception:  # noqa: BLE001
            return "torch_cluster.fps", None, "torch_cluster not installed"
        def cluster_fps(points, n_samples, start):
            clouds, n = points.shape[:2]
            batch = torch.arange(clouds, device=points.device).repeat_interleave(n)
            return fps(points.reshape(-1, 3), batch, n_samples / n, random_start=False)
        return "torch_cluster.fps", cluster_fps, None
    return "-", None, "no library computes this op"


# ---------------------------------------------------------------- comparison

def _flat_outputs(out):
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    return [t for t in out if isinstance(t, torch.Tensor)]


def compare(name, got, expected, dtype_name):
    """(ok, max relative error, detail) of ``got`` against ``expected``."""
    import torch

    tol = TOLERANCE_OVERRIDE.get((name, dtype_name), TOLERANCE.get(dtype_name, 1e-4))
    got, expected = _flat_outputs(got), _flat_outputs(expected)
    if len(got) != len(expected):
        return False, math.inf, f"{len(got)} outputs, expected {len(expected)}"
    worst, details, ok = 0.0, [], True
    for a, b in zip(got, expected):
        a, b = a.detach().cpu(), b.detach().cpu()
        if a.shape != b.shape:
            return False, math.inf, f"shape {tuple(a.shape)}, expected {tuple(b.shape)}"
        if not b.is_floating_point():
            agree = float((a == b).float().mean()) if b.numel() else 1.0
            details.append(f"indices agree {agree:.4f}")
            # A near-tie may pick another point at the same distance; the
            # distances (compared as values) decide.
            ok = ok and agree >= 0.99
            continue
        a, b = a.double(), b.double()
        if not torch.isfinite(a).all() and not torch.equal(torch.isfinite(a), torch.isfinite(b)):
            return False, math.inf, "non-finite values where the reference has none"
        finite = torch.isfinite(b)
        scale = float(b[finite].abs().max()) if finite.any() else 1.0
        err = float((a[finite] - b[finite]).abs().max()) / max(scale, 1e-30) if finite.any() else 0.0
        worst = max(worst, err)
        ok = ok and err <= tol
    return ok, worst, "; ".join(details)


# ---------------------------------------------------------------- device

def device_peaks(dry_run):
    """Name, memory bandwidth (GB/s) and matmul peaks (TFLOP/s) from the device's reported properties."""
    import torch

    if dry_run or not torch.cuda.is_available():
        return {"name": "CPU (Triton interpreter, dry run)", "capability": None, "bandwidth_gbs": None,
                "fp32_tflops": None, "fp64_tflops": None, "bf16_tc_tflops": None, "source": "none: no GPU"}
    props = torch.cuda.get_device_properties(0)
    sms, capability = props.multi_processor_count, (props.major, props.minor)
    sm_khz = getattr(props, "clock_rate", 0) or 0
    mem_khz = getattr(props, "memory_clock_rate", 0) or 0
    bus_bits = getattr(props, "memory_bus_width", 0) or 0
    source = "torch.cuda.get_device_properties"
    plausible = 2e5 <= sm_khz <= 5e6 and 1e5 <= mem_khz <= 5e7 and 32 <= bus_bits <= 16384
    if not plausible:
        try:  # CUDA 13 dropped the clocks from cudaDeviceProp; the driver API still reports them.
            from triton.runtime import driver

            p = driver.active.utils.get_device_properties(0)
            sm_khz, mem_khz, bus_bits = p["sm_clock_rate"], p["mem_clock_rate"], p["mem_bus_width"]
            source = "CUDA driver attributes (via triton)"
        except Exception:  # noqa: BLE001
            pass
    major = capability[0] * 10 + capability[1]
    # FP32 lanes per SM (2 flops each, FMA) and dense bf16 tensor-core flops per SM per clock.
    fp32_lanes = 64 if major in (60, 70, 75, 80) else 128
    bf16_per_clock = {80: 2048, 90: 4096, 100: 8192}.get(major, 1024)
    fp64_lanes = {60: 32, 70: 32, 80: 32, 90: 64, 100: 64}.get(major, 2)
    clock_hz = sm_khz * 1e3
    return {
        "name": props.name, "capability": f"sm_{major}", "sms": sms, "sm_clock_mhz": sm_khz / 1e3,
        "memory_gb": round(props.total_memory / 2**30, 1),
        # Double data rate: two transfers per memory clock.
        "bandwidth_gbs": mem_khz * 1e3 * 2 * bus_bits / 8 / 1e9 if mem_khz and bus_bits else None,
        "fp32_tflops": sms * fp32_lanes * 2 * clock_hz / 1e12 if clock_hz else None,
        "bf16_tc_tflops": sms * bf16_per_clock * clock_hz / 1e12 if clock_hz else None,
        "fp64_tflops": sms * fp64_lanes * 2 * clock_hz / 1e12 if clock_hz else None,
        "raw": {"clock_khz": sm_khz, "memory_clock_khz": mem_khz, "memory_bus_bits": bus_bits},
        "source": source + "; FLOP per clock per SM from the architecture (dense, no sparsity)",
    }


def roofline(cost, seconds, peaks):
    """(bound, fraction of that bound's peak reached) of a kernel that took ``seconds``."""
    traffic, flops, kind = cost
    bandwidth = peaks.get("bandwidth_gbs")
    peak = peaks.get({"fp32": "fp32_tflops", "fp64": "fp64_tflops", "bf16_tc": "bf16_tc_tflops"}[kind])
    if not seconds or not bandwidth:
        return ("compute" if flops and (not traffic or flops / traffic > 10) else "memory"), None
    t_memory = traffic / (bandwidth * 1e9)
    t_compute = flops / (peak * 1e12) if peak and flops else 0.0
    bound = "compute" if t_compute > t_memory else "memory"
    return bound, max(t_memory, t_compute) / seconds


# ---------------------------------------------------------------- the op child

def _to(args, device):
    import torch

    return tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)


def _opcheck(name, args):
    import torch

    op = getattr(torch.ops.skicml, name).default
    torch.library.opcheck(op, args)


def check_op(name, device, size, dtypes, repeats, peaks, launches):
    """Rows of one op: correctness, opcheck and timings of every case."""
    import importlib

    import torch
    from _common import median_times

    module, launcher = OPS[name]
    kernel = getattr(importlib.import_module(f"skicml.ops.{module}"), launcher)
    reference = _reference(name)
    op = getattr(torch.ops.skicml, name)
    alt_label, alternative, alt_note = _alternative(name)
    rows = []
    for dtype in dtypes:
        opchecked = False
        for case in CASES[name](size, dtype):
            row = {"op": name, "case": case.label, "dtype": str(dtype).replace("torch.", ""),
                   "device": device, "library": alt_label}
            launches.context = (name, case.label, row["dtype"])
            try:
                args = _to(case.args, device)
                contenders = {"kernel": lambda: kernel(*args), "reference": lambda: reference(*args)}
                with torch.no_grad():
                    note = alt_note or "the library route does not take this case"
                    try:
                        takes = alternative is not None and alternative(*args) is not None
                    except Exception as exc:  # noqa: BLE001 - the library's failure is not the kernel's
                        takes, note = False, f"failed: {type(exc).__name__}: {str(exc)[:200]}"
                    if takes:
                        contenders["library"] = lambda: alternative(*args)
                    else:
                        row["library_note"] = note
                    # Interleaved rounds; the kernel's and the reference's last results are compared.
                    timings = median_times(contenders, repeats=repeats, warmup=0 if repeats == 1 else 3,
                                           device=device)
                    through_op = op(*args)
                for key, (seconds, _) in timings.items():
                    row[f"{key}_ms"] = seconds * 1e3
                got, expected = timings["kernel"][1], timings["reference"][1]
                ok, err, detail = compare(name, got, expected, row["dtype"])
                ok_op, err_op, detail_op = compare(name, through_op, expected, row["dtype"])
                row.update(ok=ok and ok_op, max_rel_err=max(err, err_op), detail=detail or detail_op)
                if not opchecked:
                    t = time.perf_counter()
                    _opcheck(name, args)
                    row["opcheck_s"] = round(time.perf_counter() - t, 2)
                    row["opcheck"] = "passed"
                    opchecked = True
                cost = case.cost if dtype != torch.float64 else case.cost[:2] + ("fp64",)
                row["bytes"], row["flops"], row["peak"] = cost
                row["bound"], row["of_peak"] = roofline(cost, timings["kernel"][0], peaks)
            except Exception as exc:  # noqa: BLE001 - one case's failure is a row, not the end
                row.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:1500]}",
                           traceback=traceback.format_exc()[-3000:])
            rows.append(row)
            print(_row_line(row), flush=True)
    return rows


def _row_line(row):
    state = "ok" if row.get("ok") else "FAIL"
    err = row.get("max_rel_err")
    text = f"  {row['op']:<26} {row['case']:<34} {row['dtype']:<9} {state:<4}"
    if err is not None:
        text += f" err {err:.1e}"
    if "kernel_ms" in row:
        text += f" kernel {row['kernel_ms']:.3f} ms ref {row['reference_ms']:.3f} ms"
    if row.get("error"):
        text += f" {row['error'][:300]}"
    return text


class LaunchRecorder:
    """Records every Triton launch (kernel, argument types, constexprs, options) under the interpreter.

    With ``execute=False`` the launch is recorded and skipped: the launchers
    run at the GPU run's sizes on CPU tensors so that the configurations the
    GPU will compile can be compiled ahead of time for its architecture.
    """

    def __init__(self):
        self.records, self.context, self.execute = [], None, True

    def install(self):
        from triton.runtime.interpreter import InterpretedFunction

        original = InterpretedFunction.run
        recorder = self

        def run(fn_self, *args, grid, warmup, **kwargs):
            try:
                recorder.record(fn_self, args, grid, kwargs)
            except Exception as exc:  # noqa: BLE001 - recording must never break the check
                recorder.records.append({"error": repr(exc), "context": recorder.context})
            if not recorder.execute:
                return None
            return original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)

        InterpretedFunction.run = run

    def record(self, fn_self, args, grid, kwargs):
        import inspect

        import torch

        fn = fn_self.fn
        params = list(inspect.signature(fn).parameters.values())
        names = [p.name for p in params]
        constexpr = {p.name for p in params if "constexpr" in str(p.annotation)}
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        options = {k: v for k, v in kwargs.items() if k not in names}
        described = {}
        for name in names:
            value = bound.get(name, params[names.index(name)].default)
            if name in constexpr:
                described[name] = {"constexpr": _describe_constexpr(value)}
            elif isinstance(value, torch.Tensor):
                described[name] = {"type": "*" + _TRITON_TYPES[value.dtype],
                                   "aligned": value.data_ptr() % 16 == 0}
            elif isinstance(value, bool):
                described[name] = {"type": "i1", "value": value}
            elif isinstance(value, int):
                described[name] = {"type": "i32" if -2**31 <= value < 2**31 else "i64", "value": value}
            elif isinstance(value, float):
                described[name] = {"type": "fp32"}
            elif value is None:
                described[name] = {"constexpr": None}
            else:
                described[name] = {"type": type(value).__name__}
        grid = grid(bound) if callable(grid) else grid
        self.records.append({"module": fn.__module__, "kernel": fn.__name__, "args": described,
                             "options": options, "grid": [int(g) for g in grid], "context": self.context,
                             "executed": self.execute})


def _patch_interpreter_bf16_dot():
    """Make the interpreter's ``tl.dot`` read bfloat16 operands as numbers.

    Triton 3.8's interpreter stores bfloat16 as its uint16 bit patterns and
    ``create_dot`` multiplies those patterns (fp8 is converted, bf16 is not):
    a bf16 ``tl.dot`` returns values around 1e10 on CPU, while a GPU's tensor
    cores compute the product. Converting the operands (exactly, bf16 -> fp32)
    makes the dry run check the kernel instead of that interpreter bug.
    """
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "_skicml_bf16", False):
        return
    original = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16 and b.dtype.scalar == tl.bfloat16:
            a = interpreter.TensorHandle((a.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
            b = interpreter.TensorHandle((b.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    create_dot._skicml_bf16 = True
    builder.create_dot = create_dot


def _describe_constexpr(value):
    import triton.language as tl

    if isinstance(value, tl.dtype):
        return {"tl_dtype": value.name}
    if isinstance(value, tl.constexpr):
        value = value.value
    return value


def _triton_types():
    import torch

    return {torch.float32: "fp32", torch.float64: "fp64", torch.float16: "fp16", torch.bfloat16: "bf16",
            torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
            torch.bool: "i1"}


_TRITON_TYPES = None


def op_child(args):
    """Check the ops of ``args.ops`` and write their rows (and, dry, the launches) as JSON."""
    global _TRITON_TYPES
    import torch

    torch.set_num_threads(1 if args.dry_run else torch.get_num_threads())
    warnings.filterwarnings("ignore")
    _TRITON_TYPES = _triton_types()
    device = "cpu" if args.dry_run else "cuda"
    size = "tiny" if args.dry_run else "gpu"
    peaks = device_peaks(args.dry_run)
    recorder = LaunchRecorder()
    if args.dry_run:
        recorder.install()
        _patch_interpreter_bf16_dot()
    rows = []
    for name in args.ops:
        rows += check_op(name, device, size, _dtypes(name), args.repeats, peaks, recorder)
        # Written after every op: a child killed at its time limit keeps what it finished.
        _write_json(args.records, {"ops": rows, "launches": recorder.records})
        if args.dry_run and args.compile == "gpu":
            # The GPU run's configurations, recorded (not run) for the compile check.
            recorder.execute = False
            from importlib import import_module

            module, launcher = OPS[name]
            kernel = getattr(import_module(f"skicml.ops.{module}"), launcher)
            for dtype in _dtypes(name):
                for case in CASES[name]("gpu", dtype):
                    recorder.context = (name, case.label, str(dtype).replace("torch.", ""))
                    try:
                        kernel(*case.args)
                    except Exception as exc:  # noqa: BLE001
                        recorder.records.append({"error": repr(exc), "context": recorder.context})
            recorder.execute = True
    kernels = [] if args.dry_run else _compiled_kernels(args.ops)
    _write_json(args.records, {"ops": rows, "launches": recorder.records, "kernels": kernels})


def _dtypes(name):
    import torch

    return (torch.float32, torch.bfloat16) + ((torch.float64,) if name in FLOAT64_TO_KERNEL else ())


def _compiled_kernels(ops):
    """Registers, spills and shared memory of every kernel this process compiled on the device."""
    import importlib

    stats = []
    for module in sorted({OPS[name][0] for name in ops}):
        namespace = vars(importlib.import_module(f"skicml.ops.{module}"))
        for name, fn in namespace.items():
            caches = getattr(fn, "device_caches", None)
            if not caches or getattr(fn, "__module__", None) != f"skicml.ops.{module}":
                continue
            for entry in list(caches.values()):
                for kernel in list(entry[0].values()):
                    try:
                        kernel._init_handles()
                        constants = getattr(getattr(kernel, "src", None), "constants", {}) or {}
                        names = fn.arg_names
                        stats.append({
                            "kernel": f"{module}.{name}", "target": "device", "ok": True,
                            "constexprs": {names[k[0]]: _describe_constexpr(v) for k, v in constants.items()
                                           if isinstance(k, tuple) and len(k) == 1},
                            "num_warps": kernel.metadata.num_warps, "shared_bytes": kernel.metadata.shared,
                            "registers": getattr(kernel, "n_regs", None),
                            "spill_store_bytes": getattr(kernel, "n_spills", None)})
                    except Exception as exc:  # noqa: BLE001 - statistics only
                        stats.append({"kernel": f"{module}.{name}", "target": "device", "ok": True,
                                      "constexprs": {}, "note": repr(exc)[:300]})
    return stats


# ---------------------------------------------------------------- the compile child

_H100 = 90


def compile_child(args):
    """Compile every recorded launch configuration for sm_90 (no GPU needed); write the results."""
    import importlib

    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    with open(args.launches) as handle:
        launches = json.load(handle)["launches"]
    target = GPUTarget("cuda", _H100, 32)
    seen, results = {}, []
    for launch in launches:
        if "kernel" not in launch:
            results.append({"ok": False, "error": launch.get("error"), "context": launch.get("context")})
            continue
        signature, constexprs, attrs = {}, {}, {}
        for index, (name, desc) in enumerate(launch["args"].items()):
            if "constexpr" in desc:
                signature[name] = "constexpr"
                value = desc["constexpr"]
                constexprs[name] = getattr(tl, _TL_DTYPES[value["tl_dtype"]]) if isinstance(value, dict) else value
            elif desc.get("type") in ("i32", "i64") and desc.get("value") == 1:
                signature[name], constexprs[name] = "constexpr", 1  # what the JIT specialises
            else:
                signature[name] = desc["type"]
                aligned = desc.get("aligned") if desc["type"].startswith("*") else (
                    desc.get("value") is not None and desc["type"] in ("i32", "i64") and desc["value"] % 16 == 0)
                if aligned:
                    attrs[(index,)] = [["tt.divisibility", 16]]
        options = {k: v for k, v in launch["options"].items()
                   if k in ("num_warps", "num_stages", "enable_fp_fusion", "num_ctas", "maxnreg")}
        # One compile per distinct binary: values of runtime arguments only matter through the
        # JIT's specialisations (== 1, divisible by 16), which the key holds.
        key = repr((launch["module"], launch["kernel"], sorted(signature.items()),
                    sorted((k, repr(v)) for k, v in constexprs.items()), sorted(attrs.items()),
                    sorted(options.items())))
        grid_ok = _grid_ok(launch["grid"])
        if key in seen:
            result = seen[key]
            result["contexts"].append(launch["context"])
            if not grid_ok:
                result.update(ok=False, grid_ok=False, error=f"grid {launch['grid']} exceeds CUDA's limits")
            continue
        pointers = [t[1:] for t in signature.values() if t.startswith("*")]
        result = {"kernel": f"{launch['module'].rsplit('.', 1)[-1]}.{launch['kernel']}",
                  "contexts": [launch["context"]], "target": f"sm_{_H100}",
                  "dtype": pointers[0] if pointers else "",
                  "constexprs": {k: v["constexpr"] for k, v in launch["args"].items() if "constexpr" in v},
                  "options": launch["options"], "grid": launch["grid"], "grid_ok": grid_ok}
        seen[key] = result
        results.append(result)
        fn = getattr(importlib.import_module(launch["module"]), launch["kernel"])
        start = time.perf_counter()
        try:
            log = io.StringIO()
            triton.knobs.nvidia.dump_ptxas_log = True
            with contextlib.redirect_stdout(log):
                compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                                          options=options)
            shared = compiled.metadata.shared
            limit = SHARED_MEMORY_LIMIT[_H100]
            result.update(ok=shared <= limit and result["grid_ok"], shared_bytes=shared,
                          num_warps=compiled.metadata.num_warps)
            text = log.getvalue() if "Used" in log.getvalue() else _ptxas_log(compiled)
            registers = re.search(r"Used (\d+) registers", text)
            spills = re.search(r"(\d+) bytes spill stores", text)
            if registers:
                result["registers"] = int(registers.group(1))
            if spills:
                result["spill_store_bytes"] = int(spills.group(1))
            if shared > limit:
                result["error"] = f"needs {shared} bytes of shared memory, sm_{_H100} allows {limit}"
            if not result["grid_ok"]:
                result["error"] = f"grid {launch['grid']} exceeds CUDA's limits (2**31-1, 65535, 65535)"
        except Exception as exc:  # noqa: BLE001 - a compile error is the finding
            result.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:2000]}")
        result["compile_s"] = round(time.perf_counter() - start, 2)
        _write_json(args.records, {"compile": results})
        state = "ok" if result.get("ok") else "FAIL"
        print(f"  {result['kernel']:<48} {state:<4} {json.dumps(result['constexprs'])[:90]} "
              f"shared={result.get('shared_bytes')} regs={result.get('registers')} "
              f"spills={result.get('spill_store_bytes')} {result.get('error', '')[:300]}", flush=True)
    _write_json(args.records, {"compile": results})


_TL_DTYPES = {"fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16", "int32": "int32",
              "int64": "int64"}


def _ptxas_log(compiled):
    """``ptxas -v`` on the kernel's PTX: its registers and spills when Triton's cache skipped ptxas."""
    import tempfile

    try:
        from triton.backends.nvidia.compiler import get_ptxas

        with tempfile.TemporaryDirectory() as folder:
            source = os.path.join(folder, "kernel.ptx")
            with open(source, "w") as handle:
                handle.write(compiled.asm["ptx"])
            result = subprocess.run([get_ptxas(_H100).path, "-v", f"--gpu-name=sm_{_H100}a", source, "-o",
                                     os.path.join(folder, "kernel.cubin")], capture_output=True, text=True,
                                    timeout=120, check=False)
            return result.stdout + result.stderr
    except Exception as exc:  # noqa: BLE001 - statistics only
        return repr(exc)


def _grid_ok(grid):
    limits = (2**31 - 1, 65535, 65535)
    return all(0 < g <= limit for g, limit in zip(list(grid) + [1] * (3 - len(grid)), limits))


# ---------------------------------------------------------------- the estimator child

def _outputs(estimator, X):
    import numpy as np

    out = {}
    for method in ("predict", "predict_proba", "transform", "score_samples"):
        try:
            fn = getattr(estimator, method)
        except AttributeError:
            continue
        try:
            out[method] = np.asarray(fn(X))
        except (AttributeError, NotImplementedError):
            continue
    return out


def _agreement(a, b):
    import numpy as np

    if a.shape != b.shape:
        return {"same": False, "detail": f"shape {a.shape} vs {b.shape}"}
    if a.dtype.kind in "OUSb" or a.dtype.kind in "iu":
        return {"agree": float(np.mean(a == b)) if a.size else 1.0}
    a, b = a.astype(np.float64), b.astype(np.float64)
    scale = float(np.nanmax(np.abs(b))) if b.size else 1.0
    return {"max_rel_diff": float(np.nanmax(np.abs(a - b))) / max(scale, 1e-30) if a.size else 0.0}


def estimator_child(args):
    """Fit every estimator with a ``device`` parameter on CPU and on the device; compare."""
    import torch
    from sklearn.base import clone
    from sklearn.datasets import make_blobs

    warnings.filterwarnings("ignore")
    if args.dry_run:
        torch.set_num_threads(1)
    from skicml.utils._test_common import TEST_DATA, estimators_under_test

    device = "cpu" if args.dry_run else "cuda"
    rows = []
    for estimator in estimators_under_test(include_self_test=False):
        name = type(estimator).__name__
        if "device" not in estimator.get_params():
            continue
        if args.estimators and name not in args.estimators:
            continue
        row = {"estimator": name, "device": device}
        try:
            X, y = TEST_DATA[name](0) if name in TEST_DATA else make_blobs(
                n_samples=60, n_features=5, centers=3, random_state=0)
            results = {}
            for side, where in (("cpu", "cpu"), ("device", device)):
                model = clone(estimator).set_params(device=where)
                start = time.perf_counter()
                model.fit(X, y)
                fitted = time.perf_counter()
                results[side] = _outputs(model, X)
                row[f"{side}_fit_s"] = round(fitted - start, 3)
                row[f"{side}_predict_s"] = round(time.perf_counter() - fitted, 3)
            row["ran_on"] = _module_device(model)
            comparisons = {m: _agreement(results["device"][m], results["cpu"][m]) for m in results["cpu"]}
            row["outputs"] = comparisons
            row["ok"] = True
            worst = max((c.get("max_rel_diff", 0.0) for c in comparisons.values()), default=0.0)
            agree = min((c.get("agree", 1.0) for c in comparisons.values()), default=1.0)
            row["max_rel_diff"], row["agree"] = worst, agree
            row["verdict"] = ("same" if worst == 0 and agree == 1 else
                              "close" if worst <= 1e-3 and agree >= 0.95 else "differs")
        except Exception as exc:  # noqa: BLE001
            row.update(ok=False, verdict="error", error=f"{type(exc).__name__}: {str(exc)[:1500]}",
                       traceback=traceback.format_exc()[-3000:])
        rows.append(row)
        _write_json(args.records, {"estimators": rows})
        print(f"  {name:<28} {row['verdict']:<8} cpu fit {row.get('cpu_fit_s')} s, {device} fit "
              f"{row.get('device_fit_s')} s {row.get('error', '')[:300]}", flush=True)
    _write_json(args.records, {"estimators": rows})


def _module_device(model):
    """The device of the first parameter of the first torch module among the fitted attributes."""
    import torch

    for value in vars(model).values():
        if isinstance(value, torch.nn.Module):
            for parameter in value.parameters():
                return str(parameter.device)
    return None


# ---------------------------------------------------------------- the parent

def _write_json(path, data):
    # Atomic: a child killed at its time limit leaves its last complete file.
    with open(path + ".tmp", "w") as handle:
        json.dump(data, handle, indent=1, default=str)
    os.replace(path + ".tmp", path)


def _run_child(kind, extra, env, limit, out_dir, tag):
    """Run this script as a child; its JSON, or an error row."""
    records = os.path.join(out_dir, f".gpu_check_{tag}.json")
    if os.path.exists(records):
        os.remove(records)
    command = [sys.executable, os.path.abspath(__file__), "--child", kind, "--records", records, *extra]
    start = time.perf_counter()
    try:
        result = subprocess.run(command, env=env, timeout=limit, check=False, stdout=None, stderr=subprocess.PIPE,
                                text=True)
        stderr, code = result.stderr, result.returncode
    except subprocess.TimeoutExpired as exc:
        stderr, code = (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else (exc.stderr or ""), None
    seconds = time.perf_counter() - start
    data = {}
    if os.path.exists(records):
        try:
            with open(records) as handle:
                data = json.load(handle)
        except ValueError:
            data = {}
        os.remove(records)
    if code != 0 or not data:
        why = f"timed out after {limit} s" if code is None else f"exit {code}"
        data["child_error"] = f"{tag}: {why}: {stderr[-2500:]}"
        print(f"  {tag}: {why}\n{stderr[-2500:]}", flush=True)
    data["seconds"] = seconds
    return data


def _fmt_ms(value):
    if value is None:
        return ".."
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _rst_table(header, rows):
    """A reStructuredText simple table."""
    cells = [[str(c) for c in header]] + [[str(c) if c not in (None, "") else ".." for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(c.ljust(w) for c, w in zip(cells[0], widths)).rstrip(), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells[1:]]
    lines.append(rule)
    return "\n".join(lines)


def render(report):
    """The text of ``gpu_check.rst``: the device, the op table, the estimator table, the compile check."""
    device = report["device"]
    lines = []
    if device.get("bandwidth_gbs"):
        lines.append(
            f"Device: {device['name']} ({device['capability']}, {device['sms']} SMs at "
            f"{device['sm_clock_mhz']:.0f} MHz, {device['memory_gb']} GiB; peaks from its reported properties: "
            f"{device['bandwidth_gbs']:.0f} GB/s, {device['fp32_tflops']:.1f} TFLOP/s FP32, "
            f"{device['bf16_tc_tflops']:.0f} TFLOP/s bf16 tensor cores). "
            f"torch {report['torch']}, triton {report['triton']}, {report['date']}, "
            f"{report['wall_s']:.0f} s in all.")
    else:
        lines.append(f"Device: {device['name']}; torch {report['torch']}, triton {report['triton']}, "
                     f"{report['date']}, {report['wall_s']:.0f} s in all. Dry run: tiny shapes in "
                     "Triton's interpreter, one timing round; times and fractions are not measurements.")
    lines.append("")
    header = ("op", "case", "dtype", "check", "max rel err", "opcheck", "kernel ms", "ref ms",
              "library", "library ms", "ref/kernel", "bound", "of peak")
    rows = []
    for row in report["ops"]:
        kernel, ref, lib = row.get("kernel_ms"), row.get("reference_ms"), row.get("library_ms")
        rows.append((
            row["op"], row["case"], row["dtype"], "ok" if row.get("ok") else "FAIL",
            f"{row['max_rel_err']:.1e}" if row.get("max_rel_err") is not None else "error",
            row.get("opcheck", ""), _fmt_ms(kernel), _fmt_ms(ref), row.get("library", ""), _fmt_ms(lib),
            f"{ref / kernel:.2f}x" if kernel and ref else "", row.get("bound", ""),
            f"{100 * row['of_peak']:.2g}%" if row.get("of_peak") is not None else ""))
    lines.append(_rst_table(header, rows))
    if report.get("estimators"):
        lines += ["", f"Estimators at their test size, fitted on the CPU and on {report['estimators'][0]['device']}:",
                  ""]
        header = ("estimator", "verdict", "max rel diff", "agree", "cpu fit s", "device fit s", "ran on")
        rows = [(r["estimator"], r["verdict"],
                 f"{r['max_rel_diff']:.1e}" if r.get("max_rel_diff") is not None else "",
                 f"{r['agree']:.3f}" if r.get("agree") is not None else "", r.get("cpu_fit_s", ""),
                 r.get("device_fit_s", ""), r.get("ran_on", "")) for r in report["estimators"]]
        lines.append(_rst_table(header, rows))
    if report.get("compile"):
        compiled = [c for c in report["compile"] if "kernel" in c]
        if not report["dry_run"]:
            title = f"Kernels compiled on the device ({len(compiled)}; registers and spills per thread):"
        elif report.get("compile_scope") == "tiny":
            title = (f"Ahead-of-time compile for sm_{_H100} of the configurations the dry run launched "
                     f"({len(compiled)} distinct binaries):")
        else:
            title = (f"Ahead-of-time compile for sm_{_H100} of every configuration the GPU run launches "
                     f"({len(compiled)} distinct binaries):")
        lines += ["", title, ""]
        header = ("kernel", "in", "constexprs", "warps", "shared B", "regs", "spill B", "check")
        rows = [(c["kernel"], c.get("dtype", ""), " ".join(f"{k}={_short(v)}" for k, v in c["constexprs"].items()),
                 c.get("num_warps", ""), c.get("shared_bytes", ""), c.get("registers", ""),
                 c.get("spill_store_bytes", ""), "ok" if c.get("ok") else "FAIL") for c in compiled]
        lines.append(_rst_table(header, rows))
    failures = report.get("failures", [])
    lines += ["", f"Failures: {len(failures)}." + ("" if not failures else " " + "; ".join(failures)[:3000])]
    return "\n".join(lines) + "\n"


def _short(value):
    if isinstance(value, dict) and "tl_dtype" in value:
        return value["tl_dtype"]
    return value


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or None,
                        help="folder for gpu_check.json and gpu_check.rst (default: $OUT, else .)")
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU tensors, Triton's interpreter, tiny shapes; no GPU needed")
    parser.add_argument("--ops", nargs="+", default=list(OPS), choices=list(OPS), metavar="OP")
    parser.add_argument("--estimators", nargs="*", default=None, help="only these estimator classes")
    parser.add_argument("--skip-estimators", action="store_true")
    parser.add_argument("--compile", choices=("gpu", "tiny", "none"), default="gpu",
                        help="dry run: compile for sm_90 ahead of time the kernel configurations of the GPU "
                             "run (gpu, the default), only those the dry run itself launched (tiny: "
                             "smaller blocks, quicker), or none")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds (default 10; dry run 1)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="the whole run's limit in seconds: no child starts or runs past it "
                             "(default 450 on a GPU, 900 for a dry run)")
    parser.add_argument("--child", choices=("ops", "estimators", "compile"), help=argparse.SUPPRESS)
    parser.add_argument("--records", help=argparse.SUPPRESS)
    parser.add_argument("--launches", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.dry_run else 10
    if args.budget_s is None:
        args.budget_s = 900.0 if args.dry_run else 450.0
    return args


def main(argv=None):
    args = parse(argv)
    if args.child:
        sys.path.insert(0, HERE)
        if args.child == "compile":
            return compile_child(args)
        return op_child(args) if args.child == "ops" else estimator_child(args)

    start = time.perf_counter()
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here, nothing to check (exit 0). "
              "`python benchmarks/gpu_check.py --dry-run --out DIR` runs the same checks on the CPU "
              "in Triton's interpreter.")
        return 0
    out_dir = os.path.abspath(args.out or ".")
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(HERE), env.get("PYTHONPATH")]))
    child_env = dict(env)
    if args.dry_run:
        # Before any kernel module is imported in the child: @triton.jit reads it at definition.
        child_env["TRITON_INTERPRET"] = "1"
        child_env.setdefault("OMP_NUM_THREADS", "1")
    else:
        child_env.pop("TRITON_INTERPRET", None)
    common = ["--repeats", str(args.repeats), "--compile", args.compile] + (["--dry-run"] if args.dry_run else [])
    peaks = device_peaks(args.dry_run)
    print(f"gpu_check: {'dry run on ' if args.dry_run else ''}{peaks['name']}; ops: {', '.join(args.ops)}", flush=True)
    report = {"device": peaks, "dry_run": args.dry_run, "torch": torch.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "python": platform.python_version(), "ops": [], "estimators": [], "compile": [],
              "children": {}, "failures": []}
    try:
        import triton

        report["triton"] = triton.__version__
    except ImportError:
        report["triton"] = "not installed"
        if args.dry_run:
            print("gpu_check: the dry run needs triton (pip install triton); nothing checked.")
            return 1

    def budget_left():
        return args.budget_s - (time.perf_counter() - start)

    def run_estimators(limit):
        print(f"[{time.perf_counter() - start:5.0f} s] estimators on {'cpu' if args.dry_run else 'cuda'}",
              flush=True)
        extra = common + (["--estimators", *args.estimators] if args.estimators else [])
        data = _run_child("estimators", extra, child_env if not args.dry_run else env, limit, out_dir,
                          "estimators")
        report["estimators"] = data.get("estimators", [])
        report["children"]["estimators"] = round(data["seconds"], 1)
        if "child_error" in data:
            report["failures"].append(data["child_error"][:500])

    estimator_thread = None
    if args.dry_run and not args.skip_estimators:
        # On the CPU the estimators do not disturb any timing that matters: they
        # run beside the ops (the GPU run keeps them apart, after the ops).
        import threading

        estimator_thread = threading.Thread(target=run_estimators, args=(ESTIMATOR_CHILD_LIMIT_S,))
        estimator_thread.start()

    # The dry run checks all ops in one child (the interpreter is the only
    # risk there); the GPU run gives each family its own process.
    groups = [tuple(args.ops)] if args.dry_run else [g for g in (
        tuple(name for name in group if name in args.ops) for group in GROUPS) if g]
    launches = []
    # Time the GPU run keeps for the estimators, which run after the ops.
    reserve = 0 if args.dry_run or args.skip_estimators else 120
    for group in groups:
        tag = "ops" if args.dry_run else "ops-" + group[0]
        if budget_left() - reserve < 30:
            report["children"][tag] = "skipped: the time budget is spent"
            report["failures"].append(f"{tag} skipped (time budget)")
            continue
        print(f"[{time.perf_counter() - start:5.0f} s] checking {', '.join(group)}", flush=True)
        limit = min(OP_CHILD_LIMIT_S if not args.dry_run else 400, budget_left() - reserve)
        data = _run_child("ops", ["--ops", *group, *common], child_env, limit, out_dir, tag)
        report["ops"] += data.get("ops", [])
        report["compile"] += data.get("kernels", [])
        launches += data.get("launches", [])
        report["children"][tag] = round(data["seconds"], 1)
        if "child_error" in data:
            report["failures"].append(data["child_error"][:500])
        checked = {row["op"] for row in data.get("ops", [])}
        for name in group:
            if name not in checked:
                report["ops"].append({"op": name, "case": "-", "dtype": "-", "ok": False,
                                      "error": data.get("child_error", "no result")[:1500]})
    if args.dry_run and args.compile != "none" and launches:
        what = "the configurations the dry run launched" if args.compile == "tiny" else "the GPU run's configurations"
        print(f"[{time.perf_counter() - start:5.0f} s] compiling {what} for sm_{_H100}", flush=True)
        records = os.path.join(out_dir, ".gpu_check_launches.json")
        wanted = args.compile == "tiny"
        _write_json(records, {"launches": [r for r in launches
                                            if r.get("executed", True) == wanted or "kernel" not in r]})
        compile_env = dict(env)
        compile_env.pop("TRITON_INTERPRET", None)
        data = _run_child("compile", ["--launches", records], compile_env,
                          min(COMPILE_CHILD_LIMIT_S, max(budget_left(), 10)), out_dir, "compile")
        os.path.exists(records) and os.remove(records)
        report["compile"] = data.get("compile", [])
        report["compile_scope"] = args.compile
        report["children"]["compile"] = round(data["seconds"], 1)
        if "child_error" in data:
            report["failures"].append(data["child_error"][:500])
        for result in report["compile"]:
            if not result.get("ok"):
                report["failures"].append(f"compile {result.get('kernel')} {result.get('error', '')[:300]}")
    report["launch_count"] = len(launches)
    if estimator_thread is not None:
        estimator_thread.join()
    elif not args.skip_estimators:
        if budget_left() < 30:
            report["children"]["estimators"] = "skipped: the time budget is spent"
            report["failures"].append("estimators skipped (time budget)")
        else:
            run_estimators(min(ESTIMATOR_CHILD_LIMIT_S, budget_left()))
    for row in report["ops"]:
        if not row.get("ok"):
            report["failures"].append(f"{row['op']} {row['case']} {row['dtype']}: "
                                      f"{row.get('error') or 'differs from the reference'}"[:400])
    for row in report["estimators"]:
        if not row.get("ok"):
            report["failures"].append(f"{row['estimator']}: {row.get('error', '')[:300]}")
    report["ops_checked"] = sorted({row["op"] for row in report["ops"] if row.get("ok")})
    report["wall_s"] = time.perf_counter() - start
    table = render(report)
    _write_json(os.path.join(out_dir, "gpu_check.json"), report)
    with open(os.path.join(out_dir, "gpu_check.rst"), "w") as handle:
        handle.write(table)
    print()
    print(table)
    print(f"ops checked: {', '.join(report['ops_checked'])}")
    print(f"gpu_check: {len(report['failures'])} failure(s); wrote {out_dir}/gpu_check.json and gpu_check.rst "
          f"in {report['wall_s']:.0f} s")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
