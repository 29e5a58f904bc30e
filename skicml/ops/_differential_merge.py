"""``skicml::differential_merge``: ViLAMP's differential feature merging, fused.

Used by one family: ``video`` (ViLAMP's compressor).

ViLAMP (ICML 2025) reduces each non-keyframe of a long video to one token: a
softmax-weighted mean of its patches, where a patch weighs more when it is
relevant to the query and less when it repeats the same patch position of a
reference keyframe. For output row ``i`` with frame ``f``, reference ``r`` and
query ``q``,

.. math::

    s_m = \\big(\\cos(p_{f,m}, q) - \\lambda \\cos(p_{f,m}, p_{r,m})\\big) / \\alpha,
    \\qquad w = \\mathrm{softmax}_m(s), \\qquad t = \\sum_m w_m p_{f,m},

with ``cos(a, b) = <a, b> / (max(|a|, 1e-12) max(|b|, 1e-12))``, the rule of
:func:`torch.nn.functional.normalize` (a zero vector has cosine 0 with
everything). A row whose reference is -1 has no redundancy term.

Written naively this reads the (frames, patches, dim) tensor five times
(normalise, two cosines, softmax, weighted sum) and holds gathered copies of
it; 10,000 frames of 49 x 512 patches are 1 GB in float32. The op reads it
once per output row instead:

- the CPU kernel walks the rows in chunks of at most ``_CHUNK_ELEMENTS``
  patch values (16 MiB in float32), so that its passes after the first find
  the chunk in cache. A run of rows whose frames follow each other and share
  one reference and one query (the frames between two keyframes) is a view
  of the input, not a copy, and its scores are one product per patch with
  ``q / |q| - lambda k / |k|``; other rows are gathered chunk by chunk;
- the CUDA kernel (``_differential_merge_triton.py``) runs one program per
  row, reading the row's patches once with an online (running-max) softmax;
- the backward pass, a second op (``skicml::differential_merge_backward``),
  recomputes the chunk's scores instead of saving (rows, patches, dim)
  tensors, and returns the gradients of the patches and the queries.

Half-precision inputs are accumulated in float32, float64 in float64. The
tokens come back in the input's dtype, the weights in the accumulation dtype.
:func:`differential_merge_reference` is the plain, unchunked formula the tests
compare against.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from ._dispatch import load_gpu_kernel

__all__ = ["differential_merge", "differential_merge_reference"]

# Patch values of one chunk of rows on CPU: 2**22 is 16 MiB in float32 (167
# frames of 49 x 512), so the chunk's passes after the first read it from
# the last-level cache. Smaller chunks were no faster on 2 cores (2**18 to
# 2**24) and much slower when other processes share the cores: every pass
# over a chunk is a parallel region whose threads wait for each other.
# Read at call time, so tests can shrink it.
_CHUNK_ELEMENTS = 2**22
# A run of rows shorter than this (in patch values; 2 frames of 49 x 512)
# costs more in per-chunk overhead than gathering it with its neighbours.
_MIN_RUN_ELEMENTS = 2**16
# On a GPU the fallback paths (float64, the backward pass) pay a launch and a
# sync per chunk instead: bigger chunks (256 MiB in float32).
_CHUNK_ELEMENTS_GPU = 2**26
# The Triton kernel holds a whole patch (of the frame and of its reference)
# in registers; wider ones take the chunked path.
_TRITON_MAX_DIM = 16384

_EPS = 1e-12
_NAME = "differential_merge"


def _accumulation_dtype(dtype):
    # Half precision is accumulated in float32, float64 stays float64.
    return torch.promote_types(dtype, torch.float32)


def _check_shapes(patches, queries, frame_index, reference_index, query_index,
                  merge_lambda, temperature):
    """Validate everything that does not need the tensors' values."""
    for arg, tensor, layout in (("patches", patches, "(n_frames, n_patches, dim)"),
                                ("queries", queries, "(n_queries, dim)")):
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{_NAME}: {arg} must be a torch.Tensor, got {type(tensor).__name__}.")
        if tensor.dim() != len(layout.split(",")):
            raise ValueError(
                f"{_NAME}: {arg} must have shape {layout}, got {tuple(tensor.shape)}."
            )
        if not tensor.is_floating_point():
            raise ValueError(f"{_NAME}: {arg} must be a floating-point tensor, got {tensor.dtype}.")
    _, n_patches, dim = patches.shape
    if n_patches < 1 or dim < 1:
        raise ValueError(
            f"{_NAME}: patches must have at least one patch per frame and a dim >= 1, got shape "
            f"{tuple(patches.shape)}."
        )
    if queries.shape[1] != dim:
        raise ValueError(
            f"{_NAME}: queries must have shape (n_queries, {dim}) to match patches of shape "
            f"{tuple(patches.shape)}, got {tuple(queries.shape)}."
        )
    if queries.dtype != patches.dtype:
        raise ValueError(
            f"{_NAME}: queries must have the dtype of patches, {patches.dtype}, got "
            f"{queries.dtype}."
        )
    n = None
    for arg, index in (("frame_index", frame_index), ("reference_index", reference_index),
                       ("query_index", query_index)):
        if not isinstance(index, torch.Tensor):
            raise ValueError(f"{_NAME}: {arg} must be a torch.Tensor, got {type(index).__name__}.")
        if index.dim() != 1:
            raise ValueError(
                f"{_NAME}: {arg} must be a 1-D tensor, got shape {tuple(index.shape)}."
            )
        if index.dtype != torch.int64:
            raise ValueError(f"{_NAME}: {arg} must be an int64 tensor, got {index.dtype}.")
        if n is None:
            n = index.shape[0]
        elif index.shape[0] != n:
            raise ValueError(
                f"{_NAME}: {arg} must have shape ({n},), one entry per row of frame_index, got "
                f"{tuple(index.shape)}."
            )
    for arg, tensor in (("queries", queries), ("frame_index", frame_index),
                        ("reference_index", reference_index), ("query_index", query_index)):
        if tensor.device != patches.device:
            raise ValueError(
                f"{_NAME}: {arg} must be on the device of patches, {patches.device}, got "
                f"{tensor.device}."
            )
    if isinstance(merge_lambda, bool) or not (
        isinstance(merge_lambda, numbers.Real) and math.isfinite(merge_lambda)
    ):
        raise ValueError(f"{_NAME}: merge_lambda must be a finite float, got {merge_lambda!r}.")
    if isinstance(temperature, bool) or not (
        isinstance(temperature, numbers.Real) and math.isfinite(temperature) and temperature > 0
    ):
        raise ValueError(f"{_NAME}: temperature must be a finite float > 0, got {temperature!r}.")
    return n


