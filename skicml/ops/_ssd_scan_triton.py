"""Triton kernel of ``skicml::ssd_scan`` (forward pass only).

One program owns one (batch element, head, block of the head width P) and
walks through time one chunk at a time, keeping its (P-block, N) state in
registers. Per chunk of length L it computes, from the equations of
:mod:`skicml.ops._ssd_scan`:

- the chunk's log-decays ``dt * A`` and their running sum ``cs``;
- the intra-chunk output ``(exp(cs_i - cs_j) [i >= j] * (C B^T)_ij * dt_j) x``
  as two ``tl.dot`` products;
- the contribution of the entering state, ``exp(cs_i) * C_i S^T``;
- the state at the chunk's end, ``exp(cs_L) S + (x * exp(cs_L - cs) dt)^T B``.

``tl.dot`` needs every dimension to be at least 16, so L, P and N are padded
to powers of two >= 16 with masked loads. Padded time steps read ``dt = 0``
and zero ``x``, ``B``, ``C``: they neither decay nor feed the state.

The chunk length is ``chunk_size`` rounded up to a power of two and clamped
to [16, 64], and to at most 2048 / N (N rounded up to a power of two), so
that the tiles fit in shared memory and registers: 32 for N = 64, 16 for
N = 128 and 256. This changes only the rounding, not the result.
Accumulation is in float32 with exact (IEEE) float32 products in
``tl.dot``; float64 inputs never reach the kernel (the op runs its reference
for them). The backward pass has no Triton kernel: on CUDA
``skicml::ssd_scan_backward`` runs the plain-torch reference.

Imported lazily (only when a CUDA tensor reaches the op, or by the tests under
``TRITON_INTERPRET=1``, which must be set before this module is imported).
"""

import torch
import triton
import triton.language as tl

# Widest state N the kernel takes; wider ones run the reference.
MAX_STATE_SIZE = 256


@triton.jit
def _ssd_scan_kernel(
    x_ptr, dt_ptr, A_ptr, B_ptr, C_ptr, D_ptr, y_ptr,
    T, H, P, N,
    BLOCK_L: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_bh = tl.program_id(0)
    pid_p = tl.program_id(1)
    # int64 offsets: batch * T * H * P can pass 2**31 for large batches.
    b = (pid_bh // H).to(tl.int64)
    h = pid_bh % H

    offs_l = tl.arange(0, BLOCK_L)
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_n = tl.arange(0, BLOCK_N)
    mask_p = offs_p < P
    mask_n = offs_n < N
    causal = offs_l[:, None] >= offs_l[None, :]

    a_log = tl.load(A_ptr + h).to(tl.float32)
    skip = tl.load(D_ptr + h).to(tl.float32)
    x_base = x_ptr + b * T * H * P + h * P
    y_base = y_ptr + b * T * H * P + h * P
    dt_base = dt_ptr + b * T * H + h
    B_base = B_ptr + b * T * N
    C_base = C_ptr + b * T * N

    state = tl.zeros((BLOCK_P, BLOCK_N), dtype=tl.float32)
    for start in range(0, T, BLOCK_L):
        t = start + offs_l
        mask_t = t < T
        mask_tp = mask_t[:, None] & mask_p[None, :]
        mask_tn = mask_t[:, None] & mask_n[None, :]
        dt = tl.load(dt_base + t * H, mask=mask_t, other=0.0).to(tl.float32)
        x = tl.load(x_base + t[:, None] * (H * P) + offs_p[None, :], mask=mask_tp, other=0.0)
        x = x.to(tl.float32)
        Bc = tl.load(B_base + t[:, None] * N + offs_n[None, :], mask=mask_tn, other=0.0)
        Bc = Bc.to(tl.float32)
        Cc = tl.load(C_base + t[:, None] * N + offs_n[None, :], mask=mask_tn, other=0.0)
        Cc = Cc.to(tl.float32)

        cs = tl.cumsum(dt * a_log, axis=0)
        # The last entry of the running sum itself (not a fresh tl.sum, which
        # rounds differently), so that cs_last - cs is never above 0.
        cs_last = tl.sum(tl.where(offs_l == BLOCK_L - 1, cs, 0.0), axis=0)
        # Mask before exp: above the diagonal the difference is positive and
        # could overflow; exp(-inf) is the wanted 0.
        decay = tl.exp(tl.where(causal, cs[:, None] - cs[None, :], float("-inf")))

        scores = tl.dot(Cc, tl.trans(Bc), input_precision="ieee")  # (L, L)
        y = tl.dot(scores * decay * dt[None, :], x, input_precision="ieee")  # (L, P)
        entering = tl.dot(Cc, tl.trans(state), input_precision="ieee")  # (L, P)
        y += tl.exp(cs)[:, None] * entering + skip * x
        tl.store(y_base + t[:, None] * (H * P) + offs_p[None, :],
                 y.to(y_ptr.dtype.element_ty), mask=mask_tp)

        weight = tl.exp(cs_last - cs) * dt
        state = tl.exp(cs_last) * state + tl.dot(
            tl.trans(x * weight[:, None]), Bc, input_precision="ieee"
        )


def _block(n, low, high):
    return max(low, min(high, triton.next_power_of_2(max(n, 1))))


def ssd_scan_triton(x, dt, A, B, C, D, chunk_size=64):
    """Launch the kernel: one program per (batch, head, block of P).

    Arguments as :func:`skicml.ops.ssd_scan` (shapes already validated).
    Returns a tensor of ``x``'s shape and dtype.
    """
    batch, T, H, P = x.shape
    N = B.shape[-1]
    x, dt, B, C = (t.contiguous() for t in (x, dt, B, C))
    A, D = A.contiguous(), D.contiguous()
    y = torch.empty_like(x)
    if y.numel() == 0:
        return y
    if N > MAX_STATE_SIZE:
        # A (P, N) state this wide would not fit in registers.
        from ._ssd_scan import ssd_scan_reference

        return ssd_scan_reference(x, dt, A, B, C, D, chunk_size)
    block_n = _block(N, 16, MAX_STATE_SIZE)
    # Shared memory and registers grow with L * N (sm_90, compiled ahead of
    # time by benchmarks/gpu_check.py, P = 64): at L = 64 a state of 256
    # needs 378 KB of shared memory, more than any GPU has (227 KB on an
    # H100), 128 needs 214 KB (over an A100's 163 KB), and from N = 64 on
    # ptxas spilled about 10 KB a thread. L * N <= 2048 on eight warps: 70-75
    # KB of shared memory, and spills of 4.9 and 1.7 KB at N = 64 and 128 in
    # float32, under 0.5 KB in bfloat16 (N = 256 at L = 16: 140 KB and still
    # 9 KB of spills). N <= 32 keeps L = 64.
    block_l = min(_block(chunk_size, 16, 64), max(16, 2048 // block_n))
    block_p = _block(P, 16, 64)
    # Seven (L, P)- or (L, N)-sized float32 tiles are live per chunk; spread
    # the large ones over more threads (tuned on compile statistics, not yet
    # timed on a GPU).
    num_warps = 8 if block_n >= 64 or block_l * max(block_p, block_n) >= 4096 else 4
    grid = (batch * H, triton.cdiv(P, block_p))
    _ssd_scan_kernel[grid](
        x, dt, A, B, C, D, y, T, H, P, N,
        BLOCK_L=block_l, BLOCK_P=block_p, BLOCK_N=block_n, num_warps=num_warps,
    )
    return y
