"""``skicml::vsv_steer``: VISTA's visual steering of hidden states, fused.

Used by one family: ``vlm`` (VISTA's steering).

VISTA (ICML 2025, "The Hidden Life of Tokens") adds a per-sample visual
steering vector ``v`` (the difference of the last-token hidden states of the
prompt with and without its image) to the hidden states of every decoder
layer at every decoding step, then restores each token's norm. With
``u = v / |v|``, ``x_hat = x / |x|`` and the adaptive gain
``s = 1 + max(0, cos(x, -v))`` (``s = 1`` without it), per token:

.. math::

    \\text{mlp\\_output:}\\quad x' = \\frac{\\hat x + \\lambda s u}{|\\hat x + \\lambda s u|}\\,|x|,
    \\qquad
    \\text{residual:}\\quad x' = \\frac{x + \\lambda s v}{|x + \\lambda s v|}\\,|x|.

``"mlp_output"`` is the official code's ``VSVLayer`` (applied to the output
of each layer's MLP); ``"residual"`` is the paper's Eq. 5-6 on the residual
stream. Norms are clamped at 1e-12, the rule of
:func:`torch.nn.functional.normalize`: a zero ``x`` row stays zero, a zero
``v`` leaves ``x`` unchanged, and nothing is ever NaN.

Written in eager PyTorch this is about six elementwise and reduction kernels
per layer per step (two norms, a cosine, an add, a renormalisation), which at
one token a step is all launch overhead: 32 layers x 6 = ~200 tiny kernels
per generated token. The op is one kernel:

- the CPU kernel is :func:`vsv_steer_reference`, the plain formula, which
  is also the ground truth of the tests;
- the CUDA kernel (``_vsv_steer_triton.py``) runs one program per token,
  reading the token's ``x`` once and its sample's row of ``v``, forming
  ``|x|``, ``x . v`` and ``|v|`` from that one read and writing the output:
  one read and one write of the hidden states.

Everything is computed in float32 (float64 stays float64) and cast back to
``x``'s dtype: the official code runs fp16 models. The op is for inference
(VISTA steers frozen models): it has no backward pass, and backpropagating
through it raises a RuntimeError. :func:`vsv_steer_reference` is
differentiable by autograd when gradients are needed.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from ._dispatch import load_gpu_kernel

__all__ = ["vsv_steer", "vsv_steer_reference"]

SITES = ("mlp_output", "residual")
_EPS = 1e-12
_NAME = "vsv_steer"
# The Triton kernel holds a whole token (and its steering row) in registers;
# wider hidden states take the reference.
_TRITON_MAX_DIM = 32768


def _accumulation_dtype(dtype):
    # Half precision is computed in float32, float64 stays float64.
    return torch.promote_types(dtype, torch.float32)


def _check_args(x, v, strength, site, adaptive):
    """Validate everything that does not need the tensors' values."""
    for arg, tensor in (("x", x), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{_NAME}: {arg} must be a torch.Tensor, got {type(tensor).__name__}.")
        if not tensor.is_floating_point():
            raise TypeError(
                f"{_NAME}: {arg} must be a floating-point tensor (float32, float16, bfloat16 or "
                f"float64), got {tensor.dtype}."
            )
    if x.dim() not in (2, 3):
        raise ValueError(
            f"{_NAME}: x must have shape (batch, seq_len, dim) or (batch, dim), got "
            f"{tuple(x.shape)}."
        )
    batch, dim = x.shape[0], x.shape[-1]
    if v.dim() != 2 or v.shape[0] != batch or v.shape[1] != dim:
        raise ValueError(
            f"{_NAME}: v must have shape ({batch}, {dim}), one steering vector per sample of x "
            f"of shape {tuple(x.shape)}, got {tuple(v.shape)}."
        )
    if v.device != x.device:
        raise ValueError(f"{_NAME}: v must be on the device of x, {x.device}, got {v.device}.")
    if isinstance(strength, bool) or not isinstance(strength, numbers.Real):
        raise TypeError(f"{_NAME}: strength must be a float >= 0, got {type(strength).__name__}.")
    if not (math.isfinite(strength) and strength >= 0):
        raise ValueError(f"{_NAME}: strength must be a finite float >= 0, got {strength!r}.")
    if not isinstance(site, str) or site not in SITES:
        raise ValueError(f"{_NAME}: site must be one of {SITES}, got {site!r}.")
    if not isinstance(adaptive, bool):
        raise TypeError(f"{_NAME}: adaptive must be a bool, got {type(adaptive).__name__}.")


def _adaptive_gain(x, v):
    """VISTA's gain ``s = 1 + max(0, cos(x, -v))`` per token, in the accumulation dtype.

    ``x`` of shape (B, T, d) or (B, d), ``v`` of shape (B, d); the result has
    x's shape without its last axis. It is 1 where ``cos(x, v) >= 0`` and
    ``1 - cos(x, v)``, in [1, 2], where the token points away from ``v``.
    """
    acc = _accumulation_dtype(x.dtype)
    unit_x = F.normalize(x.to(acc), dim=-1, eps=_EPS)
    unit_v = F.normalize(v.to(acc), dim=-1, eps=_EPS)
    if x.dim() == 3:
        unit_v = unit_v.unsqueeze(1)
    return 1.0 + (-(unit_x * unit_v).sum(dim=-1)).clamp(min=0.0)


def vsv_steer_reference(x, v, strength, site="mlp_output", adaptive=True):
    """The plain multi-kernel formula of :func:`vsv_steer`: its CPU kernel and test oracle.

    Eager PyTorch, about a dozen kernels a call. Differentiable by autograd (unlike the op). Arguments and result as
    :func:`vsv_steer`.

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import vsv_steer_reference
    >>> x = torch.tensor([[0.0, 2.0]])  # one sample, one position
    >>> v = torch.tensor([[1.0, 0.0]])
    >>> vsv_steer_reference(x, v, 1.0, site="residual")  # (x + v) rescaled to |x| = 2
    tensor([[0.8944, 1.7889]])
    """
    acc = _accumulation_dtype(x.dtype)
    x_acc, v_acc = x.to(acc), v.to(acc)
    if x.dim() == 3:
        v_acc = v_acc.unsqueeze(1)  # row b steers every position of sample b
    norm = torch.linalg.vector_norm(x_acc, dim=-1, keepdim=True)
    unit_x = x_acc / norm.clamp(min=_EPS)
    unit_v = F.normalize(v_acc, dim=-1, eps=_EPS)
    gain = float(strength)
    if adaptive:
        # s = 1 + max(0, cos(x, -v)), per token.
        cos = (unit_x * unit_v).sum(dim=-1, keepdim=True)
        gain = (1.0 - cos.clamp(max=0.0)) * gain
    if site == "mlp_output":
        steered = unit_x + gain * unit_v
    else:
        steered = x_acc + gain * v_acc
    return (F.normalize(steered, dim=-1, eps=_EPS) * norm).to(x.dtype)


# --------------------------------------------------------------------------
# The registered op


@torch.library.custom_op("skicml::vsv_steer", mutates_args=())
def _vsv_steer_op(x: torch.Tensor, v: torch.Tensor, strength: float, site: str = "mlp_output",
                  adaptive: bool = True) -> torch.Tensor:
    # The CPU kernel; the public entry point, with the argument checks, is
    # vsv_steer. The shape checks are repeated for callers of torch.ops.
    _check_args(x, v, strength, site, adaptive)
    return vsv_steer_reference(x, v, strength, site, adaptive)


@_vsv_steer_op.register_fake
def _(x, v, strength, site="mlp_output", adaptive=True):
    _check_args(x, v, strength, site, adaptive)
    return torch.empty_like(x)


@torch.library.register_kernel("skicml::vsv_steer", "cuda")
def _(x, v, strength, site="mlp_output", adaptive=True):
    _check_args(x, v, strength, site, adaptive)
    kernel = load_gpu_kernel("skicml.ops._vsv_steer_triton", "vsv_steer_triton")
    if kernel is None or x.dtype == torch.float64 or x.shape[-1] > _TRITON_MAX_DIM:
        # The kernel computes in float32; float64 keeps its precision here.
        return vsv_steer_reference(x, v, strength, site, adaptive)
    return kernel(x, v, strength, site, adaptive)


def _setup_context(ctx, inputs, output):
    pass


def _backward(ctx, grad_output):
    raise RuntimeError(
        f"{_NAME}: skicml::vsv_steer has no backward pass (it is an inference op: VISTA steers "
        f"a frozen model). To differentiate the steering, call "
        f"skicml.ops.vsv_steer_reference, the same formula in plain torch."
    )


_vsv_steer_op.register_autograd(_backward, setup_context=_setup_context)


def vsv_steer(x, v, strength, site="mlp_output", adaptive=True):
    """Steer hidden states towards per-sample visual steering vectors, keeping each token's norm.

    VISTA's VSV injection: token ``t`` of sample ``b`` is moved towards
    ``v[b]`` by ``strength * s``, where the adaptive gain
    ``s = 1 + max(0, cos(x, -v))`` is larger for tokens pointing away from
    ``v`` (``s = 1`` with ``adaptive=False``), then rescaled to its original
    norm. With ``u = v / |v|``:

    - ``site="mlp_output"`` (the official code, applied to each layer's MLP
      output): ``normalize(x / |x| + strength * s * u) * |x|``;
    - ``site="residual"`` (the paper's Eq. 5-6, on the residual stream):
      ``(x + strength * s * v) * |x| / |x + strength * s * v|``.

    Norms are clamped at 1e-12 as in :func:`torch.nn.functional.normalize`:
    a zero token stays zero and a zero ``v`` leaves ``x`` unchanged. The
    result is computed in float32 (float64 in float64) and cast back to
    ``x``'s dtype. One fused Triton kernel on CUDA (one read of ``x``, one
    write); the plain formula, :func:`vsv_steer_reference`, on CPU. The op
    has no backward pass: backpropagating through it raises a RuntimeError
    (differentiate :func:`vsv_steer_reference` instead).

    Parameters
    ----------
    x : torch.Tensor of shape (batch, seq_len, dim) or (batch, dim)
        Hidden states (an MLP output or the residual stream of one layer);
        float32, float16, bfloat16 or float64. The 2-D form is one position
        per sample (a decoding step).
    v : torch.Tensor of shape (batch, dim)
        One steering vector per sample, on ``x``'s device, of any floating
        dtype: row ``b`` steers every position of sample ``b``.
    strength : float
        The steering strength lambda, >= 0; 0 returns ``x``. VISTA uses
        0.1-0.17 for open-ended generation and 0.01 for yes/no questions.
    site : {"mlp_output", "residual"}, default="mlp_output"
        Which formula (see above).
    adaptive : bool, default=True
        Use the adaptive gain ``s`` (the official code); False sets ``s = 1``.

    Returns
    -------
    torch.Tensor
        The steered hidden states, of the shape and dtype of ``x``.

    Raises
    ------
    TypeError
        When ``x`` or ``v`` is not a floating-point tensor, ``strength`` not
        a real number or ``adaptive`` not a bool.
    ValueError
        When ``x`` is not 2-D or 3-D, ``v``'s shape or device does not match
        ``x``, ``strength`` is negative or not finite, or ``site`` is unknown.

    Examples
    --------
    One sample, one position: the token turns towards ``v`` and keeps its
    norm of 2.

    >>> import torch
    >>> from skicml.ops import vsv_steer
    >>> x = torch.tensor([[0.0, 2.0]])
    >>> v = torch.tensor([[1.0, 0.0]])
    >>> vsv_steer(x, v, 1.0)  # normalize((0, 1) + (1, 0)) * 2
    tensor([[1.4142, 1.4142]])
    >>> vsv_steer(x, v, 1.0, site="residual")  # (x + v) * 2 / |x + v|
    tensor([[0.8944, 1.7889]])

    A token pointing away from ``v`` (here at 135 degrees, cos = -0.71) gets
    the larger gain ``s = 1 - cos = 1.71`` and turns further:

    >>> away = torch.tensor([[-2.0, 0.0]]), torch.tensor([[1.0, 1.0]])
    >>> vsv_steer(*away, 0.5, adaptive=False)
    tensor([[-1.7547,  0.9597]])
    >>> vsv_steer(*away, 0.5)
    tensor([[-1.0980,  1.6716]])

    Hidden states of shape (batch, seq_len, dim) and half precision:

    >>> h = torch.randn(2, 5, 8, dtype=torch.float16)
    >>> out = vsv_steer(h, torch.randn(2, 8), 0.1)
    >>> out.shape, out.dtype
    (torch.Size([2, 5, 8]), torch.float16)
    """
    _check_args(x, v, strength, site, adaptive)
    return _vsv_steer_op(x, v, float(strength), site, adaptive)