def _check_values(patches, queries, frame_index, reference_index, query_index):
    """Index ranges: these read the indices (a sync on a GPU, a break in a graph)."""
    n_frames, n_queries = patches.shape[0], queries.shape[0]
    for arg, index, low, high in (("frame_index", frame_index, 0, n_frames),
                                  ("reference_index", reference_index, -1, n_frames),
                                  ("query_index", query_index, 0, n_queries)):
        if index.numel() == 0:
            continue
        lowest, highest = (int(v) for v in torch.aminmax(index))
        if lowest < low or highest >= high:
            extra = " (-1: no reference)" if low == -1 else ""
            raise ValueError(
                f"{_NAME}: {arg} must lie in [{low}, {high - 1}]{extra}, got values from "
                f"{lowest} to {highest}."
            )


def differential_merge_reference(patches, queries, frame_index, reference_index, query_index,
                                 merge_lambda=1.0, temperature=0.01):
    """The unchunked formula of :func:`differential_merge`: the tests' ground truth.

    Gathers and normalises whole (rows, patches, dim) copies, so its memory
    grows with the number of rows; use :func:`differential_merge` for data.
    Differentiable by autograd. Arguments and results as
    :func:`differential_merge`.

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import differential_merge_reference
    >>> patches = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # one frame, two patches
    >>> query = torch.tensor([[1.0, 0.0]])
    >>> row = torch.tensor([0])
    >>> tokens, weights = differential_merge_reference(
    ...     patches, query, row, torch.tensor([-1]), row, temperature=1.0)
    >>> weights  # softmax((cos 0, cos 90 degrees))
    tensor([[0.7311, 0.2689]])
    """
    _check_shapes(patches, queries, frame_index, reference_index, query_index,
                  merge_lambda, temperature)
    acc = _accumulation_dtype(patches.dtype)
    frames = patches.to(acc)[frame_index]
    unit_frames = F.normalize(frames, dim=-1, eps=_EPS)
    unit_queries = F.normalize(queries.to(acc)[query_index], dim=-1, eps=_EPS)
    relevance = (unit_frames * unit_queries.unsqueeze(1)).sum(dim=-1)
    unit_references = F.normalize(patches.to(acc)[reference_index.clamp(min=0)], dim=-1, eps=_EPS)
    redundancy = (unit_frames * unit_references).sum(dim=-1)
    redundancy = torch.where((reference_index >= 0).unsqueeze(1), redundancy, 0.0)
    weights = torch.softmax((relevance - merge_lambda * redundancy) / temperature, dim=-1)
    tokens = (weights.unsqueeze(2) * frames).sum(dim=1)
    return tokens.to(patches.dtype), weights


