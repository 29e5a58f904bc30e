import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.base import seeded
from skicml.nn import CrossAttention, CrossAttentionBlock


def _padding(lengths, width):
    return torch.arange(width)[None, :] >= torch.as_tensor(lengths)[:, None]


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(0, 5), min_size=1, max_size=4), heads=st.sampled_from([1, 2, 4]),
       queries=st.integers(1, 6))
def test_probabilities_sum_to_one_over_real_tokens_and_vanish_on_padding(lengths, heads, queries):
    with seeded(0):
        attention = CrossAttention(8, heads, context_dim=6)
        x, context = torch.randn(len(lengths), queries, 8), torch.randn(len(lengths), 5, 6)
    padding = _padding(lengths, 5)
    out, probabilities = attention(x, context, padding, return_attention=True)
    assert probabilities.shape == (len(lengths), heads, queries, 5)
    assert torch.isfinite(out).all()
    sums = probabilities.sum(-1)
    for i, length in enumerate(lengths):
        expected = 1.0 if length else 0.0
        torch.testing.assert_close(sums[i], torch.full_like(sums[i], expected))
        assert (probabilities[i, ..., length:] == 0).all()
    # The fused path (no probabilities) computes the same output.
    torch.testing.assert_close(attention(x, context, padding), out, rtol=1e-5, atol=1e-6)


def test_padding_does_not_change_the_output_of_the_real_tokens():
    with seeded(1):
        attention = CrossAttention(8, 2)
        x, context = torch.randn(1, 3, 8), torch.randn(1, 4, 8)
    short = attention(x, context[:, :2])
    padded = attention(x, context, _padding([2], 4))
    torch.testing.assert_close(short, padded)


def test_probabilities_match_a_plain_softmax_reference():
    with seeded(2):
        attention = CrossAttention(4, 1)
        x, context = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    _, probabilities = attention(x, context, return_attention=True)
    q, k = attention.q(x), attention.k(context)
    reference = torch.softmax(q @ k.transpose(1, 2) / 2.0, -1)
    torch.testing.assert_close(probabilities[:, 0], reference)


def test_a_new_block_is_the_identity_and_trains():
    with seeded(3):
        block = CrossAttentionBlock(8, 2, context_dim=4)
        x, context = torch.randn(2, 3, 8, requires_grad=True), torch.randn(2, 5, 4)
    out, probabilities = block(x, context, _padding([5, 2], 5), return_attention=True)
    assert torch.equal(out, x) and probabilities.shape == (2, 2, 3, 5)
    out.pow(2).sum().backward()
    assert block.attn.proj.weight.grad is not None and block.attn.proj.weight.grad.abs().sum() > 0
