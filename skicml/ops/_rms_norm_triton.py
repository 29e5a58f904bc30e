"""Triton kernel of ``skicml::rms_norm``: one program normalises one row.

Imported lazily (only when a CUDA tensor reaches the op, or by the tests under
``TRITON_INTERPRET=1``, which must be set before this module is imported).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    # int64: row * n_cols passes 2**31 beyond 2**31 elements (4 GB of bfloat16).
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean_square = tl.sum(x * x, axis=0) / n_cols
    y = x * (1.0 / tl.sqrt(mean_square + eps)) * w
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm_triton(x, weight, eps=1e-6):
    """Launch the kernel over the rows of ``x`` (any leading shape)."""
    n_cols = x.shape[-1]
    rows = x.reshape(-1, n_cols).contiguous()
    out = torch.empty_like(rows)
    if rows.shape[0]:
        block = triton.next_power_of_2(n_cols)
        # Four warps up to 4096 columns; wider rows get more threads instead of
        # spilling (sm_90, compiled ahead of time by benchmarks/gpu_check.py: at
        # 16384 columns four warps spill 5 KB a thread in float64, sixteen none).
        num_warps = min(max(block // 1024, 4), 16)
        _rms_norm_kernel[(rows.shape[0],)](rows, weight.contiguous(), out, n_cols, eps, BLOCK=block,
                                           num_warps=num_warps)
    return out.reshape(x.shape)