# --------------------------------------------------------------------------
# The chunked kernel (CPU, and the GPU's float64 and backward paths)


class _Chunk:
    """One chunk of rows: their frames, queries and references, in ``acc``."""

    def __init__(self, patches, queries, frame_index, reference_index, query_index,
                 start, stop, first_frame=None, shared_reference=None, shared_query=None,
                 acc=torch.float32):
        self.rows = slice(start, stop)
        # A run of consecutive frames is a view: no gathered copy.
        self.first_frame = first_frame
        if first_frame is None:
            self.frames_index = frame_index[start:stop]
            frames = patches.index_select(0, self.frames_index)
        else:
            frames = patches[first_frame:first_frame + stop - start]
        self.frames = frames.to(acc)
        self.queries_index = query_index[start:stop]
        self.queries = queries.index_select(0, self.queries_index).to(acc)
        self.shared_query = shared_query
        # shared_reference: the one reference of every row (-1: none), or None
        # for a mix, which is gathered per row (rows without one masked out).
        self.shared_reference = shared_reference
        if shared_reference is None:
            self.references_index = reference_index[start:stop].clamp(min=0)
            self.has_reference = (reference_index[start:stop] >= 0).unsqueeze(1)
            self.references = patches.index_select(0, self.references_index).to(acc)
        elif shared_reference >= 0:
            self.references = patches[shared_reference].to(acc)  # (M, D), broadcast
        else:
            self.references = None

    def cosines(self):
        """Norms and the two cosines of every (row, patch) of the chunk."""
        frames, queries = self.frames, self.queries
        self.frame_norms = torch.linalg.vector_norm(frames, dim=-1)
        self.query_norms = torch.linalg.vector_norm(queries, dim=-1)
        frame_scale = self.frame_norms.clamp(min=_EPS)
        query_scale = self.query_norms.clamp(min=_EPS)
        self.frame_scale, self.query_scale = frame_scale, query_scale
        dot = torch.bmm(frames, queries.unsqueeze(2)).squeeze(2)
        self.relevance = dot.div_(frame_scale).div_(query_scale.unsqueeze(1))
        if self.references is None:
            self.redundancy = None
            return
        self.reference_norms = torch.linalg.vector_norm(self.references, dim=-1)
        self.reference_scale = self.reference_norms.clamp(min=_EPS)
        redundancy = (frames * self.references).sum(dim=-1)
        redundancy.div_(frame_scale).div_(self.reference_scale)
        if self.shared_reference is None:
            redundancy = torch.where(self.has_reference, redundancy, 0.0)
        self.redundancy = redundancy

    def weights(self, merge_lambda, temperature):
        scores = self.relevance if self.redundancy is None else (
            self.relevance - merge_lambda * self.redundancy)
        return torch.softmax(scores / temperature, dim=-1)

    def fast_weights(self, merge_lambda, temperature):
        """The forward pass's weights in three passes over the frames when the
        rows share their query and reference: ``<p, q/|q|> - merge_lambda
        <p, k/|k|> = <p, q/|q| - merge_lambda k/|k|>``, one product per patch."""
        if self.shared_query is None or self.shared_reference is None:
            self.cosines()
            return self.weights(merge_lambda, temperature)
        frames = self.frames
        direction = F.normalize(self.queries[0], dim=-1, eps=_EPS)
        if self.references is None:
            dots = (frames.reshape(-1, frames.shape[2]) @ direction).view(frames.shape[:2])
        else:
            direction = direction - merge_lambda * F.normalize(self.references, dim=-1, eps=_EPS)
            dots = torch.einsum("cmd,md->cm", frames, direction)
        scale = torch.linalg.vector_norm(frames, dim=-1).clamp_(min=_EPS)
        return torch.softmax(dots.div_(scale).div_(temperature), dim=-1)


