"""Triton kernels of ``skicml::moe_dispatch`` (``_moe_dispatch.py``): a grouped GEMM over the selected pairs.

The selected (token, expert) pairs are sorted by expert and each expert's
run is padded to a whole number of ``BLOCK_M``-row blocks, so that every
block belongs to one expert (a few padding rows per expert, whatever the
imbalance: no capacity, no dropped tokens, no per-expert launch). Then two
launches over all blocks:

- ``_expert_up_kernel``: ``gelu(x[token] @ w1[e] + b1[e])``, the gather of
  the token rows fused into the load of the A operand and the GELU into the
  epilogue, written to a ``(rows, hidden)`` buffer;
- ``_expert_down_kernel``: ``gate * (hidden @ w2[e] + b2[e])`` per pair.

A third launch sums each token's gated pair outputs in expert order
(deterministic, no atomics). Matmuls run in the input's precision
(``input_precision="ieee"``: no TF32), so results agree with the reference
to rounding. Imported lazily (only when a CUDA tensor reaches the op, or by
the tests under ``TRITON_INTERPRET=1``).
"""

import torch
import triton
import triton.language as tl

_BLOCK_M = 16
_BLOCK_N = 32
_BLOCK_K = 32


@triton.jit
def _gelu_tanh(x):
    # tanh(z) = 1 - 2 / (exp(2z) + 1); |z| <= 20 keeps exp finite, and tanh(20) is 1 in float64.
    inner = tl.minimum(tl.maximum(0.7978845608028654 * (x + 0.044715 * x * x * x), -20.0), 20.0)
    return 0.5 * x * (2.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0))


@triton.jit
def _expert_up_kernel(x_ptr, token_ptr, block_expert_ptr, w1_ptr, b1_ptr, hidden_ptr, D, H,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ACC: tl.constexpr):
    block = tl.program_id(0)
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    expert = tl.load(block_expert_ptr + block).to(tl.int64)
    token = tl.load(token_ptr + rows).to(tl.int64)
    real = token >= 0
    col_ok = cols < H
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for start in range(0, D, BLOCK_K):
        k = start + tl.arange(0, BLOCK_K)
        k_ok = k < D
        a = tl.load(x_ptr + token[:, None] * D + k[None, :], mask=real[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w1_ptr + expert * D * H + k[:, None] * H + cols[None, :], mask=k_ok[:, None] & col_ok[None, :],
                    other=0.0)
        acc += tl.dot(a, w, input_precision="ieee", out_dtype=acc.dtype)
    acc += tl.load(b1_ptr + expert * H + cols, mask=col_ok, other=0.0)[None, :]
    tl.store(hidden_ptr + rows[:, None].to(tl.int64) * H + cols[None, :], _gelu_tanh(acc), mask=col_ok[None, :])


@triton.jit
def _expert_down_kernel(hidden_ptr, gate_ptr, block_expert_ptr, w2_ptr, b2_ptr, out_ptr, D, H,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ACC: tl.constexpr):
    block = tl.program_id(0)
    rows = (block * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    expert = tl.load(block_expert_ptr + block).to(tl.int64)
    col_ok = cols < D
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    for start in range(0, H, BLOCK_K):
        k = start + tl.arange(0, BLOCK_K)
        k_ok = k < H
        a = tl.load(hidden_ptr + rows[:, None] * H + k[None, :], mask=k_ok[None, :], other=0.0)
        w = tl.load(w2_ptr + expert * H * D + k[:, None] * D + cols[None, :], mask=k_ok[:, None] & col_ok[None, :],
                    other=0.0)
        acc += tl.dot(a, w, input_precision="ieee", out_dtype=acc.dtype)
    acc += tl.load(b2_ptr + expert * D + cols, mask=col_ok, other=0.0)[None, :]
    gate = tl.load(gate_ptr + rows)
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], acc * gate[:, None], mask=col_ok[None, :])


