"""``skicml::ssd_scan``: the Mamba-2 selective state-space scan (SSD).

Used by one family: ``wearable`` (the wearable behavior model, through
``skicml.nn.mamba2``).

For every batch element ``b`` and head ``h`` the op runs the recurrence

.. math::

    a_t = \\exp(\\Delta_t A_h), \\qquad
    S_t = a_t S_{t-1} + \\Delta_t\\, x_t B_t^\\top, \\qquad
    y_t = S_t C_t + D_h x_t,

with a state ``S_t`` of shape (P, N) and ``S_0 = 0``. ``B_t`` and ``C_t`` are
shared by all heads (Mamba-2's default of one group). The scan is causal;
a bidirectional model flips time for its backward direction.

Three implementations, all plain torch except the last:

- :func:`ssd_scan_sequential`: the recurrence one step at a time. Slow; the
  ground truth of the tests.
- :func:`ssd_scan_reference`: the chunked matrix form of the Mamba-2 paper,
  the CPU kernel of the op. Because the decay is a scalar per head, a chunk of
  length L is one masked (L, L) matrix product, and only one state per chunk
  is carried between chunks.
- ``_ssd_scan_triton.py``: a chunked Triton kernel registered for CUDA.

The backward pass is a second op, ``skicml::ssd_scan_backward``, whose
plain-torch kernel (:func:`ssd_scan_backward_reference`) is hand-written
reverse-mode differentiation of the chunked form. It runs on every device,
CUDA included: only the forward pass has a Triton kernel.
"""

from __future__ import annotations

import functools

import torch

from ._dispatch import load_gpu_kernel

__all__ = [
    "ssd_scan",
    "ssd_scan_backward",
    "ssd_scan_backward_reference",
    "ssd_scan_reference",
    "ssd_scan_sequential",
]


def _accumulation_dtype(*tensors):
    # float32 at least, float64 when any input is float64 (as rms_norm).
    return functools.reduce(torch.promote_types, (t.dtype for t in tensors), torch.float32)


def _check_args(x, dt, A, B, C, D, chunk_size):
    tensors = {"x": x, "dt": dt, "A": A, "B": B, "C": C, "D": D}
    for name, tensor in tensors.items():
        if not tensor.is_floating_point():
            raise ValueError(
                f"ssd_scan: {name} must be a floating-point tensor, got {tensor.dtype}."
            )
    if x.dim() != 4:
        raise ValueError(f"ssd_scan: x must have shape (batch, T, H, P), got {tuple(x.shape)}.")
    batch, T, H, _ = x.shape
    N = B.shape[-1] if B.dim() == 3 else "N"
    expected = {
        "dt": ("(batch, T, H)", (batch, T, H)),
        "A": ("(H,)", (H,)),
        "B": ("(batch, T, N)", (batch, T, N)),
        "C": ("(batch, T, N)", (batch, T, N)),
        "D": ("(H,)", (H,)),
    }
    for name, (layout, shape) in expected.items():
        got = tuple(tensors[name].shape)
        if got != shape:
            want = "(" + ", ".join(map(str, shape)) + (",)" if len(shape) == 1 else ")")
            raise ValueError(
                f"ssd_scan: {name} must have shape {layout} = {want} to match x of shape "
                f"{tuple(x.shape)} and B of shape {tuple(B.shape)}, got {got}."
            )
    if chunk_size < 1:
        raise ValueError(f"ssd_scan: chunk_size must be >= 1, got {chunk_size}.")


def ssd_scan_sequential(x, dt, A, B, C, D):
    """The SSD recurrence one time step at a time (ground truth, slow).

    Parameters and result as :func:`ssd_scan` (without ``chunk_size``).
    """
    _check_args(x, dt, A, B, C, D, 1)
    acc, out_dtype = _accumulation_dtype(x, dt, A, B, C, D), x.dtype
    x, dt, A, B, C, D = (t.to(acc) for t in (x, dt, A, B, C, D))
    batch, T, H, P = x.shape
    state = x.new_zeros(batch, H, P, B.shape[-1])
    ys = []
    for t in range(T):
        decay = torch.exp(dt[:, t] * A)[:, :, None, None]
        update = (dt[:, t, :, None] * x[:, t])[..., None] * B[:, t, None, None, :]
        state = decay * state + update
        ys.append(state @ C[:, t, None, :, None])
    if not ys:
        return x.new_empty(x.shape, dtype=out_dtype)
    y = torch.stack(ys, dim=1).squeeze(-1) + D[:, None] * x
    return y.to(out_dtype)