def _chunks(patches, queries, frame_index, reference_index, query_index, acc):
    """Yield the chunks of rows, planned in one pass over the indices.

    A run is a stretch of rows whose frames follow each other and share one
    reference and one query (ViLAMP's frames between two keyframes). Runs are cut into
    chunks of at most ``rows`` rows, each a view of its frames with one
    broadcast reference; runs too short to be worth a chunk of their own
    (under ``_MIN_RUN_ELEMENTS`` patch values, or a quarter of a chunk) are
    pooled, in order, into gathered chunks.
    """
    n = frame_index.shape[0]
    if n == 0:
        return
    _, n_patches, dim = patches.shape
    budget = _CHUNK_ELEMENTS_GPU if patches.device.type == "cuda" else _CHUNK_ELEMENTS
    rows = max(1, int(budget) // (n_patches * dim))
    new_run = torch.ones(n, dtype=torch.bool, device=frame_index.device)
    new_run[1:] = ((frame_index.diff() != 1) | (reference_index.diff() != 0)
                   | (query_index.diff() != 0))
    starts = new_run.nonzero().flatten()
    runs = torch.stack([starts, frame_index[starts], reference_index[starts],
                        query_index[starts]], dim=1).tolist()
    stops = [run[0] for run in runs[1:]] + [n]
    min_run = max(1, min(rows // 4, _MIN_RUN_ELEMENTS // (n_patches * dim)))
    args = (patches, queries, frame_index, reference_index, query_index)
    pooled = None  # first row of the short runs pooled so far

    def gathered(begin, end):
        for a in range(begin, end, rows):
            yield _Chunk(*args, a, min(a + rows, end), acc=acc)

    for (start, first_frame, reference, query), stop in zip(runs, stops):
        if stop - start < min_run:
            pooled = start if pooled is None else pooled
            continue
        if pooled is not None:
            yield from gathered(pooled, start)
            pooled = None
        for a in range(start, stop, rows):
            yield _Chunk(*args, a, min(a + rows, stop), first_frame + a - start, reference, query,
                         acc)
    if pooled is not None:
        yield from gathered(pooled, n)


def _merge_chunked(patches, queries, frame_index, reference_index, query_index,
                   merge_lambda, temperature):
    acc = _accumulation_dtype(patches.dtype)
    n, dim = frame_index.shape[0], patches.shape[2]
    tokens = torch.empty(n, dim, dtype=patches.dtype, device=patches.device)
    weights = torch.empty(n, patches.shape[1], dtype=acc, device=patches.device)
    for chunk in _chunks(patches, queries, frame_index, reference_index, query_index, acc):
        w = chunk.fast_weights(merge_lambda, temperature)
        weights[chunk.rows] = w
        tokens[chunk.rows] = torch.bmm(w.unsqueeze(1), chunk.frames).squeeze(1)
    return tokens, weights


def _merge_backward_chunked(grad_tokens, grad_weights, patches, queries, frame_index,
                            reference_index, query_index, merge_lambda, temperature):
    """Gradients of the patches and queries, recomputing each chunk's scores.

    With ``g_m = dL/dw_m + <dL/dt, p_m>`` the softmax gives
    ``ds = w (g - <w, g>)``; the cosine ``c(a, b) = <a, b> / (|a| |b|)`` has
    ``dc/da = b / (|a| |b|) - c a / |a|^2`` (no second term where the norm
    is clamped at 1e-12, which is constant there).
    """
    acc = _accumulation_dtype(patches.dtype)
    grad_patches = torch.zeros(patches.shape, dtype=acc, device=patches.device)
    grad_queries = torch.zeros(queries.shape, dtype=acc, device=queries.device)
    for chunk in _chunks(patches, queries, frame_index, reference_index, query_index, acc):
        chunk.cosines()
        w = chunk.weights(merge_lambda, temperature)
        frames, unit = chunk.frames, chunk.frame_scale
        g_tokens = grad_tokens[chunk.rows].to(acc)
        g = grad_weights[chunk.rows].to(acc) + torch.bmm(frames, g_tokens.unsqueeze(2)).squeeze(2)
        d_scores = w * (g - (w * g).sum(dim=-1, keepdim=True)) / temperature
        # d_relevance = d_scores, d_redundancy = -merge_lambda * d_scores.
        per_query = d_scores / (unit * chunk.query_scale.unsqueeze(1))
        frame_coef = d_scores * chunk.relevance
        grad_frames = w.unsqueeze(2) * g_tokens.unsqueeze(1)
        grad_frames += per_query.unsqueeze(2) * chunk.queries.unsqueeze(1)
        query_live = (chunk.query_norms > _EPS).to(acc)
        grad_q = torch.bmm(per_query.unsqueeze(1), frames).squeeze(1)
        grad_q -= ((d_scores * chunk.relevance).sum(dim=-1) * query_live
                   / chunk.query_scale**2).unsqueeze(1) * chunk.queries
        grad_queries.index_add_(0, chunk.queries_index, grad_q)
        if chunk.redundancy is not None:
            d_redundancy = -merge_lambda * d_scores
            if chunk.shared_reference is None:
                d_redundancy = d_redundancy * chunk.has_reference
            frame_coef = frame_coef + d_redundancy * chunk.redundancy
            cross = d_redundancy / (unit * chunk.reference_scale)
            grad_frames += cross.unsqueeze(2) * chunk.references
            reference_live = (chunk.reference_norms > _EPS).to(acc)
            grad_refs = cross.unsqueeze(2) * frames
            grad_refs -= (d_redundancy * chunk.redundancy * reference_live
                          / chunk.reference_scale**2).unsqueeze(2) * chunk.references
            if chunk.shared_reference is None:
                grad_patches.index_add_(0, chunk.references_index, grad_refs)
            else:
                grad_patches[chunk.shared_reference] += grad_refs.sum(dim=0)
        frame_live = (chunk.frame_norms > _EPS).to(acc)
        grad_frames -= (frame_coef * frame_live / unit**2).unsqueeze(2) * frames
        if chunk.first_frame is None:
            grad_patches.index_add_(0, chunk.frames_index, grad_frames)
        else:
            grad_patches[chunk.first_frame:chunk.first_frame + grad_frames.shape[0]] += grad_frames
    return grad_patches.to(patches.dtype), grad_queries.to(queries.dtype)


# --------------------------------------------------------------------------
# The registered ops


@torch.library.custom_op("skicml::differential_merge", mutates_args=())
def _merge_op(
    patches: torch.Tensor,
    queries: torch.Tensor,
    frame_index: torch.Tensor,
    reference_index: torch.Tensor,
    query_index: torch.Tensor,
    merge_lambda: float = 1.0,
    temperature: float = 0.01,
) -> tuple[torch.Tensor, torch.Tensor]:
    # The CPU kernel; the public entry point, with the argument checks, is
    # differential_merge.
    _check_shapes(patches, queries, frame_index, reference_index, query_index,
                  merge_lambda, temperature)
    return _merge_chunked(patches, queries, frame_index, reference_index, query_index,
                          merge_lambda, temperature)


@_merge_op.register_fake
def _(patches, queries, frame_index, reference_index, query_index, merge_lambda=1.0,
      temperature=0.01):
    n = _check_shapes(patches, queries, frame_index, reference_index, query_index,
                      merge_lambda, temperature)
    tokens = patches.new_empty((n, patches.shape[2]))
    weights = patches.new_empty((n, patches.shape[1]), dtype=_accumulation_dtype(patches.dtype))
    return tokens, weights


@torch.library.register_kernel("skicml::differential_merge", "cuda")
def _(patches, queries, frame_index, reference_index, query_index, merge_lambda=1.0,
      temperature=0.01):
    _check_shapes(patches, queries, frame_index, reference_index, query_index,
                  merge_lambda, temperature)
    kernel = load_gpu_kernel("skicml.ops._differential_merge_triton", "differential_merge_triton")
    if kernel is None or patches.dtype == torch.float64 or patches.shape[2] > _TRITON_MAX_DIM:
        # The kernel accumulates in float32; float64 keeps its precision here.
        return _merge_chunked(patches, queries, frame_index, reference_index, query_index,
                              merge_lambda, temperature)
    return kernel(patches, queries, frame_index, reference_index, query_index,
                  merge_lambda, temperature)


@torch.library.custom_op("skicml::differential_merge_backward", mutates_args=())
def _merge_backward_op(
    grad_tokens: torch.Tensor,
    grad_weights: torch.Tensor,
    patches: torch.Tensor,
    queries: torch.Tensor,
    frame_index: torch.Tensor,
    reference_index: torch.Tensor,
    query_index: torch.Tensor,
    merge_lambda: float,
    temperature: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    # One plain-torch kernel for every device: autograd cannot run inside an
    # op's kernel, so the backward is written out (see ssd_scan_backward).
    return _merge_backward_chunked(grad_tokens, grad_weights, patches, queries, frame_index,
                                   reference_index, query_index, merge_lambda, temperature)


@_merge_backward_op.register_fake
def _(grad_tokens, grad_weights, patches, queries, frame_index, reference_index, query_index,
      merge_lambda, temperature):
    return patches.new_empty(patches.shape), queries.new_empty(queries.shape)


def _setup_context(ctx, inputs, output):
    patches, queries, frame_index, reference_index, query_index, merge_lambda, temperature = inputs
    # The inputs only: the backward recomputes the scores chunk by chunk.
    ctx.save_for_backward(patches, queries, frame_index, reference_index, query_index)
    ctx.merge_lambda, ctx.temperature = merge_lambda, temperature


def _backward(ctx, grad_tokens, grad_weights):
    patches, queries, frame_index, reference_index, query_index = ctx.saved_tensors
    n, n_patches, dim = frame_index.shape[0], patches.shape[1], patches.shape[2]
    if grad_tokens is None:
        grad_tokens = patches.new_zeros((n, dim))
    if grad_weights is None:
        grad_weights = patches.new_zeros((n, n_patches), dtype=_accumulation_dtype(patches.dtype))
    grad_patches, grad_queries = _merge_backward_op(
        grad_tokens, grad_weights, patches, queries, frame_index, reference_index, query_index,
        ctx.merge_lambda, ctx.temperature)
    return grad_patches, grad_queries, None, None, None, None, None


_merge_op.register_autograd(_backward, setup_context=_setup_context)


def differential_merge(patches, queries, frame_index, reference_index, query_index,
                       merge_lambda=1.0, temperature=0.01):
    """Merge each frame's patches into one token, weighted by query relevance minus redundancy.

    Row ``i`` merges the patches of frame ``frame_index[i]`` with the scores

    ``s_m = (cos(p_m, q) - merge_lambda * cos(p_m, k_m)) / temperature``,

    where ``q = queries[query_index[i]]`` and ``k_m`` is patch ``m`` of the
    reference frame ``reference_index[i]`` (ViLAMP's preceding keyframe; -1
    drops the redundancy term for that row). The weights are
    ``softmax_m(s)`` (max-subtracted) and the token is ``sum_m w_m p_m``.
    Cosines follow :func:`torch.nn.functional.normalize`: norms are clamped
    at 1e-12, so zero vectors give cosine 0, never NaN.

    One chunked pass over the rows on CPU (memory O(chunk x patches x dim),
    never a gathered copy of the whole input), a Triton kernel on CUDA.
    Differentiable with respect to ``patches`` and ``queries``; the backward
    pass recomputes the scores instead of storing them.

    Parameters
    ----------
    patches : torch.Tensor of shape (n_frames, n_patches, dim)
        Patch embeddings of every frame (of every video, concatenated along
        frames); float16, bfloat16, float32 or float64.
    queries : torch.Tensor of shape (n_queries, dim)
        Query embeddings, of the dtype of ``patches``.
    frame_index : torch.Tensor of shape (n,), int64
        The frame merged by each output row, in ``[0, n_frames)``.
    reference_index : torch.Tensor of shape (n,), int64
        Each row's reference frame in ``[0, n_frames)``, or -1 for none.
    query_index : torch.Tensor of shape (n,), int64
        Each row's query, in ``[0, n_queries)``.
    merge_lambda : float, default=1.0
        Weight of the redundancy term; 0 weights by relevance alone.
    temperature : float, default=0.01
        Softmax temperature, > 0. Large values give the plain mean of the
        patches, small ones the single patch of highest score.

    Returns
    -------
    tokens : torch.Tensor of shape (n, dim)
        The merged tokens, in the dtype of ``patches``.
    weights : torch.Tensor of shape (n, n_patches)
        The softmax weights of every row; float32, or float64 for float64
        ``patches``.

    Raises
    ------
    ValueError
        On a wrong rank, a ``dim`` or dtype that does not match, an index
        out of range, a non-finite ``merge_lambda`` or ``temperature <= 0``.

    Examples
    --------
    The reference case of the ViLAMP spec: a keyframe and the frame after it,
    two patches each; the frame's second patch is less relevant to the query
    and repeats its keyframe more, so it gets less weight.

    >>> import torch
    >>> from skicml.ops import differential_merge
    >>> patches = torch.tensor([[[1.0, 0.0], [0.0, 1.0]],    # frame 0: the keyframe
    ...                         [[1.0, 0.0], [0.6, 0.8]]])   # frame 1
    >>> query = torch.tensor([[1.0, 0.0]])
    >>> tokens, weights = differential_merge(
    ...     patches, query, frame_index=torch.tensor([1]), reference_index=torch.tensor([0]),
    ...     query_index=torch.tensor([0]), merge_lambda=1.0, temperature=1.0)
    >>> weights
    tensor([[0.5498, 0.4502]])
    >>> tokens
    tensor([[0.8199, 0.3601]])
    """
    _check_shapes(patches, queries, frame_index, reference_index, query_index,
                  merge_lambda, temperature)
    if not torch.compiler.is_compiling():
        # Out-of-range indices would read other memory in the GPU kernel.
        _check_values(patches, queries, frame_index, reference_index, query_index)
    return _merge_op(patches, queries, frame_index, reference_index, query_index,
                     float(merge_lambda), float(temperature))
