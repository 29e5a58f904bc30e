"""Triton kernel of ``skicml::differential_merge``: one program merges one row.

A program loads its row's query once, then walks through the frame's patches
``TILE_M`` at a time, each tile a (TILE_M, BLOCK_D) block covering the whole
``dim``. From that one read it forms the patch norms, the dot products with
the query and with the same patches of the reference frame, the scores, and
updates a running-max (online) softmax: the weighted sum of the patches seen
so far, rescaled whenever the maximum grows, and its normaliser. Each patch
of the frame (and of its reference) is read once; no score matrix reaches
memory except the (rows, patches) scores themselves, which the launcher turns
into the weights with one softmax (a pass over n x M values, against the
kernel's n x M x D). A row without a reference (-1) masks off the loads of
the reference.

Accumulation is in float32; the op sends float64 tensors to its chunked
reference instead. Imported lazily (only when a CUDA tensor reaches the op,
or by the tests under ``TRITON_INTERPRET=1``, which must be set before this
module is imported).
"""

import torch
import triton
import triton.language as tl

# Patch values of one tile: enough in flight to hide memory latency without
# spilling registers (8 warps).
_TILE_ELEMENTS = 8192


@triton.jit
def _merge_kernel(
    p_ptr, q_ptr, frame_ptr, reference_ptr, query_ptr, tokens_ptr, scores_ptr,
    M, D, inv_temperature, lambda_over_temperature, eps,
    TILE_M: tl.constexpr, BLOCK_D: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    frame = tl.load(frame_ptr + row)
    reference = tl.load(reference_ptr + row)
    query = tl.load(query_ptr + row)
    has_reference = reference >= 0
    reference = tl.where(has_reference, reference, 0)

    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < D
    q = tl.load(q_ptr + query * D + dims, mask=dim_ok, other=0.0).to(tl.float32)
    q = q / tl.maximum(tl.sqrt(tl.sum(q * q, axis=0)), eps)

    frame_base = p_ptr + frame * M * D
    reference_base = p_ptr + reference * M * D
    running_max = tl.max(tl.full((TILE_M,), float("-inf"), tl.float32), axis=0)
    normaliser = tl.sum(tl.zeros((TILE_M,), tl.float32), axis=0)
    acc = tl.zeros((BLOCK_D,), tl.float32)
    for start in range(0, M, TILE_M):
        patches = start + tl.arange(0, TILE_M)
        patch_ok = patches < M
        offsets = patches[:, None] * D + dims[None, :]
        ok = patch_ok[:, None] & dim_ok[None, :]
        p = tl.load(frame_base + offsets, mask=ok, other=0.0).to(tl.float32)
        k = tl.load(reference_base + offsets, mask=ok & has_reference, other=0.0).to(tl.float32)
        p_scale = tl.maximum(tl.sqrt(tl.sum(p * p, axis=1)), eps)
        k_scale = tl.maximum(tl.sqrt(tl.sum(k * k, axis=1)), eps)
        relevance = tl.sum(p * q[None, :], axis=1) / p_scale
        redundancy = tl.sum(p * k, axis=1) / (p_scale * k_scale)
        score = relevance * inv_temperature - redundancy * lambda_over_temperature
        score = tl.where(patch_ok, score, float("-inf"))
        tl.store(scores_ptr + row * M + patches, score, mask=patch_ok)

        new_max = tl.maximum(running_max, tl.max(score, axis=0))
        rescale = tl.exp(running_max - new_max)
        e = tl.exp(score - new_max)
        normaliser = normaliser * rescale + tl.sum(e, axis=0)
        acc = acc * rescale + tl.sum(e[:, None] * p, axis=0)
        running_max = new_max
    token = acc / normaliser
    tl.store(tokens_ptr + row * D + dims, token.to(tokens_ptr.dtype.element_ty), mask=dim_ok)


def differential_merge_triton(patches, queries, frame_index, reference_index, query_index,
                              merge_lambda=1.0, temperature=0.01):
    """Launch the kernel, one program per output row.

    Arguments and results as :func:`skicml.ops.differential_merge` (the
    arguments are not checked again here); float16, bfloat16 and float32.
    """
    _, n_patches, dim = patches.shape
    n = frame_index.shape[0]
    tokens = torch.empty(n, dim, dtype=patches.dtype, device=patches.device)
    scores = torch.empty(n, n_patches, dtype=torch.float32, device=patches.device)
    if n == 0:
        return tokens, scores
    block_d = triton.next_power_of_2(dim)
    tile_m = max(1, min(triton.next_power_of_2(n_patches), _TILE_ELEMENTS // block_d))
    _merge_kernel[(n,)](
        patches.contiguous(), queries.contiguous(), frame_index.contiguous(),
        reference_index.contiguous(), query_index.contiguous(), tokens, scores,
        n_patches, dim, 1.0 / temperature, merge_lambda / temperature, 1e-12,
        TILE_M=tile_m, BLOCK_D=block_d, num_warps=4 if tile_m * block_d <= 4096 else 8,
    )
    return tokens, torch.softmax(scores, dim=1)