class _Chunks:
    """The inputs cut into chunks of length L, and the forward intermediates.

    Shapes use ``b`` batch, ``c`` chunks, ``L`` chunk length, ``H`` heads,
    ``P`` head width, ``N`` state width. Time is padded to ``c * L`` with
    ``dt = 0`` (no decay, no input) and zero ``x``, ``B``, ``C``, so the
    padding neither changes the states nor receives gradient that is kept.
    """

    def __init__(self, x, dt, A, B, C, D, chunk_size):
        self.acc = acc = _accumulation_dtype(x, dt, A, B, C, D)
        batch, T, H, P = x.shape
        N = B.shape[-1]
        L = min(chunk_size, T)
        n_chunks = -(-T // L)
        pad = n_chunks * L - T
        self.shape = (batch, n_chunks, L, H, P, N, T)

        def cut(t, tail):
            t = t.to(acc)
            if pad:
                t = torch.nn.functional.pad(t, (0, 0) * len(tail) + (0, pad))
            return t.reshape(batch, n_chunks, L, *tail)

        self.x = cut(x, (H, P))  # (b, c, L, H, P)
        self.dt = cut(dt, (H,))  # (b, c, L, H)
        self.B = cut(B, (N,))  # (b, c, L, N)
        self.C = cut(C, (N,))
        self.A, self.D = A.to(acc), D.to(acc)

    def states(self):
        """Compute what both passes need: decays, C B^T and the chunk states."""
        batch, n_chunks, L, H, P, N, T = self.shape
        x, dt, B, C = self.x, self.dt, self.B, self.C
        self.u = u = dt[..., None] * x  # (b, c, L, H, P)

        # Log-decays summed within each chunk. Every difference taken below is
        # "later minus earlier", which is <= 0 because A < 0: exp never sees a
        # positive number, so fast decays underflow to 0 instead of overflowing.
        cs = torch.cumsum(dt * self.A, dim=2)  # (b, c, L, H)
        cs_h = cs.transpose(2, 3)  # (b, c, H, L)
        cs_last = cs[:, :, -1]  # (b, c, H)
        causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
        seg = (cs_h[..., :, None] - cs_h[..., None, :]).masked_fill(~causal, float("-inf"))
        self.decay = decay = torch.exp(seg)  # (b, c, H, L, L), lower triangular

        # Within a chunk, y = (decay * C B^T) u. C B^T is contracted first: it
        # is shared by the heads and only (L, L) per chunk.
        self.CB = CB = C @ B.transpose(-1, -2)  # (b, c, L, L)
        self.M = CB[:, :, None] * decay  # (b, c, H, L, L)
        self.u_h = u.transpose(2, 3)  # (b, c, H, L, P)

        # Each chunk's own contribution to the state at its end, (B * w)^T u,
        # with heads and head width flattened into one matmul against the
        # shared B.
        self.w = w = torch.exp(cs_last[:, :, None] - cs)  # (b, c, L, H)
        self.wu = wu = (u * w[..., None]).reshape(batch, n_chunks, L, H * P)
        local = wu.transpose(-1, -2) @ B  # (b, c, H*P, N)

        # Between chunks: the state entering chunk k+1 is the state entering
        # chunk k decayed by the chunk's product of a's, plus its own part.
        self.alpha = alpha = torch.exp(cs_last)  # (b, c, H)
        self.alpha_hp = alpha_hp = alpha.repeat_interleave(P, dim=2)[..., None]
        state = local.new_zeros(batch, H * P, N)
        entering = []
        for k in range(n_chunks):
            entering.append(state)
            state = alpha_hp[:, k] * state + local[:, k]
        self.S = S = torch.stack(entering, dim=1)  # (b, c, H*P, N)

        # What the entering state contributes at each step of the chunk.
        self.Z = (C @ S.transpose(-1, -2)).reshape(batch, n_chunks, L, H, P)
        self.E = torch.exp(cs)  # (b, c, L, H): decay from the chunk's start to t

    def output(self):
        """y in chunks, (b, c, L, H, P); :meth:`states` must have run."""
        y_intra = (self.M @ self.u_h).transpose(2, 3)
        return y_intra + self.Z * self.E[..., None] + self.D[:, None] * self.x

    def uncut(self, t):
        """(b, c, L, ...) -> (b, T, ...), dropping the padding."""
        batch, n_chunks, L, H, P, N, T = self.shape
        # contiguous: the fake implementations promise dense outputs.
        return t.reshape(batch, n_chunks * L, *t.shape[3:])[:, :T].contiguous()

    def cut_grad(self, grad_y):
        batch, n_chunks, L, H, P, N, T = self.shape
        g = grad_y.to(self.acc)
        if n_chunks * L != T:
            g = torch.nn.functional.pad(g, (0, 0, 0, 0, 0, n_chunks * L - T))
        return g.reshape(batch, n_chunks, L, H, P)

    def backward(self, grad_y):
        """Gradients of ``sum(grad_y * y)`` w.r.t. (x, dt, A, B, C, D), in chunks.

        Reverse-mode differentiation of :meth:`states` and :meth:`output`,
        step by step in the opposite order; :meth:`states` must have run.
        """
        batch, n_chunks, L, H, P, N, T = self.shape
        x, dt, B, C, u = self.x, self.dt, self.B, self.C, self.u
        g = self.cut_grad(grad_y)  # (b, c, L, H, P)

        # y = y_intra + Z * E + D x
        gD = (g * x).sum(dim=(0, 1, 2, 4))
        gx = self.D[:, None] * g
        gZ = (g * self.E[..., None]).reshape(batch, n_chunks, L, H * P)
        gcs = (g * self.Z).sum(-1) * self.E  # (b, c, L, H)
        gC = gZ @ self.S  # (b, c, L, N)
        gS = gZ.transpose(-1, -2) @ C  # (b, c, H*P, N)

        # The inter-chunk recurrence, run backwards in time: the same scan
        # reversed, carrying the gradient of the state entering chunk k+1.
        carry = gS.new_zeros(batch, H * P, N)
        g_local, g_alpha = [], []
        for k in reversed(range(n_chunks)):
            g_local.append(carry)
            g_alpha.append((carry * self.S[:, k]).sum(-1).reshape(batch, H, P).sum(-1))
            carry = gS[:, k] + self.alpha_hp[:, k] * carry
        g_local = torch.stack(g_local[::-1], dim=1)  # (b, c, H*P, N)
        g_cs_last = torch.stack(g_alpha[::-1], dim=1) * self.alpha  # (b, c, H)

        # local = (u * w)^T B
        gB = self.wu @ g_local  # (b, c, L, N)
        g_wu = (B @ g_local.transpose(-1, -2)).reshape(batch, n_chunks, L, H, P)
        gu = g_wu * self.w[..., None]
        gw = (g_wu * u).sum(-1) * self.w  # (b, c, L, H): d/d(cs_last - cs) of w
        g_cs_last = g_cs_last + gw.sum(2)
        gcs = gcs - gw

        # y_intra = (M u_h) with M = CB * decay
        g_h = g.transpose(2, 3)  # (b, c, H, L, P)
        gM = g_h @ self.u_h.transpose(-1, -2)  # (b, c, H, L, L)
        gu = gu + (self.M.transpose(-1, -2) @ g_h).transpose(2, 3)
        gCB = (gM * self.decay).sum(2)  # (b, c, L, L)
        gseg = gM * self.M  # d/dseg of CB * exp(seg); zero above the diagonal
        gcs = gcs + (gseg.sum(-1) - gseg.sum(-2)).transpose(2, 3)
        gC = gC + gCB @ B
        gB = gB + gCB.transpose(-1, -2) @ C

        # cs = cumsum(dt * A) within the chunk; cs_last is its last entry.
        gcs[:, :, -1] += g_cs_last
        g_log_a = gcs.flip(2).cumsum(2).flip(2)  # (b, c, L, H)

        # u = dt * x and log a = dt * A
        gx = gx + gu * dt[..., None]
        gdt = g_log_a * self.A + (gu * x).sum(-1)
        gA = (g_log_a * dt).sum(dim=(0, 1, 2))
        return (self.uncut(gx), self.uncut(gdt), gA, self.uncut(gB), self.uncut(gC), gD)


def ssd_scan_reference(x, dt, A, B, C, D, chunk_size=64):
    """The chunked SSD scan in plain torch: the CPU kernel of :func:`ssd_scan`.

    Parameters and result as :func:`ssd_scan`. Differentiable with autograd
    (the tests compare it with :func:`ssd_scan_sequential`).
    """
    _check_args(x, dt, A, B, C, D, chunk_size)
    if x.shape[1] == 0:
        return x.new_empty(x.shape)
    chunks = _Chunks(x, dt, A, B, C, D, chunk_size)
    chunks.states()
    return chunks.uncut(chunks.output()).to(x.dtype)


def ssd_scan_backward_reference(grad_y, x, dt, A, B, C, D, chunk_size=64):
    """Gradients of :func:`ssd_scan` w.r.t. (x, dt, A, B, C, D), chunked, plain torch.

    Recomputes the chunked forward pass, then differentiates it by hand in
    reverse order (no autograd inside, so it also runs as an op kernel).
    Each gradient has its input's shape and dtype.
    """
    _check_args(x, dt, A, B, C, D, chunk_size)
    inputs = (x, dt, A, B, C, D)
    if x.shape[1] == 0:
        return tuple(t.new_zeros(t.shape) for t in inputs)
    chunks = _Chunks(x, dt, A, B, C, D, chunk_size)
    chunks.states()
    grads = chunks.backward(grad_y)
    return tuple(grad.to(t.dtype) for grad, t in zip(grads, inputs))


@torch.library.custom_op("skicml::ssd_scan", mutates_args=())
def ssd_scan(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor,
    chunk_size: int = 64,
) -> torch.Tensor:
    """The Mamba-2 selective scan (SSD) of ``x``, causal in time.

    Per batch element and head: ``a_t = exp(dt_t * A_h)``,
    ``S_t = a_t S_{t-1} + dt_t x_t B_t^T`` (state P x N, ``S_0 = 0``),
    ``y_t = S_t C_t + D_h x_t``.

    Parameters
    ----------
    x : torch.Tensor of shape (batch, T, H, P)
        Inputs, H heads of width P.
    dt : torch.Tensor of shape (batch, T, H)
        Positive step sizes (already passed through softplus by the caller).
    A : torch.Tensor of shape (H,)
        Negative decay rates, one per head. Not checked (that would need the
        values); a positive entry makes the scan grow without bound.
    B, C : torch.Tensor of shape (batch, T, N)
        Input and output projections of the state, shared by all heads.
    D : torch.Tensor of shape (H,)
        Skip connection per head.
    chunk_size : int, default=64
        Chunk length of the chunked algorithm. It changes speed and memory,
        not the result (up to rounding); T need not be a multiple of it.

    Returns
    -------
    y : torch.Tensor of the shape and dtype of ``x``
        Computed in float32, or in float64 when any input is float64.
    """
    return ssd_scan_reference(x, dt, A, B, C, D, chunk_size)


@ssd_scan.register_fake
def _(x, dt, A, B, C, D, chunk_size=64):
    _check_args(x, dt, A, B, C, D, chunk_size)
    return x.new_empty(x.shape)


@torch.library.register_kernel("skicml::ssd_scan", "cuda")
def _(x, dt, A, B, C, D, chunk_size=64):
    _check_args(x, dt, A, B, C, D, chunk_size)
    kernel = load_gpu_kernel("skicml.ops._ssd_scan_triton", "ssd_scan_triton")
    if kernel is None or _accumulation_dtype(x, dt, A, B, C, D) == torch.float64:
        # The kernel accumulates in float32; float64 keeps its precision here.
        return ssd_scan_reference(x, dt, A, B, C, D, chunk_size)
    return kernel(x, dt, A, B, C, D, chunk_size)


@torch.library.custom_op("skicml::ssd_scan_backward", mutates_args=())
def ssd_scan_backward(
    grad_y: torch.Tensor,
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of :func:`ssd_scan` given the gradient of its output.

    The same plain-torch kernel serves every device, CUDA included (the
    Triton kernel covers the forward pass only).

    Parameters
    ----------
    grad_y : torch.Tensor of shape (batch, T, H, P)
    x, dt, A, B, C, D, chunk_size
        The arguments of the forward call.

    Returns
    -------
    tuple of torch.Tensor
        ``(grad_x, grad_dt, grad_A, grad_B, grad_C, grad_D)``, each of its
        input's shape and dtype.
    """
    if tuple(grad_y.shape) != tuple(x.shape):
        raise ValueError(
            f"ssd_scan_backward: grad_y must have the shape of x, {tuple(x.shape)}, "
            f"got {tuple(grad_y.shape)}."
        )
    return ssd_scan_backward_reference(grad_y, x, dt, A, B, C, D, chunk_size)


@ssd_scan_backward.register_fake
def _(grad_y, x, dt, A, B, C, D, chunk_size=64):
    _check_args(x, dt, A, B, C, D, chunk_size)
    return tuple(t.new_empty(t.shape) for t in (x, dt, A, B, C, D))


def _setup_context(ctx, inputs, output):
    x, dt, A, B, C, D, chunk_size = inputs
    ctx.save_for_backward(x, dt, A, B, C, D)
    ctx.chunk_size = chunk_size


def _backward(ctx, grad_y):
    grads = ssd_scan_backward(grad_y, *ctx.saved_tensors, ctx.chunk_size)
    return (*grads, None)


ssd_scan.register_autograd(_backward, setup_context=_setup_context)
