"""Triton kernel of ``skicml::subblock_attention_probs``: one program writes one tile of probabilities.

Program ``(row_tile, col_tile, batch * head)`` loads a ``BLOCK_N x D`` tile
of queries and a ``BLOCK_M x D`` tile of keys once (in slices of at most 64
of the head dimension), forms their scores with ``tl.dot``, subtracts the
queries' log-sum-exp and writes ``exp`` of it: the probabilities never
exist at full ``(T, T)`` size, and nothing but the sub-block is read. Accumulation is in float32; the op sends float64 tensors
to its reference instead. Imported lazily (by the op on a CUDA tensor, or by
the tests under ``TRITON_INTERPRET=1``, set before this module is imported).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _subblock_kernel(q_ptr, k_ptr, lse_ptr, out_ptr, n_queries, n_keys, head_dim, scale,
                     BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    row_tile = tl.program_id(0)
    col_tile = tl.program_id(1)
    pair = tl.program_id(2).to(tl.int64)  # batch * heads + head
    rows = row_tile * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = col_tile * BLOCK_M + tl.arange(0, BLOCK_M)
    # The head dimension in slices of BLOCK_D (at most 64): a whole 256-wide
    # float32 tile of queries and keys spilled 14 KB a thread on sm_90.
    scores = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for start in range(0, head_dim, BLOCK_D):
        dims = start + tl.arange(0, BLOCK_D)
        q = tl.load(q_ptr + pair * n_queries * head_dim + rows[:, None] * head_dim + dims[None, :],
                    mask=(rows[:, None] < n_queries) & (dims[None, :] < head_dim), other=0.0).to(tl.float32)
        k = tl.load(k_ptr + pair * n_keys * head_dim + cols[:, None] * head_dim + dims[None, :],
                    mask=(cols[:, None] < n_keys) & (dims[None, :] < head_dim), other=0.0).to(tl.float32)
        scores += tl.dot(q, tl.trans(k), input_precision="ieee")
    lse = tl.load(lse_ptr + pair * n_queries + rows, mask=rows < n_queries, other=0.0).to(tl.float32)
    scores = scores * scale
    probabilities = tl.exp(scores - lse[:, None])
    tl.store(out_ptr + pair * n_queries * n_keys + rows[:, None] * n_keys + cols[None, :],
             probabilities.to(out_ptr.dtype.element_ty),
             mask=(rows[:, None] < n_queries) & (cols[None, :] < n_keys))


def subblock_attention_probs_triton(q, k, lse, scale):
    """Launch the kernel; the op's signature and result."""
    batch, heads, n_queries, head_dim = q.shape
    n_keys = k.shape[2]
    q, k, lse = q.contiguous(), k.contiguous(), lse.contiguous()
    out = torch.empty((batch, heads, n_queries, n_keys), dtype=q.dtype, device=q.device)
    # tl.dot needs tiles of at least 16 on each side.
    block_d = max(16, min(64, triton.next_power_of_2(head_dim)))
    block_n = max(16, min(64, triton.next_power_of_2(n_queries)))
    block_m = max(16, min(64, triton.next_power_of_2(n_keys)))
    grid = (triton.cdiv(n_queries, block_n), triton.cdiv(n_keys, block_m), batch * heads)
    _subblock_kernel[grid](q, k, lse, out, n_queries, n_keys, head_dim, float(scale),
                           BLOCK_N=block_n, BLOCK_M=block_m, BLOCK_D=block_d)
    return out
