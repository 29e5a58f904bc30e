import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.ops import kth_largest, kth_largest_reference
from skicml.ops.testing import check_custom_op


def _triton_kernel():
    from skicml.ops._kth_largest_triton import kth_largest_triton

    return kth_largest_triton


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_opcheck_and_kernel(dtype):
    g = torch.Generator().manual_seed(0)
    samples = [(torch.randn(37, 8, generator=g).to(dtype), k) for k in (1, 5, 150, 296)]
    if dtype == torch.float64:
        # The CUDA kernel hands float64 to torch; only the op is checked.
        report = check_custom_op(kth_largest, samples, reference=kth_largest_reference, atol=0, rtol=0)
    else:
        report = check_custom_op(kth_largest, samples, reference=kth_largest_reference, kernel=_triton_kernel(),
                                 atol=0, rtol=0)
        assert report["kernel_device"] is not None
    assert report["opcheck"] == len(samples)


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(allow_nan=False, width=32), min_size=1, max_size=2500), data=st.data())
def test_the_radix_select_is_the_kth_of_the_sorted_values(values, data):
    """Any finite or infinite float32 values, ties, both zeros: the kernel's answer is sorted(values)[-k]."""
    k = data.draw(st.integers(1, len(values)))
    x = torch.tensor(values, dtype=torch.float32)
    expected = np.sort(np.asarray(values, dtype=np.float32))[-k]
    assert _triton_kernel()(x, k).item() == expected
    assert kth_largest(x, k).item() == expected


def test_spans_many_blocks_and_keeps_exactly_k_without_ties():
    x = torch.randn(5000, generator=torch.Generator().manual_seed(1))  # five blocks of 1024
    for k in (1, 1024, 1025, 4999, 5000):
        tau = _triton_kernel()(x, k)
        assert int((x >= tau).sum()) == k


@pytest.mark.parametrize("values, k, match", [
    (torch.arange(4), 1, "floating point"),
    (torch.randn(4), 0, r"k=0 must lie in \[1, 4\]"),
    (torch.randn(4), 5, r"k=5 must lie in \[1, 4\]"),
])
def test_bad_arguments_name_the_problem(values, k, match):
    with pytest.raises(ValueError, match=match):
        kth_largest(values, k)
