"""``skicml::kth_largest``: the k-th largest element of a tensor, the threshold of Expert Race.

Used by one family: ``moe`` (Race-DiT, through ``skicml.nn.ExpertRaceMoE``).

Expert Race keeps the ``K = k * B * L`` best (token, expert) pairs of a
whole batch, so each training step needs the K-th largest of ``B * L * E``
scores. On CPU the op is ``torch.kthvalue`` (a selection without the sort
``topk`` does; ``benchmarks/bench_moe_dispatch.py``). On CUDA ``kthvalue``
of one long row runs in a single thread block, so the GPU kernel is a
multi-block radix select in Triton (``_kth_largest_triton.py``): four passes
over the scores' bits, each a histogram of the next byte of the candidates,
with no host synchronisation. Both return the element itself, so
``scores >= kth_largest(scores, K)`` keeps exactly ``K`` pairs when there
are no ties.
"""

from __future__ import annotations

import torch

from ._dispatch import load_gpu_kernel

__all__ = ["kth_largest", "kth_largest_reference"]


def _check_args(values, k):
    if not values.is_floating_point():
        raise ValueError(f"kth_largest: values must be floating point, got {values.dtype}.")
    if not 1 <= k <= values.numel():
        raise ValueError(f"kth_largest: k={k} must lie in [1, {values.numel()}] (the number of values).")


def kth_largest_reference(values, k):
    """The ``k``-th largest of all elements of ``values``, by ``torch.kthvalue``.

    Parameters
    ----------
    values : torch.Tensor
        Floating point, any shape (flattened).
    k : int
        ``1`` is the maximum, ``values.numel()`` the minimum.

    Returns
    -------
    torch.Tensor
        0-d, of ``values``' dtype.
    """
    flat = values.reshape(-1)
    # The k-th largest is the (n - k + 1)-th smallest.
    return flat.kthvalue(flat.numel() - k + 1).values


@torch.library.custom_op("skicml::kth_largest", mutates_args=())
def kth_largest(values: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k``-th largest of all elements of ``values`` (ties counted, as ``sorted(values)[-k]``).

    Parameters
    ----------
    values : torch.Tensor
        Floating point, any shape (flattened). NaN is not supported.
    k : int
        ``1`` is the maximum, ``values.numel()`` the minimum.

    Returns
    -------
    torch.Tensor
        0-d, of ``values``' dtype: an element of ``values``.

    Examples
    --------
    >>> import torch
    >>> from skicml.ops import kth_largest
    >>> kth_largest(torch.tensor([[0.1, 0.9], [0.5, 0.3]]), 2)
    tensor(0.5000)
    """
    _check_args(values, k)
    return kth_largest_reference(values.detach(), k).clone()


@kth_largest.register_fake
def _(values, k):
    _check_args(values, k)
    return values.new_empty(())


@torch.library.register_kernel("skicml::kth_largest", "cuda")
def _(values, k):
    _check_args(values, k)
    kernel = load_gpu_kernel("skicml.ops._kth_largest_triton", "kth_largest_triton")
    if kernel is None or values.dtype == torch.float64:
        # float64 keys need eight passes; torch's selection is as good there.
        return kth_largest_reference(values.detach(), k).clone()
    return kernel(values, k)
