"""``skicml::subblock_attention_probs``: Lavender's text-to-image probabilities from the log-sum-exp.

Ground truth is the softmax of the full score matrix, sliced: the op must
give exactly its rows for the chosen queries and columns for the chosen
keys, with the log-sum-exp from a fused attention forward or from
:func:`row_logsumexp`, and the same gradients as the sliced softmax when the
log-sum-exp is differentiable. The Triton kernel runs in the interpreter.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.ops import _subblock_attention, row_logsumexp, subblock_attention_probs, subblock_attention_probs_reference
from skicml.ops.testing import check_custom_op

OP = _subblock_attention._subblock_attention_probs_op


def _triton():
    from skicml.ops._subblock_attention_triton import subblock_attention_probs_triton

    return subblock_attention_probs_triton


def _data(batch=2, heads=3, n_queries=5, n_keys=7, head_dim=8, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, n_queries, head_dim, generator=g, dtype=torch.float64).to(dtype)
    k = torch.randn(batch, heads, n_keys, head_dim, generator=g, dtype=torch.float64).to(dtype)
    lse = torch.randn(batch, heads, n_queries, generator=g, dtype=torch.float64).to(dtype).abs() + 2
    return q, k, lse


def test_opcheck_and_the_triton_kernel_match_the_reference():
    scale = 8 ** -0.5
    samples = [(*_data(), scale), (*_data(1, 2, 33, 70, 20, seed=1), 0.2), (*_data(3, 1, 1, 9, 64, seed=2), 0.125)]
    report = check_custom_op(OP, samples, reference=subblock_attention_probs_reference, kernel=_triton(),
                             atol=1e-5, rtol=1e-4)
    assert report["opcheck"] == 3


def test_the_sub_block_of_a_causal_fused_forward_equals_the_eager_softmax():
    # What Lavender reads: text queries (the last rows) to image keys (the first columns), causal mask.
    torch.manual_seed(0)
    batch, heads, length, dim, n_image = 2, 4, 20, 16, 9
    q, k, v = (torch.randn(batch, heads, length, dim) for _ in range(3))
    _, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)
    eager = torch.softmax((q @ k.transpose(-1, -2) / dim ** 0.5).masked_fill(
        ~torch.ones(length, length, dtype=torch.bool).tril(), float("-inf")), dim=-1)
    text = slice(n_image, length)
    recovered = subblock_attention_probs(q[:, :, text], k[:, :, :n_image], lse[:, :, text], dim ** -0.5)
    torch.testing.assert_close(recovered, eager[:, :, text, :n_image], atol=1e-6, rtol=1e-5)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 6), st.integers(1, 12), st.integers(0, 10_000))
def test_gradients_equal_those_of_the_sliced_softmax(n_queries, n_sub, seed):
    g = torch.Generator().manual_seed(seed)
    n_keys = n_sub + 3
    q = torch.randn(1, 2, n_queries, 4, generator=g, dtype=torch.float64, requires_grad=True)
    keys = torch.randn(1, 2, n_keys, 4, generator=g, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(1, 2, n_queries, n_sub, generator=g, dtype=torch.float64)
    ours = subblock_attention_probs(q, keys[:, :, :n_sub], row_logsumexp(q, keys, 0.5), 0.5)
    grads = torch.autograd.grad((ours * weights).sum(), (q, keys))
    sliced = torch.softmax(q @ keys.transpose(-1, -2) * 0.5, dim=-1)[..., :n_sub]
    expected = torch.autograd.grad((sliced * weights).sum(), (q, keys))
    torch.testing.assert_close(ours, sliced)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


def test_row_logsumexp_honours_the_mask():
    q, keys = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 6, 4)
    mask = torch.ones(3, 6, dtype=torch.bool).tril(3)
    expected = torch.logsumexp((q @ keys.transpose(-1, -2)).masked_fill(~mask, float("-inf")), -1)
    torch.testing.assert_close(row_logsumexp(q, keys, 1.0, mask), expected)


def test_bad_arguments_are_named():
    q, k, lse = _data()
    with pytest.raises(ValueError, match="k must have shape"):
        subblock_attention_probs(q, k[..., :4], lse, 0.5)
    with pytest.raises(ValueError, match="lse must have shape"):
        subblock_attention_probs(q, k, lse[..., :2], 0.5)
    with pytest.raises(ValueError, match="q must have shape"):
        subblock_attention_probs(q[0], k, lse, 0.5)
    with pytest.raises(ValueError, match="scale must be"):
        subblock_attention_probs(q, k, lse, 0.0)
    with pytest.raises(TypeError, match="floating-point"):
        subblock_attention_probs(q.long(), k, lse, 0.5)
