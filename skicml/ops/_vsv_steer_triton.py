"""Triton kernel of ``skicml::vsv_steer``: one program steers one token.

The hidden states are viewed as (B * T, d) rows; program ``r`` steers row
``r`` with the steering vector of its sample, ``v[r // T]``. It loads the
row of ``x`` and of ``v`` once, forms ``|x|^2``, ``x . v`` and ``|v|^2``
from that one read, then the gain, the steered vector and its norm (a second
reduction, over registers, not memory), and writes the output: one read and
one write of the hidden states, where eager PyTorch launches about six
kernels. The site and the adaptive gain are compile-time constants.

Accumulation is in float32; the op sends float64 tensors to its reference
instead. Imported lazily (only when a CUDA tensor reaches the op, or by the
tests under ``TRITON_INTERPRET=1``, which must be set before this module is
imported).
"""

import torch
import triton
import triton.language as tl

_SITE_CODES = {"mlp_output": 0, "residual": 1}


@triton.jit
def _vsv_steer_kernel(x_ptr, v_ptr, out_ptr, seq_len, n_cols, strength, eps,
                      SITE: tl.constexpr, ADAPTIVE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    sample = row // seq_len
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    v = tl.load(v_ptr + sample * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    x_norm = tl.sqrt(tl.sum(x * x, axis=0))
    v_norm = tl.sqrt(tl.sum(v * v, axis=0))
    x_scale = tl.maximum(x_norm, eps)
    v_scale = tl.maximum(v_norm, eps)
    gain = strength
    if ADAPTIVE:
        cosine = tl.sum(x * v, axis=0) / (x_scale * v_scale)
        gain = strength * (1.0 + tl.maximum(-cosine, 0.0))
    if SITE == 0:
        steered = x / x_scale + (gain / v_scale) * v
    else:
        steered = x + gain * v
    steered_norm = tl.sqrt(tl.sum(steered * steered, axis=0))
    y = steered * (x_norm / tl.maximum(steered_norm, eps))
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def vsv_steer_triton(x, v, strength, site="mlp_output", adaptive=True):
    """Launch the kernel over the B * T tokens of ``x`` ((B, T, d) or (B, d))."""
    n_cols = x.shape[-1]
    seq_len = x.shape[1] if x.dim() == 3 else 1
    rows = x.reshape(-1, n_cols).contiguous()
    out = torch.empty_like(rows)
    if rows.shape[0] and n_cols:
        block = triton.next_power_of_2(n_cols)
        num_warps = min(max(block // 512, 1), 8)
        _vsv_steer_kernel[(rows.shape[0],)](
            rows, v.contiguous(), out, seq_len, n_cols, float(strength), 1e-12,
            SITE=_SITE_CODES[site], ADAPTIVE=bool(adaptive), BLOCK=block, num_warps=num_warps,
        )
    return out.reshape(x.shape)
