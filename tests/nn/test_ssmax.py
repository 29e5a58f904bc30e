"""Scalable softmax, the block options TabICLv2 uses, and rotary embeddings over head halves."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.nn import MultiheadAttentionBlock, PackedMultiheadAttention, RotaryEmbedding, scalable_softmax
from skicml.nn.ssmax import SSMAX_KINDS


@pytest.mark.parametrize("kind", SSMAX_KINDS[1:])
def test_every_kind_scales_queries_by_a_factor_that_depends_on_the_key_count(kind):
    torch.manual_seed(0)
    layer = scalable_softmax(kind, num_heads=2, embed_dim=8)
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    q = torch.randn(3, 2, 5, 4)
    short, long = layer(q, 10), layer(q, 10_000)
    assert short.shape == q.shape
    assert not torch.allclose(short, long)
    # a factor, not an arbitrary map: zero queries stay zero
    assert torch.equal(layer(torch.zeros_like(q), 10), torch.zeros_like(q))


def test_plain_ssmax_is_a_learned_factor_times_log_n():
    layer = scalable_softmax("ssmax", num_heads=2, embed_dim=8)
    with torch.no_grad():
        layer.scales.copy_(torch.tensor([0.5, 2.0]))
    q = torch.randn(2, 3, 4)
    expected = q * torch.tensor([0.5, 2.0]).view(2, 1, 1) * math.log(50)
    torch.testing.assert_close(layer(q, 50), expected)


def test_query_aware_modulation_starts_at_one():
    # the query MLP's last layer is zero at initialisation: plain length scaling
    layer = scalable_softmax("qassmax-mlp", num_heads=2, embed_dim=8)
    q = torch.randn(4, 2, 3, 4)
    base = layer.base_mlp(torch.full((1, 1), math.log(7.0))).view(2, 1, 1)
    torch.testing.assert_close(layer(q, 7), q * base)


def test_bool_and_unknown_kinds():
    assert scalable_softmax(False, 2, 8) is None
    assert type(scalable_softmax(True, 2, 8)).__name__ == "QASSMax"
    with pytest.raises(ValueError, match="Unknown scalable softmax"):
        scalable_softmax("softmax-plus", 2, 8)


def test_attention_with_ssmax_is_attention_of_scaled_queries():
    torch.manual_seed(1)
    attn = PackedMultiheadAttention(8, 2, ssmax="ssmax-mlp-elementwise")
    q, k, v = torch.randn(2, 2, 6, 4), torch.randn(2, 2, 90, 4), torch.randn(2, 2, 90, 4)
    scaled = attn.ssmax_layer(q, 90)
    expected = attn.out_proj(attn._merge(F.scaled_dot_product_attention(scaled, k, v)))
    torch.testing.assert_close(attn.attend(q, k, v), expected)
    assert "ssmax_layer.mlp.0.weight" in attn.state_dict()
    assert not any("ssmax" in name for name in PackedMultiheadAttention(8, 2).state_dict())


def test_post_norm_block_and_bias_free_norms():
    torch.manual_seed(2)
    block = MultiheadAttentionBlock(8, 2, 16, norm_first=False, bias_free_ln=True, activation="relu",
                                    zero_init=False).eval()
    assert block.norm1.bias is None and block.norm2.bias is None
    x, context = torch.randn(3, 5, 8), torch.randn(3, 7, 8)
    attended = block.norm1(x + block.attn(x, context, context))
    expected = block.norm2(attended + block.linear2(F.relu(block.linear1(attended))))
    torch.testing.assert_close(block(x, context), expected)
    torch.testing.assert_close(block.forward_with_context(x, *block.context_key_value(context)), expected)


@settings(max_examples=25, deadline=None)
@given(interleaved=st.booleans(), shift=st.integers(0, 20), seed=st.integers(0, 2**16))
def test_rotary_scores_depend_only_on_relative_position(interleaved, shift, seed):
    g = torch.Generator().manual_seed(seed)
    rope = RotaryEmbedding(8, theta=100.0, interleaved=interleaved)
    q, k = torch.randn(8, generator=g), torch.randn(8, generator=g)
    length = shift + 4
    rotated_q, rotated_k = rope(q.expand(length, 8)), rope(k.expand(length, 8))
    # <q at i, k at j> is the same for (i, j) = (1, 3) and (1 + shift, 3 + shift)
    near = rotated_q[1] @ rotated_k[3]
    far = rotated_q[1 + shift] @ rotated_k[3 + shift]
    torch.testing.assert_close(near, far, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(rotated_q.norm(dim=-1), q.norm().expand(length), atol=1e-5, rtol=1e-5)


def test_halves_layout_is_interleaved_layout_with_channels_reordered():
    rope_pairs, rope_halves = RotaryEmbedding(8, interleaved=True), RotaryEmbedding(8, interleaved=False)
    x = torch.randn(2, 5, 8)
    order = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])  # halves layout -> pairs layout
    torch.testing.assert_close(rope_halves(x)[..., order], rope_pairs(x[..., order]))
