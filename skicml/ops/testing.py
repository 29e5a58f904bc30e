"""Test helper shared by every custom op's tests.

:func:`check_custom_op` runs the two checks each op must pass:

1. :func:`torch.library.opcheck` on the registered op (schema, fake tensor,
   autograd registration, AOT dispatch) for every sample;
2. the GPU kernel against the plain-torch reference. On a machine with CUDA
   the kernel runs on the GPU; without one it runs on CPU tensors in Triton's
   interpreter, which requires ``TRITON_INTERPRET=1`` to be set before the
   kernel module is imported (the test suite's ``conftest.py`` does so).
"""

from __future__ import annotations

import os

import torch

from ._dispatch import triton_available

__all__ = ["check_custom_op", "gpu_kernel_device"]


def gpu_kernel_device():
    """Where GPU kernels can be tested here: ``"cuda"``, ``"cpu"`` (Triton
    interpreter) or ``None`` (neither: Triton is not installed)."""
    if not triton_available():
        return None
    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"
    return None


def _to(value, device):
    if isinstance(value, torch.Tensor):
        moved = value.detach().to(device)
        return moved.requires_grad_(value.requires_grad)
    return value


def check_custom_op(op, samples, *, reference, kernel=None, atol=1e-5, rtol=1e-5,
                    test_utils=None, require_kernel=True):
    """Check a ``skicml::`` op and its GPU kernel; raise AssertionError on failure.

    Parameters
    ----------
    op : torch._library.custom_ops.CustomOpDef
        The registered op.
    samples : iterable of tuple
        Positional arguments to call the op with (CPU tensors).
    reference : callable
        The plain-torch reference with the op's signature.
    kernel : callable or None
        The GPU launcher (e.g. ``rms_norm_triton``) with the op's signature.
    atol, rtol : float
        Tolerance of kernel against reference.
    test_utils : sequence of str or None
        Passed to :func:`torch.library.opcheck` (default: all its tests).
    require_kernel : bool, default=True
        Fail, rather than only run opcheck, when the kernel cannot be tested
        here (no CUDA, no Triton, or ``TRITON_INTERPRET`` unset).

    Returns
    -------
    dict
        ``{"opcheck": n_samples, "kernel_device": device or None}``.
    """
    samples = list(samples)
    if not samples:
        raise ValueError("check_custom_op needs at least one sample.")
    kwargs = {} if test_utils is None else {"test_utils": tuple(test_utils)}
    for args in samples:
        torch.library.opcheck(op, args, **kwargs)
        expected = reference(*[_to(a, "cpu") for a in args])
        got = op(*args)
        torch.testing.assert_close(got, expected, atol=atol, rtol=rtol)

    device = gpu_kernel_device() if kernel is not None else None
    if kernel is not None and device is None and require_kernel:
        raise AssertionError(
            "The GPU kernel cannot be tested here: install triton and set "
            "TRITON_INTERPRET=1 before importing the kernel, or run on a GPU."
        )
    if device is not None:
        for args in samples:
            moved = [_to(a, device) for a in args]
            with torch.no_grad():
                got = kernel(*moved)
                expected = reference(*moved)
            torch.testing.assert_close(got.cpu(), expected.cpu(), atol=atol, rtol=rtol)
            if device == "cuda":
                torch.library.opcheck(op, moved, **kwargs)
    return {"opcheck": len(samples), "kernel_device": device}
