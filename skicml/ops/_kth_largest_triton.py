"""Triton kernels of ``skicml::kth_largest`` (``_kth_largest.py``): a multi-block radix select.

Each float32 maps to a 32-bit key whose unsigned order is the float order
(flip every bit of a negative number, only the sign bit of a positive one).
Four passes, most significant byte first: ``_histogram_kernel`` counts, over
all blocks of the input, the byte of every key that matches the bytes chosen
so far (a per-block ``tl.histogram`` added to the global one atomically);
``_choose_kernel``, a single program, picks the byte holding the k-th
largest of the candidates and what remains of k. The state (chosen prefix,
remaining k) stays on the device, so the select never waits on the host.
float16 and bfloat16 inputs are selected as float32 (exactly) and cast back.
Imported lazily (only when a CUDA tensor reaches the op, or by the tests
under ``TRITON_INTERPRET=1``).
"""

import torch
import triton
import triton.language as tl

_BLOCK = 1024
_INT_MIN = tl.constexpr(-2147483648)  # the sign bit, as an int32


@triton.jit
def _order_key(x):
    """float32 -> int32 key whose order, read as unsigned, is the float order."""
    bits = x.to(tl.int32, bitcast=True)
    # Negative floats: flip the magnitude bits so a larger magnitude sorts lower; then flip the sign bit so
    # negatives come before positives as unsigned numbers.
    return (bits ^ ((bits >> 31) & 0x7FFFFFFF)) ^ _INT_MIN


@triton.jit
def _histogram_kernel(values_ptr, n, state_ptr, hist_ptr, SHIFT: tl.constexpr, FIRST: tl.constexpr,
                      BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    key = _order_key(tl.load(values_ptr + offsets, mask=inside, other=0.0).to(tl.float32))
    if FIRST:
        candidate = inside
    else:
        prefix = tl.load(state_ptr)
        # The bytes above SHIFT + 8 agree with the chosen prefix (an arithmetic shift is fine: only equality).
        candidate = inside & (((key ^ prefix) >> (SHIFT + 8)) == 0)
    digit = (key >> SHIFT) & 0xFF
    counts = tl.histogram(digit, 256, mask=candidate)
    tl.atomic_add(hist_ptr + tl.arange(0, 256), counts, sem="relaxed")


@triton.jit
def _choose_kernel(hist_ptr, state_ptr, out_ptr, SHIFT: tl.constexpr, LAST: tl.constexpr):
    digits = tl.arange(0, 256)
    counts = tl.load(hist_ptr + digits)
    remaining = tl.load(state_ptr + 1)
    # at_least[d]: candidates whose byte is >= d; non-increasing in d, so the chosen byte is the last d
    # with at_least[d] >= remaining.
    at_least = tl.sum(counts, axis=0) - tl.cumsum(counts, axis=0) + counts
    chosen = tl.sum((at_least >= remaining).to(tl.int32), axis=0) - 1
    above = tl.sum(tl.where(digits == chosen, at_least - counts, 0), axis=0)
    prefix = tl.load(state_ptr) | (chosen << SHIFT)
    tl.store(state_ptr, prefix)
    tl.store(state_ptr + 1, remaining - above)
    tl.store(hist_ptr + digits, tl.zeros((256,), dtype=tl.int32))
    if LAST:
        signed = prefix ^ _INT_MIN
        bits = signed ^ ((signed >> 31) & 0x7FFFFFFF)
        tl.store(out_ptr, bits.to(tl.float32, bitcast=True))


def kth_largest_triton(values, k):
    """The ``k``-th largest element of a CUDA (or, interpreted, CPU) float32/16 tensor."""
    flat = values.detach().reshape(-1).contiguous()
    n = flat.numel()
    state = torch.tensor([0, k], dtype=torch.int32, device=flat.device)
    histogram = torch.zeros(256, dtype=torch.int32, device=flat.device)
    out = torch.empty((), dtype=torch.float32, device=flat.device)
    grid = (triton.cdiv(n, _BLOCK),)
    for shift in (24, 16, 8, 0):
        _histogram_kernel[grid](flat, n, state, histogram, SHIFT=shift, FIRST=shift == 24, BLOCK=_BLOCK)
        _choose_kernel[(1,)](histogram, state, out, SHIFT=shift, LAST=shift == 0)
    return out.to(values.dtype)