@triton.jit
def _combine_kernel(pair_out_ptr, row_ptr, offsets_ptr, out_ptr, D, BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    """Each token's sum of its pairs' outputs, in expert order: deterministic, no atomics."""
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < D
    acc = tl.zeros((BLOCK_N,), dtype=ACC)
    for j in range(tl.load(offsets_ptr + token), tl.load(offsets_ptr + token + 1)):
        row = tl.load(row_ptr + j).to(tl.int64)
        acc += tl.load(pair_out_ptr + row * D + cols, mask=col_ok, other=0.0)
    tl.store(out_ptr + token * D + cols, acc, mask=col_ok)


def block_aligned_pairs(mask, block):
    """The selected pairs of ``mask`` (n_tokens, n_experts) laid out for the grouped GEMM.

    Pairs are sorted by expert and each expert's run padded to whole blocks
    of ``block`` rows. Returns ``token`` and ``expert`` of every padded row
    (token -1 on padding), ``block_expert`` (the expert of each block), and
    the token-major view used to sum a token's pairs: ``pair_row`` (the row
    of each pair, the pairs of token 0 first, each token's in expert order)
    with ``token_offsets`` of length ``n_tokens + 1``.
    """
    n_tokens, n_experts = mask.shape
    device = mask.device
    expert, token = mask.t().nonzero(as_tuple=True)  # row-major over (expert, token): sorted by expert
    counts = torch.bincount(expert, minlength=n_experts)
    padded = (counts + block - 1) // block * block
    first_row = torch.cumsum(padded, 0) - padded
    rank_in_expert = torch.arange(len(expert), device=device) - (torch.cumsum(counts, 0) - counts)[expert]
    row_of_pair = first_row[expert] + rank_in_expert
    token_of_row = torch.full((int(padded.sum()),), -1, dtype=torch.int64, device=device)
    token_of_row[row_of_pair] = token
    expert_of_row = torch.repeat_interleave(torch.arange(n_experts, device=device), padded)
    token_major = torch.argsort(token * n_experts + expert)
    token_offsets = torch.zeros(n_tokens + 1, dtype=torch.int64, device=device)
    token_offsets[1:] = torch.cumsum(torch.bincount(token, minlength=n_tokens), 0)
    return token_of_row, expert_of_row, expert_of_row[::block].contiguous(), row_of_pair[token_major], token_offsets


def moe_dispatch_triton(x, mask, gates, w1, b1, w2, b2):
    """Grouped-GEMM forward of ``skicml::moe_dispatch`` (the same arguments)."""
    n_tokens, dim = x.shape
    hidden = w1.shape[2]
    token, expert, block_expert, pair_row, token_offsets = block_aligned_pairs(mask, _BLOCK_M)
    if len(token) == 0:
        return torch.zeros_like(x)
    acc = tl.float64 if x.dtype == torch.float64 else tl.float32
    real = token >= 0
    gate = torch.zeros(len(token), dtype=x.dtype, device=x.device)
    gate[real] = gates[token[real], expert[real]]
    x, w1, b1, w2, b2 = (t.contiguous() for t in (x, w1, b1, w2, b2))
    hidden_rows = torch.empty((len(token), hidden), dtype=x.dtype, device=x.device)
    pair_out = torch.empty((len(token), dim), dtype=x.dtype, device=x.device)
    n_blocks = len(block_expert)
    _expert_up_kernel[(n_blocks, triton.cdiv(hidden, _BLOCK_N))](
        x, token, block_expert, w1, b1, hidden_rows, dim, hidden,
        BLOCK_M=_BLOCK_M, BLOCK_N=_BLOCK_N, BLOCK_K=_BLOCK_K, ACC=acc)
    _expert_down_kernel[(n_blocks, triton.cdiv(dim, _BLOCK_N))](
        hidden_rows, gate, block_expert, w2, b2, pair_out, dim, hidden,
        BLOCK_M=_BLOCK_M, BLOCK_N=_BLOCK_N, BLOCK_K=_BLOCK_K, ACC=acc)
    out = torch.empty_like(x)
    _combine_kernel[(n_tokens, triton.cdiv(dim, _BLOCK_N))](
        pair_out, pair_row.contiguous(), token_offsets, out, dim, BLOCK_N=_BLOCK_N, ACC=acc)
    return out
